package emulator

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/cfp-dev/cfp/internal/emulator/epk"
)

// Storage layout (bbolt):
//
//	meta                      "format" -> "1"
//	dbs                       <db id>                 -> dbRecord (JSON)
//	colls                     <db id> 0x00 <coll id>  -> collRecord (JSON)
//	data / <coll rid>         one bucket per container:
//	    ranges                <range id u32>           -> rangeRecord (JSON), live and gone
//	    lsn                   <range id u32>           -> u64, the partition's LSN counter
//	    items                 <item key>               -> item (header + body with system properties)
//	    latest                <range id u32><lsn u64>  -> item key: the latest version of each live item
//	    log                   <range id u32><lsn u64>  -> operation record (every write, for all-versions/TTL),
//	                                                      kept for Options.LogRetention (retention.go)
//	    logfloor              <range id u32>           -> u64, the newest LSN compacted out of log
//	    seq                   "doc"                    -> u64, document RID counter
//
// The item key is <u16 len><canonical partition key><id>, so one logical partition is a key prefix.
// A latest-version change-feed read from LSN n of range r scans latest from (r, n+1): it never
// sees superseded versions.
//
// Items keep their LSN when their range is split or merged. A merged range can therefore hold
// two items with the same LSN (one from each merged partition): the second one's latest key is
// <range id u32><lsn u64><item key>, which sorts next to the first and is found by
// deleteLatest. A change-feed page never ends between two items with the same LSN.
var (
	bucketMeta   = []byte("meta")
	bucketDBs    = []byte("dbs")
	bucketColls  = []byte("colls")
	bucketData   = []byte("data")
	bucketRanges = []byte("ranges")
	bucketLSN    = []byte("lsn")
	bucketItems  = []byte("items")
	bucketLatest = []byte("latest")
	bucketLog    = []byte("log")
	bucketSeq    = []byte("seq")
)

// epkTop is the exclusive upper bound of the EPK space; masked V2 EPKs start with 0-3.
const epkTop = "FF"

// maxPartitionKeyLen bounds the canonical partition key (the service allows 2 KB per value).
const maxPartitionKeyLen = 8 << 10

// epkHexLen is the length of inner range boundaries (a 128-bit V2 EPK in hex).
const epkHexLen = 32

// Storage errors, mapped to HTTP statuses by the handler.
var (
	errNotFound     = errors.New("entity with the specified id does not exist in the system")
	errConflict     = errors.New("entity with the specified id already exists in the system")
	errPrecondition = errors.New("one of the specified pre-condition is not met")
	errRangeGone    = errors.New("partition key range is gone")
)

// badRequestError is a client error (400) with an optional substatus.
type badRequestError struct {
	msg       string
	substatus int
}

func (e *badRequestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &badRequestError{msg: fmt.Sprintf(format, args...)}
}

type dbRecord struct {
	ID   string `json:"id"`
	RID  string `json:"_rid"`
	Etag string `json:"_etag"`
	Ts   int64  `json:"_ts"`
}

type collRecord struct {
	DB    string `json:"db"`
	DBRID string `json:"dbRid"`
	ID    string `json:"id"`
	RID   string `json:"rid"`
	Etag  string `json:"etag"`
	Ts    int64  `json:"ts"`
	// Props is the container definition as created (id, partitionKey with kind and version,
	// indexingPolicy, ...), without system properties.
	Props      json.RawMessage `json:"props"`
	Paths      []string        `json:"paths"`
	NextRange  uint32          `json:"nextRange"`
	RangesGen  int             `json:"rangesGen"`
	Partitions int             `json:"partitions"`
	// DefaultTTL is the container's defaultTtl in seconds (-1: on, no default expiry); nil
	// when time to live is off.
	DefaultTTL *int64 `json:"defaultTtl,omitempty"`
	// PKVersion is the partition key version: 1 routes by the V1 hash, anything else (2, or 0
	// in containers stored before it was recorded) by the V2 hash.
	PKVersion int `json:"pkVersion,omitempty"`
}

// hashPK returns the effective partition key of a partition key's components.
func (c *collRecord) hashPK(comps []any) string {
	if c.PKVersion == 1 {
		return epk.HashV1(comps)
	}
	return epk.HashV2(comps)
}

