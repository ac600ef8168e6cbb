package cmd

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// avEnvelope is a --envelope line of an all-versions tail.
type avEnvelope struct {
	LSN       int64  `json:"lsn"`
	TS        string `json:"ts"`
	Operation string `json:"operation"`
	Item      struct {
		Current  map[string]any `json:"current"`
		Previous map[string]any `json:"previous"`
		Metadata struct {
			OperationType string          `json:"operationType"`
			LSN           int64           `json:"lsn"`
			ID            string          `json:"id"`
			PartitionKey  json.RawMessage `json:"partitionKey"`
		} `json:"metadata"`
	} `json:"item"`
}

func TestTail_AllVersionsShowsEveryOperationAndDeletes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedDir(t, dir, 0, 6)
	state := dir + "/av.state"
	base := []string{"--local=" + dir, "tail", "-d", "db", "-c", "c", "-e"}

	// From now: nothing yet; the state remembers every range's position and the mode.
	code, out, errOut := run(t, nil, append(base, "--mode", "all-versions", "--save-state", state)...)
	if code != 0 || out != "" {
		t.Fatalf("tail from now: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if b, err := os.ReadFile(state); err != nil || !strings.Contains(string(b), `"mode": "all-versions"`) {
		t.Fatalf("state file %s, %v: want the mode recorded", b, err)
	}

	acct := openLocal(t, dir, 4)
	ctx := context.Background()
	c := acct.Container("db", "c")
	for _, w := range []struct{ pk, body string }{
		{"p1", `{"id":"d1","pk":"p1","n":100}`}, // replace
		{"p0", `{"id":"d9","pk":"p0","n":9}`},   // create
		{"p0", `{"id":"d9","pk":"p0","n":10}`},  // replace
	} {
		if err := c.UpsertItem(ctx, w.pk, []byte(w.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := acct.LeaseDocuments("db", "c").Delete(ctx, "d2", "p2", ""); err != nil {
		t.Fatal(err)
	}
	if err := acct.Close(); err != nil {
		t.Fatal(err)
	}

	// Resumed from the state without --mode: the state's mode applies.
	code, out, errOut = run(t, nil, append(base, "--from", "@"+state, "--envelope")...)
	if code != 0 {
		t.Fatalf("resume: exit %d, stderr %q", code, errOut)
	}
	ops := map[string][]avEnvelope{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var env avEnvelope
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		id, _ := env.Item.Current["id"].(string)
		if env.Operation == "delete" {
			id = env.Item.Metadata.ID
		}
		if env.Operation != env.Item.Metadata.OperationType || env.LSN != env.Item.Metadata.LSN || env.TS == "" {
			t.Errorf("envelope %s: operation, lsn and ts must come from the metadata", line)
		}
		ops[id] = append(ops[id], env)
	}
	if len(ops) != 3 || len(ops["d1"]) != 1 || len(ops["d9"]) != 2 || len(ops["d2"]) != 1 {
		t.Fatalf("changes by id: %v\n%s", ops, out)
	}
	if e := ops["d1"][0]; e.Operation != "replace" || e.Item.Previous["n"] != 1.0 || e.Item.Current["n"] != 100.0 {
		t.Errorf("d1: %+v, want a replace of n 1 by 100", e)
	}
	if a, b := ops["d9"][0], ops["d9"][1]; a.Operation != "create" || b.Operation != "replace" || a.LSN >= b.LSN || b.Item.Previous["n"] != 9.0 {
		t.Errorf("d9: %+v then %+v, want create then replace of n 9", a, b)
	}
	if e := ops["d2"][0]; e.Operation != "delete" || string(e.Item.Metadata.PartitionKey) != `{"pk":"p2"}` || e.Item.Previous["id"] != "d2" {
		t.Errorf("d2: %+v, want a delete with its partition key and previous image", e)
	}

	// A latest-version tail from the beginning never sees the delete nor the old versions.
	code, out, _ = run(t, nil, append(base, "--from", "beginning")...)
	seen := ids(t, out)
	if code != 0 || seen["d2"] != 0 || seen["d9"] != 1 || len(seen) != 6 {
		t.Errorf("latest-version tail: exit %d, ids %v", code, seen)
	}
	// The state's mode cannot be switched on resume.
	code, _, errOut = run(t, nil, append(base, "--from", "@"+state, "--mode", "latest")...)
	if code != 2 || !strings.Contains(errOut, "--mode latest differs from the state file's mode all-versions") {
		t.Errorf("resume in another mode: exit %d, stderr %q", code, errOut)
	}
}
