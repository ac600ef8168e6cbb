// Package javatest is a model of the Java v4 SDK's change feed processor host, the EPK lease
// family that ChangeFeedProcessorBuilder.handleLatestVersionChanges builds (azure-cosmos,
// sdk/cosmos/azure-cosmos/src/main/java/com/azure/cosmos/implementation/changefeed/ in
// Azure/azure-sdk-for-java; below, paths are relative to it), for tests of mixed deployments:
// cfp hosts and Java hosts on one lease set. It follows the Java host step by step: bootstrap
// with .lock and .info (epkversion/BootstrapperImpl, LeaseStoreImpl), the lease documents of
// ServiceItemLeaseV1, EqualPartitionsBalancingStrategy (it takes an expired lease even at its
// share, and steals one lease at a time), the lease updater's If-Match with its retry that
// rewrites its own cached copy after a 412, the renewer (a full interval before the first
// renewal), the partition processor's checkpoint after every page with changes and after an
// empty page whose continuation moved, the supervisor's release of a lease whose reads stalled
// for 25 renew intervals, and the split and merge handlers (FeedRangeGoneSplitHandler,
// FeedRangeGoneMergeHandler). It runs over leases.Documents and feed.Source, as the .NET model
// does.
//
// Where the repository's history and the 4.81.0 release differ, the model follows 4.81.0 (the
// version the peer tests run, test/peers/java/pom.xml), read from its classes with javap: the
// partition processor skips the checkpoint of an empty page whose continuation did not change
// (PartitionProcessorImpl, hasServerContinuationTokenChange), and stamps lastProcessedTime on
// every response.
package javatest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Java's defaults (models/ChangeFeedProcessorOptions.java: DEFAULT_RENEW_INTERVAL,
// DEFAULT_ACQUIRE_INTERVAL, DEFAULT_EXPIRATION_INTERVAL, DEFAULT_FEED_POLL_DELAY).
const (
	DefaultAcquireInterval = 13 * time.Second
	DefaultRenewInterval   = 17 * time.Second
	DefaultExpiration      = 60 * time.Second
	DefaultPollDelay       = 5 * time.Second
	DefaultLockTime        = 30 * time.Second
	DefaultSleepTime       = 15 * time.Second
)

// verificationFactor is PartitionSupervisorImpl.VERIFICATION_FACTOR: a supervisor whose
// processor saw no response for this many renew intervals (in whole seconds) stops, and the
// lease is released.
const verificationFactor = 25

// supervisorTick is the supervisor's and the loops' 100 ms polling step
// (Mono.delayElement(Duration.ofMillis(100)) in PartitionSupervisorImpl.run,
// LeaseRenewerImpl.run, PartitionLoadBalancerImpl.run).
const supervisorTick = 100 * time.Millisecond

// Batch is one page handed to the handler.
type Batch struct {
	Token        string
	Items        [][]byte
	Continuation string
}

// Options configures a Host. Zero durations take Java's defaults.
type Options struct {
	// Instance is the host name (ChangeFeedProcessorBuilder.hostName), written as Owner.
	Instance string
	// Prefix is the lease prefix (the processor's lease prefix and the container's ids).
	Prefix string
	// Rid is the monitored container's rid, written in the states (ChangeFeedStateV1.Rid).
	Rid string
	// AcquireInterval, RenewInterval, Expiration and PollDelay are the processor options.
	AcquireInterval, RenewInterval, Expiration, PollDelay time.Duration
	// LockTime is the bootstrap lock's ttl and SleepTime the wait when another host holds it.
	LockTime, SleepTime time.Duration
	// MaxItems is the max item count (0: the service's default page size).
	MaxItems int
	// MaxPartitionCount caps the leases the host takes (0: none): with a cap the host no
	// longer takes an expired lease past its share.
	MaxPartitionCount int
	// StartFromBeginning starts leases without a continuation from the beginning, otherwise
	// from now (the time a lease is first read).
	StartFromBeginning bool
	// Handle processes a batch; an error ends the lease's processing (ObserverException), and
	// the lease is released.
	Handle func(ctx context.Context, b Batch) error
	// Now is Instant.now() (default time.Now).
	Now func() time.Time
	// Trace receives the host's log lines.
	Trace func(format string, args ...any)
	// Rand picks among expired leases (java.util.Random); default a fixed seed.
	Rand *rand.Rand
	// CheckpointEveryEmptyPage checkpoints every empty page, its continuation moved or not,
	// as the repository's history did before 4.81.0's hasServerContinuationTokenChange (a
	// write of each idle lease every poll delay).
	CheckpointEveryEmptyPage bool
	// HandledGone, when set, is told of every split the host handled: the gone lease's token
	// and range and the child leases it created.
	HandledGone func(token string, gone leases.Range, created []leases.Range)
	// ReleaseFailed, when set, is told of every lease the host stopped processing whose release
	// failed (a lost lease included): the document may still name the host, which reads it no
	// more (the simulation counts it stranded until it expires).
	ReleaseFailed func(token string, err error)
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.AcquireInterval, DefaultAcquireInterval)
	def(&o.RenewInterval, DefaultRenewInterval)
	def(&o.Expiration, DefaultExpiration)
	def(&o.PollDelay, DefaultPollDelay)
	def(&o.LockTime, DefaultLockTime)
	def(&o.SleepTime, DefaultSleepTime)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Handle == nil {
		o.Handle = func(context.Context, Batch) error { return nil }
	}
	if o.Trace == nil {
		o.Trace = func(string, ...any) {}
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(1, 2))
	}
	if o.Rid == "" {
		o.Rid = "coll"
	}
	return o
}

