package cosmos

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// ErrNoAccount means the Config names no account at all: no endpoint, connection string or
// local directory. Commands map it to a usage error.
var ErrNoAccount = errors.New("no account configured: set COSMOS_ENDPOINT (with COSMOS_KEY or Microsoft Entra ID), COSMOS_CONNECTION_STRING, or use --local DIR")

// AuthError is a 401 or 403 from the service. Commands map it to exit code 4 and print Hint.
type AuthError struct {
	// Status is 401 (the credential was rejected) or 403 (the identity lacks a permission).
	Status int
	// Op says what was being done ("read change feed of db/orders").
	Op string
	// Hint says what to check next, without the "Try:" prefix.
	Hint string
	// Message is the service's message, if any.
	Message string
}

func (e *AuthError) Error() string {
	what := "unauthorized"
	if e.Status == http.StatusForbidden {
		what = "forbidden"
	}
	if e.Message != "" {
		return fmt.Sprintf("%s: %s (HTTP %d): %s", e.Op, what, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Op, what, e.Status)
}

// StatusError is any other service error: the operation, the HTTP status, its substatus and the
// first line of the service's message.
type StatusError struct {
	Op        string
	Status    int
	Substatus int
	Code      string
	Message   string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s: HTTP %d", e.Op, e.Status)
	if e.Substatus != 0 {
		s += fmt.Sprintf(".%d", e.Substatus)
	}
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Permanent reports whether retrying the request cannot succeed (feed.IsPermanent): a 4xx
// answer other than 408 (timeout), 429 (throttled) and 449 (retry with): 400 for a
// continuation or request the service refuses, 405, 413 and the like.
func (e *StatusError) Permanent() bool {
	switch {
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusTooManyRequests, e.Status == 449,
		e.Status == http.StatusNotFound && e.Substatus == 1002:
		return false
	}
	return e.Status >= 400 && e.Status < 500
}

// Permanent reports that a refused credential or permission is not fixed by retrying
// (feed.IsPermanent): a key, token or role must change first.
func (e *AuthError) Permanent() bool { return true }

// opInfo describes an operation for error translation: what is being done, what a 404 means is
// missing, which data-plane RBAC action a 403 lacks, and which partition a 410 concerns.
type opInfo struct {
	op          string
	missing     string
	rbacAction  string
	partitionID string
}

// Data-plane RBAC actions named in 403 hints.
const (
	rbacReadMetadata   = "Microsoft.DocumentDB/databaseAccounts/readMetadata"
	rbacReadChangeFeed = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/readChangeFeed"
	rbacExecuteQuery   = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/executeQuery"
	rbacItemsRead      = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/read"
	rbacItemsCreate    = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/create"
	rbacItemsReplace   = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/replace"
	rbacItemsUpsert    = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/upsert"
	rbacItemsDelete    = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/delete"
	rbacWriteMetadata  = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/write (control plane: create databases and containers with the resource provider, not with data-plane RBAC)"
)

// translate is the one place where service errors become cfp's errors:
//
//	404            -> leases.ErrNotFound, wrapped with what is missing
//	409            -> leases.ErrConflict
//	412            -> leases.ErrPreconditionFailed
//	429, 503       -> *feed.ThrottledError with the service's retry-after
//	410/1002|1007  -> *feed.RangeGoneError (a split or merge, as .NET's ExceptionClassifier)
//	other 410      -> *feed.StaleRouteError (1000: name cache stale; 1008: completing a
//	                  partition migration; refresh and retry)
//	401, 403       -> *AuthError with a hint
//	anything else  -> *StatusError
//
// Errors that are not service responses (context cancellation, transport failures) pass through
// wrapped with the operation.
func translate(err error, info opInfo) error {
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		if strings.Contains(err.Error(), sdkRoutingGaveUp) {
			// azcosmos refreshed its partition key ranges after 410s and gave up; it documents
			// the error as safe to retry, and exports no sentinel for it.
			return fmt.Errorf("%s: %w", info.op, &feed.StaleRouteError{PartitionID: info.partitionID, Substatus: 1002})
		}
		return fmt.Errorf("%s: %w", info.op, err)
	}
	status := re.StatusCode
	var sub int
	var retryAfter time.Duration
	var code, msg string
	if resp := re.RawResponse; resp != nil {
		sub, _ = strconv.Atoi(resp.Header.Get("x-ms-substatus"))
		retryAfter = parseRetryAfter(resp.Header)
		code, msg = errorBody(re)
	}
	switch {
	case status == http.StatusNotFound && sub == 1002:
		// 404/1002 is "read session not available" (a replica behind the session token), not a
		// missing resource: retry, as both SDKs do.
		return &StatusError{Op: info.op, Status: status, Substatus: sub, Code: code, Message: msg}
	case status == http.StatusNotFound:
		missing := info.missing
		if missing == "" {
			missing = info.op
		}
		return fmt.Errorf("%s: %s: %w", info.op, missing, leases.ErrNotFound)
	case status == http.StatusConflict:
		return fmt.Errorf("%s: %w", info.op, leases.ErrConflict)
	case status == http.StatusPreconditionFailed:
		return fmt.Errorf("%s: %w", info.op, leases.ErrPreconditionFailed)
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return fmt.Errorf("%s: %w", info.op, &feed.ThrottledError{Status: status, RetryAfter: retryAfter})
	case status == http.StatusGone && (sub == 1002 || sub == 1007):
		// .NET counts 410/1002 (PartitionKeyRangeGone) and 410/1007 (CompletingSplit) as a split,
		// nothing else (Microsoft.Azure.Cosmos/src/ChangeFeedProcessor/DocDBErrors/
		// ExceptionClassifier.cs, line 16); 410/1008 (CompletingPartitionMigration) is thrown as
		// a CosmosException (FeedProcessing/FeedProcessorCore.cs, lines 113-118), the partition
		// stays: a stale route below.
		return fmt.Errorf("%s: %w", info.op, &feed.RangeGoneError{PartitionID: info.partitionID, Substatus: sub})
	case status == http.StatusGone:
		return fmt.Errorf("%s: %w", info.op, &feed.StaleRouteError{PartitionID: info.partitionID, Substatus: sub})
	case status == http.StatusUnauthorized:
		return &AuthError{Status: status, Op: info.op, Message: msg,
			Hint: "check the account key (COSMOS_KEY, --key-file or the connection string; CFP_LEASE_KEY, --lease-key-file or --lease-connection-string for a separate lease account) and that this machine's clock is right: the service rejects signatures more than 15 minutes off"}
	case status == http.StatusForbidden:
		action := info.rbacAction
		if action == "" {
			action = rbacReadMetadata
		}
		return &AuthError{Status: status, Op: info.op, Message: msg,
			Hint: "grant the identity a Cosmos DB data-plane role with " + action + " (az cosmosdb sql role assignment create), or use the account key; check the account's firewall too"}
	default:
		return &StatusError{Op: info.op, Status: status, Substatus: sub, Code: code, Message: msg}
	}
}

// sdkRoutingGaveUp is the message of azcosmos v1.5.0's errPKRangeCacheInvalidatedRepeatedly.
const sdkRoutingGaveUp = "partition key range cache: refresh repeatedly invalidated"

// parseRetryAfter reads the service's retry hint: x-ms-retry-after-ms, then Retry-After (seconds).
func parseRetryAfter(h http.Header) time.Duration {
	if v := h.Get("x-ms-retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return time.Duration(s) * time.Second
		}
	}
	return 0
}

// errorBody extracts code and the first line of message from a JSON error body; azcore keeps the
// body readable after it built the error.
func errorBody(re *azcore.ResponseError) (code, message string) {
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	b, err := readBody(re.RawResponse)
	if err != nil || json.Unmarshal(b, &body) != nil {
		return re.ErrorCode, ""
	}
	msg, _, _ := strings.Cut(body.Message, "\n")
	msg, _, _ = strings.Cut(msg, "\r")
	const maxLen = 200
	if len(msg) > maxLen {
		msg = msg[:maxLen] + "..."
	}
	return body.Code, strings.TrimSpace(msg)
}
