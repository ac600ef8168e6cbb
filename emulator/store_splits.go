package emulator

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/big"
	"slices"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/cfp-dev/cfp/internal/epk"
)

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
