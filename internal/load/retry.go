package load

import (
	"context"
	"errors"
	"time"

	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Retries is how often a throttled write is retried (after the SDK's own retries).
const Retries = 8

// RetryThrottled calls fn until it succeeds, fails with anything but throttling, or was
// throttled Retries times (after the SDK's own retries), waiting the service's retry-after or
// an exponential backoff, whichever is longer.
func RetryThrottled(ctx context.Context, fn func() error) error {
	backoff := feed.Backoff{Min: 50 * time.Millisecond, Max: 5 * time.Second}
	for attempt := 0; ; attempt++ {
		err := fn()
		var te *feed.ThrottledError
		if !errors.As(err, &te) || attempt >= Retries {
			return err
		}
		wait := max(te.RetryAfter, backoff.Wait(attempt+1))
		if serr := sleep(ctx, wait); serr != nil {
			return serr
		}
	}
}

// IsDocumentError reports whether a write error concerns one document (the service answered
// for it) rather than the whole import. A server error (5xx) is the service failing, not the
// document: it would fail every following line too, so it ends the import.
func IsDocumentError(err error) bool {
	var se *cosmos.StatusError
	var te *feed.ThrottledError
	if errors.As(err, &se) && se.Status >= 500 {
		return false
	}
	return errors.As(err, &se) || errors.As(err, &te) ||
		errors.Is(err, leases.ErrConflict) || errors.Is(err, leases.ErrPreconditionFailed)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
