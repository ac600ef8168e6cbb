package sim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// errCutOff is what a killed host's requests get: the process is gone, nothing it sends arrives.
var errCutOff = errors.New("connection refused")

// errLostAnswer is the answer of a write the service applied but whose response never came
// back (a timeout): the caller cannot tell whether it happened.
var errLostAnswer = errors.New("request timed out after it was sent")

// hostState is a host's process state as its wrappers see it.
type hostState int

const (
	running hostState = iota
	paused            // frozen: every request and every handler call blocks until resumed
	dead              // killed: every request fails, no handler call is recorded
)

// faultKind is an injected answer.
type faultKind int

const (
	faultNone        faultKind = iota
	faultLease429              // lease operations answer 429
	faultLease503              // lease operations answer 503
	faultLease412              // lease writes answer 412 without being applied
	faultLeaseLost             // lease writes are applied but answer a timeout
	faultFeed429               // change feed reads answer 429
	faultFeed503               // change feed reads answer 503
	faultFeed410               // change feed reads answer 410 with a stale-route substatus
	faultHandlerErr            // the handler fails
	faultHandlerSlow           // the handler takes slowHandler per batch
	numFaults
)

var faultNames = [...]string{"none", "lease-429", "lease-503", "lease-412", "lease-answer-lost", "feed-429", "feed-503", "feed-410", "handler-error", "handler-slow"}

func (f faultKind) String() string { return faultNames[f] }

// slowHandler is how long a handler takes under faultHandlerSlow.
const slowHandler = 2 * time.Second

// hostIO is the wire of one host: its gate (running, paused, dead) and the fault it is being
// answered with. Every request of the host's source and lease store passes through it.
type hostIO struct {
	name    string
	log     func(format string, args ...any) // Options.Requests: every request, as it passes
	mu      sync.Mutex
	state   hostState
	waiting []waiter // the requests frozen by a pause
	fault   faultKind
}

// waiter is a request frozen by a pause, named by what it asks (the operation and its
// document, partition or lease), so that a resume releases the frozen requests one at a time
// in the order of their names, not all at once in the scheduler's (order.go).
type waiter struct {
	key  string
	wake chan struct{}
}

// newHostIO is host name's wire.
func (w *World) newHostIO(name string) *hostIO {
	g := &hostIO{name: name}
	if w.requests {
		g.log = w.logf
	}
	return g
}

// enter waits while the host is paused (ignoring ctx: a frozen process does not look at its
// deadlines) and fails once it is dead. It returns the fault in force. key names the request.
func (g *hostIO) enter(key string) (faultKind, error) {
	if g.log != nil {
		g.log("request %s %.160s", g.name, key)
	}
	for {
		g.mu.Lock()
		switch g.state {
		case running:
			f := g.fault
			g.mu.Unlock()
			return f, nil
		case dead:
			g.mu.Unlock()
			return faultNone, errCutOff
		}
		wt := waiter{key: key + "\x00" + callers(), wake: make(chan struct{})}
		g.waiting = append(g.waiting, wt)
		g.mu.Unlock()
		<-wt.wake
	}
}

// set changes the host's state; leaving a pause releases the frozen requests in the order of
// their names, each running to a stop before the next. Only the driver calls it.
func (g *hostIO) set(s hostState) {
	g.mu.Lock()
	var release []waiter
	if g.state == paused && s != paused {
		release, g.waiting = g.waiting, nil
	}
	g.state = s
	g.mu.Unlock()
	slices.SortStableFunc(release, func(a, b waiter) int { return strings.Compare(a.key, b.key) })
	for _, wt := range release {
		close(wt.wake)
		synctest.Wait()
	}
}

func (g *hostIO) get() hostState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state
}

func (g *hostIO) setFault(f faultKind) {
	g.mu.Lock()
	g.fault = f
	g.mu.Unlock()
}

func throttled(status int) error {
	return &feed.ThrottledError{Status: status, RetryAfter: 200 * time.Millisecond}
}

// faultDocs is one host's view of the lease container.
type faultDocs struct {
	docs leases.Documents
	io   *hostIO
	// latency is the delay of a write, by what it asks (World.writeLatency).
	latency func(what ...[]byte) time.Duration
	// lostWrite, when set, is told of each lease write applied whose answer was lost
	// (stranded.go).
	lostWrite func(leases.Document)
}

// delay waits out a write's latency (before its gate, so that a host frozen or killed
// meanwhile does not write). The caller's code path is part of what the latency is drawn
// from: two goroutines of one host may send the same write at one instant (a resumed Java
// host's renewer, checkpoint and balancer each write the lease it cached), and the one whose
// write lands first wins it, the others get a 412.
func (d *faultDocs) delay(what ...[]byte) {
	if d.latency != nil {
		l := d.latency(append(what, []byte(callers()))...)
		if d.io.log != nil {
			d.io.log("latency %s %s %s %s", d.io.name, l, what[0], what[1])
		}
		time.Sleep(l)
	}
}

