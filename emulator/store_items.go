package emulator

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// --- items -----------------------------------------------------------------------------------

// itemWrite is one document write.
type itemWrite struct {
	Op   opKind
	ID   string
	PK   string // canonical partition key
	EPK  string
	Body map[string]json.RawMessage // user properties; nil for deletes
	// Order is Body's keys in the order the document had them (keyOrder); nil: sorted.
	Order   []string
	IfMatch string // "" when absent
	// PKObject is a delete's partition key as an object of path -> value, for the op log.
	PKObject json.RawMessage
}

// writeResult is the outcome of a write.
type writeResult struct {
	Item    item
	RangeID string
	Created bool
}

// writePrecondition decides whether a write of kind op may go ahead on an item that exists (with
// ETag etag) or not, given the request's If-Match ("" when absent), as the gateway does: a
// create of an existing id is a conflict (409, whatever If-Match says), a replace or delete of a
// missing item is not found (404), an If-Match on a missing item's upsert or an If-Match other
// than "*" that is not the stored ETag fails the precondition (412). It returns the operation to
// log: an upsert becomes a create or a replace.
func writePrecondition(op opKind, exists bool, etag, ifMatch string) (opKind, error) {
	switch {
	case op == opCreate && exists:
		return 0, errConflict
	case (op == opReplace || op == opDelete) && !exists:
		return 0, errNotFound
	case op == opUpsert && !exists && ifMatch != "":
		return 0, errPrecondition
	case exists && !ifMatchHolds(ifMatch, etag):
		return 0, errPrecondition
	}
	if op == opUpsert {
		if exists {
			return opReplace, nil
		}
		return opCreate, nil
	}
	return op, nil
}

// ifMatchHolds reports whether an If-Match value ("" when absent) lets a write through on an
// item whose ETag is etag: no value and "*" match any version.
func ifMatchHolds(ifMatch, etag string) bool {
	return ifMatch == "" || ifMatch == "*" || ifMatch == etag
}

// systemProps are the properties the server owns, in the order it writes them after the
// document's own (buildBody); client values are dropped.
var systemProps = []string{"_rid", "_self", "_etag", "_attachments", "_ts", "_lsn"}

func (s *store) writeItem(db, coll string, w itemWrite) (writeResult, error) {
	var res writeResult
	var opErr error
	// Concurrent writers share one commit. The function can run more than once, so it reports
	// domain errors through opErr and returns only storage errors.
	err := s.commits.do(func(tx *bolt.Tx) error {
		res, opErr = writeResult{}, nil
		t, err := s.openItemTx(tx, db, coll, false)
		if err != nil {
			if errors.Is(err, errNotFound) {
				opErr = err
				return nil
			}
			return err
		}
		res, opErr, err = t.write(w)
		return err
	})
	if err != nil {
		return writeResult{}, err
	}
	return res, opErr
}

// updateItems runs fn on container db/coll in one write transaction, as one change: fn's writes
// share one LSN (the service gives the operations of a transactional batch one LSN, and a
// change-feed page never ends between changes with the same LSN), and they commit all together,
// or, when fn returns an error, not at all. Readers (point reads, queries, both change-feed
// modes) see every write of fn or none of them, and a kill -9 leaves all of them or none.
//
// fn can run more than once (see committer), so it must reset its own results on entry. Its
// error, a domain error (errNotFound, errConflict, errPrecondition, *badRequestError) or a
// storage error, is returned as is.
func (s *store) updateItems(db, coll string, fn func(t *itemTx) error) error {
	return s.commits.do(func(tx *bolt.Tx) error {
		t, err := s.openItemTx(tx, db, coll, true)
		if err != nil {
			return err
		}
		return fn(t)
	})
}

// itemTx is one container in a write transaction: its reads see the transaction's own writes.
type itemTx struct {
	st  *collState
	cb  *bolt.Bucket
	now time.Time
	// oneChange gives every write the same LSN (updateItems): lsn, taken on range lsnRange by
	// the first write, and logged is the number of op-log records already written at it.
	oneChange bool
	lsn       uint64
	lsnRange  uint32
	logged    uint32
}

func (s *store) openItemTx(tx *bolt.Tx, db, coll string, oneChange bool) (*itemTx, error) {
	st, cb, err := loadColl(tx, db, coll)
	if err != nil {
		return nil, err
	}
	return &itemTx{st: st, cb: cb, now: s.now(), oneChange: oneChange}, nil
}

