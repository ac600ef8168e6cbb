package emulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dop251/goja"

	"github.com/cfp-dev/cfp/emulator/query"
)

// udfCaller returns the user-defined functions of container st for a query's udf.name(...): each
// is loaded and compiled on its first call, in one JavaScript runtime per query (the query's scan
// is sequential), and every call is bounded by the script timeout. A UDF that is missing, throws
// or runs too long fails the query with a 400.
func (e *Emulator) udfCaller(st *collState) (query.UDFs, error) {
	var vm *goja.Runtime
	fns := map[string]goja.Callable{}
	timeout := e.scriptTimeout()
	return func(name string, args []any) (any, bool, error) {
		if vm == nil {
			vm = newScriptVM()
		}
		fn, ok := fns[name]
		if !ok {
			rec, err := e.store.getRes("udfs", st.RID, name)
			if errors.Is(err, errNotFound) {
				return nil, false, fmt.Errorf("unknown function udf.%s: the container has no user-defined function %q", name, name)
			}
			if err != nil {
				return nil, false, err
			}
			var def struct {
				Body string `json:"body"`
			}
			_ = json.Unmarshal(rec.Props, &def)
			v, err := vm.RunString("(" + def.Body + "\n)")
			if err != nil {
				return nil, false, fmt.Errorf("%s", scriptExceptionMessage(err.Error()))
			}
			if fn, ok = goja.AssertFunction(v); !ok {
				return nil, false, fmt.Errorf("the user-defined function udf.%s is not a function", name)
			}
			fns[name] = fn
		}
		return callUDF(vm, fn, name, args, timeout)
	}, nil
}

// callUDF calls a compiled UDF with JSON arguments and returns its result as a JSON value.
func callUDF(vm *goja.Runtime, fn goja.Callable, name string, args []any, timeout time.Duration) (any, bool, error) {
	jsonObj := vm.Get("JSON").ToObject(vm)
	parse, _ := goja.AssertFunction(jsonObj.Get("parse"))
	stringify, _ := goja.AssertFunction(jsonObj.Get("stringify"))
	vals := make([]goja.Value, len(args))
	for i, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, false, err
		}
		if vals[i], err = parse(goja.Undefined(), vm.ToValue(string(b))); err != nil {
			return nil, false, err
		}
	}
	// The runtime serves the query's next call too: a timer that fired must have interrupted
	// before the interrupt is cleared.
	fired := make(chan struct{})
	timer := time.AfterFunc(timeout, func() { vm.Interrupt(errScriptTimeout); close(fired) })
	stopWatch := watchScriptMemory(vm)
	res, err := fn(goja.Undefined(), vals...)
	if !timer.Stop() {
		<-fired
	}
	outOfMemory := stopWatch()
	vm.ClearInterrupt()
	var ie *goja.InterruptedError
	switch {
	case errors.As(err, &ie) && outOfMemory:
		return nil, false, badRequest("the user-defined function udf.%s used more than %d MiB of memory and was stopped", name, maxScriptMemory>>20)
	case errors.As(err, &ie):
		return nil, false, badRequest("the user-defined function udf.%s ran longer than its allowed time (%s) and was stopped", name, timeout)
	case err != nil:
		return nil, false, badRequest("%s", scriptExceptionMessage(err.Error()))
	}
	if goja.IsUndefined(res) {
		return nil, false, nil
	}
	s, err := stringify(goja.Undefined(), res)
	if err != nil || goja.IsUndefined(s) {
		return nil, false, err
	}
	var v any
	if err := json.Unmarshal([]byte(s.String()), &v); err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// bindUDFs adds container st's user-defined functions to a query's parameters when the query
// calls any.
func (e *Emulator) bindUDFs(q *query.Query, params map[string]any, st *collState) (map[string]any, error) {
	if len(q.UDFNames()) == 0 {
		return params, nil
	}
	fn, err := e.udfCaller(st)
	if err != nil {
		return nil, err
	}
	return query.WithUDFs(params, fn), nil
}