// callers names the code path of the request being made: the functions on the calling
// goroutine's stack outside this package, innermost first. Function names, not lines, so that
// an unrelated edit does not change the schedule a seed plays.
func callers() string {
	var pcs [32]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	var b strings.Builder
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, simPkg) {
			b.WriteString(f.Function)
			b.WriteByte(';')
		}
		if !more {
			return b.String()
		}
	}
}

// simPkg prefixes the functions of this package (its wrappers, the world, the driver).
const simPkg = "github.com/cfp-dev/cfp/internal/feed/sim."

var _ leases.Documents = (*faultDocs)(nil)

// before passes the gate and returns the injected error of an operation, if any; write says
// whether the operation writes, lost whether it must be applied before failing.
func (d *faultDocs) before(key string, write bool) (lost bool, err error) {
	f, err := d.io.enter(key)
	if err != nil {
		return false, err
	}
	switch f {
	case faultLease429:
		return false, throttled(http.StatusTooManyRequests)
	case faultLease503:
		return false, throttled(http.StatusServiceUnavailable)
	case faultLease412:
		if write {
			return false, leases.ErrPreconditionFailed
		}
	case faultLeaseLost:
		if write {
			return true, nil
		}
	}
	return false, nil
}

func (d *faultDocs) PartitionKeyPath(ctx context.Context) (string, error) {
	if _, err := d.before("pkpath", false); err != nil {
		return "", err
	}
	return d.docs.PartitionKeyPath(ctx)
}

func (d *faultDocs) QueryPrefix(ctx context.Context, prefix string) ([]leases.Document, error) {
	if _, err := d.before("query "+prefix, false); err != nil {
		return nil, err
	}
	return d.docs.QueryPrefix(ctx, prefix)
}

func (d *faultDocs) Read(ctx context.Context, id, pk string) (leases.Document, error) {
	if _, err := d.before("read "+id, false); err != nil {
		return leases.Document{}, err
	}
	return d.docs.Read(ctx, id, pk)
}

func (d *faultDocs) Create(ctx context.Context, pk string, body []byte) (leases.Document, error) {
	d.delay([]byte("create"), []byte(pk), body)
	lost, err := d.before("create "+pk+" "+string(body), true)
	if err != nil {
		return leases.Document{}, err
	}
	doc, err := d.docs.Create(ctx, pk, body)
	if lost && err == nil {
		return leases.Document{}, errLostAnswer
	}
	return doc, err
}

func (d *faultDocs) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	d.delay([]byte("replace"), []byte(id), []byte(ifMatch), body)
	lost, err := d.before("replace "+id, true)
	if err != nil {
		return leases.Document{}, err
	}
	doc, err := d.docs.Replace(ctx, id, pk, ifMatch, body)
	if lost && err == nil {
		if d.lostWrite != nil {
			d.lostWrite(doc)
		}
		return leases.Document{}, errLostAnswer
	}
	return doc, err
}

func (d *faultDocs) Delete(ctx context.Context, id, pk, ifMatch string) error {
	d.delay([]byte("delete"), []byte(id), []byte(ifMatch))
	lost, err := d.before("delete "+id, true)
	if err != nil {
		return err
	}
	err = d.docs.Delete(ctx, id, pk, ifMatch)
	if lost && err == nil {
		return errLostAnswer
	}
	return err
}

// faultSource is one host's view of the change feed.
type faultSource struct {
	src feed.Source
	io  *hostIO
	// throttled, when set (cfp hosts), notes each read's answer: throttled or not
	// (readbackoff.go).
	throttled func(read string, throttled bool)
}

var _ feed.Source = (*faultSource)(nil)

func (s *faultSource) Partitions(ctx context.Context) ([]feed.Partition, error) {
	if _, err := s.io.enter("partitions"); err != nil {
		return nil, err
	}
	return s.src.Partitions(ctx)
}

func (s *faultSource) ReadPage(ctx context.Context, req feed.ReadRequest) (feed.Page, error) {
	key := fmt.Sprintf("page %s %v %+v", req.PartitionID, req.Range, req.Start)
	f, err := s.io.enter(key)
	if err != nil {
		return feed.Page{}, err
	}
	if s.throttled != nil {
		s.throttled(fmt.Sprintf("%s %v", req.PartitionID, req.Range), f == faultFeed429 || f == faultFeed503)
	}
	switch f {
	case faultFeed429:
		return feed.Page{}, throttled(http.StatusTooManyRequests)
	case faultFeed503:
		return feed.Page{}, throttled(http.StatusServiceUnavailable)
	case faultFeed410:
		return feed.Page{}, &feed.StaleRouteError{PartitionID: req.PartitionID, Substatus: 1000}
	}
	page, err := s.src.ReadPage(ctx, req)
	if err != nil {
		return page, err
	}
	// A page read before a pause is handed over after it, as a frozen process does.
	if _, err := s.io.enter(key); err != nil {
		return feed.Page{}, err
	}
	return page, nil
}
