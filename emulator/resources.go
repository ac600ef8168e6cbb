package emulator

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Child resources that are not documents: a container's stored procedures, triggers and
// user-defined functions (sprocs, triggers, udfs), a database's users, and a user's permissions.
// They live in one bucket, keyed by kind, the owner's resource id and their own id:
//
//	res    <kind> 0x00 <owner rid> 0x00 <id>   -> resRecord (JSON)
//
// Keying by the owner's rid, not its name, makes a database or container that is deleted and
// created again under the same name start with none of the old one's children.
var bucketRes = []byte("res")

// resKind is a kind of child resource.
type resKind struct {
	Name string // the path segment: sprocs, triggers, udfs, users, permissions
	// Field is the name of the list in a feed's body (StoredProcedures, ...).
	Field string
	// validate checks and normalises a definition (the user's properties, id included).
	validate func(props map[string]any) error
	// extra adds kind-specific system properties to a body (a user's _permissions).
	extra func(body map[string]any, rec resRecord)
}

// resRecord is a stored child resource.
type resRecord struct {
	ID    string          `json:"id"`
	RID   string          `json:"rid"`
	Etag  string          `json:"etag"`
	Ts    int64           `json:"ts"`
	Props json.RawMessage `json:"props"` // the definition as given, without system properties
}

// resOwner is the resource that owns a list of child resources: its rid and its _self link.
type resOwner struct {
	RID  string
	Self string // "dbs/<rid>/colls/<rid>/", with its trailing slash
}

func resKey(kind, ownerRID, id string) []byte {
	return []byte(kind + "\x00" + ownerRID + "\x00" + id)
}

func resPrefix(kind, ownerRID string) []byte { return []byte(kind + "\x00" + ownerRID + "\x00") }

// resBody is the resource as the gateway answers it: its definition and its system properties.
func resBody(k resKind, o resOwner, rec resRecord) map[string]any {
	body := map[string]any{}
	_ = json.Unmarshal(rec.Props, &body)
	body["id"] = rec.ID
	body["_rid"] = rec.RID
	body["_self"] = o.Self + k.Name + "/" + rec.RID + "/"
	body["_etag"] = rec.Etag
	body["_ts"] = rec.Ts
	if k.extra != nil {
		k.extra(body, rec)
	}
	return body
}

// listRes returns the child resources of kind under owner, in id order.
func (s *store) listRes(kind, ownerRID string) ([]resRecord, error) {
	var out []resRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRes)
		if b == nil {
			return nil
		}
		prefix := resPrefix(kind, ownerRID)
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var rec resRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("decode %s record: %w", kind, err)
			}
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}

// getRes returns the child resource kind/id of owner, found by id or else by rid.
func (s *store) getRes(kind, ownerRID, id string) (resRecord, error) {
	var rec resRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		rec, _, err = getResTx(tx, kind, ownerRID, id)
		return err
	})
	return rec, err
}

func getResTx(tx *bolt.Tx, kind, ownerRID, id string) (resRecord, []byte, error) {
	var rec resRecord
	b := tx.Bucket(bucketRes)
	if b == nil {
		return rec, nil, errNotFound
	}
	key := resKey(kind, ownerRID, id)
	v := b.Get(key)
	if v == nil {
		// Addressed by its resource id (its _self link).
		prefix := resPrefix(kind, ownerRID)
		c := b.Cursor()
		for k, cv := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, cv = c.Next() {
			var r resRecord
			if json.Unmarshal(cv, &r) == nil && r.RID == id {
				key, v = bytes.Clone(k), cv
				break
			}
		}
		if v == nil {
			return rec, nil, errNotFound
		}
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return rec, nil, fmt.Errorf("decode %s record: %w", kind, err)
	}
	return rec, key, nil
}

// resOp is a write of a child resource.
type resOp int

const (
	resCreate resOp = iota
	resUpsert
	resReplace
	resDelete
)

// writeRes creates, upserts, replaces (id: the id in the URL; the definition's id may rename the
// resource) or deletes a child resource, and returns the record written (deleted).
func (s *store) writeRes(kind string, owner resOwner, op resOp, id string, props map[string]any, ifMatch string) (resRecord, bool, error) {
	var rec resRecord
	var created bool
	var opErr error
	err := s.commits.do(func(tx *bolt.Tx) error {
		rec, created, opErr = resRecord{}, false, nil
		b, err := tx.CreateBucketIfNotExists(bucketRes)
		if err != nil {
			return err
		}
		rec, created, opErr, err = writeResTx(tx, b, kind, owner, op, id, props, ifMatch, s.now().Unix())
		return err
	})
	if err != nil {
		return resRecord{}, false, err
	}
	return rec, created, opErr
}