// read returns the live (not expired) item id of the logical partition pk, or errNotFound,
// and the id of the range that holds it.
func (t *itemTx) read(pk, id string) (item, string, error) {
	v := t.cb.Bucket(bucketItems).Get(itemKey(pk, id))
	if v == nil {
		return item{}, "", errNotFound
	}
	it, err := decodeItem(v, true)
	if err != nil {
		return item{}, "", err
	}
	if expired(t.st.DefaultTTL, it.Ts, it.Body, t.now) {
		return item{}, "", errNotFound
	}
	var rangeID string
	if r, ok := t.st.rangeForEPK(it.EPK); ok {
		rangeID = r.idString()
	}
	return it, rangeID, nil
}

// nextLSN returns the LSN of a write to range r: a new one, or the change's (oneChange).
func (t *itemTx) nextLSN(r rangeRecord) (uint64, error) {
	if t.oneChange && t.lsn != 0 && t.lsnRange == r.ID {
		return t.lsn, nil
	}
	lsn, err := nextLSN(t.cb, r.ID)
	if err != nil {
		return 0, err
	}
	t.lsn, t.lsnRange, t.logged = lsn, r.ID, 0
	return lsn, nil
}

// putLog writes the op-log record rec of a write at lsn on range rangeID: at <range><lsn>, or
// for the second and later records of one change (oneChange) at <range><lsn><u32 n>, which sort
// after it in the order written.
func (t *itemTx) putLog(rangeID uint32, lsn uint64, rec logRecord) error {
	lv, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	k := rangeLSNKey(rangeID, lsn)
	if t.oneChange && t.lsn == lsn && t.lsnRange == rangeID {
		if t.logged > 0 {
			k = binary.BigEndian.AppendUint32(k, t.logged)
		}
		t.logged++
	}
	return t.cb.Bucket(bucketLog).Put(k, lv)
}

// write applies w. It returns domain errors (the write's precondition, a bad body) as opErr,
// having written nothing for w, and storage errors as err.
func (t *itemTx) write(w itemWrite) (res writeResult, opErr, err error) {
	if len(w.PK) > maxPartitionKeyLen {
		return writeResult{}, badRequest("the partition key is longer than %d bytes", maxPartitionKeyLen), nil
	}
	st, cb := t.st, t.cb
	r, ok := st.rangeForEPK(w.EPK)
	if !ok {
		return writeResult{}, nil, fmt.Errorf("no live range holds EPK %s", w.EPK)
	}
	res.RangeID = r.idString()
	key := itemKey(w.PK, w.ID)
	items := cb.Bucket(bucketItems)
	var old *item
	now := t.now
	if v := items.Get(key); v != nil {
		o, err := decodeItem(v, true)
		if err != nil {
			return writeResult{}, nil, err
		}
		old = &o
		if expired(st.DefaultTTL, o.Ts, o.Body, now) {
			// The sweeper has not deleted it yet: delete it first, as it would have.
			if _, err := expireTx(cb, st, key, o, now.Unix()); err != nil {
				return writeResult{}, nil, err
			}
			old = nil
		}
	}
	if st.DefaultTTL != nil && w.Op != opDelete {
		if err := checkItemTTL(w.Body); err != nil {
			return writeResult{}, err, nil
		}
	}
	var oldEtag string
	if old != nil {
		oldEtag = old.Etag
	}
	op, err := writePrecondition(w.Op, old != nil, oldEtag, w.IfMatch)
	if err != nil {
		return writeResult{}, err, nil
	}
	res.Created = op == opCreate

	lsn, err := t.nextLSN(r)
	if err != nil {
		return writeResult{}, nil, err
	}
	latest := cb.Bucket(bucketLatest)
	var prevLSN uint64
	if old != nil {
		prevLSN = old.LSN
		if err := deleteLatest(latest, r.ID, old.LSN, key); err != nil {
			return writeResult{}, nil, err
		}
	}
	rec := logRecord{Op: op.String(), Key: key, PrevLSN: prevLSN, Ts: now.Unix(), EPK: w.EPK}
	if op == opDelete {
		rec.PK = w.PKObject
		if err := items.Delete(key); err != nil {
			return writeResult{}, nil, err
		}
		res.Item = item{LSN: lsn, Ts: now.Unix(), EPK: w.EPK}
	} else {
		it := item{LSN: lsn, Ts: now.Unix(), EPK: w.EPK, Etag: newEtag()}
		if old != nil {
			it.RID = old.RID
		} else {
			seq := cb.Bucket(bucketSeq)
			n := uint64(1)
			if v := seq.Get([]byte("doc")); len(v) == 8 {
				n = binary.BigEndian.Uint64(v) + 1
			}
			if err := seq.Put([]byte("doc"), binary.BigEndian.AppendUint64(nil, n)); err != nil {
				return writeResult{}, nil, err
			}
			collRID, _ := decodeRID(st.RID)
			ridB := binary.LittleEndian.AppendUint64(bytes.Clone(collRID), n&(1<<60-1))
			it.RID = encodeRID(ridB)
		}
		body, err := buildBody(w.Body, w.Order, st, it)
		if err != nil {
			return writeResult{}, nil, err
		}
		it.Body = body
		if err := items.Put(key, it.encode()); err != nil {
			return writeResult{}, nil, err
		}
		// Writes of one change share its LSN: the second and later get the key of a merged
		// duplicate LSN (see deleteLatest).
		lk := rangeLSNKey(r.ID, lsn)
		if latest.Get(lk) != nil {
			lk = append(lk, key...)
		}
		if err := latest.Put(lk, key); err != nil {
			return writeResult{}, nil, err
		}
		rec.Body = body
		res.Item = it
	}
	return res, nil, t.putLog(r.ID, lsn, rec)
}

