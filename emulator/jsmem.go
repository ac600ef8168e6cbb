package emulator

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// Memory bounds of scripts (stored procedures, triggers, user-defined functions). goja has no
// memory limit of its own, and one script could take the whole process down in a second: a
// string doubled in a loop, or one builtin call that allocates gigabytes at once
// ('x'.repeat(1e12), which is a fatal out-of-memory error of the Go runtime, not a panic).
//
// Two guards: the builtins that build one string of a length their arguments give (repeat,
// padStart, padEnd, Array.prototype.join) throw a RangeError past maxScriptString characters,
// as V8 throws "Invalid string length" past its own limit (no watcher of the heap can catch one
// allocation of a terabyte); and while a script runs, a watcher samples the process's heap and
// interrupts it once the heap has grown more than maxScriptMemory: jsRun.watchMemory for stored
// procedures and triggers, watchScriptMemory here for each call of a UDF (a garbage collection
// first tells garbage from what the UDF holds, as a query's runtime serves many calls). The
// script then fails with 400 and none of its writes are committed.

const (
	// maxScriptString is the longest string one builtin call may build (V8's limit is 2^29-24).
	maxScriptString = 1 << 27
	// scriptMemoryPoll is how often the watcher of a UDF's call samples the heap.
	scriptMemoryPoll = 5 * time.Millisecond
)

// newScriptVM returns a JavaScript runtime for scripts, with the call-stack and string bounds.
func newScriptVM() *goja.Runtime {
	vm := goja.New()
	vm.SetMaxCallStackSize(2000)
	guardStringBuilders(vm)
	return vm
}

// guardStringBuilders wraps the builtins whose result length their arguments set.
func guardStringBuilders(vm *goja.Runtime) {
	tooLong := func(n float64) {
		if n > maxScriptString {
			ctor, _ := goja.AssertConstructor(vm.Get("RangeError"))
			obj, _ := ctor(nil, vm.ToValue("Invalid string length"))
			panic(obj)
		}
	}
	thisLen := func(call goja.FunctionCall) float64 {
		if goja.IsUndefined(call.This) || goja.IsNull(call.This) {
			return 0
		}
		return float64(len(call.This.String()))
	}
	wrap := func(ctor, name string, check func(goja.FunctionCall)) {
		proto := vm.Get(ctor).ToObject(vm).Get("prototype").ToObject(vm)
		orig, ok := goja.AssertFunction(proto.Get(name))
		if !ok {
			return
		}
		f := vm.ToValue(func(call goja.FunctionCall) goja.Value {
			check(call)
			v, err := orig(call.This, call.Arguments...)
			if err != nil {
				panic(err)
			}
			return v
		})
		_ = proto.DefineDataProperty(name, f, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
	wrap("String", "repeat", func(call goja.FunctionCall) {
		if n := call.Argument(0).ToFloat(); n > 0 {
			tooLong(thisLen(call) * n)
		}
	})
	pad := func(call goja.FunctionCall) { tooLong(call.Argument(0).ToFloat()) }
	wrap("String", "padStart", pad)
	wrap("String", "padEnd", pad)
	wrap("Array", "join", func(call goja.FunctionCall) {
		if goja.IsUndefined(call.This) || goja.IsNull(call.This) {
			return
		}
		n := call.This.ToObject(vm).Get("length").ToFloat()
		sep := 1.0
		if s := call.Argument(0); !goja.IsUndefined(s) {
			sep = float64(len(s.String()))
		}
		tooLong((n - 1) * sep)
	})
}

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
var heapSampleMu sync.Mutex

// heapBytes is the memory of the heap's objects, live or not yet swept.
func heapBytes() uint64 {
	heapSampleMu.Lock()
	defer heapSampleMu.Unlock()
	metrics.Read(heapSample)
	if heapSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return heapSample[0].Value.Uint64()
}

// watchScriptMemory interrupts vm with errScriptMemory when the heap grows past
// maxScriptMemory from now on; the returned function stops the watch and reports whether it
// interrupted.
func watchScriptMemory(vm *goja.Runtime) func() bool {
	base := heapBytes()
	done := make(chan struct{})
	fired := make(chan bool, 1)
	go func() {
		t := time.NewTicker(scriptMemoryPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				fired <- false
				return
			case <-t.C:
			}
			if heapBytes() < base+maxScriptMemory {
				continue
			}
			runtime.GC() // what remains is held
			if heapBytes() >= base+maxScriptMemory {
				vm.Interrupt(errScriptMemory)
				<-done
				fired <- true
				return
			}
		}
	}()
	return func() bool {
		close(done)
		return <-fired
	}
}
