package sink

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// hostileChild answers with the id of the message it read; $MODE chooses how it misbehaves
// on the first batch, and every later batch is answered "error" (not processed).
const hostileChild = `
n=0
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/^{"id":\([0-9]*\),.*/\1/p'); id=${id:-0}
  case "$line" in
    *'"type":"batch"'*)
      n=$((n+1))
      if [ $n -gt 1 ]; then echo "{\"id\":$id,\"type\":\"error\",\"message\":\"not processed\"}"; continue; fi
      case "$MODE" in
        duplicate) echo "{\"id\":$id,\"type\":\"checkpoint\"}"; echo "{\"id\":$id,\"type\":\"checkpoint\"}" ;;
        late) echo "{\"id\":$id,\"type\":\"checkpoint\"}"; echo "{\"id\":$((id-1)),\"type\":\"checkpoint\"}" ;;
        longline) head -c 3000000 /dev/zero | tr '\0' x; echo; echo "{\"id\":$id,\"type\":\"checkpoint\"}" ;;
      esac ;;
    *) echo "{\"id\":$id,\"type\":\"done\"}" ;;
  esac
done
`

func TestExecLines_Adversarial(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode, stderr string
	}{
		// Two answers to the first batch: the second must not answer the second batch.
		{"duplicate", "dropped"},
		// A stale answer (the id of an earlier message) after the right one.
		{"late", "dropped"},
		// A 3 MB stdout line is skipped, not copied or held; the protocol goes on.
		{"longline", "child output line 2 skipped: longer than 2 MiB"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			var stderr syncBuffer
			x := &ExecLines{Command: hostileChild, Env: []string{"MODE=" + tc.mode, "PATH=" + os.Getenv("PATH")}, Stderr: &stderr}
			defer x.Close()
			ctx := t.Context()
			info := feed.LeaseInfo{Token: "0", Range: leases.Range{Min: "", Max: "05C1DFFFFFFFFC"}, Owner: "host-1"}
			if err := x.OpenLease(ctx, info); err != nil {
				t.Fatal(err)
			}
			if err := x.Handle(ctx, batch("0", `{"id":"a"}`)); err != nil {
				t.Fatalf("first batch: %v, want its checkpoint", err)
			}
			err := x.Handle(ctx, batch("0", `{"id":"b"}`))
			if err == nil || errors.Is(err, feed.ErrNoCheckpoint) || !strings.Contains(err.Error(), "not processed") {
				t.Fatalf("second batch: %v, want the child's own answer (not processed), never the stray one", err)
			}
			if got := stderr.String(); !strings.Contains(got, tc.stderr) || len(got) > 4096 {
				t.Errorf("stderr (%d bytes) does not say %q:\n%.500s", len(got), tc.stderr, got)
			}
		})
	}
}

// fullDisk is an output that accepts failAfter bytes of its next write and then fails, like a
// file on a disk that fills up; with seekable set it can be cut back like an *os.File.
type fullDisk struct {
	data      []byte
	off       int64
	failAfter int
}

func (d *fullDisk) Write(p []byte) (int, error) {
	n := len(p)
	var err error
	if d.failAfter >= 0 && n > d.failAfter {
		n, err = d.failAfter, errors.New("no space left on device")
		d.failAfter = -1
	}
	d.data = append(d.data[:d.off], p[:n]...)
	d.off += int64(n)
	return n, err
}

type seekableDisk struct{ *fullDisk }

func (d seekableDisk) Seek(off int64, whence int) (int64, error) {
	if whence == 1 {
		off += d.off
	}
	d.off = off
	return off, nil
}

func (d seekableDisk) Truncate(size int64) error {
	d.data = d.data[:size]
	return nil
}

func TestStdout_FullDiskLeavesWholeLines(t *testing.T) {
	t.Parallel()
	for _, seekable := range []bool{true, false} {
		disk := &fullDisk{failAfter: 30}
		var w io.Writer = disk
		if seekable {
			w = seekableDisk{disk}
		}
		s := NewStdout(w)
		ok := batch("0", `{"id":"before"}`)
		if err := s.Handle(t.Context(), ok); err != nil {
			t.Fatal(err)
		}
		disk.failAfter = 20
		b := batch("0", `{"id":"aaaaaaaaaaaa"}`, `{"id":"bbbbbbbbbbbb"}`)
		if err := s.Handle(t.Context(), b); err == nil {
			t.Fatal("the write on a full disk succeeded")
		}
		if err := s.Handle(t.Context(), b); err != nil { // the retried batch
			t.Fatal(err)
		}
		var lines []string
		for line := range strings.Lines(string(disk.data)) {
			if line == "\n" && !seekable {
				continue
			}
			if !json.Valid([]byte(line)) || !strings.HasSuffix(line, "\n") {
				if seekable || !strings.HasPrefix(line, `{"id":"aaaa`) {
					t.Errorf("seekable=%v: torn line %q in the output:\n%s", seekable, line, disk.data)
				}
				continue
			}
			lines = append(lines, strings.TrimSpace(line))
		}
		if got := strings.Join(lines, " "); got != `{"id":"before"} {"id":"aaaaaaaaaaaa"} {"id":"bbbbbbbbbbbb"}` {
			t.Errorf("seekable=%v: whole lines %s", seekable, got)
		}
	}
}