// deleteLatest removes the latest-index entry of the item stored at key, written at lsn in
// range rangeID: the plain key <range><lsn>, or <range><lsn><key> when a merge found the plain
// key taken by another item.
func deleteLatest(latest *bolt.Bucket, rangeID uint32, lsn uint64, key []byte) error {
	plain := rangeLSNKey(rangeID, lsn)
	if bytes.Equal(latest.Get(plain), key) {
		return latest.Delete(plain)
	}
	return latest.Delete(append(plain, key...))
}

// buildBody returns the stored document as the service stores it: the user's properties in
// their order (order; sorted without one), then the system properties _rid, _self, _etag,
// _attachments, _ts, and _lsn, which only change-feed reads return (withoutLSN). System
// properties the user sent are replaced. Keys and values are encoded as encoding/json encodes a
// map of raw values (compacted, HTML characters escaped), as before the order was kept.
func buildBody(user map[string]json.RawMessage, order []string, st *collState, it item) ([]byte, error) {
	own := make([]string, 0, len(user))
	for _, k := range orderedKeys(user, order) {
		if !isSystemProp(k) {
			own = append(own, k)
		}
	}
	q := func(s string) json.RawMessage { v, _ := json.Marshal(s); return v }
	sys := map[string]json.RawMessage{
		"_rid":         q(it.RID),
		"_self":        q("dbs/" + st.DBRID + "/colls/" + st.RID + "/docs/" + it.RID + "/"),
		"_etag":        q(it.Etag),
		"_attachments": q("attachments/"),
		"_ts":          strconv.AppendInt(nil, it.Ts, 10),
		"_lsn":         strconv.AppendUint(nil, it.LSN, 10),
	}
	b, err := appendMembers(append(make([]byte, 0, 256), '{'), user, own)
	if err != nil {
		return nil, err
	}
	if b, err = appendMembers(b, sys, systemProps); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// orderedKeys returns m's keys: those order names first, in its order, then the others sorted
// (all of them sorted without an order).
func orderedKeys[V any](m map[string]V, order []string) []string {
	keys := make([]string, 0, len(m))
	for _, k := range order {
		if _, ok := m[k]; ok && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(order, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// appendMembers appends the members "key":value of m named by keys to the object being written
// in b (after its '{' or a member), each encoded as encoding/json encodes a map entry.
func appendMembers[V any](b []byte, m map[string]V, keys []string) ([]byte, error) {
	for _, k := range keys {
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(m[k])
		if err != nil {
			return nil, err
		}
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = append(append(append(b, kb...), ':'), vb...)
	}
	return b, nil
}

// keyOrder returns the top-level keys of the JSON object body in their order, each once (nil
// if body is not an object).
func keyOrder(body []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		k, ok := t.(string)
		if err != nil || !ok {
			return nil
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return nil
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

func (s *store) readItem(db, coll, pk, id string) (item, string, error) {
	var it item
	var rangeID string
	err := s.db.View(func(tx *bolt.Tx) error {
		st, cb, err := loadColl(tx, db, coll)
		if err != nil {
			return err
		}
		v := cb.Bucket(bucketItems).Get(itemKey(pk, id))
		if v == nil {
			return errNotFound
		}
		it, err = decodeItem(v, true)
		if err != nil {
			return err
		}
		if expired(st.DefaultTTL, it.Ts, it.Body, s.now()) {
			return errNotFound
		}
		if r, ok := st.rangeForEPK(it.EPK); ok {
			rangeID = r.idString()
		}
		return nil
	})
	return it, rangeID, err
}

// validItemID checks a document id as the service does at creation: any character is accepted
// (ids with '/', '\\', '#' or trailing whitespace are created, but the routing gateway cannot
// address them by URL afterwards: routedIDRule).
func validItemID(id string) error {
	if id == "" {
		return badRequest("the id is missing or empty")
	}
	if len(id) > 255 {
		return badRequest("the id is longer than 255 characters")
	}
	return nil
}

// deletePartition deletes every item of the logical partition canonicalPK in one commit, each as
// a delete does (its own LSN and a delete in the operation log), and returns how many it deleted.
func (s *store) deletePartition(db, coll, canonicalPK string) (int, error) {
	var n int
	var opErr error
	err := s.commits.do(func(tx *bolt.Tx) error {
		n, opErr = 0, nil
		st, cb, err := loadColl(tx, db, coll)
		if err != nil {
			if errors.Is(err, errNotFound) {
				opErr = err
				return nil
			}
			return err
		}
		prefix := partitionPrefix(canonicalPK)
		type stored struct {
			key []byte
			it  item
		}
		var found []stored
		c := cb.Bucket(bucketItems).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			it, err := decodeItem(v, true)
			if err != nil {
				return err
			}
			found = append(found, stored{bytes.Clone(k), it})
		}
		now := s.now()
		for _, f := range found {
			ttl := expired(st.DefaultTTL, f.it.Ts, f.it.Body, now)
			if _, err := deleteStoredTx(cb, st, f.key, f.it, now.Unix(), ttl); err != nil {
				return err
			}
		}
		n = len(found)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, opErr
}

// itemIDByRID returns the id of the live item of container db/coll whose resource id is rid
// (its _self link's last segment). It scans the container: documents addressed by their self
// links are the older SDKs' way, in test suites over small containers.
func (s *store) itemIDByRID(db, coll, rid string) (string, bool) {
	var id string
	_, err := s.scanItems(db, coll, scanScope{}, nil, func(_ []byte, it item) (bool, error) {
		if it.RID != rid {
			return true, nil
		}
		var doc struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(it.Body, &doc); err != nil {
			return false, err
		}
		id = doc.ID
		return false, nil
	})
	return id, err == nil && id != ""
}

// --- queries ---------------------------------------------------------------------------------

// scanScope restricts a scan of a container's items.
type scanScope struct {
	RangeID string // "" for every range
	PK      string // canonical partition key, "" for every partition
	// EPKPrefix, when set, keeps the items whose EPK starts with it: the logical partitions
	// under a prefix of a hierarchical key.
	EPKPrefix string
}

// scanItems calls fn for each item in scope in key order, starting after the key after (nil for
// the beginning), until fn returns false. It returns the container's RID.
func (s *store) scanItems(db, coll string, scope scanScope, after []byte, fn func(key []byte, it item) (bool, error)) (string, error) {
	var rid string
	err := s.db.View(func(tx *bolt.Tx) error {
		st, cb, err := loadColl(tx, db, coll)
		if err != nil {
			return err
		}
		rid = st.RID
		now := s.now()
		var rng *rangeRecord
		if scope.RangeID != "" {
			r, ok := st.rangeByID(scope.RangeID)
			if !ok || !r.Live {
				return errRangeGone
			}
			rng = &r
		}
		var prefix []byte
		if scope.PK != "" {
			prefix = partitionPrefix(scope.PK)
		}
		c := cb.Bucket(bucketItems).Cursor()
		var k, v []byte
		switch {
		case after != nil:
			k, v = c.Seek(after)
			if bytes.Equal(k, after) {
				k, v = c.Next()
			}
		case prefix != nil:
			k, v = c.Seek(prefix)
		default:
			k, v = c.First()
		}
		for ; k != nil; k, v = c.Next() {
			if prefix != nil && !bytes.HasPrefix(k, prefix) {
				break
			}
			it, err := decodeItem(v, false)
			if err != nil {
				return err
			}
			if rng != nil && !rng.contains(it.EPK) {
				continue
			}
			if scope.EPKPrefix != "" && !strings.HasPrefix(it.EPK, scope.EPKPrefix) {
				continue
			}
			if st.DefaultTTL != nil && expired(st.DefaultTTL, it.Ts, it.Body, now) {
				continue
			}
			more, err := fn(k, it)
			if err != nil || !more {
				return err
			}
		}
		return nil
	})
	return rid, err
}
