package emulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/cfp-dev/cfp/emulator/query"
	"github.com/cfp-dev/cfp/internal/epk"
)

// patchSpec is a PATCH body: JSON Patch-like operations and an optional SQL condition
// ("FROM c WHERE ...") the item must meet (412 otherwise).
type patchSpec struct {
	Condition  string    `json:"condition"`
	Operations []patchOp `json:"operations"`
}

type patchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from"`
	Value json.RawMessage `json:"value"`
}

// maxPatchOps is the service's limit of operations in one patch.
const maxPatchOps = 10

// patchRequest is a parsed PATCH body.
type patchRequest struct {
	ops  []patchOp
	cond *query.Query // nil without a condition
}

// patchItem serves PATCH on an item: read, apply the operations and write back, in one storage
// transaction (so concurrent patches apply one after the other, as on the service).
func (e *Emulator) patchItem(w http.ResponseWriter, r *http.Request, db, coll, id string) {
	st, comps, ok := e.keyedContainer(w, r, db, coll, msgMissingPK)
	if !ok {
		return
	}
	body, err := readBody(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	res, charge, err := e.patch(st, db, coll, id, comps, body, r.Header.Get("If-Match"))
	if err != nil {
		e.fail(w, err)
		return
	}
	e.writeItemResponse(w, r, st, http.StatusOK, res, charge)
}

// patch applies the patch body to item id in one storage transaction (patchTx).
func (e *Emulator) patch(st *collState, db, coll, id string, comps []any, body []byte, ifMatch string) (writeResult, float64, error) {
	spec, err := parsePatch(body)
	if err != nil {
		return writeResult{}, 0, err
	}
	var res writeResult
	var charge float64
	err = e.store.updateItems(db, coll, func(t *itemTx) error {
		var err error
		res, charge, err = patchTx(t, st, id, comps, spec, ifMatch)
		return err
	})
	return res, charge, err
}

// parsePatch parses a patch body: {"condition", "operations"} or, from some SDKs, the bare
// operations array.
func parsePatch(body []byte) (patchRequest, error) {
	var spec patchSpec
	if trimmed := strings.TrimSpace(string(body)); strings.HasPrefix(trimmed, "[") {
		if err := json.Unmarshal(body, &spec.Operations); err != nil {
			return patchRequest{}, badRequest("invalid patch body: %v", err)
		}
	} else if err := json.Unmarshal(body, &spec); err != nil {
		return patchRequest{}, badRequest("invalid patch body: %v", err)
	}
	if len(spec.Operations) == 0 || len(spec.Operations) > maxPatchOps {
		return patchRequest{}, badRequest("a patch needs 1 to %d operations, got %d", maxPatchOps, len(spec.Operations))
	}
	p := patchRequest{ops: spec.Operations}
	if spec.Condition != "" {
		q, err := query.Parse("SELECT * " + spec.Condition)
		if err != nil {
			return patchRequest{}, badRequest("invalid patch condition: %v", err)
		}
		p.cond = q
	}
	return p, nil
}

// patchTx applies a patch to item id in the transaction t: it reads the item, checks ifMatch
// and the condition, applies the operations and replaces the item. The document is decoded with
// its numbers as written (json.Number), so the values the patch does not touch are written back
// as they were (an integer beyond 2^53 stays exact).
func patchTx(t *itemTx, st *collState, id string, comps []any, p patchRequest, ifMatch string) (writeResult, float64, error) {
	it, _, err := t.read(epk.Canonical(comps), id)
	if err != nil {
		return writeResult{}, 0, err
	}
	if !ifMatchHolds(ifMatch, it.Etag) {
		return writeResult{}, 0, errPrecondition
	}
	var doc map[string]any
	if err := decodeExact(it.Body, &doc); err != nil {
		return writeResult{}, 0, err
	}
	if p.cond != nil {
		if ok, err := p.cond.Match(doc, nil); err != nil || !ok {
			return writeResult{}, 0, errPrecondition
		}
	}
	for _, op := range p.ops {
		if err := applyPatchOp(doc, op); err != nil {
			return writeResult{}, 0, err
		}
	}
	if newComps := epk.FromDocument(doc, st.Paths); !epk.Equal(newComps, comps) {
		return writeResult{}, 0, badRequest("a patch cannot change the partition key")
	}
	if doc["id"] != id {
		return writeResult{}, 0, badRequest("a patch cannot change the id")
	}
	b, err := marshalInOrder(doc, keyOrder(it.Body))
	if err != nil {
		return writeResult{}, 0, err
	}
	wr, newDoc, err := prepareWrite(st, itemOpRequest{Op: opReplace, ID: id, Body: b, PK: comps, HasPK: true, IfMatch: it.Etag})
	if err != nil {
		return writeResult{}, 0, err
	}
	res, opErr, err := t.write(wr)
	if err != nil {
		return writeResult{}, 0, err
	}
	if opErr != nil {
		return writeResult{}, 0, opErr
	}
	_, charge := writeOutcome(st, opReplace, res, newDoc)
	return res, charge, nil
}

// decodeExact decodes the JSON value b into v with its numbers as json.Number, which encode back
// to the literal they were read from.
func decodeExact(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid character after top-level value")
	}
	return nil
}

