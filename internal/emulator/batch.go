package emulator

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/cfp-dev/cfp/internal/emulator/epk"
)

const hdrIsBatch = "x-ms-cosmos-is-batch-request"

// maxBatchOps is the service's limit of operations in one transactional batch.
const maxBatchOps = 100

type batchOp struct {
	OperationType string          `json:"operationType"`
	ID            string          `json:"id"`
	IfMatch       string          `json:"ifMatch"`
	ResourceBody  json.RawMessage `json:"resourceBody"`
}

type batchResult struct {
	StatusCode    int             `json:"statusCode"`
	SubStatusCode int             `json:"subStatusCode,omitempty"`
	RequestCharge float64         `json:"requestCharge"`
	ETag          string          `json:"eTag,omitempty"`
	ResourceBody  json.RawMessage `json:"resourceBody,omitempty"`
}

// undoStep restores one item as it was before a batch operation wrote it.
type undoStep struct {
	id   string
	prev *item // nil: the item did not exist
}

// executeBatch serves a transactional batch: every operation on one logical partition, all
// applied or none. Operations run in order; when one fails, the ones before it are undone and
// the answer is 207 with the failed operation's status and 424 for every other.
func (e *Emulator) executeBatch(w http.ResponseWriter, r *http.Request, db, coll string) {
	st, comps, ok := e.keyedContainer(w, r, db, coll, "a transactional batch needs the %s header")
	if !ok {
		return
	}
	body, err := readBody(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	var ops []batchOp
	if err := json.Unmarshal(body, &ops); err != nil {
		e.fail(w, badRequest("invalid batch body: %v", err))
		return
	}
	if len(ops) == 0 || len(ops) > maxBatchOps {
		e.fail(w, badRequest("a transactional batch needs 1 to %d operations, got %d", maxBatchOps, len(ops)))
		return
	}
	minimal := strings.Contains(strings.ToLower(r.Header.Get("Prefer")), "return=minimal")
	pk := epk.Canonical(comps)

	e.batchMu.Lock()
	defer e.batchMu.Unlock()
	results := make([]batchResult, len(ops))
	var undo []undoStep
	failed := -1
	for i, op := range ops {
		id := op.ID
		if id == "" && len(op.ResourceBody) > 0 {
			var d struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(op.ResourceBody, &d)
			id = d.ID
		}
		var prev *item
		if it, _, err := e.store.readItem(db, coll, pk, id); err == nil {
			prev = &it
		} else if !errors.Is(err, errNotFound) {
			e.fail(w, err)
			return
		}
		res, err := e.batchOne(st, db, coll, comps, op, id, prev)
		if err != nil {
			res = batchResult{StatusCode: statusOfErr(err), RequestCharge: chargeMeta}
			var bre *badRequestError
			if errors.As(err, &bre) {
				res.SubStatusCode = bre.substatus
			}
			results[i], failed = res, i
			break
		}
		if op.OperationType != "Read" {
			undo = append(undo, undoStep{id: id, prev: prev})
			if minimal {
				res.ResourceBody = nil
			}
		}
		results[i] = res
	}
	status := http.StatusOK
	if failed >= 0 {
		for j := len(undo) - 1; j >= 0; j-- {
			if err := e.undo(st, db, coll, comps, undo[j]); err != nil {
				e.fail(w, err)
				return
			}
		}
		for j := range results {
			if j != failed {
				results[j] = batchResult{StatusCode: http.StatusFailedDependency, RequestCharge: chargeMeta}
			}
		}
		status = http.StatusMultiStatus
	}
	b, _ := json.Marshal(results)
	charge := 0.0
	for _, res := range results {
		charge += res.RequestCharge
	}
	writeJSON(w, status, charge, b)
}

// batchOne runs one batch operation on item id (prev: its current version, nil if absent).
func (e *Emulator) batchOne(st *collState, db, coll string, comps []any, op batchOp, id string, prev *item) (batchResult, error) {
	var kind opKind
	switch op.OperationType {
	case "Read":
		if prev == nil {
			return batchResult{}, errNotFound
		}
		return batchResult{StatusCode: http.StatusOK, RequestCharge: ChargeRead(len(prev.Body)), ETag: prev.Etag, ResourceBody: withoutLSN(prev.Body)}, nil
	case "Patch":
		res, charge, err := e.patch(st, db, coll, id, comps, op.ResourceBody, op.IfMatch)
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
	status, res, charge, err := e.itemOp(st, db, coll, itemOpRequest{Op: kind, ID: id, Body: op.ResourceBody, PK: comps, HasPK: true, IfMatch: op.IfMatch})
	if err != nil {
		return batchResult{}, err
	}
	out := batchResult{StatusCode: status, RequestCharge: charge, ETag: res.Item.Etag}
	if kind != opDelete {
		out.ResourceBody = withoutLSN(res.Item.Body)
	}
	return out, nil
}

// undo puts an item back as it was before a batch operation (a new version of it, to the change
// feed: the emulator's batches are atomic for readers of items, not for the feed).
func (e *Emulator) undo(st *collState, db, coll string, comps []any, u undoStep) error {
	if u.prev == nil {
		_, _, _, err := e.itemOp(st, db, coll, itemOpRequest{Op: opDelete, ID: u.id, PK: comps, HasPK: true})
		if errors.Is(err, errNotFound) {
			return nil
		}
		return err
	}
	_, _, _, err := e.itemOp(st, db, coll, itemOpRequest{Op: opUpsert, ID: u.id, Body: u.prev.Body, PK: comps, HasPK: true})
	return err
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
	}
	return http.StatusInternalServerError
}
