package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/cfp-dev/cfp/emulator/query"
	"github.com/cfp-dev/cfp/internal/epk"
)

const (
	hdrPreTrigger  = "x-ms-documentdb-pre-trigger-include"
	hdrPostTrigger = "x-ms-documentdb-post-trigger-include"
)

// hasTriggers reports whether a document write names triggers to run.
func hasTriggers(r *http.Request) bool {
	return r.Header.Get(hdrPreTrigger) != "" || r.Header.Get(hdrPostTrigger) != ""
}

// refusedTriggers answers 400 "not supported by cfp emulator" to a write that names triggers it
// would not run (a patch, a transactional batch or a bulk request), and reports whether it did:
// never a write that silently skips its triggers.
func (e *Emulator) refusedTriggers(w http.ResponseWriter, r *http.Request) bool {
	if !hasTriggers(r) {
		return false
	}
	e.notSupported(w, r, "triggers on a patch, a transactional batch or a bulk request")
	return true
}

// noTriggers is serve, refusing the requests that name triggers (refusedTriggers).
func (e *Emulator) noTriggers(serve func(w http.ResponseWriter, r *http.Request, db, coll, id string)) func(w http.ResponseWriter, r *http.Request, db, coll, id string) {
	return func(w http.ResponseWriter, r *http.Request, db, coll, id string) {
		if !e.refusedTriggers(w, r) {
			serve(w, r, db, coll, id)
		}
	}
}

// trigger is a trigger to run on a write.
type trigger struct {
	id, body string
}

// opTypeName is a write's operation as triggers see it (getRequest().getOperationType()).
func opTypeName(op opKind) string {
	switch op {
	case opCreate:
		return "Create"
	case opReplace:
		return "Replace"
	case opDelete:
		return "Delete"
	}
	return "Upsert"
}

// triggerMatches reports whether a trigger of operation top runs on a write op.
func triggerMatches(top string, op opKind) bool {
	switch top {
	case "All":
		return true
	case "Create":
		return op == opCreate || op == opUpsert
	case "Replace", "Update":
		return op == opReplace || op == opUpsert
	case "Delete":
		return op == opDelete
	case "Upsert":
		return op == opUpsert
	}
	return false
}

// canonicalTriggerOp spells a trigger operation as triggerOperations does.
func canonicalTriggerOp(v string) string {
	for _, a := range triggerOperations {
		if strings.EqualFold(v, a) {
			return a
		}
	}
	return v
}

// loadTriggers reads the triggers a header names (comma-separated ids), checking each is of
// type typ and runs on op, as the service does (400 otherwise).
func (e *Emulator) loadTriggers(st *collState, header, typ string, op opKind) ([]trigger, error) {
	var out []trigger
	for id := range strings.SplitSeq(header, ",") {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		rec, err := e.store.getRes("triggers", st.RID, id)
		if errors.Is(err, errNotFound) {
			return nil, badRequest("the trigger %q named in the request does not exist in the collection", id)
		}
		if err != nil {
			return nil, err
		}
		var def struct {
			Body string `json:"body"`
			Type string `json:"triggerType"`
			Op   string `json:"triggerOperation"`
		}
		_ = json.Unmarshal(rec.Props, &def)
		if !strings.EqualFold(def.Type, typ) {
			return nil, badRequest("the trigger %q is a %s-trigger and cannot be run as a %s-trigger", id, strings.ToLower(def.Type), strings.ToLower(typ))
		}
		if !triggerMatches(canonicalTriggerOp(def.Op), op) {
			return nil, badRequest("the trigger %q runs on %s operations and cannot be run on a %s operation", id, def.Op, opTypeName(op))
		}
		out = append(out, trigger{id: rec.ID, body: def.Body})
	}
	return out, nil
}

