package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
	"github.com/google/uuid"

	"github.com/cfp-dev/cfp/emulator/query"
	"github.com/cfp-dev/cfp/internal/epk"
)

// The server-side JavaScript runtime of stored procedures and triggers, on goja (pure Go,
// ECMAScript 5.1 with most of ES6). A script runs inside the storage transaction of its request
// (store.updateItems), on the one logical partition the request names: its getCollection()
// reads see its own writes, and its writes commit all together when it ends normally, or not at
// all when it throws, runs out of time or writes too large a response.
//
// The API is the service's (the server-side JavaScript SDK): getContext() with getCollection(),
// getRequest() and getResponse(); the collection's createDocument, upsertDocument,
// readDocument, readDocuments, queryDocuments, replaceDocument and deleteDocument, each
// returning true (accepted) and calling its optional callback with (error, result, options)
// after the calling code returns, as the service does; getSelfLink(), getAltLink(); console.log;
// and the __ shorthand (__.createDocument, __.request, __.response). The service's fluent query
// API (__.filter, __.map, __.chain) is not served.

// DefaultScriptTimeout is Options.ScriptTimeout when zero: the time a stored procedure or
// trigger may run, as the service bounds it.
const DefaultScriptTimeout = 5 * time.Second

// maxScriptResponse is the largest response body a script may set (the service's 2 MB).
const maxScriptResponse = maxBodyBytes

// scriptError is the answer of a script that failed: its status, code and message.
type scriptError struct {
	status    int
	code      string
	msg       string
	substatus int
}

func (e *scriptError) Error() string { return e.msg }

// scriptRuns counts the script runs started (for tests).
var scriptRuns atomic.Int64

// errScriptTimeout interrupts a script that ran out of time.
var errScriptTimeout = errors.New("script timeout")

// scriptExceptionMessage is the message of the service's 400 for a script that threw.
func scriptExceptionMessage(what string) string {
	b, _ := json.Marshal(map[string][]string{"Errors": {"Encountered exception while executing function. Exception = " + what}})
	return "Message: " + string(b)
}

// jsRun is one execution of a script in a storage transaction.
type jsRun struct {
	vm      *goja.Runtime
	t       *itemTx
	st      *collState
	pk      []any // the logical partition the script may reach
	udfs    query.UDFs
	name    string // the script's id, for errors
	opType  string // a trigger's operation (Create, Replace, Delete, Upsert)
	pending []func() error
	errs    map[*goja.Object]*scriptError // error objects made for failed operations
	abort   error                         // a storage error: the request fails whatever the script does
	logs    []string
	charge  float64
	// respCont is the continuation the last query answered, for its callback's options.
	respCont string

	reqBody  goja.Value // getRequest().getBody()
	respBody goja.Value // getResponse().getBody()
}

func newJSRun(t *itemTx, st *collState, pk []any, name string) *jsRun {
	j := &jsRun{vm: newScriptVM(), t: t, st: st, pk: pk, name: name, errs: map[*goja.Object]*scriptError{}}
	j.reqBody, j.respBody = goja.Undefined(), goja.Undefined()
	j.install()
	return j
}

// fromJSON decodes JSON text into a JavaScript value.
func (j *jsRun) fromJSON(b []byte) goja.Value {
	parse, _ := goja.AssertFunction(j.vm.Get("JSON").ToObject(j.vm).Get("parse"))
	v, err := parse(goja.Undefined(), j.vm.ToValue(string(b)))
	if err != nil {
		panic(err)
	}
	return v
}

// toJSON encodes a JavaScript value as JSON text; nil for undefined (and functions).
func (j *jsRun) toJSON(v goja.Value) []byte {
	if v == nil || goja.IsUndefined(v) {
		return nil
	}
	stringify, _ := goja.AssertFunction(j.vm.Get("JSON").ToObject(j.vm).Get("stringify"))
	s, err := stringify(goja.Undefined(), v)
	if err != nil {
		panic(err)
	}
	if goja.IsUndefined(s) {
		return nil
	}
	return []byte(s.String())
}

