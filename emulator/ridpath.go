package emulator

// namesOfRIDs rewrites a path addressed by resource ids (dbs/<db rid>/colls/<container rid>/...,
// as the Java SDK reads a container's partition key ranges) into the names the routes take; it
// reports whether it did. A segment is a resource id only when no database (or container) has
// it as a name and one has it as its rid, so a name that happens to look like a rid still
// addresses by name. Documents are never addressed by rid (a path of more than 5 segments).
func (e *Emulator) namesOfRIDs(segs []string) ([]string, bool) {
	if len(segs) < 2 || len(segs) > 5 || segs[0] != "dbs" {
		return segs, false
	}
	if _, err := e.store.getDatabase(segs[1]); err == nil {
		return segs, false
	}
	dbs, err := e.store.listDatabases()
	if err != nil {
		return segs, false
	}
	out := append([]string(nil), segs...)
	found := false
	for _, d := range dbs {
		if d.RID == segs[1] {
			out[1], found = d.ID, true
			break
		}
	}
	if !found {
		return segs, false
	}
	if len(segs) >= 4 && segs[2] == "colls" {
		colls, err := e.store.listContainers(out[1])
		if err != nil {
			return segs, false
		}
		found = false
		for _, c := range colls {
			if c.RID == segs[3] {
				out[3], found = c.ID, true
				break
			}
		}
		if !found {
			return segs, false
		}
	}
	return out, true
}
