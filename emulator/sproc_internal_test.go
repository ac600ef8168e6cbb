package emulator

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// When a commit group fails, the committer runs each of its functions again alone. A stored
// procedure that timed out is not run a second time: it would hold every writer for the time
// bound again, only to time out again.
func TestSprocTx_TimeoutIsNotRunAgain(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir(), ScriptTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if _, err := e.store.createDatabase("db"); err != nil {
		t.Fatal(err)
	}
	st, err := e.store.createContainer("db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), 1)
	if err != nil {
		t.Fatal(err)
	}
	var out sprocOutput
	fn := e.sprocTx(context.Background(), st, "spin", "function () { while (true) {} }", []any{"p"}, nil, nil, &out)
	before := scriptRuns.Load()
	for i := range 2 { // the first run, then the committer's retry of the same function
		err := e.store.updateItems("db", "c", fn)
		var se *scriptError
		if !errors.As(err, &se) || se.status != http.StatusRequestTimeout {
			t.Fatalf("run %d: %v, want the 408 timeout", i+1, err)
		}
	}
	if n := scriptRuns.Load() - before; n != 1 {
		t.Fatalf("the script ran %d times, want once", n)
	}
}
