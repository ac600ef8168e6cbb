package leases_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

func TestPlanReset(t *testing.T) {
	t.Parallel()
	now := checkNow
	live := v1("", "80", "host-a")
	dead := v1("80", "C0", "host-b")
	dead.Timestamp = now.Add(-5 * time.Minute)
	free := v1("C0", "FF", "")
	free.Continuation = ""
	ls := []*leases.Lease{live, dead, free}

	steps := leases.PlanReset(ls, leases.ResetToLSN(500), leases.ResetClock(now, time.Minute))
	if len(steps) != 3 {
		t.Fatalf("%d steps", len(steps))
	}
	var held *leases.LeaseHeldError
	if !errors.As(steps[0].Err, &held) || held.Owner != "host-a" || !held.Until.Equal(now.Add(time.Minute)) || !steps[0].Live {
		t.Errorf("live owner step = %+v, want LeaseHeldError until %v", steps[0], now.Add(time.Minute))
	}
	if steps[1].Err != nil || steps[1].Live || steps[1].To != `"500"` || !steps[1].Changed() {
		t.Errorf("expired owner step = %+v, want a planned change to \"500\"", steps[1])
	}
	if n, ok := steps[2].ToLSN(); steps[2].Err != nil || !ok || n != 500 || steps[2].From != "" {
		t.Errorf("free lease step = %+v", steps[2])
	}

	// Without a clock every owner counts as alive; force plans them all.
	toNone := func(*leases.Lease) (string, error) { return "", nil }
	if s := leases.PlanReset(ls, toNone); !errors.Is(s[1].Err, leases.ErrLeaseHeld) {
		t.Errorf("no clock: expired owner step err = %v, want held", s[1].Err)
	}
	for _, s := range leases.PlanReset(ls, toNone, leases.ResetForce()) {
		if s.Err != nil || s.To != "" {
			t.Errorf("forced step = %+v", s)
		}
	}
}

