package emulator

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cfp-dev/cfp/internal/epk"
)

// Time to live (docs/protocol-gateway.md, "Time to live"): a container's defaultTtl turns expiry on (absent:
// off; -1: on, items live forever unless they set ttl; n > 0: n seconds), an item's ttl
// overrides it (-1: never; n > 0: n seconds) and is ignored while the container's is absent.
// An item expires ttl seconds after its last write (_ts). Expired items vanish from point reads,
// queries and the latest-version change feed at once (filtered on read); the sweeper deletes
// them, logging a delete with timeToLiveExpired in the all-versions feed.

// DefaultTTLSweepInterval is how often the sweeper deletes expired items when
// Options.TTLSweepInterval is zero.
const DefaultTTLSweepInterval = time.Second

// sweepBatch bounds the items one sweep expires per container in one transaction.
const sweepBatch = 1000

// parseDefaultTTL reads a container definition's defaultTtl: nil when absent (or null).
func parseDefaultTTL(raw json.RawMessage) (*int64, error) {
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	n, ok := ttlNumber(raw)
	if !ok || (n != -1 && n <= 0) {
		return nil, badRequest("the container's defaultTtl must be -1 or a positive number of seconds, got %s", raw)
	}
	return &n, nil
}

// checkItemTTL validates a written item's ttl property when the container has TTL on.
func checkItemTTL(body map[string]json.RawMessage) error {
	raw, ok := body["ttl"]
	if !ok || string(raw) == "null" {
		return nil
	}
	if n, ok := ttlNumber(raw); !ok || (n != -1 && n <= 0) {
		return badRequest("the item's ttl must be -1 or a positive number of seconds, got %s", raw)
	}
	return nil
}

// ttlNumber reads an integral JSON number that fits in an int64.
func ttlNumber(raw json.RawMessage) (int64, bool) {
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil || f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
		return 0, false
	}
	return int64(f), true
}

// itemTTL is the effective time to live, in seconds, of a document stored in a container whose
// defaultTtl is def: 0 when it never expires.
func itemTTL(def *int64, body []byte) int64 {
	if def == nil {
		return 0
	}
	ttl := *def
	// Fast path: most documents have no ttl property. A match may be a nested one; the
	// decode below reads only the top level.
	if bytes.Contains(body, []byte(`"ttl"`)) {
		var v struct {
			TTL json.RawMessage `json:"ttl"`
		}
		if json.Unmarshal(body, &v) == nil && v.TTL != nil {
			if n, ok := ttlNumber(v.TTL); ok && (n == -1 || n > 0) {
				ttl = n
			}
		}
	}
	if ttl < 0 {
		return 0
	}
	return ttl
}

// expired reports whether a document written at ts (Unix seconds) in a container whose
// defaultTtl is def has expired at now.
func expired(def *int64, ts int64, body []byte, now time.Time) bool {
	ttl := itemTTL(def, body)
	return ttl > 0 && now.Unix() >= ts+ttl
}

// nextLSN increments range rangeID's LSN counter in cb and returns the new LSN.
func nextLSN(cb *bolt.Bucket, rangeID uint32) (uint64, error) {
	b := cb.Bucket(bucketLSN)
	var lsn uint64
	if v := b.Get(u32(rangeID)); len(v) == 8 {
		lsn = binary.BigEndian.Uint64(v)
	}
	lsn++
	return lsn, b.Put(u32(rangeID), binary.BigEndian.AppendUint64(nil, lsn))
}

// expireTx deletes the expired item it stored at key like a delete would (a new LSN on its range,
// a delete in the operation log), marking the log record as a TTL expiry. It returns the new LSN.
func expireTx(cb *bolt.Bucket, st *collState, key []byte, it item, now int64) (uint64, error) {
	return deleteStoredTx(cb, st, key, it, now, true)
}

