// Package dotnettest is a model of the .NET v3 change feed processor host
// (Microsoft.Azure.Cosmos/src/ChangeFeedProcessor in Azure/azure-cosmos-dotnet-v3) for tests of
// mixed deployments: cfp hosts and .NET hosts on one lease set. Host follows the .NET host's
// lease protocol step by step: bootstrap with the .lock and .info markers (and its failure on a
// 409 from .info), the equal-partitions balancing strategy, acquire with the FeedRange fill-in,
// renew, checkpoint with If-Match, split and merge handling and release on stop. It writes lease
// documents field for field as .NET's serializers do, over leases.Documents, so it runs against
// leases.MemDocuments and against the emulator. It reads the change feed through feed.Source and
// hands every non-empty page to a handler before it checkpoints the page's continuation.
//
// Each function names the .NET file and lines it follows (the repository's 2026-08 head).
package dotnettest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// .NET's defaults (Configuration/ChangeFeedLeaseOptions.cs:14-16,
// Bootstrapping/BootstrapperCore.cs:15-16, Configuration/ChangeFeedProcessorOptions.cs:16).
const (
	DefaultAcquireInterval = 13 * time.Second
	DefaultRenewInterval   = 17 * time.Second
	DefaultExpiration      = 60 * time.Second
	DefaultLockTime        = 30 * time.Second
	DefaultSleepTime       = 15 * time.Second
	DefaultPollDelay       = 5 * time.Second
)

// Batch is one page handed to the handler: ChangeFeedObserverContext.LeaseToken and the items.
type Batch struct {
	Token        string
	Items        []json.RawMessage
	Continuation string
}

// Options configures a Host. Zero durations take .NET's defaults; tests scale them down.
type Options struct {
	// Instance is the host name (WithInstanceName), written as Owner.
	Instance string
	// Prefix is the lease prefix: processor name, account host, "_", database rid, "_",
	// container rid (ChangeFeedProcessorCore.cs:136).
	Prefix string
	// AcquireInterval, RenewInterval and Expiration are the lease options (13s, 17s, 60s).
	AcquireInterval, RenewInterval, Expiration time.Duration
	// LockTime is the bootstrap lock's ttl (30s) and SleepTime the wait when another host holds
	// the lock (15s).
	LockTime, SleepTime time.Duration
	// PollDelay is the wait after a page with nothing new (5s).
	PollDelay time.Duration
	// MaxItems is MaxItemCount (0: the service's default page size).
	MaxItems int
	// StartFromBeginning starts leases without a continuation from the beginning; otherwise
	// they start at the time StartAsync ran, less one second (ChangeFeedProcessorCore.cs:93-104).
	StartFromBeginning bool
	// SlowBootstrap, when positive, is how long creating the missing leases takes while the
	// host holds the bootstrap lock (a throttled lease container, many partitions).
	SlowBootstrap time.Duration
	// Handle processes a batch; an error is an observer error (the lease is released, as
	// ChangeFeedProcessorUserException makes .NET do).
	Handle func(ctx context.Context, b Batch) error
	// Now is DateTime.UtcNow (default time.Now).
	Now func() time.Time
	// Trace, when set, receives the host's DefaultTrace lines.
	Trace func(format string, args ...any)
	// HandledGone, when set, is told of every gone lease the host handled, or tried to: the
	// gone lease's range and the ranges of the leases it created for it (none when they
	// existed; not called when an EPK lease was redirected). A failed attempt reports the
	// leases it created before it failed. The simulation attributes .NET's own overlaps with it.
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
	def(&o.LockTime, DefaultLockTime)
	def(&o.SleepTime, DefaultSleepTime)
	def(&o.PollDelay, DefaultPollDelay)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Handle == nil {
		o.Handle = func(context.Context, Batch) error { return nil }
	}
	if o.Trace == nil {
		o.Trace = func(string, ...any) {}
	}
	return o
}

// Host is one .NET change feed processor instance.
type Host struct {
	src  feed.Source
	docs leases.Documents
	opts Options

	pkPath    string
	lockETag  string
	startTime time.Time

	mu    sync.Mutex
	owned map[string]chan struct{} // currentlyOwnedPartitions: token -> done when removed
	errs  []error                  // NotifyErrorAsync

	cycles   int // balancer iterations completed
	acquired int // successful acquires

	balancerStop context.CancelFunc
	balancerDone chan struct{}
	shutdown     context.CancelFunc // shutdownCts
	shutdownCtx  context.Context
	killed       bool
	wg           sync.WaitGroup
}

// New returns a host over src whose leases live in docs.
func New(src feed.Source, docs leases.Documents, opts Options) *Host {
	return &Host{src: src, docs: docs, opts: opts.withDefaults(), owned: map[string]chan struct{}{}}
}

// ErrModeSwitch is the ArgumentException of a lease set in another mode.
var ErrModeSwitch = errors.New("mode switch refused")

