package feed

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/cfp-dev/cfp/internal/leases"
)

// replaceLog records the ids of the documents replaced, in order.
type replaceLog struct {
	leases.Documents
	mu  sync.Mutex
	ids []string
}

func (d *replaceLog) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	d.mu.Lock()
	d.ids = append(d.ids, id)
	d.mu.Unlock()
	return d.Documents.Replace(ctx, id, pk, ifMatch, body)
}

// TestWorker_ReleaseChildren_KeyOrder has a worker whose split stopped half way give back the
// child leases it holds, and wants them released in key order every time, not in the order of
// a map's iteration (which differs between runs, so that a simulation's seed did not replay:
// its lease writes reached the container in another order). It failed before releaseChildren
// sorted them (the map's order in nearly every round).
func TestWorker_ReleaseChildren_KeyOrder(t *testing.T) {
	ctx := context.Background()
	docs := &replaceLog{Documents: leases.NewMemDocuments("/id")}
	store := leases.NewStore(docs, "p", leases.StoreOptions{})
	opts := ProcessorOptions{Instance: "me"}.WithDefaults()
	p := &Processor{store: store, opts: opts, log: slog.New(slog.DiscardHandler)}
	p.limit = newRateLog(p.log, opts.Now, DefaultMaxErrorBackoff)
	bounds := []string{"", "20", "40", "60", "80", "A0", "C0", "E0", "FF"}
	var want []string // the children's ids in key order
	var children []*leases.Lease
	for i := range len(bounds) - 1 {
		c, err := store.Create(ctx, leases.NewDotNetV1("p", leases.Range{Min: bounds[i], Max: bounds[i+1]}, "", ""))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, c.ID)
		children = append(children, c)
	}
	for round := range 10 {
		w := &worker{p: p}
		for _, i := range []int{5, 0, 7, 2, 6, 1, 4, 3} {
			c, err := store.Acquire(ctx, children[i], "me")
			if err != nil {
				t.Fatal(err)
			}
			children[i] = c
			w.holdChild(c)
		}
		docs.mu.Lock()
		docs.ids = nil
		docs.mu.Unlock()
		w.releaseChildren(ctx)
		docs.mu.Lock()
		got := slices.Clone(docs.ids)
		docs.mu.Unlock()
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: children released in the order %v, want key order %v", round, got, want)
		}
		for i, c := range children {
			if children[i], _ = store.Get(ctx, c); children[i].Owner != "" {
				t.Fatalf("child %s still owned by %q after the release", c.Token, children[i].Owner)
			}
		}
	}
}