// writeWithTriggers serves a document write that names pre- or post-triggers: in one storage
// transaction, the pre-triggers run in order (each may change the document with
// getRequest().setBody()), the write is applied, and the post-triggers run (they see the written
// document in getResponse().getBody()). Every trigger may read and write documents of the
// write's logical partition. A trigger that throws, or a write that fails, rolls all of it back.
func (e *Emulator) writeWithTriggers(w http.ResponseWriter, r *http.Request, st *collState, req itemOpRequest) {
	pre, err := e.loadTriggers(st, r.Header.Get(hdrPreTrigger), "Pre", req.Op)
	if err == nil {
		var post []trigger
		post, err = e.loadTriggers(st, r.Header.Get(hdrPostTrigger), "Post", req.Op)
		if err == nil {
			e.runTriggers(w, r, st, req, pre, post)
			return
		}
	}
	e.fail(w, err)
}

func (e *Emulator) runTriggers(w http.ResponseWriter, r *http.Request, st *collState, req itemOpRequest, pre, post []trigger) {
	udfs, err := e.udfCaller(st)
	if err != nil {
		e.fail(w, err)
		return
	}
	var status int
	var res writeResult
	var charge float64
	var timedOut error // a trigger that timed out is not run again (see sprocTx)
	err = e.store.updateItems(st.DB, st.ID, func(t *itemTx) (err error) {
		if timedOut != nil {
			return timedOut
		}
		defer func() {
			if isScriptTimeout(err) {
				timedOut = err
			}
		}()
		tw := triggeredWrite{e: e, ctx: r.Context(), t: t, st: st, op: req.Op, udfs: udfs, body: req.Body, comps: req.PK}
		if !req.HasPK && req.Op != opDelete {
			var doc map[string]any
			if json.Unmarshal(req.Body, &doc) != nil {
				return badRequest("the request body is not a JSON object")
			}
			tw.comps = epk.FromDocument(doc, st.Paths)
		}
		for _, tr := range pre {
			if err := tw.run(tr, nil); err != nil {
				return err
			}
		}
		op := req
		op.Body = tw.body
		wr, doc, err := prepareWrite(st, op)
		if err != nil {
			return err
		}
		var opErr error
		if res, opErr, err = t.write(wr); err != nil || opErr != nil {
			return errors.Join(opErr, err)
		}
		var wc float64
		status, wc = writeOutcome(st, req.Op, res, doc)
		tw.charge += wc
		for _, tr := range post {
			if err := tw.run(tr, &res.Item); err != nil {
				return err
			}
		}
		charge = tw.charge
		return nil
	})
	if err != nil {
		e.failScript(w, err)
		return
	}
	e.writeItemResponse(w, r, st, status, res, charge)
}

// triggeredWrite is a document write's triggers running in its transaction.
type triggeredWrite struct {
	e      *Emulator
	ctx    context.Context
	t      *itemTx
	st     *collState
	op     opKind
	udfs   query.UDFs
	comps  []any  // the write's partition key
	body   []byte // the request's document, as the pre-triggers left it; nil for a delete
	charge float64
}

// run runs one trigger: a pre-trigger (written nil) may replace the request's document, a
// post-trigger sees the written one.
func (tw *triggeredWrite) run(tr trigger, written *item) error {
	j := newJSRun(tw.t, tw.st, tw.comps, tr.id)
	j.opType, j.udfs = opTypeName(tw.op), tw.udfs
	if tw.body != nil {
		j.reqBody = j.fromJSON(tw.body)
	}
	if written != nil && tw.op != opDelete {
		j.respBody = j.fromJSON(withoutLSN(written.Body))
	}
	if err := j.run(tw.ctx, tr.body, tw.e.scriptTimeout()); err != nil {
		return err
	}
	tw.charge += j.charge
	if written == nil && tw.body != nil {
		if tw.body = j.toJSON(j.reqBody); tw.body == nil {
			return badRequest("the pre-trigger %q left the request without a body", tr.id)
		}
	}
	return nil
}
