package emulator

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/cfp-dev/cfp/internal/epk"
)

// All-versions-and-deletes change feed (docs/protocol-gateway.md, "All versions and deletes"): every
// create, replace and delete from the operation log, in LSN order, each as
// {"current","previous","metadata"} in wire format 2021-09-15.

// wireFormatFullFidelity is the x-ms-cosmos-changefeed-wire-format-version the all-versions feed
// is served in (SeparateMetadataWithCrts).
const wireFormatFullFidelity = "2021-09-15"

// avMetadata is the metadata of one all-versions change (ChangeFeedMetadata wire names).
type avMetadata struct {
	OperationType     string          `json:"operationType"`
	LSN               uint64          `json:"lsn"`
	CRTS              int64           `json:"crts"`
	PreviousImageLSN  uint64          `json:"previousImageLSN"`
	TimeToLiveExpired bool            `json:"timeToLiveExpired"`
	ID                string          `json:"id,omitempty"`
	PartitionKey      json.RawMessage `json:"partitionKey,omitempty"`
}

// avItem is one element of an all-versions page's Documents.
type avItem struct {
	Current  json.RawMessage `json:"current"`
	Previous json.RawMessage `json:"previous,omitempty"`
	Metadata avMetadata      `json:"metadata"`
}

// avEntry is an op-log record in the scope of a read.
type avEntry struct {
	lsn uint64
	key []byte // the op-log key
	rec logRecord
}

// changeFeedAll serves an all-versions read: the operations after req.Since (or after the
// current LSN with req.Now) of the range in scope, including those its ancestors logged before
// a split or merge, restricted to the range's EPKs (and to the request's sub-range or partition
// key). Continuation, etag and page-size rules are those of the latest-version feed; a page
// never ends between two operations with the same LSN (possible only after a merge).
func (s *store) changeFeedAll(db, coll string, req feedRequest) (feedPage, error) {
	var page feedPage
	err := s.db.View(func(tx *bolt.Tx) error {
		st, cb, r, since, err := openFeed(tx, db, coll, req, &page)
		if err != nil {
			return err
		}
		page.Etag = max(since, r.LSN)

		// The range's own log, then its ancestors' (their operations on its EPKs).
		sources := []uint32{r.ID}
		for _, p := range r.Parents {
			n, err := strconv.ParseUint(p, 10, 32)
			if err != nil {
				return fmt.Errorf("range %s has a corrupt parent %q", r.idString(), p)
			}
			sources = append(sources, uint32(n))
		}
		for _, src := range sources {
			if since < logFloor(cb, src) {
				return errBeforeRetention(s.logRetention)
			}
		}
		log := cb.Bucket(bucketLog)
		var pkPrefix []byte
		if req.PK != "" {
			pkPrefix = partitionPrefix(req.PK)
		}
		inScope := func(rec *logRecord) (bool, error) {
			if pkPrefix != nil && !bytes.HasPrefix(rec.Key, pkPrefix) {
				return false, nil
			}
			e := rec.EPK
			if e == "" {
				var err error
				if e, err = legacyEPK(log, sources, &st.collRecord, rec); err != nil || e == "" {
					return false, err
				}
			}
			switch {
			case !r.contains(e):
				return false, nil
			case req.StartEPK != "" && e < req.StartEPK:
				return false, nil
			case req.EndEPK != "" && req.EndEPK != epkTop && e >= req.EndEPK:
				return false, nil
			}
			return true, nil
		}
		// Each source contributes at most a page, plus the operations that share the LSN of its
		// last one (those of one transactional batch), so the first req.Max entries of all
		// sources merged, and every operation sharing the last one's LSN, are among those
		// collected.
		var entries []avEntry
		for _, src := range sources {
			n, last := 0, uint64(0)
			c := log.Cursor()
			prefix := u32(src)
			for k, v := c.Seek(rangeLSNKey(src, since+1)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				lsn := binary.BigEndian.Uint64(k[4:12])
				if n >= req.Max && lsn != last {
					break
				}
				var rec logRecord
				if err := json.Unmarshal(v, &rec); err != nil {
					return fmt.Errorf("corrupt op log record: %w", err)
				}
				ok, err := inScope(&rec)
				if err != nil {
					return err
				}
				if ok {
					entries = append(entries, avEntry{lsn: lsn, key: bytes.Clone(k), rec: rec})
					n, last = n+1, lsn
				}
			}
		}
		sort.SliceStable(entries, func(i, j int) bool { return entries[i].lsn < entries[j].lsn })
		if len(entries) >= req.Max {
			last := entries[req.Max-1].lsn
			cut := req.Max
			for cut < len(entries) && entries[cut].lsn == last {
				cut++
			}
			entries = entries[:cut]
			page.Etag = last
		}
		page.Docs = make([][]byte, 0, len(entries))
		size := 0
		for i, en := range entries {
			doc, err := avDocument(log, sources, st.Paths, en)
			if err != nil {
				return err
			}
			if i > 0 && en.lsn != entries[i-1].lsn && !fitsPage(len(page.Docs), size, len(doc)) {
				page.Etag = entries[i-1].lsn // full by bytes: the next page starts after it
				break
			}
			page.Docs = append(page.Docs, doc)
			size += len(doc)
		}
		return nil
	})
	return page, err
}