type rangeRecord struct {
	ID      uint32   `json:"id"`
	Min     string   `json:"min"`
	Max     string   `json:"max"`
	Parents []string `json:"parents"`
	Live    bool     `json:"live"`
	// Merged marks a partition made by a merge, or split from one: its LSNs interleave the
	// merged partitions' histories, so LSN order is not time order.
	Merged bool   `json:"merged,omitempty"`
	Ts     int64  `json:"ts"`
	LSN    uint64 `json:"-"` // filled from the lsn bucket when listed
}

func (r rangeRecord) idString() string { return strconv.FormatUint(uint64(r.ID), 10) }

func (r rangeRecord) contains(epk string) bool {
	return epk >= r.Min && (r.Max == epkTop || epk < r.Max)
}

// collState is a container with its ranges, read in one transaction.
type collState struct {
	collRecord
	Ranges []rangeRecord // every range ever, sorted by id; Live marks the current ones
}

func (c *collState) live() []rangeRecord {
	var out []rangeRecord
	for _, r := range c.Ranges {
		if r.Live {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Min < out[j].Min })
	return out
}

func (c *collState) rangeByID(id string) (rangeRecord, bool) {
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return rangeRecord{}, false
	}
	for _, r := range c.Ranges {
		if uint64(r.ID) == n {
			return r, true
		}
	}
	return rangeRecord{}, false
}

func (c *collState) rangeForEPK(epk string) (rangeRecord, bool) {
	for _, r := range c.Ranges {
		if r.Live && r.contains(epk) {
			return r, true
		}
	}
	return rangeRecord{}, false
}

// store is the bbolt storage of one data directory.
type store struct {
	db         *bolt.DB
	commits    *committer
	now        func() time.Time
	partitions int
	// logRetention is Options.LogRetention, for the error of a read from before it.
	logRetention time.Duration
	// readOnly is set when the data file was opened read-only (a full disk).
	readOnly bool
}

// openReadOnlyStore is newStore for a data file opened read-only: it checks the format and
// creates nothing; every write fails with bbolt's ErrDatabaseReadOnly.
func openReadOnlyStore(db *bolt.DB, dir string, now func() time.Time, partitions int) (*store, error) {
	err := db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketDBs, bucketColls, bucketData} {
			if tx.Bucket(name) == nil {
				return fmt.Errorf("the data file has no %s bucket", name)
			}
		}
		if v := tx.Bucket(bucketMeta).Get([]byte("format")); string(v) != "1" {
			return fmt.Errorf("unsupported data format %q", v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open emulator data read-only: %w", err)
	}
	return &store{db: db, commits: &committer{db: db, dir: dir}, now: now, partitions: partitions, readOnly: true}, nil
}

func newStore(db *bolt.DB, dir string, now func() time.Time, partitions int) (*store, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketDBs, bucketColls, bucketData} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		m := tx.Bucket(bucketMeta)
		if v := m.Get([]byte("format")); v == nil {
			return m.Put([]byte("format"), []byte("1"))
		} else if string(v) != "1" {
			return fmt.Errorf("unsupported data format %q", v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("initialise emulator data: %w", err)
	}
	return &store{db: db, commits: &committer{db: db, dir: dir}, now: now, partitions: partitions}, nil
}

func u32(n uint32) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, n)
	return b
}

func rangeLSNKey(rangeID uint32, lsn uint64) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint32(b, rangeID)
	binary.BigEndian.PutUint64(b[4:], lsn)
	return b
}

func collKey(db, coll string) []byte { return []byte(db + "\x00" + coll) }

// itemKey is the storage key of an item: its logical partition, then its id.
func itemKey(canonicalPK, id string) []byte {
	b := make([]byte, 2, 2+len(canonicalPK)+len(id))
	binary.BigEndian.PutUint16(b, uint16(len(canonicalPK)))
	b = append(b, canonicalPK...)
	return append(b, id...)
}

// partitionPrefix is the key prefix shared by all items of one logical partition.
func partitionPrefix(canonicalPK string) []byte { return itemKey(canonicalPK, "") }