// Start is ChangeFeedProcessorCore.StartAsync (ChangeFeedProcessorCore.cs:62-112): the mode
// check on the first lease (InitializeAsync, :128-163), then PartitionManagerCore.StartAsync
// (PartitionManagerCore.cs:23-28): bootstrap, load the leases this instance owns, start the
// balancer. An error here is the exception StartAsync throws.
func (h *Host) Start(ctx context.Context) error {
	path, err := h.docs.PartitionKeyPath(ctx)
	if err != nil {
		return err
	}
	h.pkPath = path
	h.startTime = h.opts.Now().Add(-time.Second)
	all, err := h.allLeases(ctx)
	if err != nil {
		return err
	}
	if len(all) > 0 {
		if err := verifyMode(all[0].Mode); err != nil {
			return err
		}
	}
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

// verifyMode is DocumentServiceLeaseManager.VerifyChangeFeedProcessorMode
// (LeaseManagement/DocumentServiceLeaseManager.cs:101-115) for an incremental processor.
func verifyMode(m *string) error {
	mode := ModeIncremental
	if m != nil {
		mode = *m
	}
	if !strings.EqualFold(mode, ModeIncremental) {
		return fmt.Errorf("%w: Switching ChangeFeedMode %s to %s is not allowed", ErrModeSwitch, mode, ModeIncremental)
	}
	return nil
}

// Stop is ChangeFeedProcessorCore.StopAsync -> PartitionManagerCore.StopAsync
// (PartitionManagerCore.cs:30-34): stop the balancer, then PartitionControllerCore.ShutdownAsync
// (PartitionControllerCore.cs:95-100): cancel every supervisor and wait until each released its
// lease.
func (h *Host) Stop() {
	if h.balancerStop == nil {
		return
	}
	h.balancerStop()
	<-h.balancerDone
	h.shutdown()
	h.wg.Wait()
}

// Kill abandons the host as a killed process does: every loop stops at once and nothing is
// released; its leases stay owned until they expire.
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
	out := make([]string, 0, len(h.owned))
	for t := range h.owned {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Cycles returns how many balancer iterations (acquire cycles) the host completed.
func (h *Host) Cycles() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cycles
}

// Acquired returns how many leases the host acquired so far.
func (h *Host) Acquired() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acquired
}

// Errors returns what the host reported to its health monitor (NotifyErrorAsync).
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

// pk is RequestOptionsFactory.GetPartitionKey: the id in an /id container
// (PartitionedByIdCollectionRequestOptionsFactory), the partitionKey property otherwise.
func (h *Host) pk(id string, partitionKey *string) string {
	switch h.pkPath {
	case "/id":
		return id
	case "/partitionKey":
		if partitionKey != nil {
			return *partitionKey
		}
		return id
	}
	return ""
}

// markerPK is AddPartitionKeyIfNeeded for a marker or a new lease: the id
// (IsChangeFeedLeaseIdAsPartitionKeyEnabled defaults to true, Util/ConfigurationManager.cs:326-332).
func (h *Host) markerPK(id string) *string {
	if h.pkPath == "/partitionKey" {
		return strPtr(id)
	}
	return nil
}

// ---- Bootstrapping/BootstrapperCore.cs and LeaseManagement/DocumentServiceLeaseStoreCosmos.cs

// initialize is BootstrapperCore.InitializeAsync (BootstrapperCore.cs:51-88).
func (h *Host) initialize(ctx context.Context) error {
	for {
		ok, err := h.isInitialized(ctx)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		locked, err := h.acquireInitializationLock(ctx)
		if err != nil {
			return err
		}
		if !locked {
			h.opts.Trace("Another instance is initializing the store")
			if err := sleep(ctx, h.opts.SleepTime); err != nil {
				return err
			}
			continue
		}
		err = func() error {
			defer h.releaseInitializationLock(context.WithoutCancel(ctx))
			h.opts.Trace("Initializing the store")
			if h.opts.SlowBootstrap > 0 {
				if err := sleep(ctx, h.opts.SlowBootstrap); err != nil {
					return err
				}
			}
			if err := h.createMissingLeases(ctx); err != nil {
				return err
			}
			return h.markInitialized(ctx)
		}()
		if err != nil {
			return err
		}
		break
	}
	h.opts.Trace("The store is initialized")
	return nil
}