// avDocument renders one operation in wire format 2021-09-15.
func avDocument(log *bolt.Bucket, sources []uint32, paths []string, en avEntry) ([]byte, error) {
	rec := en.rec
	it := avItem{
		Current: rec.Body,
		Metadata: avMetadata{
			OperationType:     rec.Op,
			LSN:               en.lsn,
			CRTS:              rec.Ts,
			PreviousImageLSN:  rec.PrevLSN,
			TimeToLiveExpired: rec.TTLExpired,
		},
	}
	if rec.PrevLSN != 0 {
		prev, err := previousImage(log, sources, rec, en.key)
		if err != nil {
			return nil, err
		}
		it.Previous = prev
	}
	if rec.Op == opDelete.String() {
		it.Current = json.RawMessage(`{}`)
		it.Metadata.ID = idOfKey(rec.Key)
		it.Metadata.PartitionKey = rec.PK
		if it.Metadata.PartitionKey == nil && it.Previous != nil {
			// A record written before deletes kept their partition key: take it from the
			// previous image.
			var doc map[string]any
			if json.Unmarshal(it.Previous, &doc) == nil {
				it.Metadata.PartitionKey = partitionKeyObject(paths, epk.FromDocument(doc, paths))
			}
		}
	}
	b, err := json.Marshal(it)
	if err != nil {
		return nil, fmt.Errorf("encode all-versions change: %w", err)
	}
	return b, nil
}

// previousImage is the body the item at rec.Key had at rec.PrevLSN, found in the op log of the
// range that wrote it (the read range or one of its ancestors); nil when the log lacks it.
// Several records can share an LSN (the operations of one transactional batch): the previous
// image is the last record of the item at that LSN, before logKey (the op-log key of rec, nil
// when unknown) when rec is one of them.
func previousImage(log *bolt.Bucket, sources []uint32, rec logRecord, logKey []byte) (json.RawMessage, error) {
	for _, src := range sources {
		var found json.RawMessage
		at := rangeLSNKey(src, rec.PrevLSN)
		bounded := bytes.HasPrefix(logKey, at) // rec shares the LSN it was written after
		c := log.Cursor()
		for k, v := c.Seek(at); k != nil && bytes.HasPrefix(k, at); k, v = c.Next() {
			if bounded && bytes.Compare(k, logKey) >= 0 {
				break
			}
			var prev logRecord
			if err := json.Unmarshal(v, &prev); err != nil {
				return nil, fmt.Errorf("corrupt op log record: %w", err)
			}
			if bytes.Equal(prev.Key, rec.Key) {
				found = prev.Body
			}
		}
		if found != nil {
			return found, nil
		}
	}
	return nil, nil
}

// legacyEPK computes the EPK of a record written before records kept it: from its body, or
// for a delete from its previous image. "" when neither is available.
func legacyEPK(log *bolt.Bucket, sources []uint32, coll *collRecord, rec *logRecord) (string, error) {
	body := rec.Body
	if body == nil && rec.PrevLSN != 0 {
		var err error
		if body, err = previousImage(log, sources, *rec, nil); err != nil {
			return "", err
		}
	}
	if body == nil {
		return "", nil
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("corrupt op log body: %w", err)
	}
	rec.EPK = coll.hashPK(epk.FromDocument(doc, coll.Paths))
	return rec.EPK, nil
}

// idOfKey returns the item id of an item key (<u16 len><canonical partition key><id>).
func idOfKey(key []byte) string {
	if len(key) < 2 {
		return ""
	}
	n := int(binary.BigEndian.Uint16(key))
	if len(key) < 2+n {
		return ""
	}
	return string(key[2+n:])
}

// partitionKeyObject renders a partition key as the feed's metadata does: an object of path
// (without the leading slash) -> value.
func partitionKeyObject(paths []string, comps []any) json.RawMessage {
	if len(paths) != len(comps) {
		return nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range paths {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(strings.TrimPrefix(p, "/"))
		v, err := json.Marshal(comps[i])
		if err != nil {
			return nil
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}