// errorObject makes the JavaScript Error of a failed operation, with the service's number (its
// status) and body, and remembers it so that, thrown out of the script, it answers that status.
func (j *jsRun) errorObject(se *scriptError) *goja.Object {
	o := j.vm.NewGoError(se)
	_ = o.Set("number", se.status)
	_ = o.Set("body", se.msg)
	_ = o.Set("message", se.msg)
	j.errs[o] = se
	return o
}

// opError converts an operation's error; a storage error aborts the script.
func (j *jsRun) opError(err error) *scriptError {
	var se *scriptError
	if errors.As(err, &se) {
		return se
	}
	status := statusOfErr(err)
	if status == http.StatusInternalServerError {
		j.abort = err
		panic(j.vm.NewGoError(err))
	}
	se = &scriptError{status: status, code: strings.ReplaceAll(http.StatusText(status), " ", ""), msg: err.Error()}
	var bre *badRequestError
	if errors.As(err, &bre) {
		se.substatus = bre.substatus
	}
	return se
}

// call runs an operation and answers the script as the service does: true, and the callback
// (the last function argument) later with (error, result, options); a failure without a callback
// throws.
func (j *jsRun) call(args []goja.Value, op func() (goja.Value, error)) goja.Value {
	return j.callback(args, false, op)
}

// callback is call; noResult is set for deleteDocument, whose callback gets (error, options).
func (j *jsRun) callback(args []goja.Value, noResult bool, op func() (goja.Value, error)) goja.Value {
	var cb goja.Callable
	if n := len(args); n > 0 {
		cb, _ = goja.AssertFunction(args[n-1])
	}
	res, err := op()
	cont := j.respCont
	j.respCont = ""
	var errV goja.Value = goja.Undefined()
	if err != nil {
		se := j.opError(err)
		if cb == nil {
			panic(j.errorObject(se))
		}
		errV, res = j.errorObject(se), goja.Undefined()
	}
	if cb != nil {
		opts := j.vm.NewObject()
		_ = opts.Set("currentCollectionSizeInMB", 0)
		_ = opts.Set("maxCollectionSizeInMB", 10240)
		if cont != "" {
			_ = opts.Set("continuation", cont)
		}
		args := []goja.Value{errV, res, opts}
		if noResult {
			args = []goja.Value{errV, opts}
		}
		j.pending = append(j.pending, func() error {
			_, err := cb(goja.Undefined(), args...)
			return err
		})
	}
	return j.vm.ToValue(true)
}

// optionsArg returns the options object among args (the argument at i, when it is an object
// and not the callback).
func optionsArg(args []goja.Value, i int) *goja.Object {
	if i >= len(args) {
		return nil
	}
	if _, isFn := goja.AssertFunction(args[i]); isFn || goja.IsUndefined(args[i]) || goja.IsNull(args[i]) {
		return nil
	}
	o, _ := args[i].(*goja.Object)
	return o
}

// boolOption reads a boolean option.
func boolOption(o *goja.Object, name string) bool {
	if o == nil {
		return false
	}
	v := o.Get(name)
	return v != nil && v.ToBoolean()
}

// ifMatchOption is the If-Match of an operation's options: etag, or accessCondition
// {type: "IfMatch", condition}.
func ifMatchOption(o *goja.Object) string {
	if o == nil {
		return ""
	}
	if v := o.Get("etag"); v != nil && !goja.IsUndefined(v) && !goja.IsNull(v) {
		return v.String()
	}
	if ac, ok := o.Get("accessCondition").(*goja.Object); ok {
		if t := ac.Get("type"); t != nil && strings.EqualFold(t.String(), "IfMatch") {
			if c := ac.Get("condition"); c != nil {
				return c.String()
			}
		}
	}
	return ""
}

// checkCollLink accepts the script's own collection's link, by names or by resource ids.
func (j *jsRun) checkCollLink(link string) error {
	s := strings.Split(strings.Trim(link, "/"), "/")
	if len(s) == 4 && s[0] == "dbs" && s[2] == "colls" && (s[1] == j.st.DB || s[1] == j.st.DBRID) && (s[3] == j.st.ID || s[3] == j.st.RID) {
		return nil
	}
	return badRequest("the collection link %q is not the script's collection (dbs/%s/colls/%s): a script reaches only its own collection", link, j.st.DB, j.st.ID)
}