// isInitialized is DocumentServiceLeaseStoreCosmos.IsInitializedAsync (:34-39).
func (h *Host) isInitialized(ctx context.Context) (bool, error) {
	id := h.opts.Prefix + ".info"
	_, err := h.docs.Read(ctx, id, h.pk(id, h.markerPK(id)))
	if errors.Is(err, leases.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// markerBody is LockDocument / InitializedDocument (:111-130): id, partitionKey when set, ttl.
func markerBody(id string, pk *string, ttl *int) []byte {
	m := map[string]any{"id": id}
	if pk != nil {
		m["partitionKey"] = *pk
	}
	if ttl != nil {
		m["ttl"] = *ttl
	}
	b, _ := json.Marshal(m)
	return b
}

// markInitialized is DocumentServiceLeaseStoreCosmos.MarkInitializedAsync (:41-57): a create
// whose failure, a 409 included, EnsureSuccessStatusCode turns into an exception.
func (h *Host) markInitialized(ctx context.Context) error {
	id := h.opts.Prefix + ".info"
	pk := h.markerPK(id)
	if _, err := h.docs.Create(ctx, h.pk(id, pk), markerBody(id, pk, nil)); err != nil {
		if errors.Is(err, leases.ErrConflict) {
			return fmt.Errorf("create %s: Response status code does not indicate success: Conflict (409): %w", id, err)
		}
		return fmt.Errorf("create %s: %w", id, err)
	}
	return nil
}

// acquireInitializationLock is AcquireInitializationLockAsync (:59-76): TryCreateItemAsync of
// {"id":"<prefix>.lock","ttl":<lockTime s>}; a 409 means another instance holds it.
func (h *Host) acquireInitializationLock(ctx context.Context) (bool, error) {
	id := h.opts.Prefix + ".lock"
	pk := h.markerPK(id)
	ttl := int(h.opts.LockTime / time.Second)
	d, err := h.docs.Create(ctx, h.pk(id, pk), markerBody(id, pk, &ttl))
	if errors.Is(err, leases.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h.lockETag = d.ETag
	return true, nil
}

// releaseInitializationLock is ReleaseInitializationLockAsync (:78-99): TryDeleteItemAsync with
// If-Match on the lock's ETag.
func (h *Host) releaseInitializationLock(ctx context.Context) {
	id := h.opts.Prefix + ".lock"
	if err := h.docs.Delete(ctx, id, h.pk(id, h.markerPK(id)), h.lockETag); err == nil {
		h.lockETag = ""
	}
}

// ---- Bootstrapping/PartitionSynchronizerCore.cs

// createMissingLeases is CreateMissingLeasesAsync and CreateLeasesAsync
// (PartitionSynchronizerCore.cs:49-58,198-235): one v0 lease without continuation per partition
// that has neither a PK-range lease named after it nor an EPK lease sharing its min or max.
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
		if len(all) > 0 && h.covered(all, p) {
			continue
		}
		if _, err := h.createPKRangeLease(ctx, p, nil); err != nil {
			return err
		}
	}
	return nil
}

func (h *Host) covered(all []*lease, p feed.Partition) bool {
	for _, l := range all {
		if !l.epk && l.LeaseToken == p.ID {
			return true
		}
		// Ordinal string equality, as .NET compares the bounds (:219-221).
		if l.epk && l.FeedRange != nil && (p.Range.Min == l.FeedRange.Min || p.Range.Max == l.FeedRange.Max) {
			return true
		}
	}
	return false
}

// handlePartitionGone is HandlePartitionGoneAsync (PartitionSynchronizerCore.cs:64-189): the
// leases to add and whether to delete the gone one.
func (h *Host) handlePartitionGone(ctx context.Context, l *lease) ([]*lease, bool, error) {
	if l.FeedRange == nil {
		// ((FeedRangeEpk)lease.FeedRange).Range on a lease whose range was never filled in (:78).
		return nil, false, errors.New("NullReferenceException: the lease has no FeedRange")
	}
	overlapping, err := h.overlapping(ctx, *l.FeedRange)
	if err != nil {
		return nil, false, err
	}
	if len(overlapping) == 0 {
		return nil, false, errors.New("InvalidOperationException: lease is gone but no child range was found")
	}
	cont := l.Continuation
	var added []*lease
	if !l.epk {
		if len(overlapping) > 1 {
			// Split (:104-119): one PK-range lease per child partition.
			for _, p := range overlapping {
				n, err := h.createPKRangeLease(ctx, p, cont)
				if err != nil {
					return added, false, err
				}
				if n != nil {
					added = append(added, n)
				}
			}
			h.opts.Trace("Lease %s split into %d", l.LeaseToken, len(added))
		} else {
			// Merge (:120-131): an EPK lease over the PK-range lease's range.
			n, err := h.createEPKLease(ctx, *l.FeedRange, cont)
			if err != nil {
				return nil, false, err
			}
			if n != nil {
				added = append(added, n)
			}
			h.opts.Trace("Lease %s merged into %s", l.LeaseToken, overlapping[0].ID)
		}
		return added, true, nil
	}
	if len(overlapping) > 1 {
		// Split of an EPK lease (:146-178): children from the lease's min to its max, cut at
		// the partitions' bounds.
		min, max := l.FeedRange.Min, l.FeedRange.Max
		for i := 0; i < len(overlapping)-1; i++ {
			n, err := h.createEPKLease(ctx, leases.Range{Min: min, Max: overlapping[i].Range.Max}, cont)
			if err != nil {
				return added, false, err
			}
			if n != nil {
				added = append(added, n)
			}
			min = overlapping[i].Range.Max
		}
		n, err := h.createEPKLease(ctx, leases.Range{Min: min, Max: max}, cont)
		if err != nil {
			return added, false, err
		}
		if n != nil {
			added = append(added, n)
		}
		return added, true, nil
	}
	// Redirected (:180-188): the same lease, not deleted.
	h.opts.Trace("Lease %s redirected to %s", l.LeaseToken, overlapping[0].ID)
	return []*lease{l}, false, nil
}

// overlapping is PartitionKeyRangeCache.TryGetOverlappingRangesAsync: the live partitions that
// share keys with r, sorted by range.
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
	return out, nil
}

