package emulator

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Databases and containers: create, read, replace, delete, and a container's partition key ranges.

func dbBody(rec dbRecord) map[string]any {
	return map[string]any{
		"id": rec.ID, "_rid": rec.RID, "_self": "dbs/" + rec.RID + "/", "_etag": rec.Etag,
		"_colls": "colls/", "_users": "users/", "_ts": rec.Ts,
	}
}

func (e *Emulator) createDatabase(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	var req struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		e.fail(w, badRequest("invalid database definition: %v", err))
		return
	}
	offer, _, err := offerContent(r, 0)
	if err != nil {
		e.fail(w, err)
		return
	}
	rec, err := e.store.createDatabase(req.ID)
	if err != nil {
		e.fail(w, err)
		return
	}
	if err := e.createOffer(offer, "dbs/"+rec.RID+"/", rec.RID); err != nil {
		e.fail(w, err)
		return
	}
	out, _ := json.Marshal(dbBody(rec))
	w.Header().Set("etag", rec.Etag)
	writeJSON(w, http.StatusCreated, chargeWrite, out)
}

func (e *Emulator) readDatabase(w http.ResponseWriter, id string) {
	rec, err := e.store.getDatabase(id)
	if err != nil {
		e.fail(w, err)
		return
	}
	out, _ := json.Marshal(dbBody(rec))
	w.Header().Set("etag", rec.Etag)
	writeJSON(w, http.StatusOK, chargeRead, out)
}

func (e *Emulator) deleteDatabase(w http.ResponseWriter, id string) {
	if err := e.store.deleteDatabase(id); err != nil {
		e.fail(w, err)
		return
	}
	w.Header().Set(hdrCharge, formatCharge(chargeWrite))
	w.WriteHeader(http.StatusNoContent)
}

func collBody(st *collState) (map[string]any, error) {
	var props map[string]any
	if err := json.Unmarshal(st.Props, &props); err != nil {
		return nil, fmt.Errorf("decode container definition: %w", err)
	}
	props["_rid"] = st.RID
	props["_self"] = "dbs/" + st.DBRID + "/colls/" + st.RID + "/"
	props["_etag"] = st.Etag
	props["_ts"] = st.Ts
	props["_docs"] = "docs/"
	props["_sprocs"] = "sprocs/"
	props["_triggers"] = "triggers/"
	props["_udfs"] = "udfs/"
	props["_conflicts"] = "conflicts/"
	return props, nil
}

func (e *Emulator) writeColl(w http.ResponseWriter, status int, charge float64, st *collState) {
	body, err := collBody(st)
	if err != nil {
		e.fail(w, err)
		return
	}
	out, _ := json.Marshal(body)
	w.Header().Set("etag", st.Etag)
	w.Header().Set(hdrContentPath, st.RID)
	// The owner's name-based path, as the service sends it: the Java SDK builds the container's
	// name-based link from it (owner + "/colls/" + id), and without it reads no change feed.
	w.Header().Set(hdrAltContentPath, "dbs/"+st.DB)
	writeJSON(w, status, charge, out)
}

