package leases_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cfp-dev/cfp/internal/leases"
)

// TestParseExport_RoundTrip: an export reads back with its continuations by token; another
// version or a missing prefix is refused with ErrNotExport.
func TestParseExport_RoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, _ := newTestStore(t, "/id")
	l, err := s.Acquire(ctx, createLease(t, s, "0"), "host-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkpoint(ctx, l, "host-a", `"42"`); err != nil {
		t.Fatal(err)
	}
	createLease(t, s, "1")
	e, err := s.Export(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	back, err := leases.ParseExport(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.Continuations()
	if err != nil || len(got) != 2 || got["0"] != `"42"` || got["1"] != "" {
		t.Fatalf("Continuations = %v, %v; want 0 at \"42\" and 1 without one", got, err)
	}
	for _, bad := range []string{`{"version":2,"prefix":"p","leases":[]}`, `{"version":1,"leases":[]}`} {
		if _, err := leases.ParseExport([]byte(bad)); !errors.Is(err, leases.ErrNotExport) {
			t.Errorf("ParseExport(%s) = %v, want ErrNotExport", bad, err)
		}
	}
	if _, err := leases.ParseExport([]byte("not json")); err == nil || errors.Is(err, leases.ErrNotExport) {
		t.Errorf("ParseExport(not json) = %v, want the decoder's error", err)
	}
}