// ---- LeaseManagement/DocumentServiceLeaseManagerCosmos.cs

// createPKRangeLease is CreateLeaseIfNotExistAsync(PartitionKeyRange, continuation)
// (DocumentServiceLeaseManagerCosmos.cs:113-138): nil when another host created it.
func (h *Host) createPKRangeLease(ctx context.Context, p feed.Partition, cont *string) (*lease, error) {
	r := p.Range
	l := &lease{ID: h.opts.Prefix + ".." + p.ID, LeaseToken: p.ID, Continuation: cont, FeedRange: &r,
		Mode: strPtr(ModeIncremental), Properties: map[string]string{}}
	l.PartitionKey = h.markerPK(l.ID)
	return h.tryCreate(ctx, l)
}

// createEPKLease is CreateLeaseIfNotExistAsync(FeedRangeEpk, continuation) (:140-165).
func (h *Host) createEPKLease(ctx context.Context, r leases.Range, cont *string) (*lease, error) {
	token := r.Min + "-" + r.Max
	l := &lease{epk: true, ID: h.opts.Prefix + ".." + token, LeaseToken: token, Continuation: cont, FeedRange: &r,
		Mode: strPtr(ModeIncremental), Properties: map[string]string{}}
	l.PartitionKey = h.markerPK(l.ID)
	return h.tryCreate(ctx, l)
}