// Host is one Java change feed processor instance (EPK leases, latest version).
type Host struct {
	src  feed.Source
	docs leases.Documents
	opts Options

	lockETag string

	mu      sync.Mutex
	owned   map[string]*worker // currentlyOwnedPartitions
	errs    []error
	cycles  int
	writes  map[string]int // lease writes by kind: acquire, renew, checkpoint, release, other
	killed  bool
	randMu  sync.Mutex
	stopped bool

	balancerStop context.CancelFunc
	balancerDone chan struct{}
	shutdownCtx  context.Context
	shutdown     context.CancelFunc
	wg           sync.WaitGroup
}

// worker is WorkerTask: one supervisor's job.
type worker struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (w *worker) running() bool {
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

// New returns a host over src whose leases live in docs (a container partitioned on /id:
// Java accepts no other).
func New(src feed.Source, docs leases.Documents, opts Options) *Host {
	return &Host{src: src, docs: docs, opts: opts.withDefaults(), owned: map[string]*worker{}, writes: map[string]int{}}
}

// ErrModeSwitch is the IllegalStateException of a lease set in another mode.
var ErrModeSwitch = errors.New("change feed mode in the pre-existing lease differs")

// Start is ChangeFeedProcessorImplBase.start: the bootstrapper, then PartitionManagerImpl.start
// (the controller loads the leases this host owns, then the balancer starts).
func (h *Host) Start(ctx context.Context) error {
	if err := h.initialize(ctx); err != nil {
		return err
	}
	h.shutdownCtx, h.shutdown = context.WithCancel(context.WithoutCancel(ctx))
	if err := h.loadLeases(ctx); err != nil {
		return err
	}
	bctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h.balancerStop, h.balancerDone = stop, make(chan struct{})
	go h.balance(bctx)
	return nil
}

// Stop stops the balancer and cancels every supervisor (PartitionControllerImpl.shutdown);
// each releases its lease. Java's stop does not wait for the releases ("TODO: wait for the
// threads to finish"); the model does, so that a test sees them.
func (h *Host) Stop() {
	if h.balancerStop == nil {
		return
	}
	h.balancerStop()
	<-h.balancerDone
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
	h.shutdown()
	h.wg.Wait()
}

// Kill abandons the host as a killed process: every loop stops and nothing more is written.
func (h *Host) Kill() {
	h.mu.Lock()
	h.killed = true
	h.mu.Unlock()
	if h.balancerStop == nil {
		return
	}
	h.balancerStop()
	<-h.balancerDone
	h.shutdown()
	h.wg.Wait()
}

func (h *Host) isKilled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.killed
}

// Owned returns the tokens of the leases the host processes now, sorted.
func (h *Host) Owned() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for t, w := range h.owned {
		if w.running() {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// Cycles returns how many balancer iterations the host completed.
func (h *Host) Cycles() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cycles
}

// Writes returns how many lease writes (replaces) of each kind the host sent: "acquire",
// "renew", "checkpoint", "release", "properties".
func (h *Host) Writes() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.writes))
	for k, v := range h.writes {
		out[k] = v
	}
	return out
}

// Errors returns what the host logged as errors.
func (h *Host) Errors() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}

func (h *Host) notifyError(token string, err error) {
	h.mu.Lock()
	h.errs = append(h.errs, fmt.Errorf("lease %s: %w", token, err))
	h.mu.Unlock()
	h.opts.Trace("lease %s: error: %v", token, err)
}

func (h *Host) now() time.Time { return h.opts.Now().UTC() }

// ---- epkversion/BootstrapperImpl.java and LeaseStoreImpl.java

