package emulator

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/cfp-dev/cfp/internal/epk"
)

// --- databases -------------------------------------------------------------------------------

func (s *store) createDatabase(id string) (dbRecord, error) {
	if err := validID(id); err != nil {
		return dbRecord{}, err
	}
	var rec dbRecord
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDBs)
		if b.Get([]byte(id)) != nil {
			return errConflict
		}
		rid := newRID(4, nil)
		rec = dbRecord{ID: id, RID: encodeRID(rid), Etag: newEtag(), Ts: s.now().Unix()}
		v, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), v)
	})
	return rec, err
}

func getDB(tx *bolt.Tx, id string) (dbRecord, error) {
	var rec dbRecord
	v := tx.Bucket(bucketDBs).Get([]byte(id))
	if v == nil {
		return rec, errNotFound
	}
	err := json.Unmarshal(v, &rec)
	return rec, err
}

func (s *store) getDatabase(id string) (dbRecord, error) {
	var rec dbRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		rec, err = getDB(tx, id)
		return err
	})
	return rec, err
}

func (s *store) listDatabases() ([]dbRecord, error) {
	var out []dbRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDBs).ForEach(func(_, v []byte) error {
			var rec dbRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			out = append(out, rec)
			return nil
		})
	})
	return out, err
}

func (s *store) deleteDatabase(id string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		d, err := getDB(tx, id)
		if err != nil {
			return err
		}
		if err := deleteChildrenTx(tx, d.RID); err != nil { // its users and their permissions
			return err
		}
		colls := tx.Bucket(bucketColls)
		prefix := []byte(id + "\x00")
		var keys [][]byte
		c := colls.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		for _, k := range keys {
			if err := deleteCollTx(tx, k); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketDBs).Delete([]byte(id))
	})
}

// --- containers ------------------------------------------------------------------------------

// containerDef is the part of a container definition the store interprets.
type containerDef struct {
	ID           string           `json:"id"`
	PartitionKey *partitionKeyDef `json:"partitionKey"`
}

type partitionKeyDef struct {
	Paths     []string `json:"paths"`
	Kind      string   `json:"kind,omitempty"`
	Version   int      `json:"version,omitempty"`
	SystemKey bool     `json:"systemKey,omitempty"`
}

// createContainer creates container props["id"] in db with partitions physical partitions.
// props is the request body.
func (s *store) createContainer(db string, body []byte, partitions int) (*collState, error) {
	var props map[string]json.RawMessage
	if err := json.Unmarshal(body, &props); err != nil {
		return nil, badRequest("container definition is not a JSON object: %v", err)
	}
	var def containerDef
	if err := json.Unmarshal(body, &def); err != nil {
		return nil, badRequest("invalid container definition: %v", err)
	}
	if err := validID(def.ID); err != nil {
		return nil, err
	}
	pk, legacy, err := partitionKeyOf(&def)
	if err != nil {
		return nil, err
	}
	if legacy {
		partitions = 1 // a non-partitioned collection is never split
	}
	propsJSON, defaultTTL, err := containerProps(props, pk)
	if err != nil {
		return nil, err
	}

	var st *collState
	err = s.db.Update(func(tx *bolt.Tx) error {
		dbr, err := getDB(tx, db)
		if err != nil {
			return err
		}
		colls := tx.Bucket(bucketColls)
		if colls.Get(collKey(db, def.ID)) != nil {
			return errConflict
		}
		dbRID, _ := decodeRID(dbr.RID)
		var ridB []byte
		data := tx.Bucket(bucketData)
		for {
			ridB = append(bytes.Clone(dbRID), newRID(4, func(b []byte) { b[0] |= 0x80 })...)
			if data.Bucket(ridB) == nil {
				break
			}
		}
		now := s.now().Unix()
		rec := collRecord{
			DB: db, DBRID: dbr.RID, ID: def.ID, RID: encodeRID(ridB),
			Etag: newEtag(), Ts: now, Props: propsJSON, Paths: pk.Paths,
			NextRange: uint32(partitions), RangesGen: 1, Partitions: partitions,
			DefaultTTL: defaultTTL, PKVersion: cmp.Or(pk.Version, 1), Legacy: legacy,
		}
		v, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if err := colls.Put(collKey(db, def.ID), v); err != nil {
			return err
		}
		cb, err := data.CreateBucket(ridB)
		if err != nil {
			return err
		}
		for _, name := range [][]byte{bucketRanges, bucketLSN, bucketItems, bucketLatest, bucketLog, bucketSeq} {
			if _, err := cb.CreateBucket(name); err != nil {
				return err
			}
		}
		bounds := initialBoundaries(partitions)
		if pk.Version == 1 {
			bounds = initialBoundariesV1(partitions)
		}
		st = &collState{collRecord: rec}
		for i := 0; i < partitions; i++ {
			r := rangeRecord{ID: uint32(i), Min: bounds[i], Max: bounds[i+1], Parents: []string{}, Live: true, Ts: now}
			if err := putRange(cb, r); err != nil {
				return err
			}
			if err := cb.Bucket(bucketLSN).Put(u32(r.ID), binary.BigEndian.AppendUint64(nil, 0)); err != nil {
				return err
			}
			st.Ranges = append(st.Ranges, r)
		}
		return nil
	})
	return st, err
}

