package emulator

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/cfp-dev/cfp/internal/epk"
)

const (
	hdrIsBatch         = "x-ms-cosmos-is-batch-request"
	hdrBatchAtomic     = "x-ms-cosmos-batch-atomic"
	hdrContinueOnError = "x-ms-cosmos-batch-continue-on-error"
)

// maxBatchOps is the service's limit of operations in one transactional batch.
const maxBatchOps = 100

type batchOp struct {
	OperationType string          `json:"operationType"`
	ID            string          `json:"id"`
	IfMatch       string          `json:"ifMatch"`
	ResourceBody  json.RawMessage `json:"resourceBody"`
	// PartitionKey is a bulk operation's own partition key: the JSON text of the key as the
	// partition-key header carries it (`["a"]`), in a JSON string, or that array itself.
	PartitionKey json.RawMessage `json:"partitionKey"`
}

type batchResult struct {
	StatusCode    int             `json:"statusCode"`
	SubStatusCode int             `json:"subStatusCode,omitempty"`
	RequestCharge float64         `json:"requestCharge"`
	ETag          string          `json:"eTag,omitempty"`
	ResourceBody  json.RawMessage `json:"resourceBody,omitempty"`
}

// errBatchFailed rolls back a transactional batch one of whose operations failed.
var errBatchFailed = errors.New("a transactional batch operation failed")

// executeBatch serves a transactional batch: every operation on one logical partition, all
// applied or none. The operations run in order in one storage transaction (store.updateItems),
// as one change with one LSN: readers and both change-feed modes see all of them or none, and a
// kill -9 leaves all of them or none. When one fails, the transaction is rolled back and the
// answer is 207 with the failed operation's status and 424 for every other.
func (e *Emulator) executeBatch(w http.ResponseWriter, r *http.Request, db, coll string) {
	if strings.EqualFold(r.Header.Get(hdrBatchAtomic), "false") {
		e.executeBulk(w, r, db, coll)
		return
	}
	st, comps, ok := e.keyedContainer(w, r, db, coll, "a transactional batch needs the %s header")
	if !ok {
		return
	}
	ops, minimal, err := readBatchOps(r, "a transactional batch")
	if err != nil {
		e.fail(w, err)
		return
	}

	var results []batchResult
	failed := -1
	err = e.store.updateItems(db, coll, func(t *itemTx) error {
		results, failed = make([]batchResult, len(ops)), -1
		for i, op := range ops {
			res, err := batchOne(t, st, comps, op)
			if err != nil {
				status := statusOfErr(err)
				if status == http.StatusInternalServerError {
					return err // a storage error: the whole request fails
				}
				res = batchResult{StatusCode: status, RequestCharge: chargeMeta}
				var bre *badRequestError
				if errors.As(err, &bre) {
					res.SubStatusCode = bre.substatus
				}
				results[i], failed = res, i
				return errBatchFailed
			}
			if op.OperationType != "Read" && minimal {
				res.ResourceBody = nil
			}
			results[i] = res
		}
		return nil
	})
	status := http.StatusOK
	switch {
	case errors.Is(err, errBatchFailed):
		for j := range results {
			if j != failed {
				results[j] = batchResult{StatusCode: http.StatusFailedDependency, RequestCharge: chargeMeta}
			}
		}
		status = http.StatusMultiStatus
	case err != nil:
		e.fail(w, err)
		return
	}
	b, _ := json.Marshal(results)
	charge := 0.0
	for _, res := range results {
		charge += res.RequestCharge
	}
	writeJSON(w, status, charge, b)
}

// executeBulk serves a bulk request, a batch with x-ms-cosmos-batch-atomic: false (the
// JavaScript SDK's items.bulk and executeBulkOperations send them): each operation carries its own
// partition key and is applied on its own, in order, in its own storage transaction, so one that
// fails leaves the others applied. With x-ms-cosmos-batch-continue-on-error: false the operations
// after the first failure are not run and answer 424. The answer is 200 when every operation
// succeeded and 207 otherwise, with each operation's status in the body.
// readBatchOps reads the operations of a batch or bulk request (what: its name in the errors) and
// whether its answer is minimal (Prefer: return=minimal).
func readBatchOps(r *http.Request, what string) (ops []batchOp, minimal bool, err error) {
	body, err := readBody(r)
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(body, &ops); err != nil {
		return nil, false, badRequest("invalid batch body: %v", err)
	}
	if len(ops) == 0 || len(ops) > maxBatchOps {
		return nil, false, badRequest("%s needs 1 to %d operations, got %d", what, maxBatchOps, len(ops))
	}
	return ops, strings.Contains(strings.ToLower(r.Header.Get("Prefer")), "return=minimal"), nil
}

