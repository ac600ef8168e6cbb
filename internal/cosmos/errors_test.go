package cosmos

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// responseError builds the *azcore.ResponseError azcosmos returns for a status.
func responseError(status int, header map[string]string, body string) error {
	req, _ := http.NewRequest(http.MethodGet, "http://localhost:8081/dbs/d/colls/c/docs", nil)
	resp := &http.Response{
		StatusCode: status,
		Status:     http.StatusText(status),
		Header:     http.Header{},
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    req,
	}
	for k, v := range header {
		resp.Header.Set(k, v)
	}
	return azruntime.NewResponseErrorWithErrorCode(resp, resp.Status)
}

func TestTranslate(t *testing.T) {
	t.Parallel()
	info := opInfo{op: "read change feed of db/orders", missing: "container db/orders", rbacAction: rbacReadChangeFeed, partitionID: "3"}
	tests := []struct {
		name   string
		err    error
		check  func(t *testing.T, err error)
		inText string
	}{
		{name: "404", err: responseError(404, nil, `{"code":"NotFound","message":"Entity does not exist"}`),
			check: func(t *testing.T, err error) {
				if !errors.Is(err, leases.ErrNotFound) || !errors.Is(err, feed.ErrNotFound) {
					t.Errorf("404 = %v, want ErrNotFound", err)
				}
			}, inText: "container db/orders"},
		{name: "409", err: responseError(409, nil, `{}`), check: func(t *testing.T, err error) {
			if !errors.Is(err, leases.ErrConflict) {
				t.Errorf("409 = %v, want ErrConflict", err)
			}
		}},
		{name: "412", err: responseError(412, nil, `{}`), check: func(t *testing.T, err error) {
			if !errors.Is(err, leases.ErrPreconditionFailed) {
				t.Errorf("412 = %v, want ErrPreconditionFailed", err)
			}
		}},
		{name: "429", err: responseError(429, map[string]string{"x-ms-retry-after-ms": "250"}, `{}`), check: func(t *testing.T, err error) {
			var th *feed.ThrottledError
			if !errors.As(err, &th) || th.Status != 429 || th.RetryAfter != 250*time.Millisecond {
				t.Errorf("429 = %#v, want ThrottledError{429, 250ms}", err)
			}
		}},
		{name: "503 retry-after seconds", err: responseError(503, map[string]string{"Retry-After": "2"}, `{}`), check: func(t *testing.T, err error) {
			var th *feed.ThrottledError
			if !errors.As(err, &th) || th.Status != 503 || th.RetryAfter != 2*time.Second {
				t.Errorf("503 = %#v, want ThrottledError{503, 2s}", err)
			}
		}},
		{name: "410/1002", err: responseError(410, map[string]string{"x-ms-substatus": "1002"}, `{}`), check: func(t *testing.T, err error) {
			var g *feed.RangeGoneError
			if !errors.As(err, &g) || g.PartitionID != "3" {
				t.Errorf("410/1002 = %v, want RangeGoneError for 3", err)
			}
		}},
		{name: "410/1007", err: responseError(410, map[string]string{"x-ms-substatus": "1007"}, `{}`), check: func(t *testing.T, err error) {
			var g *feed.RangeGoneError
			if !errors.As(err, &g) || g.Substatus != 1007 {
				t.Errorf("410/1007 = %v, want RangeGoneError with substatus 1007", err)
			}
		}},
		// .NET's ExceptionClassifier counts only 1002 and 1007 as a split: 1008 (completing a
		// partition migration) is an error to retry, the partition stays.
		{name: "410/1008", err: responseError(410, map[string]string{"x-ms-substatus": "1008"}, `{}`), check: func(t *testing.T, err error) {
			var sr *feed.StaleRouteError
			if feed.IsRangeGone(err) || !errors.As(err, &sr) || sr.Substatus != 1008 {
				t.Errorf("410/1008 = %v, want a StaleRouteError, not a split", err)
			}
		}},
		// 404/1002 is "read session not available": retried, not a missing container.
		{name: "404/1002", err: responseError(404, map[string]string{"x-ms-substatus": "1002"}, `{}`), check: func(t *testing.T, err error) {
			if errors.Is(err, leases.ErrNotFound) || feed.IsPermanent(err) {
				t.Errorf("404/1002 = %v, want a transient error, not not-found", err)
			}
		}},
		{name: "400 permanent", err: responseError(400, nil, `{"code":"BadRequest","message":"invalid continuation"}`), check: func(t *testing.T, err error) {
			if !feed.IsPermanent(err) {
				t.Errorf("400 = %v, want a permanent error", err)
			}
		}},
		{name: "410 other", err: responseError(410, map[string]string{"x-ms-substatus": "1000"}, `{}`), check: func(t *testing.T, err error) {
			var sr *feed.StaleRouteError
			if feed.IsRangeGone(err) || !errors.As(err, &sr) || sr.Substatus != 1000 || sr.PartitionID != "3" {
				t.Errorf("410/1000 = %v, want a StaleRouteError for partition 3", err)
			}
		}},
		{name: "401", err: responseError(401, nil, `{"code":"Unauthorized","message":"The input authorization token can't serve the request.\nActivityId: 1"}`),
			check: func(t *testing.T, err error) {
				var ae *AuthError
				if !errors.As(err, &ae) || ae.Status != 401 || !strings.Contains(ae.Hint, "clock") {
					t.Errorf("401 = %v, want AuthError with a key/clock hint", err)
				}
				if strings.Contains(err.Error(), "ActivityId") {
					t.Errorf("401 error keeps more than the message's first line: %v", err)
				}
			}, inText: "unauthorized"},
		{name: "403", err: responseError(403, nil, `{"code":"Forbidden","message":"blocked"}`), check: func(t *testing.T, err error) {
			var ae *AuthError
			if !errors.As(err, &ae) || ae.Status != 403 || !strings.Contains(ae.Hint, rbacReadChangeFeed) {
				t.Errorf("403 = %v, want AuthError naming %s", err, rbacReadChangeFeed)
			}
		}, inText: "forbidden"},
		{name: "500", err: responseError(500, nil, `{"code":"InternalServerError","message":"boom"}`), check: func(t *testing.T, err error) {
			var se *StatusError
			if !errors.As(err, &se) || se.Status != 500 || se.Code != "InternalServerError" {
				t.Errorf("500 = %v, want StatusError", err)
			}
		}, inText: "boom"},
		{name: "transport", err: &url.Error{Op: "Get", URL: "http://x", Err: io.ErrUnexpectedEOF}, check: func(t *testing.T, err error) {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("transport error lost its cause: %v", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := translate(tc.err, info)
			if err == nil {
				t.Fatal("translate() = nil")
			}
			tc.check(t, err)
			if !strings.HasPrefix(err.Error(), info.op) {
				t.Errorf("error %q does not start with the operation", err)
			}
			if tc.inText != "" && !strings.Contains(err.Error(), tc.inText) {
				t.Errorf("error %q does not mention %q", err, tc.inText)
			}
		})
	}
	if translate(nil, info) != nil {
		t.Error("translate(nil) != nil")
	}
}
