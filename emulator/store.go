package emulator

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/cfp-dev/cfp/internal/epk"
)

// The store: the emulator's bbolt storage. This file holds the layout, the records and their
// encodings; store_containers.go the databases and containers, store_items.go the document
// writes (with the write precondition, writePrecondition), reads and scans, store_feed.go the
// change feed, store_splits.go partition splits and merges.
//
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
//
// The operations of a transactional batch share one LSN too (store.updateItems): their items'
// latest keys are those of merged duplicates, and their op-log records after the first are keyed
// <range id u32><lsn u64><u32 n>, n counting from 1 in the batch's order.
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

// errTooLarge is the service's 413 for an item (or a request body) over its 2 MB limit.
var errTooLarge = errors.New("request size is too large")

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
	// Legacy marks a non-partitioned collection, created without a partition key: one
	// partition for ever, keyed by the system key /_partitionKey, whose documents are written
	// and read without a partition key (absent, [] or [{}]: the none key).
	Legacy bool `json:"legacy,omitempty"`
}

// noneKey returns the partition key a request to this container addresses with the header's
// components comps (ok: the header is there): a legacy collection's none key, undefined, for
// a header of no component ([] as the SDKs send it) or, when absent is set, no header at all.
func (c *collRecord) noneKey(comps []any, ok, absent bool) ([]any, bool) {
	if c.Legacy && (ok && len(comps) == 0 || !ok && absent) {
		return []any{epk.Undefined{}}, true
	}
	return comps, ok
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
	db      *bolt.DB
	commits *committer
	now     func() time.Time
	// logRetention is Options.LogRetention, for the error of a read from before it.
	logRetention time.Duration
	// readOnly is set when the data file was opened read-only (a full disk).
	readOnly bool
}

// openReadOnlyStore is newStore for a data file opened read-only: it checks the format and
// creates nothing; every write fails with bbolt's ErrDatabaseReadOnly.
func openReadOnlyStore(db *bolt.DB, dir string, now func() time.Time) (*store, error) {
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
	return &store{db: db, commits: &committer{db: db, dir: dir}, now: now, readOnly: true}, nil
}

func newStore(db *bolt.DB, dir string, now func() time.Time) (*store, error) {
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
	return &store{db: db, commits: &committer{db: db, dir: dir}, now: now}, nil
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