// item is the stored form of a document.
type item struct {
	LSN  uint64
	Ts   int64
	EPK  string
	Etag string
	RID  string
	Body []byte // the document with system properties, compact JSON
}

func (it *item) encode() []byte {
	b := make([]byte, 0, 16+6+len(it.EPK)+len(it.Etag)+len(it.RID)+len(it.Body))
	b = binary.BigEndian.AppendUint64(b, it.LSN)
	b = binary.BigEndian.AppendUint64(b, uint64(it.Ts))
	for _, s := range []string{it.EPK, it.Etag, it.RID} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	return append(b, it.Body...)
}

// decodeItem decodes v; the body aliases v unless copyBody is set.
func decodeItem(v []byte, copyBody bool) (item, error) {
	var it item
	if len(v) < 22 {
		return it, errors.New("corrupt item record")
	}
	it.LSN = binary.BigEndian.Uint64(v)
	it.Ts = int64(binary.BigEndian.Uint64(v[8:]))
	p := v[16:]
	var strs [3]string
	for i := range strs {
		if len(p) < 2 {
			return it, errors.New("corrupt item record")
		}
		n := int(binary.BigEndian.Uint16(p))
		if len(p) < 2+n {
			return it, errors.New("corrupt item record")
		}
		strs[i] = string(p[2 : 2+n])
		p = p[2+n:]
	}
	it.EPK, it.Etag, it.RID = strs[0], strs[1], strs[2]
	if copyBody {
		it.Body = bytes.Clone(p)
	} else {
		it.Body = p
	}
	return it, nil
}

// peekItem reads the LSN, _ts, EPK and body of an encoded item without copying or allocating;
// the slices alias v.
func peekItem(v []byte) (lsn uint64, ts int64, epk, body []byte, err error) {
	if len(v) < 22 {
		return 0, 0, nil, nil, errors.New("corrupt item record")
	}
	lsn = binary.BigEndian.Uint64(v)
	ts = int64(binary.BigEndian.Uint64(v[8:]))
	p := v[16:]
	for i := range 3 {
		if len(p) < 2 {
			return 0, 0, nil, nil, errors.New("corrupt item record")
		}
		n := int(binary.BigEndian.Uint16(p))
		if len(p) < 2+n {
			return 0, 0, nil, nil, errors.New("corrupt item record")
		}
		if i == 0 {
			epk = p[2 : 2+n]
		}
		p = p[2+n:]
	}
	return lsn, ts, epk, p, nil
}

// opKind is a write operation.
type opKind byte

const (
	opCreate opKind = iota + 1
	opReplace
	opDelete
	opUpsert // resolved to opCreate or opReplace in the log
)

func (o opKind) String() string {
	switch o {
	case opCreate:
		return "create"
	case opReplace:
		return "replace"
	case opDelete:
		return "delete"
	case opUpsert:
		return "upsert"
	}
	return "unknown"
}

// logRecord is one entry of a partition's operation log, the source of the all-versions feed.
// The service bounds the log by the account's continuous-backup retention; the emulator keeps
// it for Options.LogRetention.
type logRecord struct {
	Op      string          `json:"op"`
	Key     []byte          `json:"key"`
	PrevLSN uint64          `json:"prevLsn,omitempty"`
	Ts      int64           `json:"ts"`
	Body    json.RawMessage `json:"body,omitempty"` // nil for deletes
	// EPK is the item's effective partition key ("" in records written before it was kept).
	EPK string `json:"epk,omitempty"`
	// PK is a delete's partition key as an object of path -> value (the feed's metadata).
	PK json.RawMessage `json:"pk,omitempty"`
	// TTLExpired marks a delete made by time-to-live expiry (the feed's timeToLiveExpired).
	TTLExpired bool `json:"ttlExpired,omitempty"`
}

// encodeRID renders resource id bytes the way Cosmos DB does (ResourceId.ToString): standard
// base64 with '/' replaced by '-', so that a rid never adds a path segment to a resource link
// or to an id built from it (lease prefixes embed the database and container rids).
func encodeRID(b []byte) string {
	return strings.ReplaceAll(base64.StdEncoding.EncodeToString(b), "/", "-")
}

// decodeRID reverses encodeRID.
func decodeRID(s string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(strings.ReplaceAll(s, "-", "/"))
}

