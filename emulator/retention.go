package emulator

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Operation-log retention. The latest-version feed reads items and their latest index only;
// the operation log (every create, replace and delete with its body) serves the all-versions
// feed, which the service keeps for the account's continuous-backup retention. The emulator
// keeps the log for Options.LogRetention and compacts older records: freed pages are reused by
// new writes, so the data file stops growing with the number of writes.

// DefaultLogRetention is Options.LogRetention when zero.
const DefaultLogRetention = 24 * time.Hour

// compactBatch bounds the log records one compaction transaction deletes, so that writers do
// not wait long behind it.
const compactBatch = 10000

// bucketLogFloor, inside a container's bucket, holds per range the LSN of the newest log record
// compacted away (<range id u32> -> u64): an all-versions read from before it would miss
// operations and is refused.
var bucketLogFloor = []byte("logfloor")

// errBeforeRetention is an all-versions read whose continuation is older than what the log
// still holds.
func errBeforeRetention(retention time.Duration) error {
	return badRequest("the all-versions-and-deletes continuation is older than the operation log the cfp emulator keeps (--retention %s): start from now", retention)
}

// logFloor returns the compaction floor of range id in container bucket cb (0: nothing
// compacted).
func logFloor(cb *bolt.Bucket, id uint32) uint64 {
	fb := cb.Bucket(bucketLogFloor)
	if fb == nil {
		return 0
	}
	if v := fb.Get(u32(id)); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// compactLog deletes, in every container, the operation-log records written before cutoff
// (Unix seconds), oldest first per range, at most compactBatch of them, and returns how many it
// deleted. A range's records are in LSN order, which is time order except after a merge: the
// scan of a range stops at its first record inside the window, keeping a little more rather
// than less.
func (s *store) compactLog(cutoff int64) (int, error) {
	if due, err := s.logCompactionDue(cutoff); err != nil || !due {
		return 0, err
	}
	n := 0
	err := s.commits.do(func(tx *bolt.Tx) error {
		n = 0
		data := tx.Bucket(bucketData)
		return data.ForEachBucket(func(rid []byte) error {
			cb := data.Bucket(rid)
			log := cb.Bucket(bucketLog)
			if log == nil {
				return nil
			}
			c := log.Cursor()
			floors := map[uint32]uint64{}
			var stopped []byte // the range prefix whose window has been reached
			for k, v := c.First(); k != nil && n < compactBatch; {
				if len(k) < 12 {
					k, v = c.Next()
					continue
				}
				if stopped != nil && bytes.HasPrefix(k, stopped) {
					// Skip to the next range.
					next := binary.BigEndian.Uint32(k[:4]) + 1
					if next == 0 {
						break
					}
					k, v = c.Seek(u32(next))
					stopped = nil
					continue
				}
				var rec struct {
					Ts int64 `json:"ts"`
				}
				if err := json.Unmarshal(v, &rec); err != nil {
					return fmt.Errorf("corrupt op log record: %w", err)
				}
				if rec.Ts >= cutoff {
					stopped = bytes.Clone(k[:4])
					k, v = c.Next()
					continue
				}
				key := bytes.Clone(k)
				floors[binary.BigEndian.Uint32(key[:4])] = binary.BigEndian.Uint64(key[4:12])
				if err := c.Delete(); err != nil {
					return err
				}
				n++
				// Seek past the deleted key: Next after Delete can skip a record.
				k, v = c.Seek(key)
			}
			if len(floors) == 0 {
				return nil
			}
			fb, err := cb.CreateBucketIfNotExists(bucketLogFloor)
			if err != nil {
				return err
			}
			for id, lsn := range floors {
				if err := fb.Put(u32(id), binary.BigEndian.AppendUint64(nil, lsn)); err != nil {
					return err
				}
			}
			return nil
		})
	})
	return n, err
}

// logCompactionDue reports whether some range's oldest log record is older than cutoff, so
// that an idle emulator does not run a write transaction per sweep.
func (s *store) logCompactionDue(cutoff int64) (bool, error) {
	due := false
	err := s.db.View(func(tx *bolt.Tx) error {
		data := tx.Bucket(bucketData)
		return data.ForEachBucket(func(rid []byte) error {
			log := data.Bucket(rid).Bucket(bucketLog)
			if log == nil || due {
				return nil
			}
			c := log.Cursor()
			for k, v := c.First(); k != nil; {
				var rec struct {
					Ts int64 `json:"ts"`
				}
				if err := json.Unmarshal(v, &rec); err != nil {
					return fmt.Errorf("corrupt op log record: %w", err)
				}
				if rec.Ts < cutoff {
					due = true
					return nil
				}
				if len(k) < 4 {
					k, v = c.Next()
					continue
				}
				next := binary.BigEndian.Uint32(k[:4]) + 1
				if next == 0 {
					return nil
				}
				k, v = c.Seek(u32(next))
			}
			return nil
		})
	})
	return due, err
}

// CompactLog deletes the operation-log records older than Options.LogRetention, as the
// background sweeper does, and returns how many it deleted. It does nothing when the log is
// kept for ever (a negative LogRetention).
func (e *Emulator) CompactLog() (int, error) {
	if e.opts.LogRetention < 0 {
		return 0, nil
	}
	total := 0
	for {
		n, err := e.compactOnce()
		total += n
		if err != nil {
			return total, fmt.Errorf("compact the operation log: %w", err)
		}
		if n < compactBatch {
			return total, nil
		}
	}
}

// compactOnce is one compaction transaction; a corrupt data file is an error, not a crash.
func (e *Emulator) compactOnce() (n int, err error) {
	defer catchCorrupt(e.opts.Dir, &err)()
	return e.store.compactLog(e.store.now().Add(-e.opts.LogRetention).Unix())
}
