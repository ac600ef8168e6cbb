package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// tornWriter writes only the first half of its first write and fails it, as a file does when
// the disk fills up in the middle of a line; later writes go through.
type tornWriter struct {
	buf  bytes.Buffer
	torn bool
}

func (w *tornWriter) Write(p []byte) (int, error) {
	if !w.torn {
		w.torn = true
		n, _ := w.buf.Write(p[:len(p)/2])
		return n, errors.New("no space left on device")
	}
	return w.buf.Write(p)
}

// TestRetry_DeadLetterAfterATornLineStartsOnANewLine dead-letters a batch whose record is
// only half written (the batch then comes again and is dead-lettered once more): the complete
// record must be a line of its own, readable by a JSON-lines reader, not glued to the torn one.
func TestRetry_DeadLetterAfterATornLineStartsOnANewLine(t *testing.T) {
	t.Parallel()
	dl := &tornWriter{}
	r := &Retry{Handler: &flaky{n: 100}, OnError: OnErrorDeadLetter, DeadLetter: dl}
	b := batch("3", `{"id":"x"}`)
	if err := r.Handle(t.Context(), b); err == nil {
		t.Fatal("a dead letter that was not written counted as processed")
	}
	if err := r.Handle(t.Context(), b); err != nil {
		t.Fatalf("second delivery: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(dl.buf.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	var rec DeadLetterRecord
	if err := json.Unmarshal([]byte(last), &rec); err != nil {
		t.Fatalf("the dead letter after the torn line is not a JSON line of its own: %q (%v)", last, err)
	}
	if rec.Lease != "3" || len(rec.Items) != 1 || string(rec.Items[0]) != `{"id":"x"}` {
		t.Fatalf("dead letter = %+v, want lease 3 with its item", rec)
	}
}
