package cosmos

import (
	"context"
	"testing"

	"github.com/cfp-dev/cfp/internal/feed/feedtest"
)

// TestContainer_SourceConformance runs the engine's feed.Source suite against a container of the
// embedded emulator, through azcosmos.
func TestContainer_SourceConformance(t *testing.T) {
	t.Parallel()
	feedtest.RunSourceSuite(t, func(t *testing.T) feedtest.Fixture {
		a := openLocal(t, 3)
		c := newFeedContainer(t, a)
		return feedtest.Fixture{
			Source: c,
			Write: func(pk string, doc []byte) error {
				return c.UpsertItem(context.Background(), pk, doc)
			},
			Split: func(id string) error {
				_, err := a.Emulator().Split("db", "orders", id)
				return err
			},
		}
	})
}