// initialize is BootstrapperImpl.initialize: repeat until .info exists: take the lock (a 409:
// wait sleepTime), create the missing leases, mark the store initialized (a 409 there is
// fine), release the lock. Errors of the lease creation are swallowed
// (PartitionSynchronizerImpl.createMissingLeases: "Create lease failed"), so .info can be
// written over a partial set. Once initialized, the first lease with a continuation must be
// in this host's mode (validateLeaseCFModeInteroperabilityForEpkRangeBasedLease).
func (h *Host) initialize(ctx context.Context) error {
	for {
		ok, err := h.isInitialized(ctx)
		if err != nil {
			return err
		}
		if ok {
			return h.validateMode(ctx)
		}
		locked, err := h.acquireInitializationLock(ctx)
		if err != nil {
			// onErrorResume: "Unexpected exception caught while initializing the lock".
			h.opts.Trace("Unexpected exception caught while initializing the lock: %v", err)
			locked = false
		}
		if !locked {
			h.opts.Trace("Another instance is initializing the store")
			if err := sleep(ctx, h.opts.SleepTime); err != nil {
				return err
			}
			continue
		}
		if err := h.createMissingLeases(ctx); err != nil {
			h.opts.Trace("Create lease failed: %v", err)
		}
		h.markInitialized(ctx)
		if err := h.releaseInitializationLock(ctx); err != nil {
			return err
		}
	}
}