// docID returns the id (or resource id) a document link ends with, after checking its collection.
func (j *jsRun) docID(link string) (string, error) {
	link = strings.Trim(link, "/")
	i := strings.LastIndex(link, "/docs/")
	if i < 0 {
		return "", badRequest("invalid document link %q", link)
	}
	if err := j.checkCollLink(link[:i]); err != nil {
		return "", err
	}
	return link[i+len("/docs/"):], nil
}

// readDoc reads a document of the script's partition by id, or else by resource id.
func (j *jsRun) readDoc(id string) (item, error) {
	pk := epk.Canonical(j.pk)
	it, _, err := j.t.read(pk, id)
	if !errors.Is(err, errNotFound) {
		return it, err
	}
	var found *item
	err = j.scan(func(it item) bool {
		if it.RID == id {
			found = &it
			return false
		}
		return true
	})
	if err != nil {
		return item{}, err
	}
	if found == nil {
		return item{}, errNotFound
	}
	return *found, nil
}

// resolveID returns the id of the document a link names by id or by resource id (its _self).
func (j *jsRun) resolveID(id string) (string, error) {
	it, err := j.readDoc(id)
	if err != nil {
		return "", err
	}
	var d struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(it.Body, &d); err != nil {
		return "", err
	}
	return d.ID, nil
}

// scan calls fn for each live document of the script's partition, with the transaction's writes.
func (j *jsRun) scan(fn func(item) bool) error {
	prefix := partitionPrefix(epk.Canonical(j.pk))
	c := j.t.cb.Bucket(bucketItems).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		it, err := decodeItem(v, true)
		if err != nil {
			return err
		}
		if expired(j.t.st.DefaultTTL, it.Ts, it.Body, j.t.now) {
			continue
		}
		if !fn(it) {
			return nil
		}
	}
	return nil
}

// write applies one document write of the script, in its partition.
func (j *jsRun) write(op opKind, id string, doc goja.Value, opts *goja.Object) (goja.Value, error) {
	var body []byte
	if op != opDelete {
		o, ok := doc.(*goja.Object)
		if !ok || o.ClassName() == "Array" {
			return nil, badRequest("the document is not a JSON object")
		}
		if id := o.Get("id"); (op == opCreate || op == opUpsert) && (id == nil || goja.IsUndefined(id)) && !boolOption(opts, "disableAutomaticIdGeneration") {
			// The server-side SDK gives a document without an id a new GUID.
			_ = o.Set("id", uuid.NewString())
		}
		body = j.toJSON(doc)
	}
	wr, d, err := prepareWrite(j.st, itemOpRequest{Op: op, ID: id, Body: body, PK: j.pk, HasPK: true, IfMatch: ifMatchOption(opts)})
	if err != nil {
		return nil, err
	}
	res, opErr, err := j.t.write(wr)
	if err != nil {
		j.abort = err
		panic(j.vm.NewGoError(err))
	}
	if opErr != nil {
		return nil, opErr
	}
	_, charge := writeOutcome(j.st, op, res, d)
	j.charge += charge
	if op == opDelete {
		return goja.Undefined(), nil
	}
	return j.fromJSON(withoutLSN(res.Item.Body)), nil
}