// deleteStoredTx deletes the item it stored at key as a delete does: a new LSN on its range and a
// delete in the operation log, marked as a TTL expiry when ttl is set. It returns the new LSN.
func deleteStoredTx(cb *bolt.Bucket, st *collState, key []byte, it item, now int64, ttl bool) (uint64, error) {
	r, ok := st.rangeForEPK(it.EPK)
	if !ok {
		return 0, fmt.Errorf("no live range holds EPK %s", it.EPK)
	}
	lsn, err := nextLSN(cb, r.ID)
	if err != nil {
		return 0, err
	}
	if err := deleteLatest(cb.Bucket(bucketLatest), r.ID, it.LSN, key); err != nil {
		return 0, err
	}
	if err := cb.Bucket(bucketItems).Delete(key); err != nil {
		return 0, err
	}
	rec := logRecord{Op: opDelete.String(), Key: key, PrevLSN: it.LSN, Ts: now, EPK: it.EPK, TTLExpired: ttl}
	var doc map[string]any
	if json.Unmarshal(it.Body, &doc) == nil {
		rec.PK = partitionKeyObject(st.Paths, epk.FromDocument(doc, st.Paths))
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	return lsn, cb.Bucket(bucketLog).Put(rangeLSNKey(r.ID, lsn), v)
}

// sweepExpired deletes the items that have expired in every container with TTL on, at most
// sweepBatch per container, and returns how many it deleted.
func (s *store) sweepExpired() (int, error) {
	type target struct{ db, coll string }
	var targets []target
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketColls).ForEach(func(_, v []byte) error {
			var rec collRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("decode container: %w", err)
			}
			if rec.DefaultTTL != nil {
				targets = append(targets, target{rec.DB, rec.ID})
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	total := 0
	for _, t := range targets {
		n, err := s.sweepContainer(t.db, t.coll)
		if err != nil {
			return total, fmt.Errorf("sweep %s/%s: %w", t.db, t.coll, err)
		}
		total += n
	}
	return total, nil
}

// sweepContainer expires up to sweepBatch expired items of db/coll: it finds them in a read
// transaction, then deletes those still expired in one write.
func (s *store) sweepContainer(db, coll string) (int, error) {
	now := s.now()
	var keys [][]byte
	err := s.db.View(func(tx *bolt.Tx) error {
		st, cb, err := loadColl(tx, db, coll)
		if err != nil {
			return err
		}
		c := cb.Bucket(bucketItems).Cursor()
		for k, v := c.First(); k != nil && len(keys) < sweepBatch; k, v = c.Next() {
			_, ts, _, body, err := peekItem(v)
			if err != nil {
				return err
			}
			if expired(st.DefaultTTL, ts, body, now) {
				keys = append(keys, bytes.Clone(k))
			}
		}
		return nil
	})
	if errors.Is(err, errNotFound) || len(keys) == 0 {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	err = s.commits.do(func(tx *bolt.Tx) error {
		n = 0
		st, cb, err := loadColl(tx, db, coll)
		if errors.Is(err, errNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		items := cb.Bucket(bucketItems)
		for _, k := range keys {
			v := items.Get(k)
			if v == nil {
				continue // deleted meanwhile
			}
			it, err := decodeItem(v, true)
			if err != nil {
				return err
			}
			if !expired(st.DefaultTTL, it.Ts, it.Body, now) {
				continue // rewritten meanwhile
			}
			if _, err := expireTx(cb, st, k, it, now.Unix()); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// sweep runs the sweeper every interval until ctx ends.
func (e *Emulator) sweep(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := e.sweepOnce()
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("delete expired items", "err", err)
			}
			continue
		}
		if n > 0 {
			e.log.Debug("deleted expired items", "count", n)
		}
		if n, err := e.CompactLog(); err != nil {
			if ctx.Err() == nil {
				e.log.Warn("compact the operation log", "err", err)
			}
		} else if n > 0 {
			e.log.Debug("compacted the operation log", "records", n)
		}
	}
}

// sweepOnce is one pass of the sweeper; a corrupt data file is an error, not a crash.
func (e *Emulator) sweepOnce() (n int, err error) {
	defer catchCorrupt(e.opts.Dir, &err)()
	return e.store.sweepExpired()
}

// SweepExpired deletes every item whose time to live has passed now, as the background sweeper
// does, and returns how many it deleted. Tests call it to avoid waiting for the sweeper.
func (e *Emulator) SweepExpired() (int, error) {
	total := 0
	for {
		n, err := e.store.sweepExpired()
		total += n
		if err != nil {
			return total, fmt.Errorf("delete expired items: %w", err)
		}
		if n == 0 {
			return total, nil
		}
	}
}