func (h *Host) isInitialized(ctx context.Context) (bool, error) {
	id := h.opts.Prefix + ".info"
	_, err := h.docs.Read(ctx, id, id)
	if errors.Is(err, leases.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (h *Host) markInitialized(ctx context.Context) {
	id := h.opts.Prefix + ".info"
	if _, err := h.docs.Create(ctx, id, fmt.Appendf(nil, `{"id":%q}`, id)); err != nil && !errors.Is(err, leases.ErrConflict) {
		h.opts.Trace("Unexpected exception thrown: %v", err)
	}
}

func (h *Host) acquireInitializationLock(ctx context.Context) (bool, error) {
	id := h.opts.Prefix + ".lock"
	d, err := h.docs.Create(ctx, id, fmt.Appendf(nil, `{"id":%q,"ttl":%d}`, id, int(h.opts.LockTime/time.Second)))
	if errors.Is(err, leases.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h.lockETag = d.ETag
	return true, nil
}

// releaseInitializationLock deletes the lock with If-Match; a failure other than 409 fails
// the start.
func (h *Host) releaseInitializationLock(ctx context.Context) error {
	id := h.opts.Prefix + ".lock"
	err := h.docs.Delete(ctx, id, id, h.lockETag)
	if err == nil || errors.Is(err, leases.ErrConflict) {
		h.lockETag = ""
		return nil
	}
	return err
}

func (h *Host) validateMode(ctx context.Context) error {
	all, err := h.allLeases(ctx)
	if err != nil {
		return err
	}
	for _, l := range all {
		if l.Continuation == nil || *l.Continuation == "" {
			continue // SELECT TOP 1 ... AND c.ContinuationToken <> null
		}
		st, err := parseState(*l.Continuation)
		if err != nil {
			return err
		}
		if st.Mode != "INCREMENTAL" {
			return fmt.Errorf("%w: %s, not INCREMENTAL", ErrModeSwitch, st.Mode)
		}
		return nil
	}
	return nil
}

// createMissingLeases is PartitionSynchronizerImpl.createLeases: one lease with a null
// continuation per partition that no lease shares its min or max with.
func (h *Host) createMissingLeases(ctx context.Context) error {
	parts, err := h.src.Partitions(ctx)
	if err != nil {
		return err
	}
	all, err := h.allLeases(ctx)
	if err != nil {
		return err
	}
	for _, p := range parts {
		covered := false
		for _, l := range all {
			if l.FeedRange == nil {
				return errors.New("NullPointerException: a lease without feedRange")
			}
			if l.FeedRange.Min == p.Range.Min || l.FeedRange.Max == p.Range.Max {
				covered = true
			}
		}
		if covered {
			continue
		}
		if _, err := h.createLease(ctx, p.Range, nil); err != nil {
			return err
		}
	}
	return nil
}

// ---- epkversion/LeaseStoreManagerImpl.java and DocumentServiceLeaseUpdaterImpl.java

// createLease is createLeaseIfNotExist(FeedRangeEpkImpl, continuation): nil when another host
// created it (409). The lease it returns carries the created document's _etag.
func (h *Host) createLease(ctx context.Context, r leases.Range, cont *string) (*lease, error) {
	token := r.Min + "-" + r.Max
	l := &lease{ID: h.opts.Prefix + ".." + token, Token: token, Continuation: cont, Version: 1,
		FeedRange: &r, Timestamp: instantString(h.now()), Properties: map[string]string{}}
	body, err := l.encode()
	if err != nil {
		return nil, err
	}
	d, err := h.docs.Create(ctx, l.ID, body)
	if errors.Is(err, leases.ErrConflict) {
		h.opts.Trace("Some other host created lease for %s.", token)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l.ETag = d.ETag
	return l, nil
}

// errLeaseLost is LeaseLostException.
type errLeaseLost struct {
	token string
	gone  bool
}

func (e *errLeaseLost) Error() string {
	if e.gone {
		return fmt.Sprintf("lease %s is gone", e.token)
	}
	return fmt.Sprintf("lease %s was lost", e.token)
}

func isLost(err error) bool {
	var lost *errLeaseLost
	return errors.As(err, &lost)
}

// read is readItem + ServiceItemLeaseV1.fromDocument.
func (h *Host) read(ctx context.Context, l *lease) (*lease, error) {
	d, err := h.docs.Read(ctx, l.ID, l.ID)
	if err != nil {
		return nil, err
	}
	return decodeLease(d.Body, h.now())
}

// acquire is LeaseStoreManagerImpl.acquire: on the listed lease, lost if its owner changed
// since it was listed, then Owner = this host.
func (h *Host) acquire(ctx context.Context, l *lease) (*lease, error) {
	oldOwner := l.owner()
	props := l.Properties
	return h.update(ctx, "acquire", l, func(s *lease) error {
		if s.Owner != nil && !strings.EqualFold(s.owner(), oldOwner) {
			return &errLeaseLost{token: l.Token}
		}
		s.Owner = strPtr(h.opts.Instance)
		s.Properties = props
		return nil
	})
}

// release is LeaseStoreManagerImpl.release: read (a 404 is a lost lease), then Owner = null
// unless another host owns it.
func (h *Host) release(ctx context.Context, l *lease) error {
	fresh, err := h.read(ctx, l)
	if errors.Is(err, leases.ErrNotFound) {
		return &errLeaseLost{token: l.Token, gone: true}
	}
	if err != nil {
		return err
	}
	_, err = h.update(ctx, "release", fresh, func(s *lease) error {
		if s.Owner != nil && !strings.EqualFold(s.owner(), l.owner()) {
			return &errLeaseLost{token: l.Token}
		}
		s.Owner = nil
		return nil
	})
	return err
}

// ownedBy is the owner check of renew and checkpoint: a released lease is lost too.
func ownedBy(s *lease, owner string) error {
	if s.Owner == nil || !strings.EqualFold(s.owner(), owner) {
		return &errLeaseLost{token: s.Token}
	}
	return nil
}

// renew is LeaseStoreManagerImpl.renew: read (404: lost), then replace it unchanged.
func (h *Host) renew(ctx context.Context, l *lease) (*lease, error) {
	fresh, err := h.read(ctx, l)
	if errors.Is(err, leases.ErrNotFound) {
		return nil, &errLeaseLost{token: l.Token, gone: true}
	}
	if err != nil {
		return nil, err
	}
	return h.update(ctx, "renew", fresh, func(s *lease) error { return ownedBy(s, l.owner()) })
}

// checkpoint is LeaseStoreManagerImpl.checkpoint: read, then replace with the continuation.
// (Its read has no 404 branch: a deleted lease fails the checkpoint with the read's error.)
func (h *Host) checkpoint(ctx context.Context, l *lease, cont string) (*lease, error) {
	fresh, err := h.read(ctx, l)
	if err != nil {
		return nil, err
	}
	return h.update(ctx, "checkpoint", fresh, func(s *lease) error {
		if err := ownedBy(s, l.owner()); err != nil {
			return err
		}
		s.Continuation = strPtr(cont)
		return nil
	})
}

// updateProperties is LeaseStoreManagerImpl.updateProperties: on the lease as given.
func (h *Host) updateProperties(ctx context.Context, l *lease) (*lease, error) {
	if l.Owner != nil && !strings.EqualFold(l.owner(), h.opts.Instance) {
		return nil, &errLeaseLost{token: l.Token}
	}
	props := l.Properties
	return h.update(ctx, "properties", l, func(s *lease) error {
		if s.Owner != nil && !strings.EqualFold(s.owner(), l.owner()) {
			return &errLeaseLost{token: l.Token}
		}
		s.Properties = props
		return nil
	})
}

// delete is LeaseStoreManagerImpl.delete: no If-Match, a 404 is fine.
func (h *Host) delete(ctx context.Context, l *lease) error {
	err := h.docs.Delete(ctx, l.ID, l.ID, "")
	if errors.Is(err, leases.ErrNotFound) {
		return nil
	}
	return err
}

// retryCountOnConflict is DocumentServiceLeaseUpdaterImpl.RETRY_COUNT_ON_CONFLICT.
const retryCountOnConflict = 5

// update is DocumentServiceLeaseUpdaterImpl.updateLease: the change is applied once, to the
// cached lease, which gets a fresh timestamp and is replaced with If-Match on its _etag. After
// a 412 it re-reads the document only to check the owner (a 404 or another owner: lost) and to
// take its _etag, then replaces the document with its own cached copy again: a concurrent
// write of this host (a renew and a checkpoint) is overwritten, the checkpoint included. After
// five retries it gives up without an error and returns its cached copy. A 404 or 409 on the
// replace is a lost lease.
func (h *Host) update(ctx context.Context, kind string, cached *lease, change func(*lease) error) (*lease, error) {
	l := cached.clone()
	if err := change(l); err != nil {
		return nil, err
	}
	l.Timestamp = instantString(h.now())
	for attempt := 0; ; attempt++ {
		body, err := l.encode()
		if err != nil {
			return nil, err
		}
		d, err := h.docs.Replace(ctx, l.ID, l.ID, l.ETag, body)
		if err == nil {
			h.mu.Lock()
			h.writes[kind]++
			h.mu.Unlock()
			n, derr := decodeLease(d.Body, h.now())
			if derr != nil {
				return nil, derr
			}
			n.Properties = l.Properties
			return n, nil
		}
		switch {
		case errors.Is(err, leases.ErrNotFound):
			return nil, &errLeaseLost{token: l.Token, gone: true}
		case errors.Is(err, leases.ErrConflict):
			return nil, &errLeaseLost{token: l.Token}
		case !errors.Is(err, leases.ErrPreconditionFailed):
			return nil, err
		}
		server, err := h.read(ctx, l)
		if errors.Is(err, leases.ErrNotFound) {
			return nil, &errLeaseLost{token: l.Token, gone: true}
		}
		if err != nil {
			return nil, err
		}
		if server.Owner != nil && !strings.EqualFold(server.owner(), l.owner()) {
			return nil, &errLeaseLost{token: l.Token}
		}
		if attempt == retryCountOnConflict {
			h.opts.Trace("Lease %s failed to update due to lease conflict; keeping the cached copy", l.Token)
			return l, nil
		}
		l.Timestamp = instantString(h.now())
		l.ETag = server.ETag
	}
}

// allLeases is getAllLeases: SELECT * FROM c WHERE STARTSWITH(c.id, '<prefix>..'), every
// document through fromDocument (one that fails fails the listing).
func (h *Host) allLeases(ctx context.Context) ([]*lease, error) {
	docs, err := h.docs.QueryPrefix(ctx, h.opts.Prefix+"..")
	if err != nil {
		return nil, err
	}
	out := make([]*lease, 0, len(docs))
	for _, d := range docs {
		l, err := decodeLease(d.Body, h.now())
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// ---- epkversion/PartitionLoadBalancerImpl.java and common/EqualPartitionsBalancingStrategy.java

// balance is PartitionLoadBalancerImpl.run: list, select, add the selected leases one at a
// time (an error ends the iteration's adds), wait the acquire interval.
func (h *Host) balance(ctx context.Context) {
	defer close(h.balancerDone)
	for ctx.Err() == nil {
		all, err := h.allLeases(ctx)
		if err != nil {
			h.opts.Trace("Unexpected exception thrown while trying to acquire available leases: %v", err)
		} else {
			for _, l := range h.selectLeasesToTake(all) {
				if ctx.Err() != nil {
					break
				}
				if err := h.addOrUpdateLease(ctx, l); err != nil {
					h.opts.Trace("Unexpected exception thrown while trying to acquire available leases: %v", err)
					break
				}
			}
		}
		h.mu.Lock()
		h.cycles++
		h.mu.Unlock()
		if sleep(ctx, h.opts.AcquireInterval) != nil {
			return
		}
	}
}

// selectLeasesToTake is EqualPartitionsBalancingStrategy.selectLeasesToTake. Free and expired
// leases come first: with no maximum partition count the host takes one even when it already
// holds its share, and one at a time while other hosts own leases; only when none is free or
// expired does it steal, one lease from the host with the most, if that host holds more than
// the target (less one when this host needs more than one).
func (h *Host) selectLeasesToTake(all []*lease) []*lease {
	workerCount := map[string]int{}
	var workers []string // HashMap iteration order is not insertion order; ties go to the last seen
	var expired []*lease
	byToken := map[string]*lease{}
	var tokens []string
	for _, l := range all {
		if _, ok := byToken[l.Token]; !ok {
			tokens = append(tokens, l.Token)
		}
		byToken[l.Token] = l
		if l.owner() == "" || h.isExpired(l) {
			expired = append(expired, l)
			continue
		}
		if _, ok := workerCount[l.owner()]; !ok {
			workers = append(workers, l.owner())
		}
		workerCount[l.owner()]++
	}
	if _, ok := workerCount[h.opts.Instance]; !ok {
		workers = append(workers, h.opts.Instance)
		workerCount[h.opts.Instance] = 0
	}
	if len(byToken) == 0 {
		return nil
	}
	target := 1
	if n, w := len(byToken), len(workerCount); n > w {
		target = (n + w - 1) / w
	}
	if h.opts.MaxPartitionCount > 0 && target > h.opts.MaxPartitionCount {
		target = h.opts.MaxPartitionCount
	}
	mine := workerCount[h.opts.Instance]
	need := target - mine
	if len(expired) > 0 {
		if (h.opts.MaxPartitionCount == 0 && need <= 0) || (need > 1 && len(workerCount) > 1) {
			need = 1
		}
		if need == 1 {
			h.randMu.Lock()
			l := expired[h.opts.Rand.IntN(len(expired))]
			h.randMu.Unlock()
			h.opts.Trace("Found unused or expired lease %s (owner was %s); mine %d", l.Token, l.owner(), mine)
			return []*lease{l}
		}
		if need <= 0 {
			return nil
		}
		return expired[:min(need, len(expired))]
	}
	if need <= 0 {
		return nil
	}
	most, mostN := "", 0
	for _, w := range workers {
		if mostN <= workerCount[w] {
			most, mostN = w, workerCount[w]
		}
	}
	slack := 0
	if need > 1 {
		slack = 1
	}
	if mostN > target-slack {
		for _, t := range tokens {
			if strings.EqualFold(byToken[t].owner(), most) {
				return []*lease{byToken[t]}
			}
		}
	}
	return nil
}

// isExpired is EqualPartitionsBalancingStrategy.isExpired: timestamp + expiration before now,
// on this host's clock.
func (h *Host) isExpired(l *lease) bool {
	return l.timestamp().Add(h.opts.Expiration).Before(h.now())
}

// ---- epkversion/PartitionControllerImpl.java

// loadLeases is PartitionControllerImpl.loadLeases: the leases this host owns, added.
func (h *Host) loadLeases(ctx context.Context) error {
	all, err := h.allLeases(ctx)
	if err != nil {
		return err
	}
	for _, l := range all {
		if strings.EqualFold(l.owner(), h.opts.Instance) {
			_ = h.addOrUpdateLease(ctx, l)
		}
	}
	return nil
}

// addOrUpdateLease is PartitionControllerImpl.addOrUpdateLease: a lease whose worker runs gets
// its properties written (an error goes to the caller); otherwise it is acquired and a
// supervisor starts; a failed acquire removes (releases) the lease.
func (h *Host) addOrUpdateLease(ctx context.Context, l *lease) error {
	h.mu.Lock()
	if h.killed || h.shutdownCtx.Err() != nil {
		h.mu.Unlock()
		return context.Canceled
	}
	if w, ok := h.owned[l.Token]; ok && w.running() {
		h.mu.Unlock()
		_, err := h.updateProperties(ctx, l)
		return err
	}
	h.mu.Unlock()
	acquired, err := h.acquire(ctx, l)
	if err != nil {
		h.removeLease(l)
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.owned[l.Token]; ok && w.running() {
		return nil
	}
	wctx, cancel := context.WithCancel(h.shutdownCtx)
	w := &worker{cancel: cancel, done: make(chan struct{})}
	h.owned[l.Token] = w
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.runWorker(wctx, w, acquired)
	}()
	return nil
}

// removeLease is PartitionControllerImpl.removeLease: forget the worker (cancel it if it runs),
// release the lease; a lost lease or any failure is only logged.
func (h *Host) removeLease(l *lease) {
	h.mu.Lock()
	w := h.owned[l.Token]
	delete(h.owned, l.Token)
	killed := h.killed
	h.mu.Unlock()
	if w != nil && w.running() {
		w.cancel()
	}
	if killed {
		return
	}
	err := h.release(context.WithoutCancel(h.shutdownCtx), l)
	if err != nil && !isLost(err) {
		h.notifyError(l.Token, err)
	}
	if err != nil && h.opts.ReleaseFailed != nil {
		h.opts.ReleaseFailed(l.Token, err)
	}
}

// errGone is FeedRangeGoneException with its last continuation.
type errGone struct{ last *string }

func (e *errGone) Error() string { return "Partition split or merge." }

// runWorker is getWorkerJob: the supervisor runs; a gone range is handled; then the lease is
// removed (released), whatever ended the supervisor.
func (h *Host) runWorker(ctx context.Context, w *worker, l *lease) {
	err := h.supervise(ctx, l)
	if h.isKilled() {
		close(w.done)
		return
	}
	var gone *errGone
	if errors.As(err, &gone) {
		h.handleFeedRangeGone(l, gone.last, w)
	} else if err != nil && !errors.Is(err, context.Canceled) && !isLost(err) {
		h.notifyError(l.Token, err)
	}
	close(w.done)
	h.mu.Lock()
	if h.owned[l.Token] == w {
		delete(h.owned, l.Token)
	}
	h.mu.Unlock()
	err = h.release(context.WithoutCancel(h.shutdownCtx), l)
	if err != nil && !isLost(err) {
		h.notifyError(l.Token, err)
	}
	if err != nil && h.opts.ReleaseFailed != nil {
		h.opts.ReleaseFailed(l.Token, err)
	}
}

// handleFeedRangeGone is PartitionControllerImpl.handleFeedRangeGone with
// PartitionSynchronizerImpl.getFeedRangeGoneHandler: the lease takes the last continuation (in
// memory); a range over several partitions is a split: one lease per child range from the
// lease's min to its max, each with the parent's state narrowed to it (createLeaseIfNotExist,
// conditional), added (acquired) here, then the parent is deleted; a range in one partition is
// a merge: the same lease, kept (its properties written, which writes the cached copy and its
// continuation), then released with the others.
func (h *Host) handleFeedRangeGone(l *lease, last *string, w *worker) {
	ctx := context.WithoutCancel(h.shutdownCtx)
	if last != nil {
		l.Continuation = last
	}
	if l.FeedRange == nil {
		h.notifyError(l.Token, errors.New("ClassCastException: the lease has no feedRange"))
		return
	}
	parts, err := h.overlapping(ctx, *l.FeedRange)
	if err != nil {
		h.notifyError(l.Token, err)
		return
	}
	switch {
	case len(parts) == 0:
		//lint:ignore ST1005 the Java SDK's own message, word for word
		h.notifyError(l.Token, fmt.Errorf("Lease %s is gone but we failed to find at least one child partition", l.Token))
	case len(parts) > 1:
		lo, hi := l.FeedRange.Min, l.FeedRange.Max
		var ranges []leases.Range
		for i := 0; i < len(parts)-1; i++ {
			ranges = append(ranges, leases.Range{Min: lo, Max: parts[i].Range.Max})
			lo = parts[i].Range.Max
		}
		ranges = append(ranges, leases.Range{Min: lo, Max: hi})
		var created []leases.Range
		for _, r := range ranges {
			cont := childContinuation(l.Continuation, r)
			n, err := h.createLease(ctx, r, cont)
			if err != nil {
				h.notifyError(l.Token, fmt.Errorf("failed to handle partition gone: %w", err))
				return
			}
			if n == nil {
				continue
			}
			created = append(created, r)
			n.Properties = l.Properties
			if err := h.addOrUpdateLease(ctx, n); err != nil {
				h.opts.Trace("lease %s: child %s not acquired: %v", l.Token, n.Token, err)
			}
		}
		h.opts.Trace("Lease with token %s split into %d", l.Token, len(ranges))
		if h.opts.HandledGone != nil {
			h.opts.HandledGone(l.Token, *l.FeedRange, created)
		}
		if err := h.delete(ctx, l); err != nil {
			h.notifyError(l.Token, err)
		}
	default:
		h.opts.Trace("Lease %s redirected to %s", l.Token, parts[0].ID)
		// addOrUpdateLease finds this worker still running: updateProperties.
		if _, err := h.updateProperties(ctx, l); err != nil && !isLost(err) {
			h.notifyError(l.Token, err)
		}
	}
}

// childContinuation is FeedRangeGoneSplitHandler.getEffectiveChildLeaseContinuationToken: the
// parent's state with the child's range and the parent's token; null stays null.
func childContinuation(parent *string, r leases.Range) *string {
	if parent == nil || *parent == "" {
		return parent
	}
	st, err := parseState(*parent)
	if err != nil {
		return parent
	}
	st.Range = r
	return strPtr(st.String())
}

// overlapping is getOverlappingRanges: the live partitions sharing keys with r, by range.
func (h *Host) overlapping(ctx context.Context, r leases.Range) ([]feed.Partition, error) {
	parts, err := h.src.Partitions(ctx)
	if err != nil {
		return nil, err
	}
	var out []feed.Partition
	for _, p := range parts {
		if p.Range.Overlaps(r) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Range.Min < out[j].Range.Min })
	return out, nil
}

// ---- epkversion/PartitionSupervisorImpl.java, LeaseRenewerImpl.java, PartitionProcessorImpl.java

// supervise is PartitionSupervisorImpl.run: the processor and the renewer run; every 100 ms the
// supervisor checks whether to go on: not after a shutdown, nor once either ended with an
// error, nor when the processor saw no response for 25 renew intervals (whole seconds). Then it
// cancels both, without waiting for a batch in flight, and reports the processor's error first.
func (h *Host) supervise(ctx context.Context, l *lease) error {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	p := &processor{h: h, l: l, last: l.Continuation, more: true, lastProcessed: h.now()}
	r := &renewer{h: h, l: l}
	pdone, rdone := make(chan struct{}), make(chan struct{})
	go func() { defer close(pdone); p.run(cctx) }()
	go func() { defer close(rdone); r.run(cctx) }()
	limit := time.Duration(int64(h.opts.RenewInterval/time.Second)*verificationFactor) * time.Second
	t := time.NewTicker(supervisorTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-pdone:
		case <-rdone:
		case <-t.C:
		}
		if ctx.Err() != nil {
			return ctx.Err() // ready with another case: select picks at random, a replay must not
		}
		if idle := h.now().Sub(p.lastSeen()).Truncate(time.Second); idle > limit {
			h.opts.Trace("Lease with token %s: skipping renew as no batches processed.", l.Token)
			return nil
		}
		if perr := p.result(); perr != nil && !errors.Is(perr, context.Canceled) {
			return perr
		}
		if rerr := r.result(); rerr != nil {
			return rerr
		}
	}
}

// renewer is LeaseRenewerImpl: a full renew interval, then a renewal, repeated; a lost lease
// ends it, other failures are logged.
type renewer struct {
	h   *Host
	l   *lease
	mu  sync.Mutex
	err error
}

func (r *renewer) result() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *renewer) run(ctx context.Context) {
	cur := r.l
	for {
		if sleep(ctx, r.h.opts.RenewInterval) != nil {
			return
		}
		n, err := r.h.renew(ctx, cur)
		switch {
		case isLost(err):
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			r.h.opts.Trace("Lease with token %s: failed to renew lease: %v", cur.Token, err)
		default:
			cur = n
		}
	}
}

// processor is PartitionProcessorImpl.
type processor struct {
	h *Host
	l *lease

	mu            sync.Mutex
	last          *string // lastServerContinuationToken
	more          bool    // hasMoreResults
	lastProcessed time.Time
	err           error
}

func (p *processor) result() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *processor) lastSeen() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastProcessed
}

func (p *processor) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
}

