package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/epk"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// TestEmulatorMerge_LeasesListAndEstimate: `cfp emulator merge` merges two partitions under a
// running processor with .NET v0 leases; the processor handles every order, `cfp leases list`
// then shows a v1 lease over each merged range (and no v0 lease of a gone partition), and
// `cfp estimate` measures their lag on the merged partition: 0 when caught up, the number of
// changes written since for a range that has some.
func TestEmulatorMerge_LeasesListAndEstimate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	orders, err := os.ReadFile(ordersFixture)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, ctx, string(orders), "--local="+dir, "import", "-d", "shop", "-c", "orders", "--create", "--throughput", "40000", "--partition-key-path", "/customerId")
	if code != 0 {
		t.Fatalf("import: exit %d\n%s", code, errOut)
	}
	want := strings.Count(string(orders), "\n")

	acct := openLocal(t, dir, 4)
	defer acct.Close()
	c := acct.Container("shop", "orders")
	createContainer(t, acct, "shop", "leases", "/id")
	before, err := c.Partitions(ctx)
	if err != nil || len(before) != 4 {
		t.Fatalf("partitions before the merge: %v, %v; want 4", before, err)
	}
	store := processorStore(t, acct, c, "proj")

	var mu sync.Mutex
	seen := map[string]bool{}
	var mergeErr error
	merged := false
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	p, err := feed.NewProcessor(c, store, feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range b.Items {
			var v struct{ ID string }
			_ = json.Unmarshal(it, &v)
			seen[v.ID] = true
		}
		if len(seen) >= 30 && !merged {
			merged = true
			// The merge goes through the CLI's in-process admin path on the same emulator.
			_, mergeErr = emulator.LocalAdmin{Emu: acct.Emulator()}.Merge(ctx, "shop", "orders", []string{before[0].ID, before[1].ID})
		}
		return nil
	}), feed.ProcessorOptions{
		Instance: "host-1", StartFrom: feed.StartFrom{Kind: feed.StartBeginning}, MaxItems: 10,
		AcquireInterval: 20 * time.Millisecond, RenewInterval: 100 * time.Millisecond, PollInterval: 5 * time.Millisecond,
		ErrorBackoff: 5 * time.Millisecond, MaxErrorBackoff: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(pctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		ls, err := store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v1 := 0
		for _, l := range ls {
			if l.Family == leases.FamilyDotNetV1 {
				v1++
			}
		}
		if n == want && len(ls) == 4 && v1 == 2 {
			break
		}
		if time.Now().After(deadline) {
			stop()
			var desc []string
			for _, l := range ls {
				desc = append(desc, fmt.Sprintf("%s(%v)", l.Token, l.Family))
			}
			t.Fatalf("processor handled %d of %d orders; leases %v", n, want, desc)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if mergeErr != nil {
		t.Fatalf("merge: %v", mergeErr)
	}
	// Three changes pending in the first merged range.
	var pk string
	for i := 0; pk == ""; i++ {
		if k := fmt.Sprintf("cust-merge-%d", i); before[0].Range.Contains(epk.HashV2([]any{k})) {
			pk = k
		}
	}
	for i := range 3 {
		if err := c.UpsertItem(ctx, pk, fmt.Appendf(nil, `{"id":"late-%d","customerId":%q}`, i, pk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := acct.Close(); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, ctx, "", "--local="+dir, "leases", "list", "-d", "shop", "-c", "orders", "-p", "proj", "-o", "json",
		"--jq", `.[] | [.lease, .family, .range.min, .range.max, (.checkpoint_lsn != null)] | @tsv`)
	if code != 0 {
		t.Fatalf("leases list: exit %d\n%s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("leases list: %d leases, want 4:\n%s", len(lines), out)
	}
	for i := range 2 {
		r := before[i].Range
		if w := fmt.Sprintf("%s-%s\tdotnet-v1\t%s\t%s\ttrue", r.Min, r.Max, r.Min, r.Max); lines[i] != w {
			t.Errorf("leases list line %d = %q, want %q", i, lines[i], w)
		}
	}

	code, out, errOut = runCLI(t, ctx, "", "--local="+dir, "estimate", "-d", "shop", "-c", "orders", "-p", "proj", "-o", "json",
		"--jq", `.leases[0:2][] | [.lease, .lag, .sentinel] | @tsv`)
	if code != 0 {
		t.Fatalf("estimate: exit %d\n%s", code, errOut)
	}
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("estimate: %d lines, want 2:\n%s", len(lines), out)
	}
	var lag0, lag1 int
	var tok0, tok1, s0, s1 string
	_, err0 := fmt.Sscanf(strings.ReplaceAll(lines[0], "\t", " ")+" -", "%s %d %s", &tok0, &lag0, &s0)
	_, err1 := fmt.Sscanf(strings.ReplaceAll(lines[1], "\t", " ")+" -", "%s %d %s", &tok1, &lag1, &s1)
	if err0 != nil || err1 != nil {
		t.Fatalf("estimate output %q: %v %v", out, err0, err1)
	}
	if lag0 != 3 || s0 != "-" {
		t.Errorf("estimate of %s (3 pending) = lag %d sentinel %q, want a measured lag of 3", tok0, lag0, s0)
	}
	if lag1 != 0 || s1 != "-" {
		t.Errorf("estimate of %s (caught up) = lag %d sentinel %q, want 0", tok1, lag1, s1)
	}
}