func TestStore_ApplyReset(t *testing.T) {
	t.Parallel()
	s, _, clk := newTestStore(t, "/id")
	ctx := context.Background()
	l, err := s.Acquire(ctx, createLease(t, s, "0"), "host-a")
	if err != nil {
		t.Fatal(err)
	}
	if l, err = s.Checkpoint(ctx, l, "host-a", `"40"`); err != nil {
		t.Fatal(err)
	}
	ls, _ := s.List(ctx)
	steps := leases.PlanReset(ls, leases.ResetToLSN(10), leases.ResetClock(clk.Now(), time.Minute))
	if _, err := s.ApplyReset(ctx, steps[0], false); !errors.Is(err, leases.ErrLeaseHeld) {
		t.Fatalf("ApplyReset on a live lease = %v, want ErrLeaseHeld", err)
	}
	// The owner checkpoints after the plan: a forced reset still wins and takes the lease away.
	if _, err := s.Checkpoint(ctx, l, "host-a", `"41"`); err != nil {
		t.Fatal(err)
	}
	got, err := s.ApplyReset(ctx, steps[0], true)
	if err != nil {
		t.Fatalf("forced ApplyReset: %v", err)
	}
	if got.Owner != "" || got.Continuation != `"10"` {
		t.Errorf("after reset: owner %q continuation %q", got.Owner, got.Continuation)
	}
	if _, err := s.Checkpoint(ctx, l, "host-a", `"42"`); !errors.Is(err, leases.ErrLeaseLost) {
		t.Errorf("old owner's checkpoint after reset = %v, want lost", err)
	}

	// An unforced plan against a lease that changed since is stale.
	clk.Add(time.Hour)
	ls, _ = s.List(ctx)
	steps = leases.PlanReset(ls, leases.ResetToLSN(3), leases.ResetClock(clk.Now(), time.Minute))
	if _, err := s.Acquire(ctx, ls[0], "host-c"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyReset(ctx, steps[0], false); !errors.Is(err, leases.ErrPlanStale) {
		t.Errorf("ApplyReset after a change = %v, want ErrPlanStale", err)
	}
}

func TestStore_ApplyReset_JavaEPK(t *testing.T) {
	t.Parallel()
	s, docs, clk := newTestStore(t, "/id")
	ctx := context.Background()
	seed := readDoc(t, "testdata/corpus/java-epk.json")
	var m map[string]any
	if err := json.Unmarshal(seed.Body, &m); err != nil {
		t.Fatal(err)
	}
	m["id"] = leases.LeaseID(testPrefix, "-05C1DFFFFFFFFC")
	b, _ := json.Marshal(m)
	if _, err := docs.Put(m["id"].(string), b); err != nil {
		t.Fatal(err)
	}
	ls, err := s.List(ctx)
	if err != nil || len(ls) != 1 {
		t.Fatalf("List = %v, %v", ls, err)
	}
	clk.Add(time.Hour) // java-host-a stopped a while ago
	steps := leases.PlanReset(ls, leases.ResetToLSN(100), leases.ResetClock(clk.Now(), time.Minute))
	got, err := s.ApplyReset(ctx, steps[0], false)
	if err != nil {
		t.Fatalf("ApplyReset: %v", err)
	}
	st := got.JavaState()
	if got.Family != leases.FamilyJavaEPK || got.Owner != "" || st == nil || st.Token() != `"100"` || st.Rid != "Z4hMAIs0cjs=" {
		t.Errorf("java lease after reset = %+v, state %+v", got, st)
	}
}

func TestExportImport(t *testing.T) {
	t.Parallel()
	src, _, clk := newTestStore(t, "/partitionKey")
	ctx := context.Background()
	l, err := src.Acquire(ctx, createLease(t, src, "0"), "host-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Checkpoint(ctx, l, "host-a", `"77"`); err != nil {
		t.Fatal(err)
	}
	createLease(t, src, "1")
	if err := src.MarkInitialized(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := src.TryLock(ctx, 0, ""); !ok || err != nil {
		t.Fatal(ok, err)
	}
	exp, err := src.Export(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.Leases) != 2 || len(exp.Markers) != 1 {
		t.Fatalf("export has %d leases, %d markers; want 2 and 1 (no lock)", len(exp.Leases), len(exp.Markers))
	}
	b, err := json.Marshal(exp)
	if err != nil {
		t.Fatal(err)
	}
	var back leases.Export
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, d := range back.Leases {
		var m map[string]any
		_ = json.Unmarshal(d, &m)
		if _, ok := m["_etag"]; ok {
			t.Errorf("exported lease keeps _etag: %s", d)
		}
	}

	// Import into an /id container under a new prefix.
	const newPrefix = "copylocalhost_Z4hMAA==_Z4hMAIs0cjs="
	renamed, err := back.Rename(newPrefix)
	if err != nil {
		t.Fatal(err)
	}
	dstDocs := leases.NewMemDocuments("/id")
	dst := leases.NewStore(dstDocs, newPrefix, leases.StoreOptions{Now: clk.Now})
	existing, _ := dstDocs.QueryPrefix(ctx, newPrefix)
	steps, err := leases.PlanImport(renamed, existing)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if st.Action != leases.ImportCreate {
			t.Errorf("step %s = %s, want create", st.ID, st.Action)
		}
		if err := dst.ApplyImport(ctx, st); err != nil {
			t.Fatalf("ApplyImport: %v", err)
		}
	}
	got, err := dst.List(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("imported leases = %v, %v", got, err)
	}
	if got[0].ID != newPrefix+"..0" || got[0].Continuation != `"77"` || got[0].Owner != "host-a" {
		t.Errorf("imported lease 0 = %+v", got[0])
	}
	if ok, _ := dst.IsInitialized(ctx); !ok {
		t.Error("imported .info marker missing")
	}

	// Importing again changes nothing; a lease changed since is replaced.
	if _, err := dst.Checkpoint(ctx, got[0], "host-a", `"99"`); err != nil {
		t.Fatal(err)
	}
	existing, _ = dstDocs.QueryPrefix(ctx, newPrefix)
	steps, err = leases.PlanImport(renamed, existing)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, st := range steps {
		actions[st.ID] = st.Action
		if err := dst.ApplyImport(ctx, st); err != nil {
			t.Fatalf("ApplyImport %s: %v", st.Action, err)
		}
	}
	if actions[newPrefix+"..0"] != leases.ImportReplace || actions[newPrefix+"..1"] != leases.ImportUnchanged || actions[newPrefix+".info"] != leases.ImportUnchanged {
		t.Errorf("second import actions = %v", actions)
	}
	l0, err := dst.Get(ctx, got[0])
	if err != nil || l0.Continuation != `"77"` {
		t.Errorf("after re-import lease 0 = %+v, %v; want continuation \"77\"", l0, err)
	}
}

// A Java EPK lease that never had a state gets one naming its container: Java treats the Rid as
// the container's identity, so an empty one would not be the same feed.
func TestStore_ApplyReset_JavaEPKWithoutState(t *testing.T) {
	t.Parallel()
	s, docs, clk := newTestStore(t, "/id")
	ctx := context.Background()
	id := leases.LeaseID(testPrefix, "-05C1DFFFFFFFFC")
	body := `{"id":"` + id + `","LeaseToken":"-05C1DFFFFFFFFC","ContinuationToken":null,"timestamp":"2024-05-24T14:22:42.541742Z","Owner":null,` +
		`"version":1,"feedRange":{"Range":{"min":"","max":"05C1DFFFFFFFFC"}}}`
	if _, err := docs.Put(id, []byte(body)); err != nil {
		t.Fatal(err)
	}
	ls, err := s.List(ctx)
	if err != nil || len(ls) != 1 || ls[0].Family != leases.FamilyJavaEPK {
		t.Fatalf("List = %v, %v", ls, err)
	}
	steps := leases.PlanReset(ls, leases.ResetToLSN(7), leases.ResetClock(clk.Now(), time.Minute))
	got, err := s.ApplyReset(ctx, steps[0], false)
	if err != nil {
		t.Fatalf("ApplyReset: %v", err)
	}
	_, _, collRid := splitPrefixForTest(testPrefix)
	if st := got.JavaState(); st == nil || st.Token() != `"7"` || st.Rid != collRid {
		t.Errorf("state after reset = %+v, want token \"7\" and Rid %q", st, collRid)
	}
}

func splitPrefixForTest(prefix string) (head, dbRid, collRid string) {
	parts := strings.Split(prefix, "_")
	return strings.Join(parts[:len(parts)-2], "_"), parts[len(parts)-2], parts[len(parts)-1]
}