// run reads the lease's range from its state (else the start option); after a response with
// changes it reads again at once, after one without it waits the poll delay. A page with
// changes goes to the handler and is checkpointed (the default observer checkpoints after
// processChanges); an empty page is checkpointed only when its continuation differs from the
// last one or the response said more results follow (4.81.0). A 429 with a retry-after waits
// and reads again; a gone range ends with FeedRangeGoneException; any other failure, a failed
// handler or a lost checkpoint ends the processing.
func (p *processor) run(ctx context.Context) {
	h := p.h
	cp := p.l
	for {
		if ctx.Err() != nil {
			p.fail(ctx.Err())
			return
		}
		p.mu.Lock()
		more := p.more
		p.mu.Unlock()
		if !more {
			if sleep(ctx, h.opts.PollDelay) != nil {
				p.fail(ctx.Err())
				return
			}
		}
		page, err := p.read(ctx)
		switch {
		case err == nil:
		case errors.As(err, new(*errGone)) || feed.IsRangeGone(err):
			p.mu.Lock()
			last := p.last
			p.mu.Unlock()
			p.fail(&errGone{last: last})
			return
		default:
			var th *feed.ThrottledError
			if errors.As(err, &th) && th.Status == 429 && th.RetryAfter > 0 {
				if sleep(ctx, th.RetryAfter) != nil {
					p.fail(ctx.Err())
					return
				}
				continue
			}
			p.fail(err)
			return
		}
		st := state{Rid: h.opts.Rid, Mode: "INCREMENTAL", StartFrom: p.startFrom(), Token: page.Continuation, Range: *p.l.FeedRange}
		cont := st.String()
		p.mu.Lock()
		changed := p.last == nil || *p.last != cont
		p.last = strPtr(cont)
		p.more = !page.NotModified
		more = p.more
		p.lastProcessed = h.now()
		p.mu.Unlock()
		if len(page.Items) > 0 {
			items := make([][]byte, len(page.Items))
			for i, it := range page.Items {
				items[i] = it
			}
			if err := h.opts.Handle(ctx, Batch{Token: p.l.Token, Items: items, Continuation: page.Continuation}); err != nil {
				p.fail(fmt.Errorf("ObserverException: %w", err))
				return
			}
		} else if !changed && !more && !h.opts.CheckpointEveryEmptyPage {
			continue
		}
		if ctx.Err() != nil || h.isKilled() {
			p.fail(context.Canceled) // the checkpointer checks the cancellation first
			return
		}
		n, err := h.checkpoint(ctx, cp, cont)
		if err != nil {
			p.fail(err)
			return
		}
		cp = n
	}
}