// queryDocs runs a query on the script's partition.
func (j *jsRun) queryDocs(spec goja.Value, opts *goja.Object) (goja.Value, error) {
	var sql string
	params := map[string]any{}
	if o, ok := spec.(*goja.Object); ok && o.ClassName() != "String" {
		var qs querySpec
		if err := json.Unmarshal(j.toJSON(o), &qs); err != nil {
			return nil, badRequest("invalid query: %v", err)
		}
		sql = qs.Query
		for _, p := range qs.Parameters {
			var v any
			_ = json.Unmarshal(p.Value, &v)
			params[p.Name] = v
		}
	} else {
		sql = spec.String()
	}
	q, err := query.Parse(sql)
	if errors.Is(err, query.ErrUnsupported) {
		return nil, refusal(err, sql)
	}
	if err != nil {
		return nil, badRequest("query %q: %v", sql, err)
	}
	if q, err = q.Bind(params); err != nil {
		return nil, badRequest("query %q: %v", sql, err)
	}
	if j.udfs != nil {
		params = query.WithUDFs(params, j.udfs)
	}
	var docs []map[string]any
	var scanErr error
	err = j.scan(func(it item) bool {
		var doc map[string]any
		if scanErr = json.Unmarshal(withoutLSN(it.Body), &doc); scanErr != nil {
			return false
		}
		docs = append(docs, doc)
		return true
	})
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return nil, err
	}
	out, cont, err := queryPage(q, params, docs, pageOptions(opts))
	if err != nil {
		return nil, badRequest("%v", err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	j.charge += ChargeQueryPage(len(docs), len(b))
	j.respCont = cont
	return j.fromJSON(b), nil
}

// pageRequest is a script query's options: pageSize (0: every result) and continuation.
type pageRequest struct {
	size int
	cont string
}

func pageOptions(o *goja.Object) pageRequest {
	var p pageRequest
	if o == nil {
		return p
	}
	if v := o.Get("pageSize"); v != nil && !goja.IsUndefined(v) && !goja.IsNull(v) {
		p.size = max(int(v.ToInteger()), 0)
	}
	if v := o.Get("continuation"); v != nil && !goja.IsUndefined(v) && !goja.IsNull(v) {
		p.cont = v.String()
	}
	return p
}

// queryPage answers one page of a script's query over the partition's documents (in id order)
// and the continuation of the next page ("" for the last). A plain query (no ORDER BY, aggregate,
// DISTINCT, TOP or OFFSET) continues after the last document's id, so a script that deletes what
// it read and asks for the next page misses nothing; the others continue at an offset.
func queryPage(q *query.Query, params map[string]any, docs []map[string]any, page pageRequest) ([]any, string, error) {
	plain := !q.IsAggregate() && len(q.OrderBy) == 0 && !q.Distinct && q.RowLimit() < 0 && q.Offset < 0
	if plain {
		after, _ := strings.CutPrefix(page.cont, "id:")
		out := []any{}
		for i, d := range docs {
			id, _ := d["id"].(string)
			if page.cont != "" && id <= after {
				continue
			}
			ok, err := q.Match(d, params)
			if err != nil {
				return nil, "", err
			}
			if !ok {
				continue
			}
			v, ok, err := q.Project(d, params)
			if err != nil {
				return nil, "", err
			}
			if ok {
				out = append(out, v)
			}
			if page.size > 0 && len(out) == page.size && i < len(docs)-1 {
				return out, "id:" + id, nil
			}
		}
		return out, "", nil
	}
	out, err := evalQuery(q, params, docs)
	if err != nil {
		return nil, "", err
	}
	from := 0
	if n, ok := strings.CutPrefix(page.cont, "offset:"); ok {
		from, _ = strconv.Atoi(n)
	}
	out = out[min(max(from, 0), len(out)):]
	if page.size > 0 && len(out) > page.size {
		return out[:page.size], "offset:" + strconv.Itoa(from+page.size), nil
	}
	return out, "", nil
}

// evalQuery evaluates q over docs in memory: filter, order, aggregate, project, DISTINCT,
// OFFSET and LIMIT (TOP).
func evalQuery(q *query.Query, params map[string]any, docs []map[string]any) ([]any, error) {
	var matched []map[string]any
	for _, d := range docs {
		ok, err := q.Match(d, params)
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, d)
		}
	}
	out := []any{}
	if q.IsAggregate() {
		agg := q.NewAggregator(params)
		for _, d := range matched {
			if err := agg.Add(d); err != nil {
				return nil, err
			}
		}
		res, err := agg.Results()
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	} else {
		sort.SliceStable(matched, func(a, b int) bool { return q.Compare(matched[a], matched[b]) < 0 })
		for _, d := range matched {
			v, ok, err := q.Project(d, params)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, v)
			}
		}
	}
	if q.Distinct {
		seen := map[string]bool{}
		kept := out[:0]
		for _, v := range out {
			b, _ := json.Marshal(v)
			if !seen[string(b)] {
				seen[string(b)] = true
				kept = append(kept, v)
			}
		}
		out = kept
	}
	if q.Offset > 0 {
		out = out[min(q.Offset, len(out)):]
	}
	if n := q.RowLimit(); n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// fn makes a Go function callable from the script.
func (j *jsRun) fn(f func(args []goja.Value) goja.Value) func(goja.FunctionCall) goja.Value {
	return func(c goja.FunctionCall) goja.Value { return f(c.Arguments) }
}