func (e *Emulator) executeBulk(w http.ResponseWriter, r *http.Request, db, coll string) {
	st, err := e.store.getContainer(db, coll)
	if err != nil {
		e.fail(w, err)
		return
	}
	headerComps, hasHeaderPK, err := headerPK(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	headerComps, hasHeaderPK = st.noneKey(headerComps, hasHeaderPK, false)
	ops, minimal, err := readBatchOps(r, "a bulk request")
	if err != nil {
		e.fail(w, err)
		return
	}
	stopOnError := strings.EqualFold(r.Header.Get(hdrContinueOnError), "false")

	results := make([]batchResult, len(ops))
	status, stopped := http.StatusOK, false
	for i, op := range ops {
		if stopped {
			results[i] = batchResult{StatusCode: http.StatusFailedDependency, RequestCharge: chargeMeta}
			continue
		}
		comps, err := bulkOpPK(op, headerComps, hasHeaderPK)
		if err == nil {
			err = e.store.updateItems(db, coll, func(t *itemTx) error {
				res, err := batchOne(t, st, comps, op)
				results[i] = res
				return err
			})
		}
		if err != nil {
			code := statusOfErr(err)
			if code == http.StatusInternalServerError {
				e.fail(w, err) // a storage error: the whole request fails
				return
			}
			res := batchResult{StatusCode: code, RequestCharge: chargeMeta}
			var bre *badRequestError
			if errors.As(err, &bre) {
				res.SubStatusCode = bre.substatus
			}
			results[i], status, stopped = res, http.StatusMultiStatus, stopOnError
			continue
		}
		if op.OperationType != "Read" && minimal {
			results[i].ResourceBody = nil
		}
	}
	b, _ := json.Marshal(results)
	charge := 0.0
	for _, res := range results {
		charge += res.RequestCharge
	}
	writeJSON(w, status, charge, b)
}

// bulkOpPK is the partition key of one bulk operation: its own, or the request's header when it
// has none.
func bulkOpPK(op batchOp, header []any, hasHeader bool) ([]any, error) {
	raw := op.PartitionKey
	if len(raw) == 0 || string(raw) == "null" {
		if !hasHeader {
			return nil, badRequest("a bulk operation needs a partitionKey")
		}
		return header, nil
	}
	text := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, badRequest("invalid bulk operation partitionKey: %v", err)
		}
	}
	comps, err := epk.ParseHeader(text)
	if err != nil {
		return nil, badRequest("invalid bulk operation partitionKey: %v", err)
	}
	return comps, nil
}

// batchOne runs one batch operation in the batch's transaction t.
func batchOne(t *itemTx, st *collState, comps []any, op batchOp) (batchResult, error) {
	id := op.ID
	if id == "" && len(op.ResourceBody) > 0 {
		var d struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(op.ResourceBody, &d)
		id = d.ID
	}
	var kind opKind
	switch op.OperationType {
	case "Read":
		it, _, err := t.read(epk.Canonical(comps), id)
		if err != nil {
			return batchResult{}, err
		}
		return batchResult{StatusCode: http.StatusOK, RequestCharge: ChargeRead(len(it.Body)), ETag: it.Etag, ResourceBody: withoutLSN(it.Body)}, nil
	case "Patch":
		spec, err := parsePatch(op.ResourceBody)
		if err != nil {
			return batchResult{}, err
		}
		res, charge, err := patchTx(t, st, id, comps, spec, op.IfMatch)
		if err != nil {
			return batchResult{}, err
		}
		return batchResult{StatusCode: http.StatusOK, RequestCharge: charge, ETag: res.Item.Etag, ResourceBody: withoutLSN(res.Item.Body)}, nil
	case "Create":
		kind = opCreate
	case "Upsert":
		kind = opUpsert
	case "Replace":
		kind = opReplace
	case "Delete":
		kind = opDelete
	default:
		return batchResult{}, badRequest("unknown batch operation type %q", op.OperationType)
	}
	wr, doc, err := prepareWrite(st, itemOpRequest{Op: kind, ID: id, Body: op.ResourceBody, PK: comps, HasPK: true, IfMatch: op.IfMatch})
	if err != nil {
		return batchResult{}, err
	}
	res, opErr, err := t.write(wr)
	if err != nil {
		return batchResult{}, err
	}
	if opErr != nil {
		return batchResult{}, opErr
	}
	status, charge := writeOutcome(st, kind, res, doc)
	out := batchResult{StatusCode: status, RequestCharge: charge, ETag: res.Item.Etag}
	if kind != opDelete {
		out.ResourceBody = withoutLSN(res.Item.Body)
	}
	return out, nil
}

// statusOfErr is the HTTP status Emulator.fail answers for err.
func statusOfErr(err error) int {
	var bre *badRequestError
	switch {
	case errors.Is(err, errNotFound):
		return http.StatusNotFound
	case errors.Is(err, errConflict):
		return http.StatusConflict
	case errors.Is(err, errPrecondition):
		return http.StatusPreconditionFailed
	case errors.As(err, &bre):
		return http.StatusBadRequest
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}
