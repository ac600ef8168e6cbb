package sink_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/sink"
)

// TestRetry_EachTryCarriesItsAttempt: a batch retried by the policy reaches the handler with
// attempt 1, 2, 3, as the --exec-lines and application-protocol docs say ("attempt" counts the
// deliveries of a batch). Before, every retry carried the processor's attempt, 1: found by the
// Node.js library's test of a handler that throws once.
func TestRetry_EachTryCarriesItsAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []int
		r := &sink.Retry{
			Handler: feed.HandlerFunc(func(_ context.Context, b feed.Batch) error {
				got = append(got, b.Attempt)
				if len(got) < 3 {
					return errors.New("not yet")
				}
				return nil
			}),
			MaxRetries: 5,
		}
		if err := r.Handle(context.Background(), feed.Batch{LeaseToken: "0", Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		if want := []int{1, 2, 3}; !slices.Equal(got, want) {
			t.Errorf("attempts seen by the handler: %v, want %v", got, want)
		}
		// A batch the processor delivers again after the policy gave up continues the count.
		got = nil
		_ = r.Handle(context.Background(), feed.Batch{LeaseToken: "0", Attempt: 4})
		if want := []int{4, 5, 6}; !slices.Equal(got, want) {
			t.Errorf("attempts of a redelivered batch: %v, want %v", got, want)
		}
	})
}
