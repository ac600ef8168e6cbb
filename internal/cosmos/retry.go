package cosmos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/cfp-dev/cfp/internal/feed"
)

// Defaults of the request policy (Config.RequestTimeout and the retry budget).
const (
	// DefaultRequestTimeout bounds one attempt of one request: an endpoint that accepts the
	// connection and never answers fails after this long instead of hanging.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultMaxRetries is how many times a throttled (429) or unavailable (503) request is
	// retried, like the .NET SDK's MaxRetryAttemptsOnRateLimitedRequests.
	DefaultMaxRetries = 9
	// DefaultMaxRetryWait bounds the total wait of one request's retries, like the .NET SDK's
	// MaxRetryWaitTimeOnRateLimitedRequests.
	DefaultMaxRetryWait = 30 * time.Second
	// defaultMinBackoff and defaultMaxBackoff bound the wait before one retry: the first waits
	// about defaultMinBackoff, each further one twice as long, never longer than
	// defaultMaxBackoff and never shorter than the service's retry-after.
	defaultMinBackoff = 50 * time.Millisecond
	defaultMaxBackoff = 5 * time.Second
)

// requestPolicy is the per-retry policy every request cfp sends goes through (the SDK's, the
// account bootstrap, cfp's own partition key range reads). It
//
//   - retries 429 (any request: the service did not execute it) and 503 (reads and queries
//     only, as the SDKs do in a single-region account) up to maxRetries times and maxWait in
//     total, waiting the larger of the service's retry-after and a capped exponential backoff
//     with jitter, and logs each retry at info (method, path, status, attempt, wait; never a
//     header, so never a key or token);
//   - bounds each attempt by timeout: an attempt that gets no answer in time fails with a
//     *RequestTimeoutError that the SDK does not retry.
//
// It sits after azcosmos's own retry and auth policies, so each attempt is signed afresh, and
// azcore's retry policy is told not to retry 429 and 503 again (Open sets Retry.StatusCodes).
type requestPolicy struct {
	log        *slog.Logger
	timeout    time.Duration
	maxRetries int
	maxWait    time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration
	rand       func() float64
}

// RetryOptions bound the retries of throttled (429) and unavailable (503) requests; zero fields
// take the defaults.
type RetryOptions struct {
	// MaxRetries is the number of retries of one request (default DefaultMaxRetries; -1: none).
	MaxRetries int
	// MaxWait bounds the total wait of one request's retries (default DefaultMaxRetryWait).
	MaxWait time.Duration
	// MinBackoff and MaxBackoff bound the wait before one retry (defaults 50ms and 5s).
	MinBackoff, MaxBackoff time.Duration
}

func newRequestPolicy(log *slog.Logger, timeout time.Duration, ro RetryOptions) *requestPolicy {
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	p := &requestPolicy{
		log: log, timeout: timeout,
		maxRetries: DefaultMaxRetries, maxWait: DefaultMaxRetryWait,
		minBackoff: defaultMinBackoff, maxBackoff: defaultMaxBackoff,
		rand: rand.Float64,
	}
	switch {
	case ro.MaxRetries < 0:
		p.maxRetries = 0
	case ro.MaxRetries > 0:
		p.maxRetries = ro.MaxRetries
	}
	if ro.MaxWait > 0 {
		p.maxWait = ro.MaxWait
	}
	if ro.MinBackoff > 0 {
		p.minBackoff = ro.MinBackoff
	}
	if ro.MaxBackoff > 0 {
		p.maxBackoff = ro.MaxBackoff
	}
	p.maxBackoff = max(p.maxBackoff, p.minBackoff)
	return p
}

// retryStatusCodes are the statuses azcore's own retry policy still retries: requestPolicy
// handles 429 and 503 itself.
var retryStatusCodes = []int{http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout}

// RequestTimeoutError is an attempt that got no answer within the request timeout.
type RequestTimeoutError struct {
	Method, Path string
	After        time.Duration
}

func (e *RequestTimeoutError) Error() string {
	return fmt.Sprintf("%s %s: no answer within %s", e.Method, e.Path, e.After)
}

// Hint says what to check.
func (e *RequestTimeoutError) Hint() string {
	return "the endpoint accepted the request but did not answer: check the endpoint and the network, or raise --request-timeout (CFP_REQUEST_TIMEOUT)"
}

// Timeout reports true, like net.Error.
func (e *RequestTimeoutError) Timeout() bool { return true }

// NonRetriable tells azcore's retry policy not to retry (errorinfo.NonRetriable).
func (e *RequestTimeoutError) NonRetriable() {}

