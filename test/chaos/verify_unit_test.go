//go:build unix

package chaos

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/internal/leases"
)

func TestLedger_CountsLostAndDuplicates(t *testing.T) {
	t.Parallel()
	l := newLedger(5)
	l.add(delivery{Host: "h1", Lease: "0", Seqs: []int{0, 1, 2}})
	l.add(delivery{Host: "h2", Lease: "0", Seqs: []int{2, 3}}) // 2 again after a kill
	l.add(delivery{Host: "h2", Lease: "1", Seqs: []int{-1, 9}})
	if got := l.lost(); got != 1 {
		t.Errorf("lost = %d, want 1", got)
	}
	if got := l.missing(10); !slices.Equal(got, []int{4}) {
		t.Errorf("missing = %v, want [4]", got)
	}
	if got := l.duplicates(); got != 1 {
		t.Errorf("duplicates = %d, want 1", got)
	}
	if l.foreign != 2 || l.batches != 3 || l.maxCount() != 2 {
		t.Errorf("foreign=%d batches=%d maxCount=%d, want 2, 3, 2", l.foreign, l.batches, l.maxCount())
	}
}

func TestLedger_ScanReadsCompleteLinesOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, "h1.jsonl")
	env := envOf(map[string]string{recorderHostEnv: "h1", "CFP_LEASE_TOKEN": "3", "CFP_BATCH_SIZE": "2"})
	if err := record(name, strings.NewReader(`[{"id":"d0","seq":0},{"id":"d1","seq":1}]`), env); err != nil {
		t.Fatal(err)
	}
	l := newLedger(3)
	if err := l.scan(dir); err != nil {
		t.Fatal(err)
	}
	// A line that a recorder is still writing is left for the next scan.
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`{"host":"h1","lease":"3","seqs":[2`); err != nil {
		t.Fatal(err)
	}
	if err := l.scan(dir); err != nil {
		t.Fatal(err)
	}
	if l.lost() != 1 || l.deliveries != 2 {
		t.Fatalf("after a partial line: lost=%d deliveries=%d, want 1 and 2", l.lost(), l.deliveries)
	}
	if _, err := f.WriteString(",1]}\n"); err != nil {
		t.Fatal(err)
	}
	if err := l.scan(dir); err != nil {
		t.Fatal(err)
	}
	if l.lost() != 0 || l.duplicates() != 1 || l.perLease["3"] != 4 {
		t.Errorf("after the line ended: lost=%d duplicates=%d lease 3=%d, want 0, 1, 4", l.lost(), l.duplicates(), l.perLease["3"])
	}
}

func TestRecord_RejectsABatchSizeMismatch(t *testing.T) {
	t.Parallel()
	name := filepath.Join(t.TempDir(), "h1.jsonl")
	if err := record(name, strings.NewReader(`[{"seq":0}]`), envOf(map[string]string{"CFP_BATCH_SIZE": "3"})); err == nil {
		t.Fatal("record accepted 1 item with CFP_BATCH_SIZE=3")
	}
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Errorf("record wrote a delivery for a rejected batch (stat: %v)", err)
	}
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func lease(id, token, rmin, rmax, cont, owner string) *leases.Lease {
	return &leases.Lease{ID: id, Token: token, Range: leases.Range{Min: rmin, Max: rmax}, Continuation: cont, Owner: owner}
}

func TestLeaseChecker(t *testing.T) {
	t.Parallel()
	const mid, top = "80", "FF"
	tests := []struct {
		name       string
		samples    [][]*leases.Lease
		violations int
		owners     int
	}{
		{
			name: "forward and a new owner",
			samples: [][]*leases.Lease{
				{lease("p..0", "0", "", top, "", "a")},
				{lease("p..0", "0", "", top, `"5"`, "a")},
				{lease("p..0", "0", "", top, `"9"`, "b")},
			},
			owners: 1,
		},
		{
			name: "backwards",
			samples: [][]*leases.Lease{
				{lease("p..0", "0", "", top, `"9"`, "a")},
				{lease("p..0", "0", "", top, `"7"`, "a")},
			},
			violations: 1,
		},
		{
			name: "checkpoint cleared",
			samples: [][]*leases.Lease{
				{lease("p..0", "0", "", top, `"9"`, "a")},
				{lease("p..0", "0", "", top, ``, "a")},
			},
			violations: 1,
		},
		{
			name: "gone and back behind",
			samples: [][]*leases.Lease{
				{lease("p..0", "0", "", top, `"9"`, "a")},
				{},
				{lease("p..0", "0", "", top, `"3"`, "a")},
			},
			violations: 1,
		},
		{
			name: "split children from the parent's checkpoint",
			samples: [][]*leases.Lease{
				{lease("p..0", "0", "", top, `"9"`, "a")},
				{lease("p..1", "1", "", mid, `"9"`, "a"), lease("p..2", "2", mid, top, `"12"`, "")},
			},
		},
		{
			name: "split child behind its parent",
			samples: [][]*leases.Lease{
				{lease("p..0", "0", "", top, `"9"`, "a")},
				{lease("p..0", "0", "", top, `"9"`, "a"), lease("p..1", "1", "", mid, `"4"`, ""), lease("p..2", "2", mid, top, ``, "")},
			},
			violations: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newLeaseChecker()
			for _, s := range tt.samples {
				c.observe(s)
			}
			if len(c.violations) != tt.violations || c.ownerChanges != tt.owners {
				t.Errorf("violations %q, owner changes %d; want %d violations, %d owner changes",
					c.violations, c.ownerChanges, tt.violations, tt.owners)
			}
		})
	}
}
