package feed_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// reusingSource hands out pages as a reusing source does: with ReadRequest.Reuse, each page
// with items gets a Release that overwrites the items' bytes (the memory goes to a later
// page) and counts the calls.
type reusingSource struct {
	feed.Source

	mu       sync.Mutex
	reuse    int // reads that asked for reuse
	pages    int // pages with items handed out for reuse
	released int
	twice    int // Release called again on a released page
}

func (s *reusingSource) ReadPage(ctx context.Context, req feed.ReadRequest) (feed.Page, error) {
	page, err := s.Source.ReadPage(ctx, req)
	if err != nil || !req.Reuse {
		return page, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reuse++
	if len(page.Items) == 0 {
		return page, nil
	}
	s.pages++
	items := page.Items
	done := false
	page.Release = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if done {
			s.twice++
			return
		}
		done = true
		s.released++
		for _, it := range items {
			copy(it, bytes.Repeat([]byte{'#'}, len(it)))
		}
	}
	return page, nil
}

func (s *reusingSource) counts() (reuse, pages, released, twice int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reuse, s.pages, s.released, s.twice
}

// TestProcessor_ReuseItemsReleasesEachPageAfterItsHandler checks that with ReuseItems the
// worker asks for reusable pages and hands each one back once, after the handler returned (the
// handler sees every document whole), also a batch that failed and comes again; and that
// without it the pages are never asked for reuse (a handler may keep its items).
func TestProcessor_ReuseItemsReleasesEachPageAfterItsHandler(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		for _, reuse := range []bool{true, false} {
			mem := feedtest.NewMemSource(2)
			writeDocs(t, mem, 0, 50)
			src := &reusingSource{Source: mem}
			var mu sync.Mutex
			seen, failed := map[string]bool{}, false
			var kept []feed.Batch
			h := feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
				mu.Lock()
				defer mu.Unlock()
				for _, it := range b.Items {
					if bytes.Contains(it, []byte("#")) {
						t.Errorf("reuse %v: the handler got an item already released: %s", reuse, it)
					}
				}
				if !failed {
					failed = true
					return context.DeadlineExceeded // the batch comes again
				}
				for _, it := range b.Items {
					seen[docID(it)] = true
				}
				kept = append(kept, b)
				return nil
			})
			opts := fastOptions("host-1")
			opts.MaxItems = 7
			opts.ReuseItems = reuse
			hs := startHost(t, src, leases.NewMemDocuments("/id"), h, opts)
			waitFor(t, 10*time.Second, "50 documents handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(seen) == 50
			})
			if err := hs.stop(t); err != nil {
				t.Fatal(err)
			}
			asked, pages, released, twice := src.counts()
			if !reuse {
				if asked != 0 {
					t.Errorf("without ReuseItems the processor asked for reusable pages %d times", asked)
				}
				for _, b := range kept {
					for _, it := range b.Items {
						if bytes.Contains(it, []byte("#")) {
							t.Errorf("without ReuseItems a kept item changed: %s", it)
						}
					}
				}
				continue
			}
			if pages < 50/7+1 || released != pages || twice != 0 {
				t.Errorf("with ReuseItems: %d pages with items read for reuse, %d released, %d released twice; want every page released once (at least %d pages)",
					pages, released, twice, 50/7+1)
			}
		}
	})
}
