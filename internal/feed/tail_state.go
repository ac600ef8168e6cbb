package feed

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/lineio"
)

// ParseTailFrom parses tail's --from: everything ParseStart accepts, or "@FILE" to resume from a
// state file written by WriteTailState (then the StartFrom is zero and the state is returned).
func ParseTailFrom(s string, now time.Time) (StartFrom, *TailState, error) {
	p, err := ParsePosition(s, now)
	if err != nil {
		return StartFrom{}, nil, err
	}
	if p.Kind == PositionFile {
		st, err := ReadTailState(p.File)
		if err != nil {
			return StartFrom{}, nil, err
		}
		return StartFrom{}, st, nil
	}
	start, err := p.StartFrom(now)
	return start, nil, err
}

// MaxTailStateFile bounds the size of a state file ReadTailState reads: one range takes about
// 200 bytes, so this is room for far more ranges than a container has.
const MaxTailStateFile = 64 << 20

// ReadTailState reads and checks a state file.
func ReadTailState(path string) (*TailState, error) {
	b, err := lineio.ReadFile(path, MaxTailStateFile)
	if err != nil {
		return nil, fmt.Errorf("read tail state: %w", err)
	}
	var st TailState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read tail state %s: %w", path, err)
	}
	mode, err := ParseFeedMode(st.Mode)
	if err != nil {
		return nil, fmt.Errorf("read tail state %s: %w", path, err)
	}
	if err := (TailOptions{State: &st, Mode: mode}).Validate(); err != nil {
		return nil, fmt.Errorf("read tail state %s: %w", path, err)
	}
	for _, rs := range st.Ranges {
		if rs.Continuation == "" && rs.Start == "" {
			return nil, fmt.Errorf("read tail state %s: range %s has neither a continuation nor a start", path, rs.Range)
		}
	}
	if err := CheckStateRanges(st); err != nil {
		return nil, fmt.Errorf("read tail state %s: %w", path, err)
	}
	return &st, nil
}

// CheckContainer refuses a state written for another container than database/container
// (resource id rid): its continuations and ranges mean nothing there. A state without the
// container, from an older cfp, is taken as it is; so is an unknown rid. The error reads after
// the state file's name ("state file F " + err).
func (st *TailState) CheckContainer(database, container, rid string) error {
	switch {
	case st.ContainerRID != "" && rid != "" && st.ContainerRID != rid,
		st.ContainerRID == "" && st.Container != "" && (st.Database != database || st.Container != container):
		return fmt.Errorf("was written for container %s/%s (resource id %s), not %s/%s (resource id %s)",
			st.Database, st.Container, cmp.Or(st.ContainerRID, "-"), database, container, rid)
	}
	return nil
}

// CheckStateRanges reports whether the ranges of a state tile its scope: sorted by key, no two
// share a key (a duplicate range would deliver its changes twice) and no key between the
// first and the last is left out (a missing range would never be read). With a Scope (files
// written since it exists), the ranges start at its Min and end at its Max too.
func CheckStateRanges(st TailState) error {
	rs := make([]Range, len(st.Ranges))
	for i, r := range st.Ranges {
		rs[i] = r.Range.Normal()
	}
	slices.SortFunc(rs, Range.Compare)
	for i := 1; i < len(rs); i++ {
		prev, cur := rs[i-1], rs[i]
		switch c := leases.CompareEPK(prev.Max, cur.Min); {
		case prev.Equal(cur):
			return fmt.Errorf("range %s appears twice", cur)
		case c > 0:
			return fmt.Errorf("ranges %s and %s overlap", prev, cur)
		case c < 0:
			return fmt.Errorf("no range covers %s-%s", prev.Max, cur.Min)
		}
	}
	if st.Scope != nil && len(rs) > 0 {
		scope := st.Scope.Normal()
		if leases.CompareEPK(rs[0].Min, scope.Min) != 0 {
			return fmt.Errorf("no range covers %s-%s", scope.Min, rs[0].Min)
		}
		if last := rs[len(rs)-1]; leases.CompareEPK(last.Max, scope.Max) != 0 {
			return fmt.Errorf("no range covers %s-%s", last.Max, scope.Max)
		}
	}
	return nil
}

// WriteTailState writes st to path atomically (a temporary file in the same directory, synced,
// then a rename), so a crash never leaves a half-written state.
func WriteTailState(path string, st TailState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("write tail state: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write tail state: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(append(b, '\n'))
	var serr error
	if werr == nil {
		// On disk before the rename: after a power loss the rename may survive a file whose
		// data did not, leaving an empty state.
		serr = f.Sync()
	}
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write tail state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write tail state: %w", err)
	}
	return nil
}
