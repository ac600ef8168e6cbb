package emulator

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// serveConflicts answers a container's conflicts (dbs/<db>/colls/<coll>/conflicts[/<id>]). The
// emulator is one region with one writer, so no write ever conflicts: the feed and every query
// over it are empty, and a read or delete of a conflict is 404, as on a single-write-region
// account. It reports whether it answered (false: a method the service does not serve there).
func (e *Emulator) serveConflicts(w http.ResponseWriter, r *http.Request, db, coll string, byID bool) bool {
	st, err := e.store.getContainer(db, coll)
	if err != nil {
		e.fail(w, err)
		return true
	}
	switch {
	case byID && (r.Method == http.MethodGet || r.Method == http.MethodDelete):
		e.fail(w, errNotFound)
	case !byID && (r.Method == http.MethodGet || r.Method == http.MethodPost && isQuery(r)):
		out, _ := json.Marshal(map[string]any{"_rid": st.RID, "Conflicts": []any{}, "_count": 0})
		w.Header().Set(hdrItemCount, strconv.Itoa(0))
		w.Header().Set(hdrContentPath, st.RID)
		writeJSON(w, http.StatusOK, chargeMeta, out)
	default:
		return false
	}
	return true
}
