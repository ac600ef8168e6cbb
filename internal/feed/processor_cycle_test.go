package feed_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// cycles records OnAcquireCycle calls.
type cycles struct {
	mu   sync.Mutex
	errs []error
}

func (c *cycles) add(err error) { c.mu.Lock(); c.errs = append(c.errs, err); c.mu.Unlock() }

func (c *cycles) last() (n int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) == 0 {
		return 0, nil
	}
	return len(c.errs), c.errs[len(c.errs)-1]
}

func TestProcessor_OnAcquireCycleReportsEachCycleAndAnUnreachableStore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		cut := &frozenDocs{Documents: leases.NewMemDocuments("/id")}
		var c cycles
		opts := fastOptions("a")
		opts.OnAcquireCycle = c.add
		h := startHost(t, src, cut, newRecorder(0).handler("a"), opts)
		waitFor(t, 10*time.Second, "a cycle that holds every lease", func() bool {
			n, err := c.last()
			return n > 0 && err == nil && len(h.p.Owned()) == 2
		})
		cut.freeze()
		waitFor(t, 10*time.Second, "a cycle that could not list the leases", func() bool {
			_, err := c.last()
			return errors.Is(err, errCutOff)
		})
		if err := h.stop(t); err != nil {
			t.Logf("Run = %v", err)
		}
	})
}
