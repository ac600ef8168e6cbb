package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/cfp-dev/cfp/emulator/query"
)

const (
	hdrScriptLogging    = "x-ms-documentdb-script-enable-logging"
	hdrScriptLogResults = "x-ms-documentdb-script-log-results"
)

// scriptKinds are a container's server-side script resources.
var scriptKinds = map[string]resKind{
	"sprocs":   {Name: "sprocs", Field: "StoredProcedures", validate: validateScript},
	"triggers": {Name: "triggers", Field: "Triggers", validate: validateTrigger},
	"udfs":     {Name: "udfs", Field: "UserDefinedFunctions", validate: validateScript},
}

// validateScript checks that a script's body is a JavaScript function the runtime compiles, as
// the service does when the script is created.
func validateScript(props map[string]any) error {
	body, ok := stringProp(props, "body")
	if !ok || strings.TrimSpace(body) == "" {
		return badRequest("the script has no body: want the JavaScript function's text in \"body\"")
	}
	if _, err := goja.Compile("", "("+body+"\n)", false); err != nil {
		return badRequest("%s", scriptExceptionMessage("the script does not compile: "+err.Error()))
	}
	return nil
}

var (
	triggerTypes      = []string{"Pre", "Post"}
	triggerOperations = []string{"All", "Create", "Update", "Delete", "Replace", "Upsert"}
)

func validateTrigger(props map[string]any) error {
	if err := validateScript(props); err != nil {
		return err
	}
	for name, allowed := range map[string][]string{"triggerType": triggerTypes, "triggerOperation": triggerOperations} {
		// Kept as given (the Python SDK sends "pre" and "all"), compared without case.
		v, _ := stringProp(props, name)
		ok := false
		for _, a := range allowed {
			ok = ok || strings.EqualFold(v, a)
		}
		if !ok {
			return badRequest("invalid %s %q: want one of %s", name, v, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// scriptTimeout is the time a script may run.
func (e *Emulator) scriptTimeout() time.Duration {
	if e.opts.ScriptTimeout > 0 {
		return e.opts.ScriptTimeout
	}
	return DefaultScriptTimeout
}

// failScript answers a script's error, or any other with fail.
func (e *Emulator) failScript(w http.ResponseWriter, err error) {
	var se *scriptError
	if errors.As(err, &se) {
		writeError(w, se.status, se.code, se.msg, se.substatus)
		return
	}
	e.fail(w, err)
}

// executeSproc serves POST .../sprocs/<id>: the stored procedure runs with the request's body (a
// JSON array of its arguments) on the logical partition of the partition-key header, in one
// storage transaction. Its response body is what it set with getResponse().setBody().
func (e *Emulator) executeSproc(w http.ResponseWriter, r *http.Request, st *collState, id string) {
	rec, err := e.store.getRes("sprocs", st.RID, id)
	if err != nil {
		e.fail(w, err)
		return
	}
	var def struct {
		Body string `json:"body"`
	}
	_ = json.Unmarshal(rec.Props, &def)
	comps, ok, err := headerPK(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	if !ok {
		e.fail(w, badRequest("executing a stored procedure needs the %s header: it runs on one logical partition", hdrPartitionKey))
		return
	}
	body, err := readBody(r)
	if err != nil {
		e.fail(w, err)
		return
	}
	var params []json.RawMessage
	if len(strings.TrimSpace(string(body))) > 0 {
		if json.Unmarshal(body, &params) != nil {
			// One argument that is not an array.
			params = []json.RawMessage{body}
		}
	}
	udfs, err := e.udfCaller(st)
	if err != nil {
		e.fail(w, err)
		return
	}
	var out sprocOutput
	err = e.store.updateItems(st.DB, st.ID, e.sprocTx(r.Context(), st, rec.ID, def.Body, comps, params, udfs, &out))
	if err != nil {
		e.failScript(w, err)
		return
	}
	h := w.Header()
	if strings.EqualFold(r.Header.Get(hdrScriptLogging), "true") && len(out.logs) > 0 {
		h.Set(hdrScriptLogResults, url.PathEscape(strings.Join(out.logs, "\n")))
	}
	h.Set(hdrContentPath, st.RID)
	if rg, ok := st.rangeForEPK(st.hashPK(comps)); ok {
		h.Set(hdrRangeID, rg.idString())
	}
	writeJSON(w, http.StatusOK, chargeMeta+out.charge, out.body)
}

// sprocOutput is what an execution of a stored procedure answers.
type sprocOutput struct {
	body   []byte
	logs   []string
	charge float64
}

// sprocTx returns the storage-transaction function that runs a stored procedure and fills out.
// The group committer runs it again, alone, when the transaction it shared with other writers
// failed; a run that timed out is not repeated (it would hold every writer for the time bound
// once more, to time out again): the function answers the timeout at once.
func (e *Emulator) sprocTx(ctx context.Context, st *collState, id, body string, comps []any, params []json.RawMessage, udfs query.UDFs, out *sprocOutput) func(*itemTx) error {
	var timedOut error
	return func(t *itemTx) error {
		*out = sprocOutput{}
		if timedOut != nil {
			return timedOut
		}
		j := newJSRun(t, st, comps, id)
		j.udfs = udfs
		args := make([]goja.Value, len(params))
		for i, p := range params {
			args[i] = j.fromJSON(p)
		}
		err := j.run(ctx, body, e.scriptTimeout(), args...)
		if isScriptTimeout(err) {
			timedOut = err
		}
		*out = sprocOutput{body: j.toJSON(j.respBody), logs: j.logs, charge: j.charge}
		return err
	}
}

// isScriptTimeout reports whether err is a script's 408.
func isScriptTimeout(err error) bool {
	var se *scriptError
	return errors.As(err, &se) && se.status == http.StatusRequestTimeout
}