func arg(args []goja.Value, i int) goja.Value {
	if i < len(args) {
		return args[i]
	}
	return goja.Undefined()
}

// install sets up the script's global API: getContext(), __, console.
func (j *jsRun) install() {
	vm := j.vm
	coll, request, response := j.collectionAPI(), j.requestAPI(), j.responseAPI()
	ctx := vm.NewObject()
	_ = ctx.Set("getCollection", j.fn(func([]goja.Value) goja.Value { return coll }))
	_ = ctx.Set("getRequest", j.fn(func([]goja.Value) goja.Value { return request }))
	_ = ctx.Set("getResponse", j.fn(func([]goja.Value) goja.Value { return response }))
	_ = vm.Set("getContext", j.fn(func([]goja.Value) goja.Value { return ctx }))
	_ = coll.Set("request", request)
	_ = coll.Set("response", response)
	_ = vm.Set("__", coll)

	console := vm.NewObject()
	_ = console.Set("log", j.fn(func(args []goja.Value) goja.Value {
		j.logs = append(j.logs, formatLog(args))
		return goja.Undefined()
	}))
	_ = vm.Set("console", console)
}

// refuse panics with the script error of something the emulator does not serve.
func (j *jsRun) refuse(what string) {
	panic(j.errorObject(&scriptError{status: http.StatusBadRequest, code: "BadRequest", msg: "not supported by cfp emulator: " + what}))
}

// collectionAPI is getContext().getCollection(): the document operations on the script's
// partition.
func (j *jsRun) collectionAPI() *goja.Object {
	vm := j.vm
	coll := vm.NewObject()
	self := "dbs/" + j.st.DBRID + "/colls/" + j.st.RID + "/"
	_ = coll.Set("getSelfLink", j.fn(func([]goja.Value) goja.Value { return vm.ToValue(self) }))
	_ = coll.Set("getAltLink", j.fn(func([]goja.Value) goja.Value { return vm.ToValue("dbs/" + j.st.DB + "/colls/" + j.st.ID) }))
	for name, op := range map[string]opKind{"createDocument": opCreate, "upsertDocument": opUpsert, "replaceDocument": opReplace, "deleteDocument": opDelete} {
		_ = coll.Set(name, j.fn(func(args []goja.Value) goja.Value {
			return j.callback(args, op == opDelete, func() (goja.Value, error) { return j.docWrite(op, args) })
		}))
	}
	_ = coll.Set("readDocument", j.fn(func(args []goja.Value) goja.Value {
		return j.call(args, func() (goja.Value, error) {
			id, err := j.docID(arg(args, 0).String())
			if err != nil {
				return nil, err
			}
			it, err := j.readDoc(id)
			if err != nil {
				return nil, err
			}
			j.charge += ChargeRead(len(it.Body))
			return j.fromJSON(withoutLSN(it.Body)), nil
		})
	}))
	query := func(spec func(args []goja.Value) goja.Value, optsAt int) func(args []goja.Value) goja.Value {
		return func(args []goja.Value) goja.Value {
			return j.call(args, func() (goja.Value, error) {
				if err := j.checkCollLink(arg(args, 0).String()); err != nil {
					return nil, err
				}
				return j.queryDocs(spec(args), optionsArg(args, optsAt))
			})
		}
	}
	_ = coll.Set("readDocuments", j.fn(query(func([]goja.Value) goja.Value { return vm.ToValue("SELECT * FROM root") }, 1)))
	_ = coll.Set("queryDocuments", j.fn(query(func(args []goja.Value) goja.Value { return arg(args, 1) }, 2)))
	for _, name := range []string{"filter", "map", "pluck", "flatten", "sortBy", "sortByDescending", "chain", "value"} {
		_ = coll.Set(name, j.fn(func([]goja.Value) goja.Value {
			j.refuse("the server-side query API (__." + name + "); use queryDocuments")
			return nil
		}))
	}
	return coll
}