func putRange(cb *bolt.Bucket, r rangeRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return cb.Bucket(bucketRanges).Put(u32(r.ID), v)
}

// initialBoundaries tiles ["", "FF") into n ranges with equal shares of the masked EPK space
// [0, 2^126).
func initialBoundaries(n int) []string {
	out := make([]string, n+1)
	out[0], out[n] = "", epkTop
	space := new(big.Int).Lsh(big.NewInt(1), 126)
	for i := 1; i < n; i++ {
		v := new(big.Int).Mul(space, big.NewInt(int64(i)))
		v.Div(v, big.NewInt(int64(n)))
		out[i] = epkHex(v)
	}
	return out
}

// initialBoundariesV1 tiles ["", "FF") for a V1 container as the service does: at the EPKs of
// equal shares of the 32-bit hash space.
func initialBoundariesV1(n int) []string {
	out := make([]string, n+1)
	out[0], out[n] = "", epkTop
	for i := 1; i < n; i++ {
		out[i] = epk.NumberEPK(float64((uint64(1) << 32) * uint64(i) / uint64(n)))
	}
	return out
}

// epkValueV1 reads a V1 range boundary as its hash value ("" is 0, "FF" is 2^32).
func epkValueV1(s string) (uint64, error) {
	switch s {
	case "":
		return 0, nil
	case epkTop:
		return 1 << 32, nil
	}
	f, ok := epk.ParseNumberEPK(s)
	if !ok || f < 0 || f > 1<<32 {
		return 0, fmt.Errorf("invalid V1 range boundary %q", s)
	}
	return uint64(f), nil
}

func epkHex(v *big.Int) string {
	s := strings.ToUpper(v.Text(16))
	if len(s) < epkHexLen {
		s = strings.Repeat("0", epkHexLen-len(s)) + s
	}
	return s
}

// epkValue reads a boundary as a 128-bit number ("" is 0, "FF" is 2^126, shorter strings are
// padded with zeros).
func epkValue(s string) (*big.Int, error) {
	switch s {
	case "":
		return big.NewInt(0), nil
	case epkTop:
		return new(big.Int).Lsh(big.NewInt(1), 126), nil
	}
	if len(s) < epkHexLen {
		s += strings.Repeat("0", epkHexLen-len(s))
	}
	v, ok := new(big.Int).SetString(s[:epkHexLen], 16)
	if !ok {
		return nil, fmt.Errorf("invalid range boundary %q", s)
	}
	return v, nil
}

// loadColl reads a container and its ranges (with their LSN counters) inside tx.
func loadColl(tx *bolt.Tx, db, coll string) (*collState, *bolt.Bucket, error) {
	v := tx.Bucket(bucketColls).Get(collKey(db, coll))
	if v == nil {
		if _, err := getDB(tx, db); err != nil {
			return nil, nil, err
		}
		return nil, nil, errNotFound
	}
	st := &collState{}
	if err := json.Unmarshal(v, &st.collRecord); err != nil {
		return nil, nil, fmt.Errorf("decode container: %w", err)
	}
	rid, _ := decodeRID(st.RID)
	cb := tx.Bucket(bucketData).Bucket(rid)
	if cb == nil {
		return nil, nil, fmt.Errorf("container %s has no data bucket", coll)
	}
	lsns := cb.Bucket(bucketLSN)
	err := cb.Bucket(bucketRanges).ForEach(func(k, v []byte) error {
		var r rangeRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		if l := lsns.Get(k); len(l) == 8 {
			r.LSN = binary.BigEndian.Uint64(l)
		}
		st.Ranges = append(st.Ranges, r)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("decode ranges: %w", err)
	}
	return st, cb, nil
}

func (s *store) getContainer(db, coll string) (*collState, error) {
	var st *collState
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		st, _, err = loadColl(tx, db, coll)
		return err
	})
	return st, err
}