// applyPatchOp applies one operation to doc: add, set, replace, remove, incr or move, with the
// service's rules (replace and remove need the property; the parent must exist). Numbers are
// json.Number (decodeExact).
func applyPatchOp(doc map[string]any, op patchOp) error {
	var value any
	if op.Op != "remove" && op.Op != "move" {
		if len(op.Value) == 0 {
			return badRequest("patch %s %s needs a value", op.Op, op.Path)
		}
		if err := decodeExact(op.Value, &value); err != nil {
			return badRequest("invalid value of patch %s %s", op.Op, op.Path)
		}
	}
	if op.Op == "move" {
		v, err := patchRemove(doc, op.From)
		if err != nil {
			return err
		}
		return patchSet(doc, op.Path, v, "set")
	}
	switch op.Op {
	case "add", "set", "replace":
		return patchSet(doc, op.Path, value, op.Op)
	case "remove":
		_, err := patchRemove(doc, op.Path)
		return err
	case "incr":
		inc, ok := value.(json.Number)
		if !ok {
			return badRequest("patch incr %s needs a number", op.Path)
		}
		parent, key, err := patchParent(doc, op.Path)
		if err != nil {
			return err
		}
		cur, exists := getChild(parent, key)
		if !exists {
			return patchSet(doc, op.Path, inc, "set")
		}
		n, ok := cur.(json.Number)
		if !ok {
			return badRequest("patch incr %s: the property is not a number", op.Path)
		}
		sum, err := addNumbers(n, inc)
		if err != nil {
			return badRequest("patch incr %s: %v", op.Path, err)
		}
		return patchSet(doc, op.Path, sum, "set")
	}
	return badRequest("unknown patch operation %q", op.Op)
}

// addNumbers adds two JSON numbers as the service's incr does: two integers add as 64-bit
// integers (exactly, beyond 2^53), anything else, or a sum that overflows, as float64.
func addNumbers(a, b json.Number) (any, error) {
	x, errX := a.Int64()
	y, errY := b.Int64()
	if errX == nil && errY == nil {
		if s := x + y; (s > x) == (y > 0) {
			return json.Number(strconv.FormatInt(s, 10)), nil
		}
	}
	f, err := a.Float64()
	if err != nil {
		return nil, err
	}
	g, err := b.Float64()
	if err != nil {
		return nil, err
	}
	return f + g, nil
}

// patchParent resolves the container of the last segment of a JSON pointer path.
func patchParent(doc map[string]any, path string) (any, string, error) {
	if !strings.HasPrefix(path, "/") || path == "/" {
		return nil, "", badRequest("invalid patch path %q", path)
	}
	segs := strings.Split(path[1:], "/")
	for i := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(segs[i], "~1", "/"), "~0", "~")
	}
	var cur any = doc
	for _, s := range segs[:len(segs)-1] {
		next, ok := getChild(cur, s)
		if !ok {
			return nil, "", badRequest("patch path %q: %s does not exist", path, s)
		}
		cur = next
	}
	return cur, segs[len(segs)-1], nil
}

func getChild(parent any, key string) (any, bool) {
	switch p := parent.(type) {
	case map[string]any:
		v, ok := p[key]
		return v, ok
	case []any:
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i >= len(p) {
			return nil, false
		}
		return p[i], true
	}
	return nil, false
}

// patchSet writes value at path; mode "replace" needs the property to exist, "add" inserts into
// arrays (index or "-"), "set" overwrites.
func patchSet(doc map[string]any, path string, value any, mode string) error {
	parent, key, err := patchParent(doc, path)
	if err != nil {
		return err
	}
	if path == "/id" || strings.HasPrefix(path, "/_") {
		if path != "/id" || mode != "replace" {
			return badRequest("patch cannot change the system property %s", path)
		}
	}
	switch p := parent.(type) {
	case map[string]any:
		if _, ok := p[key]; !ok && mode == "replace" {
			return badRequest("patch replace %s: the property does not exist", path)
		}
		p[key] = value
		return nil
	case []any:
		if key == "-" && mode == "add" {
			return setAt(doc, path, append(p, value))
		}
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i > len(p) || (i == len(p) && mode != "add") {
			return badRequest("patch %s %s: no such array index", mode, path)
		}
		if mode == "add" {
			p = append(p[:i], append([]any{value}, p[i:]...)...)
			return setAt(doc, path, p)
		}
		p[i] = value
		return nil
	}
	return badRequest("patch %s %s: the parent is not an object or array", mode, path)
}

// setAt stores a new slice for the array that holds path's last segment.
func setAt(doc map[string]any, path string, arr []any) error {
	i := strings.LastIndex(path, "/")
	if i == 0 {
		return badRequest("patch path %q: the document is not an array", path)
	}
	return patchSet(doc, path[:i], arr, "set")
}

func patchRemove(doc map[string]any, path string) (any, error) {
	parent, key, err := patchParent(doc, path)
	if err != nil {
		return nil, err
	}
	if path == "/id" || strings.HasPrefix(path, "/_") {
		return nil, badRequest("patch cannot remove the system property %s", path)
	}
	switch p := parent.(type) {
	case map[string]any:
		v, ok := p[key]
		if !ok {
			return nil, badRequest("patch remove %s: the property does not exist", path)
		}
		delete(p, key)
		return v, nil
	case []any:
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i >= len(p) {
			return nil, badRequest("patch remove %s: no such array index", path)
		}
		v := p[i]
		return v, setAt(doc, path, append(p[:i:i], p[i+1:]...))
	}
	return nil, badRequest("patch remove %s: the parent is not an object or array", path)
}

// marshalInOrder encodes the object doc with its top-level keys in order (a patched document's
// properties stay where they were), the keys order does not name after them, sorted (a patch's
// new properties).
func marshalInOrder(doc map[string]any, order []string) ([]byte, error) {
	b, err := appendMembers([]byte{'{'}, doc, orderedKeys(doc, order))
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}
