package feed_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// TestProcessor_SettledHostSeesASplitElsewhereAtOnce: three cfp hosts share two leases, so one
// of them holds none and goes calm (reads only the presence records). A split of another
// host's lease makes three leases: the host without one must take its share within a few
// acquire cycles, not at its next full listing two expirations later (found by the deployment
// simulation, internal/feed/sim, seed 91).
func TestProcessor_SettledHostSeesASplitElsewhereAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		writeDocs(t, src, 0, 20)
		var hosts []*host
		for _, name := range []string{"a", "b", "c"} {
			opts := fastOptions(name)
			opts.AcquireInterval, opts.RenewInterval, opts.Expiration = time.Second, 2*time.Second, 30*time.Second
			opts.PollInterval = 100 * time.Millisecond
			hosts = append(hosts, startHost(t, src, docs, feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts))
		}
		owners := func() map[string]int { return ownerCounts(listLeases(t, docs)) }
		time.Sleep(10 * time.Second) // settled: two hosts hold a lease each, the third none, for 10 cycles
		c := owners()
		idle := ""
		for _, h := range hosts {
			if c[h.name] == 0 {
				idle = h.name
			}
		}
		if len(c) != 2 || idle == "" {
			t.Fatalf("before the split: owners %v, want two hosts with a lease each", c)
		}
		var split string
		for _, l := range listLeases(t, docs) {
			split = l.Token
		}
		if _, err := src.Split(split); err != nil {
			t.Fatal(err)
		}
		writeDocs(t, src, 20, 40) // the owner reads the split's 410 at once
		start := time.Now()
		for owners()[idle] == 0 {
			if time.Since(start) > 8*time.Second {
				t.Fatalf("%s still holds no lease %s after the split (3 leases, 3 hosts): %v", idle, time.Since(start), owners())
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%s took a lease %s after the split", idle, time.Since(start))
		for _, h := range hosts {
			if err := h.stop(t); err != nil {
				t.Errorf("host %s: Run = %v", h.name, err)
			}
		}
	})
}