func (s *store) listContainers(db string) ([]*collState, error) {
	var out []*collState
	err := s.db.View(func(tx *bolt.Tx) error {
		if _, err := getDB(tx, db); err != nil {
			return err
		}
		prefix := []byte(db + "\x00")
		c := tx.Bucket(bucketColls).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			st, _, err := loadColl(tx, db, string(k[len(prefix):]))
			if err != nil {
				return err
			}
			out = append(out, st)
		}
		return nil
	})
	return out, err
}

func (s *store) deleteContainer(db, coll string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if _, _, err := loadColl(tx, db, coll); err != nil {
			return err
		}
		return deleteCollTx(tx, collKey(db, coll))
	})
}

func deleteCollTx(tx *bolt.Tx, key []byte) error {
	colls := tx.Bucket(bucketColls)
	var rec collRecord
	if err := json.Unmarshal(colls.Get(key), &rec); err != nil {
		return err
	}
	rid, _ := decodeRID(rec.RID)
	if err := tx.Bucket(bucketData).DeleteBucket(rid); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return err
	}
	if err := deleteChildrenTx(tx, rec.RID); err != nil { // its scripts (resources.go)
		return err
	}
	return colls.Delete(key)
}

// validID checks a database, container or item id.
func validID(id string) error {
	if id == "" {
		return badRequest("the id is missing or empty")
	}
	if len(id) > 255 {
		return badRequest("the id is longer than 255 characters")
	}
	if strings.ContainsAny(id, "/\\?#") {
		return badRequest("the id %q contains one of the characters / \\ ? #", id)
	}
	return nil
}

// replaceContainer replaces a container's definition (indexing policy, time to live, unique
// keys, ...) keeping its partition key, which cannot change (400 otherwise).
func (s *store) replaceContainer(db, coll string, body []byte) (*collState, error) {
	var props map[string]json.RawMessage
	if err := json.Unmarshal(body, &props); err != nil {
		return nil, badRequest("container definition is not a JSON object: %v", err)
	}
	var def containerDef
	if err := json.Unmarshal(body, &def); err != nil {
		return nil, badRequest("invalid container definition: %v", err)
	}
	if def.ID != coll {
		return nil, badRequest("the id in the body (%q) differs from the container's (%q)", def.ID, coll)
	}
	defaultTTL, err := parseDefaultTTL(props["defaultTtl"])
	if err != nil {
		return nil, err
	}
	var st *collState
	err = s.db.Update(func(tx *bolt.Tx) error {
		cur, _, err := loadColl(tx, db, coll)
		if err != nil {
			return err
		}
		var old map[string]json.RawMessage
		if err := json.Unmarshal(cur.Props, &old); err != nil {
			return fmt.Errorf("decode container definition: %w", err)
		}
		if def.PartitionKey != nil && len(def.PartitionKey.Paths) > 0 && strings.Join(def.PartitionKey.Paths, ",") != strings.Join(cur.Paths, ",") {
			return badRequest("the partition key of a container cannot be changed")
		}
		props["partitionKey"] = old["partitionKey"]
		if _, ok := props["indexingPolicy"]; !ok {
			props["indexingPolicy"] = old["indexingPolicy"]
		}
		ip, err := normalizeIndexingPolicy(props["indexingPolicy"])
		if err != nil {
			return err
		}
		props["indexingPolicy"] = ip
		for _, k := range []string{"geospatialConfig", "conflictResolutionPolicy"} {
			if _, ok := props[k]; !ok && old[k] != nil {
				props[k] = old[k]
			}
		}
		if defaultTTL == nil {
			delete(props, "defaultTtl")
		}
		for k := range props {
			if strings.HasPrefix(k, "_") {
				delete(props, k)
			}
		}
		b, err := json.Marshal(props)
		if err != nil {
			return err
		}
		cur.Props, cur.DefaultTTL, cur.Etag, cur.Ts = b, defaultTTL, newEtag(), s.now().Unix()
		rec, err := json.Marshal(cur.collRecord)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketColls).Put(collKey(db, coll), rec); err != nil {
			return err
		}
		st = cur
		return nil
	})
	return st, err
}

