package leases_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

// TestStore_Update_StampsProgress: a checkpoint that moves the LSN forward records when, as
// read back from the stored document; a renew and a rewind keep the record, so that an
// estimator can tell a lease that has not moved for a while, and one that went backwards.
func TestStore_Update_StampsProgress(t *testing.T) {
	t.Parallel()
	s, _, clk := newTestStore(t, "/id")
	ctx := context.Background()
	l, err := s.Acquire(ctx, createLease(t, s, "0"), "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := leases.ProgressOf(l); ok {
		t.Fatal("a lease never checkpointed has a progress record")
	}
	clk.Add(time.Second)
	at := clk.Now()
	if l, err = s.Checkpoint(ctx, l, "a", `"42"`); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	if l, err = s.Renew(ctx, l, "a"); err != nil {
		t.Fatal(err)
	}
	if l, err = s.Checkpoint(ctx, l, "a", `"7"`); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := leases.ProgressOf(got)
	if !ok || !p.At.Equal(at) || p.LSN != 42 {
		t.Errorf("progress %+v (%v), want LSN 42 at %v", p, ok, at)
	}
}

// TestSetFailure_Bounds: a failure record keeps the last 5 lines and 1 KB of stderr and 300
// bytes of error, and is current only while the lease's continuation is the one it was
// written at.
func TestSetFailure_Bounds(t *testing.T) {
	t.Parallel()
	var stderr []string
	for i := range 9 {
		stderr = append(stderr, strings.Repeat(string(rune('a'+i)), 300))
	}
	l := &leases.Lease{Continuation: `"5"`}
	leases.SetFailure(l, &leases.Failure{Error: strings.Repeat("e", 1000), Stderr: stderr, Checkpoint: `"5"`})
	f := leases.CurrentFailure(l)
	if f == nil {
		t.Fatal("no current failure")
	}
	if len(f.Error) > leases.MaxFailureError+3 {
		t.Errorf("error of %d bytes kept", len(f.Error))
	}
	total := 0
	for _, s := range f.Stderr {
		total += len(s)
	}
	if len(f.Stderr) != 3 || total > leases.MaxFailureStderrBytes || f.Stderr[2][0] != 'i' {
		t.Errorf("stderr kept %d lines, %d bytes, last %.3q", len(f.Stderr), total, f.Stderr[len(f.Stderr)-1])
	}
	l.Continuation = `"6"`
	if leases.CurrentFailure(l) != nil {
		t.Error("a failure written at \"5\" is current at \"6\"")
	}
}
