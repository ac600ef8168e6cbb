package emulator

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

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

// openFeed starts a change-feed read of either mode in tx: the container, its bucket, the range
// in scope and the LSN the page starts after, with the page's container, range and current LSN
// filled in.
func openFeed(tx *bolt.Tx, db, coll string, req feedRequest, page *feedPage) (*collState, *bolt.Bucket, rangeRecord, uint64, error) {
	st, cb, err := loadColl(tx, db, coll)
	if err != nil {
		return nil, nil, rangeRecord{}, 0, err
	}
	page.CollRID = st.RID
	r, err := feedScope(st, req)
	if err != nil {
		return nil, nil, rangeRecord{}, 0, err
	}
	page.RangeID, page.Current = r.idString(), r.LSN
	since := req.Since
	if req.Now {
		since = r.LSN
	}
	return st, cb, r, since, nil
}

func (s *store) changeFeed(db, coll string, req feedRequest) (feedPage, error) {
	var page feedPage
	err := s.db.View(func(tx *bolt.Tx) error {
		st, cb, r, since, err := openFeed(tx, db, coll, req, &page)
		if err != nil {
			return err
		}
		if r.Merged && !req.ModifiedSince.IsZero() && !req.StartTimeAfterMerge {
			return errStartTimeMerged
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
		prev := uint64(0) // the LSN of the last document taken
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
			if lsn != prev && !fitsPage(len(bodies), size, len(body)) {
				// Full by bytes: the page ends after the last LSN taken (items sharing it are
				// taken whatever their size, as above).
				page.Etag = prev
				break
			}
			bodies = append(bodies, body)
			size += len(body)
			prev = lsn
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
