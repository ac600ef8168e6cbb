package emulator

// namesOfRIDs rewrites a path addressed by resource ids (dbs/<db rid>/colls/<container rid>/...,
// as the Java SDK reads a container's partition key ranges) into the names the routes take; it
// reports whether it did. A segment is a resource id only when no database (or container) has
// it as a name and one has it as its rid, so a name that happens to look like a rid still
// addresses by name. A document addressed by its _self link (dbs/<rid>/colls/<rid>/docs/<rid>,
// under a container addressed by rid) gets its id; a rid no document has is left as it is, and
// the request finds nothing (404).
func (e *Emulator) namesOfRIDs(segs []string) ([]string, bool) {
	if len(segs) < 2 || len(segs) > 6 || segs[0] != "dbs" {
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
	if len(segs) == 6 && segs[4] == "docs" {
		if id, ok := e.store.itemIDByRID(out[1], out[3], segs[5]); ok {
			out[5] = id
		}
	}
	return out, true
}