func (p *processor) startFrom() string {
	if p.h.opts.StartFromBeginning {
		return "BEGINNING"
	}
	return "NOW"
}

// read resolves the lease's range to one partition (the SDK reads an EPK range from the
// partition that holds it, restricted to the range; a range over several partitions is gone)
// and reads one page from the state's token, or from the start.
func (p *processor) read(ctx context.Context) (feed.Page, error) {
	h := p.h
	if p.l.FeedRange == nil {
		return feed.Page{}, errors.New("NullPointerException: lease without feedRange")
	}
	parts, err := h.overlapping(ctx, *p.l.FeedRange)
	if err != nil {
		return feed.Page{}, err
	}
	if len(parts) != 1 {
		return feed.Page{}, &errGone{}
	}
	r := *p.l.FeedRange
	if parts[0].Range == r {
		r = leases.Range{}
	}
	req := feed.ReadRequest{PartitionID: parts[0].ID, Range: r, MaxItems: h.opts.MaxItems}
	p.mu.Lock()
	last := p.last
	p.mu.Unlock()
	var st state
	if last != nil && *last != "" {
		if st, err = parseState(*last); err != nil {
			return feed.Page{}, err
		}
	}
	switch {
	case st.Token != "":
		req.Start = feed.StartFrom{Kind: feed.StartContinuation, Continuation: st.Token}
	case st.StartFrom == "BEGINNING" || (st.StartFrom == "" && h.opts.StartFromBeginning):
		req.Start = feed.StartFrom{Kind: feed.StartBeginning}
	default:
		req.Start = feed.StartFrom{Kind: feed.StartNow}
	}
	return h.src.ReadPage(ctx, req)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