func writeResTx(tx *bolt.Tx, b *bolt.Bucket, kind string, owner resOwner, op resOp, id string, props map[string]any, ifMatch string, now int64) (resRecord, bool, error, error) {
	newID, _ := props["id"].(string)
	if op != resReplace && op != resDelete {
		id = newID
	}
	old, oldKey, err := getResTx(tx, kind, owner.RID, id)
	exists := err == nil
	if err != nil && !errors.Is(err, errNotFound) {
		return resRecord{}, false, nil, err
	}
	var oldEtag string
	if exists {
		oldEtag = old.Etag
	}
	itemOp := map[resOp]opKind{resCreate: opCreate, resUpsert: opUpsert, resReplace: opReplace, resDelete: opDelete}[op]
	if _, err := writePrecondition(itemOp, exists, oldEtag, ifMatch); err != nil {
		return resRecord{}, false, err, nil
	}
	if op == resDelete {
		if kind == "users" {
			if err := deleteResPrefix(b, resPrefix("permissions", old.RID)); err != nil {
				return resRecord{}, false, nil, err
			}
		}
		return old, false, nil, b.Delete(oldKey)
	}
	if exists && newID != old.ID {
		// A replace that renames: the new id must be free.
		if _, _, err := getResTx(tx, kind, owner.RID, newID); err == nil {
			return resRecord{}, false, errConflict, nil
		}
		if err := b.Delete(oldKey); err != nil {
			return resRecord{}, false, nil, err
		}
	}
	user := map[string]any{}
	for k, v := range props {
		if !strings.HasPrefix(k, "_") && k != "id" {
			user[k] = v
		}
	}
	raw, err := json.Marshal(user)
	if err != nil {
		return resRecord{}, false, nil, err
	}
	rec := resRecord{ID: newID, Etag: newEtag(), Ts: now, Props: raw}
	if exists {
		rec.RID = old.RID
	} else {
		rec.RID, err = nextChildRID(b, owner.RID)
		if err != nil {
			return resRecord{}, false, nil, err
		}
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return resRecord{}, false, nil, err
	}
	return rec, !exists, nil, b.Put(resKey(kind, owner.RID, newID), v)
}

// deleteChildrenTx deletes the child resources a database or container being deleted owns
// (ownerRID): a container's scripts, a database's users and their permissions.
func deleteChildrenTx(tx *bolt.Tx, ownerRID string) error {
	b := tx.Bucket(bucketRes)
	if b == nil {
		return nil
	}
	for _, kind := range []string{"sprocs", "triggers", "udfs"} {
		if err := deleteResPrefix(b, resPrefix(kind, ownerRID)); err != nil {
			return err
		}
	}
	prefix := resPrefix("users", ownerRID)
	var users []string
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var rec resRecord
		if json.Unmarshal(v, &rec) == nil {
			users = append(users, rec.RID)
		}
	}
	for _, u := range users {
		if err := deleteResPrefix(b, resPrefix("permissions", u)); err != nil {
			return err
		}
	}
	return deleteResPrefix(b, prefix)
}