func (e *Emulator) createContainer(w http.ResponseWriter, r *http.Request, db string) {
	b, err := readBody(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	dbr, err := e.store.getDatabase(db)
	if err != nil {
		e.fail(w, err)
		return
	}
	shared, err := e.hasOffer("dbs/" + dbr.RID + "/")
	if err != nil {
		e.fail(w, err)
		return
	}
	defaultRU := defaultContainerThroughput
	if shared {
		defaultRU = 0
	}
	offer, throughput, err := offerContent(r, defaultRU)
	if err != nil {
		e.fail(w, err)
		return
	}
	st, err := e.store.createContainer(db, b, e.partitionsFor(throughput))
	if err != nil {
		e.fail(w, err)
		return
	}
	if err := e.createOffer(offer, "dbs/"+st.DBRID+"/colls/"+st.RID+"/", st.RID); err != nil {
		e.fail(w, err)
		return
	}
	e.writeColl(w, http.StatusCreated, chargeWrite, st)
}

// replaceContainer serves PUT on a container: a new definition (indexing policy, time to live,
// ...) with the same partition key.
func (e *Emulator) replaceContainer(w http.ResponseWriter, r *http.Request, db, coll string) {
	b, err := readBody(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	st, err := e.store.replaceContainer(db, coll, b)
	if err != nil {
		e.fail(w, err)
		return
	}
	e.writeColl(w, http.StatusOK, chargeWrite, st)
}

func (e *Emulator) readContainer(w http.ResponseWriter, r *http.Request, db, coll string) {
	st, err := e.store.getContainer(db, coll)
	if err != nil {
		e.fail(w, err)
		return
	}
	if strings.EqualFold(r.Header.Get("x-ms-documentdb-populatequotainfo"), "true") {
		// Indexing is never behind: every index transformation is complete.
		w.Header().Set("x-ms-documentdb-collection-index-transformation-progress", "100")
		w.Header().Set("x-ms-resource-quota", "collectionSize=10485760;documentSize=10240;documentsSize=10485760;")
		w.Header().Set("x-ms-resource-usage", "collectionSize=0;documentSize=0;documentsSize=0;")
	}
	if !strings.EqualFold(r.Header.Get("x-ms-documentdb-populatepartitionstatistics"), "true") {
		e.writeColl(w, http.StatusOK, chargeRead, st)
		return
	}
	body, err := collBody(st)
	if err == nil {
		body["statistics"], err = e.partitionStatistics(db, coll, st)
	}
	if err != nil {
		e.fail(w, err)
		return
	}
	out, _ := json.Marshal(body)
	w.Header().Set("etag", st.Etag)
	w.Header().Set(hdrContentPath, st.RID)
	writeJSON(w, http.StatusOK, chargeRead, out)
}

// partitionStatistics is a container's "statistics" when a read asks for them
// (x-ms-documentdb-populatepartitionstatistics): per live partition key range, its id, how many
// documents it holds and their size in KB.
func (e *Emulator) partitionStatistics(db, coll string, st *collState) ([]map[string]any, error) {
	live := st.live()
	stats := make([]map[string]any, 0, len(live))
	for _, rg := range live {
		var count, size int
		if _, err := e.store.scanItems(db, coll, scanScope{RangeID: rg.idString()}, nil, func(_ []byte, it item) (bool, error) {
			count++
			size += len(it.Body)
			return true, nil
		}); err != nil {
			return nil, err
		}
		stats = append(stats, map[string]any{"id": rg.idString(), "documentCount": count,
			"sizeInKB": (size + 1023) / 1024, "partitionKeys": []any{}})
	}
	return stats, nil
}

func (e *Emulator) deleteContainer(w http.ResponseWriter, db, coll string) {
	if err := e.store.deleteContainer(db, coll); err != nil {
		e.fail(w, err)
		return
	}
	w.Header().Set(hdrCharge, formatCharge(chargeWrite))
	w.WriteHeader(http.StatusNoContent)
}

func pkRangeRID(collRID string, id uint32) string {
	b, _ := decodeRID(collRID)
	b = binary.LittleEndian.AppendUint64(b, uint64(id)+1)
	b[15] = (b[15] & 0x0F) | 0x50
	return encodeRID(b)
}

func (e *Emulator) readPKRanges(w http.ResponseWriter, r *http.Request, db, coll string) {
	st, err := e.store.getContainer(db, coll)
	if err != nil {
		e.fail(w, err)
		return
	}
	etag := fmt.Sprintf(`"pk-%d"`, st.RangesGen)
	h := w.Header()
	h.Set("etag", etag)
	h.Set(hdrContentPath, st.RID)
	if r.Header.Get(hdrAIM) != "" && r.Header.Get("If-None-Match") == etag {
		h.Set(hdrCharge, formatCharge(chargeMeta))
		w.WriteHeader(http.StatusNotModified)
		return
	}
	live := st.live()
	ranges := make([]map[string]any, 0, len(live))
	for _, rg := range live {
		rid := pkRangeRID(st.RID, rg.ID)
		ranges = append(ranges, map[string]any{
			"id": rg.idString(), "_rid": rid, "_etag": fmt.Sprintf(`"pkr-%d-%d"`, rg.ID, st.RangesGen),
			"_self":        "dbs/" + st.DBRID + "/colls/" + st.RID + "/pkranges/" + rid + "/",
			"minInclusive": rg.Min, "maxExclusive": rg.Max, "ridPrefix": rg.ID,
			"throughputFraction": 1 / float64(len(live)), "status": "online",
			"parents": rg.Parents, "ownedArchivalPKRangeIds": []string{}, "_ts": rg.Ts, "lsn": rg.LSN,
		})
	}
	out, _ := json.Marshal(map[string]any{"_rid": st.RID, "PartitionKeyRanges": ranges, "_count": len(ranges)})
	h.Set(hdrItemCount, strconv.Itoa(len(ranges)))
	writeJSON(w, http.StatusOK, chargeMeta, out)
}