// newRID returns n random bytes as standard base64 after fix is applied to them.
func newRID(n int, fix func([]byte)) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	if fix != nil {
		fix(b)
	}
	return b
}

func newEtag() string { return `"` + uuid.NewString() + `"` }

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
		if _, err := getDB(tx, id); err != nil {
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
	ID           string `json:"id"`
	PartitionKey *struct {
		Paths   []string `json:"paths"`
		Kind    string   `json:"kind,omitempty"`
		Version int      `json:"version,omitempty"`
	} `json:"partitionKey"`
}

// createContainer creates container props["id"] in db. props is the request body.
func (s *store) createContainer(db string, body []byte) (*collState, error) {
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
	if def.PartitionKey == nil || len(def.PartitionKey.Paths) == 0 {
		def.PartitionKey = &struct {
			Paths   []string `json:"paths"`
			Kind    string   `json:"kind,omitempty"`
			Version int      `json:"version,omitempty"`
		}{Paths: []string{"/_partitionKey"}}
	}
	pk := def.PartitionKey
	if pk.Kind == "" {
		pk.Kind = "Hash"
		if len(pk.Paths) > 1 {
			pk.Kind = "MultiHash"
		}
	}
	if pk.Version == 0 {
		pk.Version = 2
	}
	if pk.Version != 1 && pk.Version != 2 {
		return nil, badRequest("partition key version %d is not 1 or 2", pk.Version)
	}
	if pk.Version == 1 && (pk.Kind == "MultiHash" || len(pk.Paths) > 1) {
		return nil, badRequest("a hierarchical (MultiHash) partition key needs partition key version 2")
	}
	for _, p := range pk.Paths {
		if !strings.HasPrefix(p, "/") {
			return nil, badRequest("partition key path %q must start with /", p)
		}
	}
	defaultTTL, err := parseDefaultTTL(props["defaultTtl"])
	if err != nil {
		return nil, err
	}
	if defaultTTL == nil {
		delete(props, "defaultTtl")
	}
	pkJSON, _ := json.Marshal(pk)
	props["partitionKey"] = pkJSON
	ip, err := normalizeIndexingPolicy(props["indexingPolicy"])
	if err != nil {
		return nil, err
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
		return nil, fmt.Errorf("encode container definition: %w", err)
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
			NextRange: uint32(s.partitions), RangesGen: 1, Partitions: s.partitions,
			DefaultTTL: defaultTTL, PKVersion: pk.Version,
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
		bounds := initialBoundaries(s.partitions)
		if pk.Version == 1 {
			bounds = initialBoundariesV1(s.partitions)
		}
		st = &collState{collRecord: rec}
		for i := 0; i < s.partitions; i++ {
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
	return colls.Delete(key)
}

// --- items -----------------------------------------------------------------------------------

// itemWrite is one document write.
type itemWrite struct {
	Op      opKind
	ID      string
	PK      string // canonical partition key
	EPK     string
	Body    map[string]json.RawMessage // user properties; nil for deletes
	IfMatch string                     // "" when absent
	// PKObject is a delete's partition key as an object of path -> value, for the op log.
	PKObject json.RawMessage
}

// writeResult is the outcome of a write.
type writeResult struct {
	Item    item
	RangeID string
	Created bool
}

// systemProps are the properties the server owns; client values are dropped.
var systemProps = []string{"_rid", "_self", "_etag", "_ts", "_attachments", "_lsn"}

func (s *store) writeItem(db, coll string, w itemWrite) (writeResult, error) {
	if len(w.PK) > maxPartitionKeyLen {
		return writeResult{}, badRequest("the partition key is longer than %d bytes", maxPartitionKeyLen)
	}
	var res writeResult
	var opErr error
	// Concurrent writers share one commit. The function can run more than once, so it reports
	// domain errors through opErr and returns only storage errors.
	err := s.commits.do(func(tx *bolt.Tx) error {
		res, opErr = writeResult{}, nil
		st, cb, err := loadColl(tx, db, coll)
		if err != nil {
			if errors.Is(err, errNotFound) {
				opErr = err
				return nil
			}
			return err
		}
		r, ok := st.rangeForEPK(w.EPK)
		if !ok {
			return fmt.Errorf("no live range holds EPK %s", w.EPK)
		}
		res.RangeID = r.idString()
		key := itemKey(w.PK, w.ID)
		items := cb.Bucket(bucketItems)
		var old *item
		now := s.now()
		if v := items.Get(key); v != nil {
			o, err := decodeItem(v, true)
			if err != nil {
				return err
			}
			old = &o
			if expired(st.DefaultTTL, o.Ts, o.Body, now) {
				// The sweeper has not deleted it yet: delete it first, as it would have.
				if _, err := expireTx(cb, st, key, o, now.Unix()); err != nil {
					return err
				}
				old = nil
			}
		}
		if st.DefaultTTL != nil && w.Op != opDelete {
			if err := checkItemTTL(w.Body); err != nil {
				opErr = err
				return nil
			}
		}
		op := w.Op
		switch {
		case op == opCreate && old != nil:
			opErr = errConflict
			return nil
		case (op == opReplace || op == opDelete) && old == nil:
			opErr = errNotFound
			return nil
		case op == opUpsert && old == nil && w.IfMatch != "":
			opErr = errPrecondition
			return nil
		case old != nil && w.IfMatch != "" && w.IfMatch != "*" && w.IfMatch != old.Etag:
			opErr = errPrecondition
			return nil
		}
		if op == opUpsert {
			op = opCreate
			if old != nil {
				op = opReplace
			}
		}
		res.Created = op == opCreate

		lsn, err := nextLSN(cb, r.ID)
		if err != nil {
			return err
		}
		latest := cb.Bucket(bucketLatest)
		var prevLSN uint64
		if old != nil {
			prevLSN = old.LSN
			if err := deleteLatest(latest, r.ID, old.LSN, key); err != nil {
				return err
			}
		}
		rec := logRecord{Op: op.String(), Key: key, PrevLSN: prevLSN, Ts: now.Unix(), EPK: w.EPK}
		if op == opDelete {
			rec.PK = w.PKObject
			if err := items.Delete(key); err != nil {
				return err
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
					return err
				}
				collRID, _ := decodeRID(st.RID)
				ridB := binary.LittleEndian.AppendUint64(bytes.Clone(collRID), n&(1<<60-1))
				it.RID = encodeRID(ridB)
			}
			body, err := buildBody(w.Body, st, it)
			if err != nil {
				return err
			}
			it.Body = body
			if err := items.Put(key, it.encode()); err != nil {
				return err
			}
			if err := latest.Put(rangeLSNKey(r.ID, lsn), key); err != nil {
				return err
			}
			rec.Body = body
			res.Item = it
		}
		lv, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return cb.Bucket(bucketLog).Put(rangeLSNKey(r.ID, lsn), lv)
	})
	if err != nil {
		return writeResult{}, err
	}
	return res, opErr
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

// buildBody returns the stored document: the user's properties plus the system properties.
func buildBody(user map[string]json.RawMessage, st *collState, it item) ([]byte, error) {
	doc := make(map[string]json.RawMessage, len(user)+len(systemProps))
	for k, v := range user {
		doc[k] = v
	}
	for _, p := range systemProps {
		delete(doc, p)
	}
	q := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	doc["_rid"] = q(it.RID)
	doc["_self"] = q("dbs/" + st.DBRID + "/colls/" + st.RID + "/docs/" + it.RID + "/")
	doc["_etag"] = q(it.Etag)
	doc["_attachments"] = q("attachments/")
	doc["_ts"] = json.RawMessage(strconv.FormatInt(it.Ts, 10))
	doc["_lsn"] = json.RawMessage(strconv.FormatUint(it.LSN, 10))
	return json.Marshal(doc)
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

// --- change feed -----------------------------------------------------------------------------

// feedRequest is one latest-version change-feed read.
type feedRequest struct {
	RangeID       string // "" when scoped by partition key (or a single-range container)
	PK            string // canonical partition key, "" for none
	PKComps       []any  // the partition key's components when PK is set
	StartEPK      string // x-ms-start-epk, "" for none
	EndEPK        string // x-ms-end-epk, "" for none
	Since         uint64
	Now           bool      // If-None-Match: *
	ModifiedSince time.Time // zero for none; applies together with Since
	// StartTimeAfterMerge is capability bit 2 of x-ms-cosmos-sdk-supportedcapabilities: the
	// client can read a merged partition from a time. Without it such a read is refused, as
	// the service refuses it.
	StartTimeAfterMerge bool
	Max                 int
}

// errStartTimeMerged is the service's answer to a read from a time of a merged partition by
// a client without capability bit 2.
var errStartTimeMerged = &badRequestError{msg: "StartTime/IfModifiedSince is not currently supported with merged partitions."}

// feedPage is the answer to a feedRequest.
type feedPage struct {
	Docs    [][]byte
	Etag    uint64 // the continuation: the LSN to read after next time
	Current uint64 // the partition's current LSN
	RangeID string
	CollRID string
	// Body is the rendered response of a page with documents, {"_rid":..., "Documents":[...],
	// "_count":n}, whose sub-slices Docs are; nil when the reader did not render one. It comes
	// from getBody: whoever is done with it may hand it back with putBody.
	Body []byte
}

// feedScope is the live range a change-feed read serves: the named range, the range of the
// partition key, or the container's only range.
func feedScope(st *collState, req feedRequest) (rangeRecord, error) {
	switch {
	case req.RangeID != "":
		r, ok := st.rangeByID(req.RangeID)
		if !ok || !r.Live {
			return rangeRecord{}, errRangeGone
		}
		return r, nil
	case req.PK != "":
		pkEPK := st.hashPK(req.PKComps)
		r, ok := st.rangeForEPK(pkEPK)
		if !ok {
			return rangeRecord{}, fmt.Errorf("no live range holds EPK %s", pkEPK)
		}
		return r, nil
	}
	live := st.live()
	if len(live) != 1 {
		return rangeRecord{}, badRequest("a change-feed read needs x-ms-documentdb-partitionkeyrangeid or x-ms-documentdb-partitionkey on a container with %d partitions", len(live))
	}
	return live[0], nil
}

func (s *store) changeFeed(db, coll string, req feedRequest) (feedPage, error) {
	var page feedPage
	err := s.db.View(func(tx *bolt.Tx) error {
		st, cb, err := loadColl(tx, db, coll)
		if err != nil {
			return err
		}
		page.CollRID = st.RID
		r, err := feedScope(st, req)
		if err != nil {
			return err
		}
		if r.Merged && !req.ModifiedSince.IsZero() && !req.StartTimeAfterMerge {
			return errStartTimeMerged
		}
		page.RangeID = r.idString()
		page.Current = r.LSN
		since := req.Since
		if req.Now {
			since = r.LSN
		}
		now := s.now()
		var modTs int64
		if !req.ModifiedSince.IsZero() {
			modTs = req.ModifiedSince.Unix()
		}
		var pkPrefix []byte
		if req.PK != "" {
			pkPrefix = partitionPrefix(req.PK)
		}
		// One cursor serves every item lookup: Bucket.Get would allocate a cursor per item.
		items := cb.Bucket(bucketItems).Cursor()
		c := cb.Bucket(bucketLatest).Cursor()
		start := rangeLSNKey(r.ID, since+1)
		prefix := u32(r.ID)
		page.Etag = max(since, r.LSN)
		// Bodies alias the read transaction's pages until the page is complete, then are copied
		// into one arena of the exact size (pooled, see getBody): one copy per page.
		var bodies [][]byte
		size := 0
		startEPK, endEPK := []byte(req.StartEPK), []byte(req.EndEPK)
		bounded := req.EndEPK != "" && req.EndEPK != epkTop
		// A full page still takes the items that share its last LSN (possible only after a
		// merge): the page's etag is that LSN, so the next read would skip them.
		full, last := false, uint64(0)
		for k, key := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, key = c.Next() {
			if full && binary.BigEndian.Uint64(k[4:12]) != last {
				break
			}
			if pkPrefix != nil && !bytes.HasPrefix(key, pkPrefix) {
				continue
			}
			ik, v := items.Seek(key)
			if v == nil || !bytes.Equal(ik, key) {
				return fmt.Errorf("latest index names a missing item")
			}
			lsn, ts, epk, body, err := peekItem(v)
			if err != nil {
				return err
			}
			if len(startEPK) > 0 && bytes.Compare(epk, startEPK) < 0 {
				continue
			}
			if bounded && bytes.Compare(epk, endEPK) >= 0 {
				continue
			}
			if modTs != 0 && ts < modTs {
				continue
			}
			if st.DefaultTTL != nil && expired(st.DefaultTTL, ts, body, now) {
				continue
			}
			bodies = append(bodies, body)
			size += len(body)
			if len(bodies) == req.Max {
				full, last = true, lsn
				page.Etag = lsn
			}
		}
		if len(bodies) == 0 {
			return nil
		}
		// The arena is the response body itself, {"_rid":...,"Documents":[...],"_count":n}:
		// the handler writes it as is, and Docs are its sub-slices.
		body := getBody(listBodySize(st.RID, "Documents", len(bodies), size))
		body = appendListHead(body, st.RID, "Documents")
		page.Docs = make([][]byte, len(bodies))
		for i, b := range bodies {
			if i > 0 {
				body = append(body, ',')
			}
			from := len(body)
			body = append(body, b...)
			page.Docs[i] = body[from:len(body):len(body)]
		}
		page.Body = appendListTail(body, len(bodies))
		return nil
	})
	return page, err
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

// --- splits and merges -----------------------------------------------------------------------

func (s *store) split(db, coll, rangeID string) ([]string, error) {
	var children []string
	err := s.db.Update(func(tx *bolt.Tx) error {
		st, cb, err := loadColl(tx, db, coll)
		if err != nil {
			return err
		}
		parent, ok := st.rangeByID(rangeID)
		if !ok || !parent.Live {
			return errRangeGone
		}
		mid, err := splitPoint(st, parent)
		if err != nil {
			return err
		}
		now := s.now().Unix()
		parents := append(append([]string{}, parent.Parents...), parent.idString())
		a := rangeRecord{ID: st.NextRange, Min: parent.Min, Max: mid, Parents: parents, Live: true, Ts: now, Merged: parent.Merged}
		b := rangeRecord{ID: st.NextRange + 1, Min: mid, Max: parent.Max, Parents: parents, Live: true, Ts: now, Merged: parent.Merged}
		parent.Live = false
		for _, r := range []rangeRecord{parent, a, b} {
			if err := putRange(cb, r); err != nil {
				return err
			}
		}
		lsnB := cb.Bucket(bucketLSN)
		for _, r := range []rangeRecord{a, b} {
			if err := lsnB.Put(u32(r.ID), binary.BigEndian.AppendUint64(nil, parent.LSN)); err != nil {
				return err
			}
		}
		// Move the parent's latest-version index to the children, keeping each item's LSN.
		latest := cb.Bucket(bucketLatest)
		items := cb.Bucket(bucketItems)
		type move struct{ old, new, key []byte }
		var moves []move
		c := latest.Cursor()
		prefix := u32(parent.ID)
		for k, key := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, key = c.Next() {
			it, err := decodeItem(items.Get(key), false)
			if err != nil {
				return err
			}
			child := a
			if b.contains(it.EPK) {
				child = b
			}
			// Keep the rest of the key (LSN, and the item key of a merged duplicate LSN).
			moves = append(moves, move{bytes.Clone(k), append(u32(child.ID), k[4:]...), bytes.Clone(key)})
		}
		for _, m := range moves {
			if err := latest.Delete(m.old); err != nil {
				return err
			}
			if err := latest.Put(m.new, m.key); err != nil {
				return err
			}
		}
		st.NextRange += 2
		st.RangesGen++
		v, err := json.Marshal(st.collRecord)
		if err != nil {
			return err
		}
		children = []string{a.idString(), b.idString()}
		return tx.Bucket(bucketColls).Put(collKey(db, coll), v)
	})
	return children, err
}

// merge replaces the adjacent live partitions rangeIDs by one new partition over their union,
// whose parents are the merged partitions (and their ancestors) and whose LSN counter starts at
// the highest of theirs. Items keep their LSNs, so a merged partition's continuation, read with
// its EPK range on the new partition, still returns exactly what it had not delivered.
func (s *store) merge(db, coll string, rangeIDs []string) (string, error) {
	var merged string
	err := s.db.Update(func(tx *bolt.Tx) error {
		st, cb, err := loadColl(tx, db, coll)
		if err != nil {
			return err
		}
		if len(rangeIDs) < 2 {
			return badRequest("a merge needs at least two ranges, got %d", len(rangeIDs))
		}
		var olds []rangeRecord
		for _, id := range rangeIDs {
			r, ok := st.rangeByID(id)
			if !ok || !r.Live {
				return errRangeGone
			}
			if slices.ContainsFunc(olds, func(o rangeRecord) bool { return o.ID == r.ID }) {
				return badRequest("range %s is named twice", id)
			}
			olds = append(olds, r)
		}
		sort.Slice(olds, func(i, j int) bool { return olds[i].Min < olds[j].Min })
		for i := 1; i < len(olds); i++ {
			if olds[i-1].Max != olds[i].Min {
				return badRequest("ranges %s and %s are not adjacent", olds[i-1].idString(), olds[i].idString())
			}
		}
		m := rangeRecord{ID: st.NextRange, Min: olds[0].Min, Max: olds[len(olds)-1].Max, Parents: []string{}, Live: true, Ts: s.now().Unix(), Merged: true}
		for _, r := range olds {
			for _, p := range append(slices.Clone(r.Parents), r.idString()) {
				if !slices.Contains(m.Parents, p) {
					m.Parents = append(m.Parents, p)
				}
			}
			m.LSN = max(m.LSN, r.LSN)
			r.Live = false
			if err := putRange(cb, r); err != nil {
				return err
			}
		}
		if err := putRange(cb, m); err != nil {
			return err
		}
		if err := cb.Bucket(bucketLSN).Put(u32(m.ID), binary.BigEndian.AppendUint64(nil, m.LSN)); err != nil {
			return err
		}
		// Move the latest-version index to the new range, keeping each item's LSN. Two items
		// with the same LSN (one per merged partition) get distinct keys: see deleteLatest.
		latest := cb.Bucket(bucketLatest)
		type move struct{ old, key []byte }
		var moves []move
		for _, r := range olds {
			c := latest.Cursor()
			prefix := u32(r.ID)
			for k, key := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, key = c.Next() {
				moves = append(moves, move{bytes.Clone(k), bytes.Clone(key)})
			}
		}
		for _, mv := range moves {
			if err := latest.Delete(mv.old); err != nil {
				return err
			}
		}
		for _, mv := range moves {
			nk := rangeLSNKey(m.ID, binary.BigEndian.Uint64(mv.old[4:12]))
			if latest.Get(nk) != nil {
				nk = append(nk, mv.key...)
			}
			if err := latest.Put(nk, mv.key); err != nil {
				return err
			}
		}
		st.NextRange++
		st.RangesGen++
		v, err := json.Marshal(st.collRecord)
		if err != nil {
			return err
		}
		merged = m.idString()
		return tx.Bucket(bucketColls).Put(collKey(db, coll), v)
	})
	return merged, err
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
// indexes (a policy with indexingMode none keeps empty path lists).
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

// splitPoint is the boundary that halves a range: in the masked 128-bit space of V2 EPKs, or in
// the 32-bit hash space of a V1 container.
func splitPoint(st *collState, r rangeRecord) (string, error) {
	if st.PKVersion == 1 {
		lo, err := epkValueV1(r.Min)
		if err != nil {
			return "", err
		}
		hi, err := epkValueV1(r.Max)
		if err != nil {
			return "", err
		}
		if hi-lo < 2 {
			return "", badRequest("range %s is too small to split", r.idString())
		}
		return epk.NumberEPK(float64((lo + hi) / 2)), nil
	}
	lo, err := epkValue(r.Min)
	if err != nil {
		return "", err
	}
	hi, err := epkValue(r.Max)
	if err != nil {
		return "", err
	}
	if new(big.Int).Sub(hi, lo).Cmp(big.NewInt(2)) < 0 {
		return "", badRequest("range %s is too small to split", r.idString())
	}
	return epkHex(new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)), nil
}
