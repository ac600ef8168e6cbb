package emulator

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
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

// Deleting a container deletes its scripts, and deleting a database its users and their
// permissions: nothing is left behind in the data file.
func TestDelete_TakesChildResourcesAlong(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	db, err := e.store.createDatabase("db")
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.store.createContainer("db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), 1)
	if err != nil {
		t.Fatal(err)
	}
	coll := resOwner{RID: st.RID, Self: "dbs/" + db.RID + "/colls/" + st.RID + "/"}
	for _, kind := range []string{"sprocs", "triggers", "udfs"} {
		if _, _, err := e.store.writeRes(kind, coll, resCreate, "", map[string]any{"id": "x", "body": "function () {}"}, ""); err != nil {
			t.Fatal(err)
		}
	}
	user, _, err := e.store.writeRes("users", resOwner{RID: db.RID, Self: "dbs/" + db.RID + "/"}, resCreate, "", map[string]any{"id": "u"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.writeRes("permissions", resOwner{RID: user.RID}, resCreate, "", map[string]any{"id": "p", "permissionMode": "Read", "resource": "dbs/db"}, ""); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		_ = e.store.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketRes).ForEach(func(k, _ []byte) error {
				if k[0] != 0 { // not the rid counter
					n++
				}
				return nil
			})
		})
		return n
	}
	if n := count(); n != 5 {
		t.Fatalf("%d child resources stored, want 5", n)
	}
	if err := e.store.deleteContainer("db", "c"); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d child resources after the container's delete, want the user and its permission", n)
	}
	if err := e.store.deleteDatabase("db"); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d child resources after the database's delete, want none", n)
	}
}
