package cmd

import (
	"bytes"
	"fmt"
	"io"
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
// logs, events, delegates' stderr), which would otherwise land in the middle of the frame; it
// is written out after. It keeps the last heldStderrMax bytes, whole lines, and counts the
// lines it let go: a view can run for days (cfp process). Before and after the view it
// passes what it gets straight to stderr.
type heldStderr struct {
	mu      sync.Mutex
	orig    io.Writer
	holding bool
	buf     bytes.Buffer
	dropped int
}

// heldStderrMax bounds what a live view holds of stderr.
const heldStderrMax = 1 << 20

func (h *heldStderr) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.holding {
		return h.orig.Write(p)
	}
	n, err := h.buf.Write(p)
	if over := h.buf.Len() - heldStderrMax; over > 0 {
		b := h.buf.Bytes()
		cut := over
		if i := bytes.IndexByte(b[over:], '\n'); i >= 0 {
			cut = over + i + 1
		}
		h.dropped += bytes.Count(b[:cut], []byte("\n"))
		h.buf.Next(cut)
	}
	return n, err
}

// holdStderr sends the factory's stderr and logger to a buffer until the returned function
// is called, which restores them and writes out what was held.
func (f *factory) holdStderr() (release func()) {
	hold, release := f.redirectStderr()
	hold()
	return release
}

// redirectStderr routes the factory's stderr and logger through a heldStderr that passes
// writes on until hold, and holds them from then until release, which writes out what was
// held and passes on again (writers taken from f.IO.ErrOut meanwhile, like a delegate's
// stderr, keep working after).
func (f *factory) redirectStderr() (hold, release func()) {
	orig, origLog := f.IO.ErrOut, f.Log
	held := &heldStderr{orig: orig}
	f.IO.ErrOut = held
	f.Log = f.newLogger()
	var once sync.Once
	hold = func() {
		held.mu.Lock()
		held.holding = true
		held.mu.Unlock()
	}
	release = func() {
		once.Do(func() {
			f.IO.ErrOut, f.Log = orig, origLog
			held.mu.Lock()
			defer held.mu.Unlock()
			if held.dropped > 0 {
				_, _ = fmt.Fprintf(orig, "cfp: %d earlier line(s) of stderr from while the live view was shown were left out\n", held.dropped)
			}
			_, _ = orig.Write(held.buf.Bytes())
			held.buf.Reset()
			held.holding = false
		})
	}
	return hold, release
}