func deleteResPrefix(b *bolt.Bucket, prefix []byte) error {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// nextChildRID is a new resource id under the owner's: the owner's bytes and a counter.
func nextChildRID(b *bolt.Bucket, ownerRID string) (string, error) {
	n := uint64(1)
	seqKey := []byte("\x00seq")
	if v := b.Get(seqKey); len(v) == 8 {
		n = binary.BigEndian.Uint64(v) + 1
	}
	if err := b.Put(seqKey, binary.BigEndian.AppendUint64(nil, n)); err != nil {
		return "", err
	}
	ob, err := decodeRID(ownerRID)
	if err != nil {
		return "", fmt.Errorf("owner rid %q: %w", ownerRID, err)
	}
	rb := binary.LittleEndian.AppendUint64(bytes.Clone(ob), n)
	rb[len(rb)-1] = (rb[len(rb)-1] & 0x0F) | 0x80
	return encodeRID(rb), nil
}

// serveRes serves the REST operations on the child resources of kind k under owner: create,
// upsert, read feed and query on the list (rest empty), read, replace and delete of one.
func (e *Emulator) serveRes(w http.ResponseWriter, r *http.Request, k resKind, owner resOwner, rest []string) {
	switch {
	case len(rest) == 0 && r.Method == http.MethodPost && !isQuery(r):
		op := resCreate
		if strings.EqualFold(r.Header.Get(hdrIsUpsert), "true") {
			op = resUpsert
		}
		e.writeResRequest(w, r, k, owner, op, "")
	case len(rest) == 0 && (r.Method == http.MethodGet || r.Method == http.MethodPost):
		q, params, err := parseQuery(r)
		if err != nil {
			e.fail(w, err)
			return
		}
		recs, err := e.store.listRes(k.Name, owner.RID)
		if err != nil {
			e.fail(w, err)
			return
		}
		bodies := make([]map[string]any, len(recs))
		for i, rec := range recs {
			bodies[i] = resBody(k, owner, rec)
		}
		e.writeMetaQuery(w, q, params, owner.RID, k.Field, bodies)
	case len(rest) == 1 && r.Method == http.MethodGet:
		rec, err := e.store.getRes(k.Name, owner.RID, rest[0])
		if err != nil {
			e.fail(w, err)
			return
		}
		e.writeResBody(w, http.StatusOK, chargeRead, k, owner, rec)
	case len(rest) == 1 && r.Method == http.MethodPut:
		e.writeResRequest(w, r, k, owner, resReplace, rest[0])
	case len(rest) == 1 && r.Method == http.MethodDelete:
		if _, _, err := e.store.writeRes(k.Name, owner, resDelete, rest[0], nil, r.Header.Get("If-Match")); err != nil {
			e.fail(w, err)
			return
		}
		w.Header().Set(hdrCharge, formatCharge(chargeWrite))
		w.WriteHeader(http.StatusNoContent)
	default:
		e.notSupported(w, r, "this operation on "+k.Name)
	}
}

func (e *Emulator) writeResRequest(w http.ResponseWriter, r *http.Request, k resKind, owner resOwner, op resOp, id string) {
	b, err := readBody(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	var props map[string]any
	if err := json.Unmarshal(b, &props); err != nil || props == nil {
		e.fail(w, badRequest("the request body is not a JSON object"))
		return
	}
	newID, _ := props["id"].(string)
	if err := validID(newID); err != nil {
		e.fail(w, err)
		return
	}
	if k.validate != nil {
		if err := k.validate(props); err != nil {
			e.fail(w, err)
			return
		}
	}
	rec, created, err := e.store.writeRes(k.Name, owner, op, id, props, r.Header.Get("If-Match"))
	if err != nil {
		e.fail(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	e.writeResBody(w, status, chargeWrite, k, owner, rec)
}

func (e *Emulator) writeResBody(w http.ResponseWriter, status int, charge float64, k resKind, owner resOwner, rec resRecord) {
	out, err := json.Marshal(resBody(k, owner, rec))
	if err != nil {
		e.fail(w, err)
		return
	}
	w.Header().Set("etag", rec.Etag)
	w.Header().Set(hdrContentPath, owner.RID)
	writeJSON(w, status, charge, out)
}

// routeChildResources serves the routes of this file's resources and reports whether s was one:
// dbs/<db>/users[/<user>[/permissions[/<permission>]]] and
// dbs/<db>/colls/<coll>/{sprocs,triggers,udfs}[/<id>] (a POST to a stored procedure executes it).
func (e *Emulator) routeChildResources(w http.ResponseWriter, r *http.Request, s []string) bool {
	n := len(s)
	switch {
	case n < 3 || s[0] != "dbs":
		return false
	case s[2] == "users" && n <= 6 && (n <= 4 || s[4] == "permissions"):
		e.routeUsers(w, r, s)
		return true
	case n < 5 || n > 6 || s[2] != "colls":
		return false
	}
	k, ok := scriptKinds[s[4]]
	if !ok {
		return false
	}
	st, err := e.store.getContainer(s[1], s[3])
	if err != nil {
		e.fail(w, err)
		return true
	}
	owner := resOwner{RID: st.RID, Self: "dbs/" + st.DBRID + "/colls/" + st.RID + "/"}
	if n == 6 && k.Name == "sprocs" && r.Method == http.MethodPost {
		e.executeSproc(w, r, st, s[5])
		return true
	}
	e.serveRes(w, r, k, owner, s[5:])
	return true
}

// stringProp reads a string property of a definition.
func stringProp(props map[string]any, name string) (string, bool) {
	v, ok := props[name].(string)
	return v, ok
}

// quoteID quotes a resource id for a message.
func quoteID(id string) string { return strconv.Quote(id) }