func (p *requestPolicy) Do(req *policy.Request) (*http.Response, error) {
	ctx := req.Raw().Context()
	var waited time.Duration
	for attempt := 1; ; attempt++ {
		tryCtx, cancel := context.WithTimeout(ctx, p.timeout)
		// The body download policy, after this one, reads the whole body within Next, except
		// for ReadPage's change-feed pages, which this policy reads itself into one buffer
		// (readFeedBody), still within the attempt: the attempt's context can end after that.
		try := req.Clone(tryCtx)
		feedRead := splitFeedRead(req.Raw())
		if feedRead {
			azruntime.SkipBodyDownload(try)
		}
		resp, err := try.Next()
		if err == nil && feedRead && resp.StatusCode < http.StatusBadRequest {
			if err = readFeedBody(resp, req.Raw().Context().Value(rawFeedKey{}).(*rawFeed).reuse); err != nil {
				resp = nil
			}
		}
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(tryCtx.Err(), context.DeadlineExceeded) {
				return nil, &RequestTimeoutError{Method: req.Raw().Method, Path: req.Raw().URL.Path, After: p.timeout}
			}
			if reason := unreachableReason(err); reason != "" {
				u := req.Raw().URL
				return nil, &UnreachableError{Endpoint: u.Scheme + "://" + u.Host + "/", Reason: reason, detail: err.Error()}
			}
			return nil, err
		}
		if !p.retriable(req.Raw(), resp.StatusCode) || attempt > p.maxRetries {
			return resp, nil
		}
		wait := p.backoff(attempt, parseRetryAfter(resp.Header))
		if waited+wait > p.maxWait {
			return resp, nil
		}
		if resp.Body != nil {
			_ = resp.Body.Close()
		}
		p.log.Info("retrying request", "method", req.Raw().Method, "path", req.Raw().URL.Path,
			"status", resp.StatusCode, "reason", statusReason(resp.StatusCode), "attempt", attempt, "wait", wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		waited += wait
		if err := req.RewindBody(); err != nil {
			return nil, err
		}
	}
}

// retriable reports whether a response with status is retried: 429 always, 503 for reads
// (GET, HEAD) and queries.
func (p *requestPolicy) retriable(r *http.Request, status int) bool {
	switch status {
	case http.StatusTooManyRequests:
		return true
	case http.StatusServiceUnavailable:
		return isRead(r)
	}
	return false
}

// isRead reports whether r only reads: a GET or HEAD, or a query POST.
func isRead(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return true
	case http.MethodPost:
		return strings.EqualFold(r.Header.Get("x-ms-documentdb-isquery"), "true") ||
			strings.HasPrefix(r.Header.Get("Content-Type"), "application/query+json")
	}
	return false
}

// backoff is the wait before retry n (1-based): minBackoff doubled per retry, capped at
// maxBackoff, with ±20% jitter, and never shorter than the service's retryAfter.
func (p *requestPolicy) backoff(n int, retryAfter time.Duration) time.Duration {
	d := feed.Backoff{Min: p.minBackoff, Max: p.maxBackoff}.Wait(n)
	d = time.Duration(float64(d) * (0.8 + 0.4*p.rand()))
	return max(d, retryAfter)
}

// statusReason names a retried status for logs and errors.
func statusReason(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "throttled"
	case http.StatusServiceUnavailable:
		return "service unavailable"
	}
	return http.StatusText(status)
}

// UnreachableError is an endpoint that cannot be reached at all: its host name does not
// resolve, or nothing listens on its port (the connection is refused). Neither recovers by
// retrying within a command's life, so it is not retried: without it azcosmos retries a refused
// connection three times a second apart and again for its account bootstrap, and azcore once
// more, about 10 s of silence before an error that named the step, not the endpoint.
//
// It wraps nothing on purpose: the SDK's retry policies classify a wrapped *net.OpError or
// *net.DNSError as a connection error and retry it.
type UnreachableError struct {
	// Endpoint is the URL's scheme and host, "https://acct.documents.azure.com:443/".
	Endpoint string
	// Reason is "connection refused" or "host not found".
	Reason string
	// detail is the transport's error, for --log-level debug.
	detail string
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach %s (%s)", e.Endpoint, e.Reason)
}

// Detail is the transport's own error text.
func (e *UnreachableError) Detail() string { return e.detail }

// Hint says what to check.
func (e *UnreachableError) Hint() string {
	return "check --endpoint (cfp config shows the one in use) or start cfp emulator"
}

// NonRetriable tells azcore's retry policy not to retry (errorinfo.NonRetriable).
func (e *UnreachableError) NonRetriable() {}

// unreachableReason says why err means the endpoint cannot be reached at all ("" when it may
// recover: a reset, a timeout, a TLS failure).
func unreachableReason(err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return "host not found"
	}
	return ""
}
