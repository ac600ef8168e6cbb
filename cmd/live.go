package cmd

import (
	"bytes"
	"sync"

	"github.com/cfp-dev/cfp/internal/render"
)

// The sort orders of the live lease views, the first the default.
var (
	demoSorts = []render.LiveSort{{Key: "r", Name: render.SortRange}, {Key: "l", Name: render.SortLag},
		{Key: "o", Name: render.SortOwner}}
	estimateSorts = []render.LiveSort{{Key: "r", Name: render.SortRange}, {Key: "l", Name: render.SortLag},
		{Key: "t", Name: render.SortTimeLag}, {Key: "o", Name: render.SortOwner}}
)

// heldStderr keeps what cfp writes to stderr while a live view owns the terminal (warnings,
// logs), which would otherwise land in the middle of the frame; it is written out after.
type heldStderr struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (h *heldStderr) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.Write(p)
}

// holdStderr sends the factory's stderr and logger to a buffer until the returned function
// is called, which restores them and writes out what was held.
func (f *factory) holdStderr() (release func()) {
	orig, origLog := f.IO.ErrOut, f.Log
	held := &heldStderr{}
	f.IO.ErrOut = held
	f.Log = f.newLogger()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.IO.ErrOut, f.Log = orig, origLog
			held.mu.Lock()
			defer held.mu.Unlock()
			_, _ = orig.Write(held.buf.Bytes())
		})
	}
}
