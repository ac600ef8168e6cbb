package feed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cfp-dev/cfp/internal/lineio"
)

// ParseTailFrom parses tail's --from: everything ParseStart accepts, or "@FILE" to resume from a
// state file written by WriteTailState (then the StartFrom is zero and the state is returned).
func ParseTailFrom(s string, now time.Time) (StartFrom, *TailState, error) {
	if path, ok := strings.CutPrefix(strings.TrimSpace(s), "@"); ok {
		if path == "" {
			return StartFrom{}, nil, fmt.Errorf("start position %q: missing state file name", s)
		}
		st, err := ReadTailState(path)
		if err != nil {
			return StartFrom{}, nil, err
		}
		return StartFrom{}, st, nil
	}
	start, err := ParseStart(s, now)
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
	if err := (&TailOptions{State: &st, Mode: mode}).Validate(); err != nil {
		return nil, fmt.Errorf("read tail state %s: %w", path, err)
	}
	for _, rs := range st.Ranges {
		if rs.Continuation == "" && rs.Start == "" {
			return nil, fmt.Errorf("read tail state %s: range %s has neither a continuation nor a start", path, rs.Range)
		}
	}
	return &st, nil
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