// normalizeIndexingPolicy returns the indexing policy as the service stores it: consistent and
// automatic unless said otherwise, "/*" included and "/\"_etag\"/?" excluded when the policy
// indexes (a policy with indexingMode none keeps empty path lists), and no legacy index list on
// an included path.
func normalizeIndexingPolicy(raw json.RawMessage) (json.RawMessage, error) {
	p := map[string]any{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, badRequest("invalid indexingPolicy: %v", err)
		}
	}
	mode, _ := p["indexingMode"].(string)
	if mode == "" {
		mode = "consistent"
	}
	p["indexingMode"] = strings.ToLower(mode)
	if _, ok := p["automatic"]; !ok {
		p["automatic"] = true
	}
	paths := func(name string) []any {
		v, _ := p[name].([]any)
		if v == nil {
			v = []any{}
		}
		return v
	}
	inc, exc := paths("includedPaths"), paths("excludedPaths")
	for _, x := range inc {
		// An included path's legacy index list (kind Hash or Range, dataType, precision) is
		// accepted and dropped: every path is range-indexed for every type.
		if m, ok := x.(map[string]any); ok {
			delete(m, "indexes")
		}
	}
	if p["indexingMode"] != "none" {
		has := func(list []any, path string) bool {
			for _, x := range list {
				if m, ok := x.(map[string]any); ok && m["path"] == path {
					return true
				}
			}
			return false
		}
		if len(inc) == 0 && !has(exc, "/*") {
			inc = append(inc, map[string]any{"path": "/*"})
		}
		if !has(exc, `/"_etag"/?`) {
			exc = append(exc, map[string]any{"path": `/"_etag"/?`})
		}
	}
	p["includedPaths"], p["excludedPaths"] = inc, exc
	return json.Marshal(p)
}

// partitionKeyOf returns the partition key definition of a new container, its defaults filled
// in, and whether the container is a legacy non-partitioned collection (created without one:
// it gets the system key, as the service keeps such a collection).
func partitionKeyOf(def *containerDef) (*partitionKeyDef, bool, error) {
	legacy := def.PartitionKey == nil || len(def.PartitionKey.Paths) == 0
	if legacy {
		def.PartitionKey = &partitionKeyDef{Paths: []string{"/_partitionKey"}, Kind: "Hash", SystemKey: true}
	}
	pk := def.PartitionKey
	if pk.Kind == "" {
		pk.Kind = "Hash"
		if len(pk.Paths) > 1 {
			pk.Kind = "MultiHash"
		}
	}
	if pk.Version == 0 && !legacy {
		pk.Version = 2
	}
	if pk.Version != 1 && pk.Version != 2 && !legacy {
		return nil, false, badRequest("partition key version %d is not 1 or 2", pk.Version)
	}
	if pk.Version == 1 && (pk.Kind == "MultiHash" || len(pk.Paths) > 1) {
		return nil, false, badRequest("a hierarchical (MultiHash) partition key needs partition key version 2")
	}
	for _, p := range pk.Paths {
		if !strings.HasPrefix(p, "/") {
			return nil, false, badRequest("partition key path %q must start with /", p)
		}
	}
	return pk, legacy, nil
}

// containerProps returns a new container's stored definition, from the request's properties
// and its partition key: the service's defaults filled in, system properties dropped; and its
// default time to live.
func containerProps(props map[string]json.RawMessage, pk *partitionKeyDef) (json.RawMessage, *int64, error) {
	defaultTTL, err := parseDefaultTTL(props["defaultTtl"])
	if err != nil {
		return nil, nil, err
	}
	if defaultTTL == nil {
		delete(props, "defaultTtl")
	}
	pkJSON, _ := json.Marshal(pk)
	props["partitionKey"] = pkJSON
	ip, err := normalizeIndexingPolicy(props["indexingPolicy"])
	if err != nil {
		return nil, nil, err
	}
	props["indexingPolicy"] = ip
	if _, ok := props["geospatialConfig"]; !ok {
		props["geospatialConfig"] = json.RawMessage(`{"type":"Geography"}`)
	}
	if _, ok := props["conflictResolutionPolicy"]; !ok {
		props["conflictResolutionPolicy"] = json.RawMessage(`{"mode":"LastWriterWins","conflictResolutionPath":"/_ts","conflictResolutionProcedure":""}`)
	}
	for k := range props {
		if strings.HasPrefix(k, "_") {
			delete(props, k)
		}
	}
	propsJSON, err := json.Marshal(props)
	if err != nil {
		return nil, nil, fmt.Errorf("encode container definition: %w", err)
	}
	return propsJSON, defaultTTL, nil
}