// docWrite is createDocument, upsertDocument (link: the collection's), replaceDocument and
// deleteDocument (link: the document's).
func (j *jsRun) docWrite(op opKind, args []goja.Value) (goja.Value, error) {
	if op == opCreate || op == opUpsert {
		if err := j.checkCollLink(arg(args, 0).String()); err != nil {
			return nil, err
		}
		return j.write(op, "", arg(args, 1), optionsArg(args, 2))
	}
	id, err := j.docID(arg(args, 0).String())
	if err != nil {
		return nil, err
	}
	if id, err = j.resolveID(id); err != nil {
		return nil, err
	}
	if op == opDelete {
		return j.write(op, id, nil, optionsArg(args, 1))
	}
	return j.write(op, id, arg(args, 1), optionsArg(args, 2))
}

// requestAPI is getContext().getRequest(): a trigger's document.
func (j *jsRun) requestAPI() *goja.Object {
	request := j.vm.NewObject()
	_ = request.Set("getBody", j.fn(func([]goja.Value) goja.Value { return j.reqBody }))
	_ = request.Set("setBody", j.fn(func(args []goja.Value) goja.Value { j.reqBody = arg(args, 0); return goja.Undefined() }))
	_ = request.Set("getOperationType", j.fn(func([]goja.Value) goja.Value { return j.vm.ToValue(j.opType) }))
	_ = request.Set("getValue", j.fn(func(args []goja.Value) goja.Value {
		if arg(args, 0).String() == "Body" {
			return j.reqBody
		}
		return goja.Undefined()
	}))
	_ = request.Set("setValue", j.fn(func(args []goja.Value) goja.Value {
		if arg(args, 0).String() != "Body" {
			j.refuse("request values other than Body")
		}
		j.reqBody = arg(args, 1)
		return goja.Undefined()
	}))
	return request
}

// responseAPI is getContext().getResponse(): the body a stored procedure answers, or the
// document a post-trigger sees.
func (j *jsRun) responseAPI() *goja.Object {
	response := j.vm.NewObject()
	_ = response.Set("getBody", j.fn(func([]goja.Value) goja.Value { return j.respBody }))
	_ = response.Set("setBody", j.fn(func(args []goja.Value) goja.Value { j.setBody(arg(args, 0)); return goja.Undefined() }))
	_ = response.Set("appendBody", j.fn(func(args []goja.Value) goja.Value { j.appendBody(arg(args, 0)); return goja.Undefined() }))
	_ = response.Set("getMaxResponseBodySize", j.fn(func([]goja.Value) goja.Value { return j.vm.ToValue(maxScriptResponse) }))
	onlyBody := func(args []goja.Value) {
		if arg(args, 0).String() != "Body" {
			j.refuse("response values other than Body")
		}
	}
	_ = response.Set("getValue", j.fn(func(args []goja.Value) goja.Value { onlyBody(args); return j.respBody }))
	_ = response.Set("setValue", j.fn(func(args []goja.Value) goja.Value { onlyBody(args); j.setBody(arg(args, 1)); return goja.Undefined() }))
	_ = response.Set("appendValue", j.fn(func(args []goja.Value) goja.Value {
		onlyBody(args)
		j.appendBody(arg(args, 1))
		return goja.Undefined()
	}))
	return response
}

// setBody sets the response body, within maxScriptResponse (413 past it).
func (j *jsRun) setBody(v goja.Value) {
	if b := j.toJSON(v); len(b) > maxScriptResponse {
		panic(j.errorObject(&scriptError{status: http.StatusRequestEntityTooLarge, code: "RequestEntityTooLarge",
			msg: fmt.Sprintf("the script's response body (%d bytes) is larger than %d bytes", len(b), maxScriptResponse)}))
	}
	j.respBody = v
}

// appendBody appends v's text to the response body's.
func (j *jsRun) appendBody(v goja.Value) {
	prefix := ""
	if !goja.IsUndefined(j.respBody) && !goja.IsNull(j.respBody) {
		prefix = j.respBody.String()
	}
	j.setBody(j.vm.ToValue(prefix + v.String()))
}

// formatLog formats console.log's arguments as the service does: %s, %d, %i, %f and %j in the
// first are replaced by the next arguments, the rest are appended with spaces.
func formatLog(args []goja.Value) string {
	if len(args) == 0 {
		return ""
	}
	format, rest := args[0].String(), args[1:]
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c == '%' && i+1 < len(format) && strings.IndexByte("sdifj", format[i+1]) >= 0 && len(rest) > 0 {
			b.WriteString(rest[0].String())
			rest = rest[1:]
			i++
			continue
		}
		b.WriteByte(c)
	}
	for _, a := range rest {
		b.WriteByte(' ')
		b.WriteString(a.String())
	}
	return b.String()
}

