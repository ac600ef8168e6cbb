//go:build unix

package java

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/feed/javatest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// idleWrites is the window and the renew interval of TestJavaModelWritesIdleLeasesAsTheRealHost.
const (
	idleWindow = 12 * time.Second
	idleRenew  = 4 * time.Second
)

// TestJavaModelWritesIdleLeasesAsTheRealHost compares one behaviour of the real Java host
// (azure-cosmos 4.81.0) with the model of the simulation (internal/feed/javatest) side by
// side: how often an idle host writes its idle leases. The real host, alone on four
// partitions, polls every 200 ms and renews every 4 s; in 12 s it writes each lease about three
// times (its renewals), not sixty (a checkpoint per empty page, which the repository's history
// did): 4.81.0 skips the checkpoint of an empty page whose continuation did not move. The model
// at the same timings writes each lease as often.
func TestJavaModelWritesIdleLeasesAsTheRealHost(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const processor = "idle"
	java := r.startJava(processor, "java-1", "epk",
		"--renew", fmt.Sprint(idleRenew.Milliseconds()), "--expiration", "60000")
	r.waitFor(90*time.Second, "4 leases owned by java-1",
		func() bool { return r.owners(processor)["java-1"] == 4 },
		func() string { return fmt.Sprint(r.owners(processor)) }, java)
	time.Sleep(2 * time.Second) // the first page of each lease read and checkpointed
	last := map[string]string{}
	for _, l := range r.leases(processor) {
		last[l.Token] = l.Timestamp
	}
	writes := 0
	for end := time.Now().Add(idleWindow); time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		for _, l := range r.leases(processor) {
			if l.Timestamp != last[l.Token] {
				writes++
				last[l.Token] = l.Timestamp
			}
		}
	}
	java.stop(t)
	real := float64(writes) / 4
	model := modelIdleWrites(t)
	t.Logf("writes per idle lease in %v (renew %v, poll 200ms): real Java host %.1f, model %.1f", idleWindow, idleRenew, real, model)
	want := float64(idleWindow / idleRenew)
	for what, n := range map[string]float64{"real Java host": real, "model": model} {
		if n < want-1 || n > want+1 {
			t.Errorf("%s: %.1f writes per idle lease in %v, want %v±1 (one per renewal)", what, n, idleWindow, want)
		}
	}
}

// modelIdleWrites runs the Java model with the same timings on four idle partitions and
// returns its writes per lease over the same window.
func modelIdleWrites(t *testing.T) float64 {
	var per float64
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(4)
		docs := &countingDocs{Documents: leases.NewMemDocuments("/id")}
		h := javatest.New(src, docs, javatest.Options{Instance: "java-1", Prefix: "idle",
			AcquireInterval: acquireInterval, RenewInterval: idleRenew, Expiration: time.Minute,
			PollDelay: pollInterval, StartFromBeginning: true})
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		before := docs.replaces()
		time.Sleep(idleWindow)
		per = float64(docs.replaces()-before) / 4
		h.Stop()
	})
	return per
}

type countingDocs struct {
	leases.Documents
	mu sync.Mutex
	n  int
}

func (c *countingDocs) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	d, err := c.Documents.Replace(ctx, id, pk, ifMatch, body)
	if err == nil {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
	return d, err
}

func (c *countingDocs) replaces() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