// tryCreate is TryCreateDocumentServiceLeaseAsync (:329-342). It returns the lease object it
// sent, not the stored document: TryCreateItemAsync wraps the item it was given in the response
// (Utils/CosmosContainerExtensions.cs:56-61, EnableContentResponseOnWrite = false at :17-20), so
// the new lease has no _etag, and the acquire that follows for a split's children
// (PartitionControllerCore.cs:190-194) replaces it with IfMatchEtag = null, unconditionally
// (DocumentServiceLeaseUpdaterCosmos.cs:114-117): it overwrites a host that took the child
// between the create and the acquire.
func (h *Host) tryCreate(ctx context.Context, l *lease) (*lease, error) {
	body, err := l.encode()
	if err != nil {
		return nil, err
	}
	_, err = h.docs.Create(ctx, h.pk(l.ID, l.PartitionKey), body)
	if errors.Is(err, leases.ErrConflict) {
		h.opts.Trace("Some other host created lease for %s.", l.LeaseToken)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h.opts.Trace("Created lease with lease token %s.", l.LeaseToken)
	return l, nil
}

// errLeaseLost is LeaseLostException; gone is its IsGone.
type errLeaseLost struct {
	token string
	owner string
	gone  bool
}

func (e *errLeaseLost) Error() string {
	if e.gone {
		return fmt.Sprintf("lease %s is gone", e.token)
	}
	return fmt.Sprintf("%s lease token was taken over by owner '%s'", e.token, e.owner)
}

// acquire is AcquireAsync (:51-111): fill in FeedRange from the partition key ranges when the
// lease has none (persisted by the first replace only), then replace with Owner = this host and
// the properties read, provided the owner did not change since the lease was read.
func (h *Host) acquire(ctx context.Context, l *lease) (*lease, error) {
	oldOwner := l.Owner
	if l.FeedRange == nil {
		parts, err := h.src.Partitions(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			if p.ID == l.LeaseToken {
				r := p.Range
				l.FeedRange = &r
			}
		}
	}
	props := l.Properties
	return h.update(ctx, l, func(s *lease) (*lease, error) {
		if !sameOwner(s.Owner, oldOwner) {
			h.opts.Trace("%s lease token was taken over by owner '%s'", l.LeaseToken, s.owner())
			return nil, &errLeaseLost{token: l.LeaseToken, owner: s.owner()}
		}
		s.Owner = strPtr(h.opts.Instance)
		s.Properties = props
		return s, nil
	})
}

// sameOwner is C#'s string == on two owners (ordinal, null equals only null).
func sameOwner(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// release is ReleaseAsync (:181-230): a lease deleted under it (a 404 on the read, :189-198)
// is released without a word.
func (h *Host) release(ctx context.Context, l *lease) error {
	fresh, err := h.get(ctx, l)
	if errors.Is(err, leases.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = h.update(ctx, fresh, func(s *lease) (*lease, error) {
		if !sameOwner(s.Owner, l.Owner) {
			return nil, &errLeaseLost{token: l.LeaseToken, owner: s.owner()}
		}
		s.Owner = nil
		return s, nil
	})
	return err
}

// renew is RenewAsync (:244-281): re-read, then replace unchanged (a fresh timestamp) if the
// owner is still the one this host holds. A deleted lease is not a lost one here: the read
// (TryGetLeaseAsync, :344-347) is TryGetItemAsync, which throws a CosmosException on a 404
// (EnsureSuccessStatusCode, Utils/CosmosContainerExtensions.cs:24-37) and never returns the
// null that :252-256 checks for; LeaseRenewerCore.RenewAsync logs that exception as "failed to
// renew lease" and keeps renewing (FeedManagement/LeaseRenewerCore.cs:70-74), so the host
// keeps processing a deleted lease until a checkpoint's replace finds it gone.
func (h *Host) renew(ctx context.Context, l *lease) (*lease, error) {
	fresh, err := h.get(ctx, l)
	if err != nil {
		return nil, err
	}
	return h.update(ctx, fresh, func(s *lease) (*lease, error) {
		if !sameOwner(s.Owner, l.Owner) {
			return nil, &errLeaseLost{token: l.LeaseToken, owner: s.owner()}
		}
		return s, nil
	})
}

// updateProperties is UpdatePropertiesAsync (:283-327).
func (h *Host) updateProperties(ctx context.Context, l *lease) (*lease, error) {
	if l.owner() != h.opts.Instance {
		return nil, &errLeaseLost{token: l.LeaseToken, owner: l.owner()}
	}
	props := l.Properties
	return h.update(ctx, l, func(s *lease) (*lease, error) {
		if !sameOwner(s.Owner, l.Owner) {
			return nil, &errLeaseLost{token: l.LeaseToken, owner: s.owner()}
		}
		s.Properties = props
		return s, nil
	})
}

// checkpoint is DocumentServiceLeaseCheckpointerCore.CheckpointAsync
// (LeaseManagement/DocumentServiceLeaseCheckpointerCore.cs:25-51).
func (h *Host) checkpoint(ctx context.Context, l *lease, cont string) (*lease, error) {
	if cont == "" {
		return nil, errors.New("continuationToken must be a non-empty string")
	}
	return h.update(ctx, l, func(s *lease) (*lease, error) {
		if !sameOwner(s.Owner, l.Owner) {
			return nil, &errLeaseLost{token: l.LeaseToken, owner: s.owner()}
		}
		s.Continuation = strPtr(cont)
		return s, nil
	})
}

// delete is DeleteAsync (:232-242): TryDeleteItemAsync, no If-Match.
func (h *Host) delete(ctx context.Context, l *lease) error {
	err := h.docs.Delete(ctx, l.ID, h.pk(l.ID, l.PartitionKey), "")
	if errors.Is(err, leases.ErrNotFound) {
		return nil
	}
	return err
}

// get is TryGetLeaseAsync (:344-347): TryGetItemAsync, an error wrapping leases.ErrNotFound
// when the lease is gone (it throws on a 404, Utils/CosmosContainerExtensions.cs:24-37).
func (h *Host) get(ctx context.Context, l *lease) (*lease, error) {
	d, err := h.docs.Read(ctx, l.ID, h.pk(l.ID, l.PartitionKey))
	if err != nil {
		return nil, err
	}
	return decodeLease(d.Body)
}

// tryGet is the updater's re-read after a 412 (DocumentServiceLeaseUpdaterCosmos.cs:52-70): nil
// when the lease is gone.
func (h *Host) tryGet(ctx context.Context, l *lease) (*lease, error) {
	d, err := h.docs.Read(ctx, l.ID, h.pk(l.ID, l.PartitionKey))
	if errors.Is(err, leases.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeLease(d.Body)
}

// update is DocumentServiceLeaseUpdaterCosmos.UpdateLeaseAsync
// (LeaseManagement/DocumentServiceLeaseUpdaterCosmos.cs:28-117): apply the change to the cached
// lease, stamp the timestamp, replace with If-Match (none when the lease has no _etag); on 412
// re-read and retry, at most 5 times; a 404 or 409 is a lost lease.
//
// It returns the lease object it sent, with the _etag it was sent with, not the stored
// document: TryReplaceItemAsync sets EnableContentResponseOnWrite = false and wraps the item it
// was given (Utils/CosmosContainerExtensions.cs:66-87). The next write with that object fails
// its If-Match (the document's _etag changed with this write), re-reads and replaces: every
// checkpoint after the first costs a 412, a read and a replace
// (FeedManagement/PartitionCheckpointerCore.cs:22-26 keeps the returned lease).
func (h *Host) update(ctx context.Context, cached *lease, change func(*lease) (*lease, error)) (*lease, error) {
	l := cached.clone()
	for retry := 5; retry >= 0; retry-- {
		n, err := change(l)
		if err != nil {
			return nil, err
		}
		now := h.opts.Now().UTC()
		n.Explicit = &now
		body, err := n.encode()
		if err != nil {
			return nil, err
		}
		_, err = h.docs.Replace(ctx, n.ID, h.pk(n.ID, n.PartitionKey), n.ETag, body)
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, leases.ErrNotFound):
			return nil, &errLeaseLost{token: n.LeaseToken, gone: true}
		case errors.Is(err, leases.ErrConflict):
			return nil, &errLeaseLost{token: n.LeaseToken}
		case !errors.Is(err, leases.ErrPreconditionFailed):
			return nil, err
		}
		h.opts.Trace("Lease with token %s update conflict. Reading the current version of lease.", n.LeaseToken)
		server, err := h.tryGet(ctx, n)
		if err != nil {
			return nil, err
		}
		if server == nil {
			return nil, &errLeaseLost{token: n.LeaseToken, gone: true}
		}
		l = server
	}
	return nil, &errLeaseLost{token: cached.LeaseToken, owner: l.owner()}
}

// ---- LeaseManagement/DocumentServiceLeaseContainerCosmos.cs

// allLeases is GetAllLeasesAsync: SELECT * FROM c WHERE STARTSWITH(c.id, '<prefix>..')
// (DocumentServiceLeaseContainerCosmos.cs:45-68), every document deserialized as a lease.
func (h *Host) allLeases(ctx context.Context) ([]*lease, error) {
	docs, err := h.docs.QueryPrefix(context.WithValue(ctx, listPageKey{}, ListPageSize), h.opts.Prefix+"..")
	if err != nil {
		return nil, err
	}
	out := make([]*lease, 0, len(docs))
	for _, d := range docs {
		l, err := decodeLease(d.Body)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// ListPageSize is how many leases a page of .NET's lease listing holds: the query sets no
// MaxItemCount (DocumentServiceLeaseContainerCosmos.cs:16,50-53), and the SDK's query pipeline
// then asks for pages of 1,000 items (Query/Core/Pipeline/CosmosQueryExecutionContextFactory.cs:
// 824,890), not the service's default of 100 that a request without x-ms-max-item-count gets.
const ListPageSize = 1000

type listPageKey struct{}

// QueryPageSize returns the page size of the lease listing a Host runs with ctx (ListPageSize),
// or 0 when ctx is not a Host's listing: a leases.Documents decorator that charges query pages
// (the scale bench's counter) reads it.
func QueryPageSize(ctx context.Context) int {
	n, _ := ctx.Value(listPageKey{}).(int)
	return n
}

// ---- FeedManagement/PartitionLoadBalancerCore.cs and EqualPartitionsBalancingStrategy.cs

// balance is PartitionLoadBalancerCore.RunAsync (PartitionLoadBalancerCore.cs:72-109): every
// acquire interval, list all leases, select the ones to take and take them one by one.
func (h *Host) balance(ctx context.Context) {
	defer close(h.balancerDone)
	for {
		all, err := h.allLeases(ctx)
		if err != nil {
			h.opts.Trace("Partition load balancer iteration failed: %v", err)
		} else {
			for _, l := range h.selectLeasesToTake(all) {
				if err := h.addOrUpdateLease(ctx, l); err != nil {
					h.opts.Trace("Failed to acquire lease: Id=%s, Owner=%s: %v", l.ID, l.owner(), err)
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

// selectLeasesToTake is EqualPartitionsBalancingStrategy.SelectLeasesToTake
// (EqualPartitionsBalancingStrategy.cs:37-79): the target is ceil(leases / owners) counting
// only owners of unexpired leases and this host; take expired or free leases up to the target,
// else steal one lease from the owner with the most.
func (h *Host) selectLeasesToTake(all []*lease) []*lease {
	workerCount := map[string]int{}
	var workers []string // insertion order, as Dictionary enumerates
	var expired []*lease
	var allPartitions []*lease
	seen := map[string]bool{}
	for _, l := range all {
		if seen[l.LeaseToken] {
			// Dictionary.Add throws on a duplicate token: the iteration fails.
			h.opts.Trace("An item with the same key has already been added: %s", l.LeaseToken)
			return nil
		}
		seen[l.LeaseToken] = true
		allPartitions = append(allPartitions, l)
		if strings.TrimSpace(l.owner()) == "" || h.isExpired(l) {
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
	if len(allPartitions) == 0 {
		return nil
	}
	target := 1
	if n, w := len(allPartitions), len(workerCount); n > w {
		target = (n + w - 1) / w
	}
	need := target - workerCount[h.opts.Instance]
	h.opts.Trace("Host '%s' %d partitions, %d hosts, %d available leases, target = %d, mine = %d, will try to take %d lease(s) for myself'.",
		h.opts.Instance, len(allPartitions), len(workerCount), len(expired), target, workerCount[h.opts.Instance], max(need, 0))
	if need <= 0 {
		return nil
	}
	if len(expired) > 0 {
		return expired[:min(need, len(expired))]
	}
	// GetLeaseToSteal and FindWorkerWithMostPartitions (:81-108).
	var most string
	mostN := 0
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
		for _, l := range allPartitions {
			if strings.EqualFold(l.owner(), most) {
				return []*lease{l}
			}
		}
	}
	return nil
}

// isExpired is EqualPartitionsBalancingStrategy.IsExpired (:167-170).
func (h *Host) isExpired(l *lease) bool {
	return l.timestamp().Add(h.opts.Expiration).Before(h.opts.Now().UTC())
}

// ---- FeedManagement/PartitionControllerCore.cs

// loadLeases is LoadLeasesAsync (PartitionControllerCore.cs:102-113): the leases this host
// owns (GetOwnedLeasesAsync: owner equal ignoring case), added in parallel.
func (h *Host) loadLeases(ctx context.Context) error {
	all, err := h.allLeases(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, l := range all {
		if strings.EqualFold(l.owner(), h.opts.Instance) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := h.addOrUpdateLease(ctx, l); err != nil {
					h.opts.Trace("Acquire on startup of %s failed: %v", l.LeaseToken, err)
				}
			}()
		}
	}
	wg.Wait()
	return nil
}

// addOrUpdateLease is AddOrUpdateLeaseAsync (:49-93): a lease already processed gets its
// properties updated; otherwise it is acquired and a supervisor starts processing it.
func (h *Host) addOrUpdateLease(ctx context.Context, l *lease) error {
	h.mu.Lock()
	if h.killed || h.shutdownCtx.Err() != nil {
		h.mu.Unlock()
		return context.Canceled
	}
	if _, ok := h.owned[l.LeaseToken]; ok {
		h.mu.Unlock()
		_, err := h.updateProperties(ctx, l)
		return err
	}
	done := make(chan struct{})
	h.owned[l.LeaseToken] = done
	h.wg.Add(1)
	h.mu.Unlock()
	acquired, err := h.acquire(ctx, l)
	if err != nil {
		h.removeLease(l, false)
		h.wg.Done()
		var lost *errLeaseLost
		if !errors.As(err, &lost) {
			h.notifyError(l.LeaseToken, err)
		}
		return err
	}
	h.opts.Trace("lease %s acquired", l.LeaseToken)
	h.mu.Lock()
	h.acquired++
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		h.processPartition(acquired)
	}()
	return nil
}

// removeLease is RemoveLeaseAsync (:115-146): release the lease, whatever happens forget it.
func (h *Host) removeLease(l *lease, _ bool) {
	h.mu.Lock()
	done, ok := h.owned[l.LeaseToken]
	killed := h.killed
	if ok {
		delete(h.owned, l.LeaseToken)
	}
	h.mu.Unlock()
	if !ok {
		return
	}
	defer close(done)
	if killed {
		return
	}
	var lost *errLeaseLost
	err := h.release(context.Background(), l)
	if err != nil && !errors.As(err, &lost) {
		h.notifyError(l.LeaseToken, err)
	}
	if err != nil && h.opts.ReleaseFailed != nil {
		h.opts.ReleaseFailed(l.LeaseToken, err)
	}
}

// errGone is FeedRangeGoneException with its LastContinuation.
type errGone struct{ last *string }

func (e *errGone) Error() string { return "partition split or merged" }

// processPartition is ProcessPartitionAsync (:148-182) around PartitionSupervisorCore.RunAsync
// (FeedManagement/PartitionSupervisorCore.cs:32-85): the feed processor and the renewer run
// until one of them ends, which stops the other; a gone range is handled, then the lease is
// removed (released).
func (h *Host) processPartition(l *lease) {
	ctx, cancel := context.WithCancel(h.shutdownCtx)
	var wg sync.WaitGroup
	var procErr, renewErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer cancel()
		procErr = h.runProcessor(ctx, l)
	}()
	go func() {
		defer wg.Done()
		defer cancel()
		renewErr = h.runRenewer(ctx, l)
	}()
	wg.Wait()
	if h.isKilled() {
		h.removeLease(l, true)
		return
	}
	var gone *errGone
	switch {
	case errors.As(procErr, &gone):
		h.handleGone(l, gone.last)
	case h.shutdownCtx.Err() != nil:
	case procErr != nil && !errors.Is(procErr, context.Canceled):
		var lost *errLeaseLost
		if !errors.As(procErr, &lost) {
			h.notifyError(l.LeaseToken, procErr)
		}
	case renewErr != nil && !errors.Is(renewErr, context.Canceled):
		h.opts.Trace("Lease with token %s: lease was lost", l.LeaseToken)
	}
	h.removeLease(l, true)
}

// handleGone is HandlePartitionGoneAsync (:184-208): the gone lease gets the last read position
// as its continuation, the synchronizer creates the children (or keeps a redirected EPK lease),
// each is added (acquired) with the parent's properties, and the parent is deleted.
func (h *Host) handleGone(l *lease, last *string) {
	ctx := context.WithoutCancel(h.shutdownCtx)
	l.Continuation = last
	added, del, err := h.handlePartitionGone(ctx, l)
	if h.opts.HandledGone != nil && (del || err != nil) && l.FeedRange != nil {
		var created []leases.Range
		for _, n := range added {
			if n.FeedRange != nil {
				created = append(created, *n.FeedRange)
			}
		}
		h.opts.HandledGone(l.LeaseToken, *l.FeedRange, created)
	}
	if err != nil {
		// The children created so far stay, the gone lease too (it is released): the next
		// host to take it handles it again, with the partitions of that moment
		// (PartitionControllerCore.HandlePartitionGoneAsync's catch, :201-205).
		h.notifyError(l.LeaseToken, err)
		return
	}
	var wg sync.WaitGroup
	for _, n := range added {
		n.Properties = l.Properties
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.addOrUpdateLease(ctx, n)
		}()
	}
	if del {
		if err := h.delete(ctx, l); err != nil {
			h.notifyError(l.LeaseToken, err)
		}
	}
	wg.Wait()
}

// ---- FeedManagement/LeaseRenewerCore.cs

// runRenewer is LeaseRenewerCore.RunAsync (LeaseRenewerCore.cs:26-75): half an interval first,
// then every interval; a lost lease ends it, other failures are logged.
func (h *Host) runRenewer(ctx context.Context, l *lease) error {
	if err := sleep(ctx, h.opts.RenewInterval/2); err != nil {
		return err
	}
	cur := l
	for {
		n, err := h.renew(ctx, cur)
		var lost *errLeaseLost
		switch {
		case errors.As(err, &lost):
			h.opts.Trace("Lease with token %s: lost lease on renew.", l.LeaseToken)
			return err
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			h.opts.Trace("Lease with token %s: failed to renew lease: %v", l.LeaseToken, err)
		default:
			cur = n
		}
		if err := sleep(ctx, h.opts.RenewInterval); err != nil {
			return err
		}
	}
}

// ---- FeedProcessing/FeedProcessorCore.cs, FeedProcessorFactoryCore.cs and
// ChangeFeed/ChangeFeedPartitionKeyResultSetIteratorCore.cs

// runProcessor is FeedProcessorCore.RunAsync (FeedProcessorCore.cs:38-106) with the observer
// and checkpointer (Observers/AutoCheckpointer.cs, PartitionCheckpointerCore): read from the
// lease's continuation (else the start option), hand each page with changes to the handler and
// checkpoint its continuation; remember the last continuation of every response, 304s
// included; a gone range ends with that continuation.
func (h *Host) runProcessor(ctx context.Context, l *lease) error {
	cp := l // the checkpointer's lease
	var last *string
	if l.Continuation != nil && *l.Continuation != "" {
		last = strPtr(*l.Continuation)
	}
	for ctx.Err() == nil {
		pid, rng, err := h.route(ctx, l)
		if g := (*errGone)(nil); errors.As(err, &g) {
			return &errGone{last: last}
		}
		if err != nil {
			return err
		}
		req := feed.ReadRequest{PartitionID: pid, Range: rng, MaxItems: h.opts.MaxItems}
		switch {
		case last != nil:
			req.Start = feed.StartFrom{Kind: feed.StartContinuation, Continuation: *last}
		case h.opts.StartFromBeginning:
			req.Start = feed.StartFrom{Kind: feed.StartBeginning}
		default:
			req.Start = feed.StartFrom{Kind: feed.StartTime, Time: h.startTime}
		}
		page, err := h.src.ReadPage(ctx, req)
		switch {
		case feed.IsRangeGone(err):
			return &errGone{last: last}
		case err != nil:
			// Any other failed read, a 429 or 503 the SDK's retries gave up on included, ends
			// the lease's processing: HandleFailedRequest classifies every status but a 410
			// with substatus 1002 or 1007 as DocDbError.Undefined and throws
			// (FeedProcessing/FeedProcessorCore.cs:69-81,108-123,
			// DocDBErrors/ExceptionClassifier.cs:12-22; the RetryAfter delay at :74-77 is never
			// reached), and PartitionControllerCore.ProcessPartitionAsync reports it and
			// releases the lease (FeedManagement/PartitionControllerCore.cs:175-181): a
			// throttled .NET host drops its lease, another host (or itself, at its next
			// balancing) takes it.
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		default:
			last = strPtr(page.Continuation)
			if !page.NotModified && len(page.Items) > 0 {
				if err := h.opts.Handle(ctx, Batch{Token: l.LeaseToken, Items: page.Items, Continuation: page.Continuation}); err != nil {
					return fmt.Errorf("observer: %w", err)
				}
				if h.isKilled() {
					return ctx.Err() // a killed process writes nothing more
				}
				// The checkpoint after a processed batch is not cancelled by a shutdown.
				n, err := h.checkpoint(context.WithoutCancel(ctx), cp, page.Continuation)
				if err != nil {
					return err
				}
				cp = n
				continue
			}
		}
		if err := sleep(ctx, h.opts.PollDelay); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// route is how the SDK resolves the lease's feed range to a partition: a PK-range lease reads
// its partition by id (FeedRangePartitionKeyRange); an EPK lease reads the one partition that
// holds its range, restricted to the range, and is gone when its range spans several.
func (h *Host) route(ctx context.Context, l *lease) (string, leases.Range, error) {
	if !l.epk {
		return l.LeaseToken, leases.Range{}, nil
	}
	if l.FeedRange == nil {
		return "", leases.Range{}, errors.New("EPK lease without FeedRange")
	}
	parts, err := h.overlapping(ctx, *l.FeedRange)
	if err != nil {
		return "", leases.Range{}, err
	}
	if len(parts) != 1 {
		return "", leases.Range{}, &errGone{}
	}
	r := *l.FeedRange
	if parts[0].Range == r {
		r = leases.Range{}
	}
	return parts[0].ID, r, nil
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