// run compiles and calls the script's function with args, then runs the callbacks its
// operations queued, until none is left. It answers a script error (*scriptError) or a storage
// error. The script is interrupted after timeout, or when ctx ends.
func (j *jsRun) run(ctx context.Context, src string, timeout time.Duration, args ...goja.Value) (err error) {
	scriptRuns.Add(1)
	timer := time.AfterFunc(timeout, func() { j.vm.Interrupt(errScriptTimeout) })
	defer timer.Stop()
	stop := context.AfterFunc(ctx, func() { j.vm.Interrupt(ctx.Err()) })
	defer stop()
	defer j.watchMemory()()
	defer func() {
		if p := recover(); p != nil {
			if j.abort != nil {
				err = j.abort
				return
			}
			panic(p)
		}
	}()
	err = j.exec(src, args)
	if j.abort != nil {
		return j.abort
	}
	return j.scriptErr(err, timeout)
}

// maxScriptMemory bounds what a script may allocate: goja has no memory limit, and a script that
// doubles a string in a loop would take the emulator's process down before its time bound.
const maxScriptMemory = 256 << 20

// errScriptMemory interrupts a script that allocated more than maxScriptMemory.
var errScriptMemory = errors.New("script memory")

// watchMemory interrupts the script when the process's heap grows by more than maxScriptMemory
// while it runs (the heap is the process's, so what other requests allocate at the same time
// counts too: the bound is generous). It returns the function that stops watching.
func (j *jsRun) watchMemory() func() {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				metrics.Read(sample)
				if sample[0].Value.Uint64() > base+maxScriptMemory {
					j.vm.Interrupt(errScriptMemory)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

func (j *jsRun) exec(src string, args []goja.Value) error {
	prog, err := goja.Compile(j.name, "("+src+"\n)", false)
	if err != nil {
		return &scriptError{status: http.StatusBadRequest, code: "BadRequest", msg: scriptExceptionMessage(err.Error())}
	}
	v, err := j.vm.RunProgram(prog)
	if err != nil {
		return err
	}
	f, ok := goja.AssertFunction(v)
	if !ok {
		return &scriptError{status: http.StatusBadRequest, code: "BadRequest", msg: scriptExceptionMessage("the script's body is not a function")}
	}
	if _, err := f(goja.Undefined(), args...); err != nil {
		return err
	}
	for len(j.pending) > 0 {
		cb := j.pending[0]
		j.pending = j.pending[1:]
		if err := cb(); err != nil {
			return err
		}
	}
	return nil
}

// scriptErr maps what a script's run returned to the answer.
func (j *jsRun) scriptErr(err error, timeout time.Duration) error {
	var ie *goja.InterruptedError
	var ex *goja.Exception
	var se *scriptError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return se
	case errors.As(err, &ie):
		if ie.Value() == errScriptMemory {
			return &scriptError{status: http.StatusBadRequest, code: "BadRequest",
				msg: scriptExceptionMessage(fmt.Sprintf("not supported by cfp emulator: the script %s allocated more than %d MiB and was stopped; none of its writes were committed", quoteID(j.name), maxScriptMemory>>20))}
		}
		if ie.Value() == errScriptTimeout {
			return &scriptError{status: http.StatusRequestTimeout, code: "RequestTimeout",
				msg: scriptExceptionMessage(fmt.Sprintf("the script %s ran longer than its allowed time (%s) and was stopped; none of its writes were committed", quoteID(j.name), timeout))}
		}
		return &scriptError{status: http.StatusRequestTimeout, code: "RequestTimeout", msg: "the request was cancelled while its script ran"}
	case errors.As(err, &ex):
		if o, ok := ex.Value().(*goja.Object); ok {
			if se := j.errs[o]; se != nil {
				return se
			}
		}
		what := ex.Value().String()
		if o, ok := ex.Value().(*goja.Object); ok && o.Get("stack") != nil {
			what = o.String()
		}
		return &scriptError{status: http.StatusBadRequest, code: "BadRequest", msg: scriptExceptionMessage(what)}
	}
	return err
}
