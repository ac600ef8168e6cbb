package leases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrLeaseLost is matched (errors.Is) by every *LeaseLostError.
var ErrLeaseLost = errors.New("lease lost")

// LeaseLostError reports that a lease is no longer ours: another instance owns it (Owner), it
// was released (Owner ""), or it was deleted (Gone).
type LeaseLostError struct {
	Token string
	// Owner is the owner found in the store, "" when the lease is unowned or gone.
	Owner string
	// Gone is true when the lease document no longer exists.
	Gone bool
}

func (e *LeaseLostError) Error() string {
	switch {
	case e.Gone:
		return fmt.Sprintf("lease %s lost: deleted", e.Token)
	case e.Owner == "":
		return fmt.Sprintf("lease %s lost: released", e.Token)
	}
	return fmt.Sprintf("lease %s lost to %s", e.Token, e.Owner)
}

// Is makes errors.Is(err, ErrLeaseLost) true.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// Defaults of the lease protocol (docs/protocol-leases.md, "Timestamps and expiry").
const (
	DefaultRenewInterval   = 17 * time.Second
	DefaultAcquireInterval = 13 * time.Second
	DefaultExpiration      = 60 * time.Second
	DefaultLockTTL         = 30 * time.Second
	// RetryCountOnConflict is how often an update re-reads and retries after a 412.
	RetryCountOnConflict = 5
)

// StoreOptions configures a Store. The zero value is usable.
type StoreOptions struct {
	// Now is the clock that stamps timestamps (default time.Now).
	Now func() time.Time
	// OnSkip, when set, is told about every document under the prefix that List could not
	// decode as a lease.
	OnSkip func(id string, err error)
	// Mode is the change feed mode of the processor writing (either SDK's name); it becomes
	// the Mode of the state cfp writes into a Java EPK lease that has none yet (Java's
	// bootstrapper creates leases with a null continuation). Default: incremental.
	Mode string
}

// Store is the lease container of one lease prefix, with the .NET lease protocol on top of it:
// every write is a whole-document replace with If-Match, a 412 re-reads and re-applies. A Store is
// safe for concurrent use.
type Store struct {
	docs   Documents
	prefix string
	opts   StoreOptions

	mu       sync.Mutex
	pkPath   string
	pkLoaded bool
	lockETag string

	listed listCache // the leases of the last listing, decoded
}

// NewStore returns the store of the leases under prefix in docs.
func NewStore(docs Documents, prefix string, opts StoreOptions) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{docs: docs, prefix: prefix, opts: opts}
}

// Prefix returns the store's lease prefix.
func (s *Store) Prefix() string { return s.prefix }

// Documents returns the lease container the store writes to.
func (s *Store) Documents() Documents { return s.docs }

func (s *Store) now() time.Time { return s.opts.Now().UTC() }

// path returns the lease container's partition-key path, read once.
func (s *Store) path(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pkLoaded {
		return s.pkPath, nil
	}
	p, err := s.docs.PartitionKeyPath(ctx)
	if err != nil {
		return "", fmt.Errorf("read lease container partition key: %w", err)
	}
	s.pkPath, s.pkLoaded = p, true
	return p, nil
}

// pkOf returns the partition-key value of a lease write: the id in an /id container, the
// lease's stored value in a /partitionKey container (the id for a new lease), none otherwise.
func (s *Store) pkOf(ctx context.Context, l *Lease) (string, error) {
	p, err := s.path(ctx)
	if err != nil {
		return "", err
	}
	return pkFor(p, l.ID, l.PK), nil
}

func pkFor(path, id, stored string) string {
	switch path {
	case "/id":
		return id
	case "/partitionKey":
		if stored != "" {
			return stored
		}
		return id
	}
	return ""
}

// List returns every lease under the prefix (a cross-partition prefix query on "<prefix>..").
// Documents that are not leases, and leases whose continuation cannot be decoded (StateError),
// are skipped and reported to OnSkip.
func (s *Store) List(ctx context.Context) ([]*Lease, error) {
	all, err := s.ListAll(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, l := range all {
		if l.StateError != nil {
			if s.opts.OnSkip != nil {
				s.opts.OnSkip(l.ID, l.StateError)
			}
			continue
		}
		out = append(out, l)
	}
	return out, nil
}

// ListAll is List with the leases whose continuation cannot be decoded (StateError set).
func (s *Store) ListAll(ctx context.Context) ([]*Lease, error) {
	ctx = WithCharge(ctx, ChargeLeaseList, "")
	docs, err := s.docs.QueryPrefix(ctx, s.prefix+leaseSeparator)
	if err != nil {
		return nil, fmt.Errorf("list leases %s: %w", s.prefix, err)
	}
	out := make([]*Lease, 0, len(docs))
	decode, done := s.listed.decoder(len(docs))
	defer done()
	for _, d := range docs {
		l, err := decode(d)
		if err != nil {
			if s.opts.OnSkip != nil {
				s.opts.OnSkip(d.ID, err)
			}
			continue
		}
		out = append(out, l)
	}
	// The service returns query results in its own order (creation order within a partition,
	// partition by partition): list in id order, so that listings are stable.
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Get reads the current version of l; ErrNotFound when it is gone.
func (s *Store) Get(ctx context.Context, l *Lease) (*Lease, error) {
	ctx = WithCharge(ctx, ChargeLeaseRead, l.Token)
	pk, err := s.pkOf(ctx, l)
	if err != nil {
		return nil, err
	}
	d, err := s.docs.Read(ctx, l.ID, pk)
	if err != nil {
		return nil, fmt.Errorf("read lease %s: %w", l.Token, err)
	}
	if d.PK == "" {
		d.PK = pk
	}
	n, err := Decode(d)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// Create stores a new lease if none with its id exists; an existing one gives an error
// wrapping ErrConflict (another host created it first). In a /partitionKey container the lease
// gets a partitionKey field, its id unless l.PK says otherwise.
func (s *Store) Create(ctx context.Context, l *Lease) (*Lease, error) {
	p, err := s.path(ctx)
	if err != nil {
		return nil, err
	}
	n := l.Clone()
	n.PK = pkFor(p, n.ID, n.PK)
	if p == "/partitionKey" {
		n.usePKField()
	}
	body, err := Encode(n)
	if err != nil {
		return nil, err
	}
	d, err := s.docs.Create(ctx, n.PK, body)
	if err != nil {
		return nil, fmt.Errorf("create lease %s: %w", n.Token, err)
	}
	return s.written(n, d), nil
}

// written returns the lease as stored after a successful write of n.
func (s *Store) written(n *Lease, d Document) *Lease {
	if d.PK == "" {
		d.PK = n.PK
	}
	if len(d.Body) > 0 {
		if w, err := Decode(d); err == nil {
			return w
		}
	}
	w := n.Clone()
	w.ETag = d.ETag
	return w
}

// Update is the generic lease write (docs/protocol-leases.md, "Writing a lease"): apply mutate to the lease in hand, stamp the
// timestamp, replace with If-Match. On 412 it re-reads the lease and applies mutate to the fresh
// copy, at most RetryCountOnConflict times. A lease that is gone, or still contended after the
// retries, is lost (*LeaseLostError). Errors returned by mutate end the update unchanged.
// A write that moves the checkpoint LSN forward also stamps PropProgressAt and
// PropProgressLSN (.NET families only), so that estimators see when the lease last advanced.
func (s *Store) Update(ctx context.Context, l *Lease, mutate func(*Lease) error) (*Lease, error) {
	ctx = WithCharge(ctx, ChargeOther, l.Token)
	cur := l
	if cur.ETag == "" {
		// Never replace without If-Match: read the stored version first.
		fresh, err := s.fresh(ctx, l)
		if err != nil {
			return nil, err
		}
		cur = fresh
	}
	for attempt := 0; ; attempt++ {
		n := cur.Clone()
		if err := mutate(n); err != nil {
			return nil, err
		}
		n.Timestamp = s.now()
		stampProgress(cur, n, n.Timestamp)
		if n.Family == FamilyJavaEPK && n.java == nil && n.Mode == "" {
			n.Mode = s.opts.Mode
		}
		pk, err := s.pkOf(ctx, n)
		if err != nil {
			return nil, err
		}
		body, err := Encode(n)
		if err != nil {
			return nil, err
		}
		d, err := s.docs.Replace(ctx, n.ID, pk, cur.ETag, body)
		switch {
		case err == nil:
			n.PK = pk
			return s.written(n, d), nil
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrConflict):
			return nil, &LeaseLostError{Token: l.Token, Gone: true}
		case !errors.Is(err, ErrPreconditionFailed):
			return nil, fmt.Errorf("update lease %s: %w", l.Token, err)
		}
		if attempt == RetryCountOnConflict {
			return nil, &LeaseLostError{Token: l.Token, Owner: cur.Owner}
		}
		fresh, err := s.Get(ctx, l)
		if errors.Is(err, ErrNotFound) {
			return nil, &LeaseLostError{Token: l.Token, Gone: true}
		}
		if err != nil {
			return nil, err
		}
		cur = fresh
	}
}

// Acquire makes owner the owner of l, provided the owner has not changed since l was read
// (taking a free or expired lease and stealing are the same replace).
func (s *Store) Acquire(ctx context.Context, l *Lease, owner string) (*Lease, error) {
	ctx = WithCharge(ctx, ChargeAcquire, l.Token)
	seen := l.Owner
	return s.Update(ctx, l, func(n *Lease) error {
		if n.Owner != seen {
			return &LeaseLostError{Token: n.Token, Owner: n.Owner}
		}
		n.Owner = owner
		return nil
	})
}

// Renew rewrites l with a fresh timestamp if owner still owns it. The first attempt uses l's
// ETag, without reading the lease first (.NET reads it before every renew: a request per
// lease per renew interval saved); when the lease changed since (a checkpoint of another
// writer, a handoff request, a steal), the 412 re-reads it and the renew applies to the stored
// version, or reports the lease lost.
// A copy that does not name owner (one from before the acquire) is read first.
func (s *Store) Renew(ctx context.Context, l *Lease, owner string) (*Lease, error) {
	ctx = WithCharge(ctx, ChargeRenew, l.Token)
	if l.Owner != owner {
		fresh, err := s.fresh(ctx, l)
		if err != nil {
			return nil, err
		}
		l = fresh
	}
	return s.Update(ctx, l, ownedBy(owner, nil))
}

// Checkpoint records continuation (a raw ETag, not empty) on l if owner still owns it. The first
// attempt uses l's ETag; after a renew that gives a 412 and a re-read, as in .NET.
func (s *Store) Checkpoint(ctx context.Context, l *Lease, owner, continuation string) (*Lease, error) {
	ctx = WithCharge(ctx, ChargeCheckpoint, l.Token)
	if continuation == "" {
		return nil, fmt.Errorf("checkpoint lease %s: empty continuation", l.Token)
	}
	return s.Update(ctx, l, ownedBy(owner, func(n *Lease) { n.Continuation = continuation }))
}

// Release clears the owner of l if owner still owns it. A lease that is already gone is fine.
func (s *Store) Release(ctx context.Context, l *Lease, owner string) error {
	ctx = WithCharge(ctx, ChargeRelease, l.Token)
	fresh, err := s.Get(ctx, l)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.Update(ctx, fresh, ownedBy(owner, func(n *Lease) { n.Owner = "" }))
	var lost *LeaseLostError
	if errors.As(err, &lost) && lost.Gone {
		return nil
	}
	return err
}

// Delete removes l whatever its ETag; a lease that is already gone is fine.
func (s *Store) Delete(ctx context.Context, l *Lease) error {
	pk, err := s.pkOf(ctx, l)
	if err != nil {
		return err
	}
	if err := s.docs.Delete(ctx, l.ID, pk, ""); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete lease %s: %w", l.Token, err)
	}
	return nil
}

// DeleteAll deletes the whole lease set of the prefix: its .info and .lock markers first (so
// that a run interrupted half way leaves leases that a processor adopts, never a store marked
// initialized with leases missing), then every lease (those whose continuation cannot be
// decoded too), then the host presence records. Documents already gone are fine; documents
// under the prefix that are not leases are left and reported to OnSkip. It does not check for
// live owners: callers stop the hosts first.
func (s *Store) DeleteAll(ctx context.Context) error {
	p, err := s.path(ctx)
	if err != nil {
		return err
	}
	for _, id := range []string{InfoID(s.prefix), LockID(s.prefix)} {
		if err := s.docs.Delete(ctx, id, pkFor(p, id, id), ""); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("delete %s: %w", id, err)
		}
	}
	ls, err := s.ListAll(ctx)
	if err != nil {
		return err
	}
	for _, l := range ls {
		if err := s.Delete(ctx, l); err != nil {
			return err
		}
	}
	hosts, err := s.Hosts(ctx)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if err := s.docs.Delete(ctx, h.ID, pkFor(p, h.ID, h.PK), ""); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("delete host %s: %w", h.Instance, err)
		}
	}
	return nil
}

func (s *Store) fresh(ctx context.Context, l *Lease) (*Lease, error) {
	fresh, err := s.Get(ctx, l)
	if errors.Is(err, ErrNotFound) {
		return nil, &LeaseLostError{Token: l.Token, Gone: true}
	}
	return fresh, err
}

// ownedBy is a mutation that fails with *LeaseLostError unless owner owns the lease, then
// applies f.
func ownedBy(owner string, f func(*Lease)) func(*Lease) error {
	return func(n *Lease) error {
		if n.Owner != owner {
			return &LeaseLostError{Token: n.Token, Owner: n.Owner}
		}
		if f != nil {
			f(n)
		}
		return nil
	}
}

// marker writes {"id": id, ...extra} (plus partitionKey in a /partitionKey container).
func (s *Store) marker(ctx context.Context, id string, extra map[string]any) (Document, error) {
	p, err := s.path(ctx)
	if err != nil {
		return Document{}, err
	}
	o := newObject()
	if err := o.set(fID, id); err != nil {
		return Document{}, err
	}
	if p == "/partitionKey" {
		if err := o.set(fPK, id); err != nil {
			return Document{}, err
		}
	}
	// In key order, not the map's: one marker is the same bytes every time (a simulation
	// replaying a seed draws a write's latency from what it writes, sim/order.go).
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := o.set(k, extra[k]); err != nil {
			return Document{}, err
		}
	}
	body, err := o.MarshalJSON()
	if err != nil {
		return Document{}, err
	}
	return s.docs.Create(ctx, pkFor(p, id, id), body)
}

// IsInitialized reports whether the prefix's .info marker exists.
func (s *Store) IsInitialized(ctx context.Context) (bool, error) {
	p, err := s.path(ctx)
	if err != nil {
		return false, err
	}
	id := InfoID(s.prefix)
	_, err = s.docs.Read(ctx, id, pkFor(p, id, id))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("read %s: %w", id, err)
}

// MarkInitialized creates the .info marker (an existing marker is fine).
func (s *Store) MarkInitialized(ctx context.Context) error {
	if _, err := s.marker(ctx, InfoID(s.prefix), nil); err != nil && !errors.Is(err, ErrConflict) {
		return fmt.Errorf("create %s: %w", InfoID(s.prefix), err)
	}
	return nil
}

// LockHolder describes a bootstrap lock that another host holds.
type LockHolder struct {
	// Owner is the instance that wrote the lock: cfp writes its instance name into the lock
	// document; .NET and Java write none, and Owner is "".
	Owner string
	// Since is when the lock was written (its _ts), zero when unknown.
	Since time.Time
	// TTL is the lock's ttl field, 0 when it has none.
	TTL time.Duration
}

// TryLock creates the bootstrap lock {"id":"<prefix>.lock","ttl":<ttl s>,"owner":<owner>}, as
// .NET's AcquireInitializationLockAsync does (plus the owner, which no SDK reads). It returns
// false and the holder when another host holds the lock. It never deletes a lock it did not
// write, however old: .NET and Java wait for the lock to go (its ttl in a container with time
// to live, or the holder's delete), and a host whose lock was taken away fails its start when
// its .info create then conflicts. A lock left behind in a container without time to live is
// reported by Check (stale-lock) with the command that removes it.
func (s *Store) TryLock(ctx context.Context, ttl time.Duration, owner string) (bool, *LockHolder, error) {
	if ttl <= 0 {
		ttl = DefaultLockTTL
	}
	id := LockID(s.prefix)
	extra := map[string]any{"ttl": int(ttl / time.Second)}
	if owner != "" {
		extra["owner"] = owner
	}
	d, err := s.marker(ctx, id, extra)
	if err == nil {
		s.mu.Lock()
		s.lockETag = d.ETag
		s.mu.Unlock()
		return true, nil, nil
	}
	if !errors.Is(err, ErrConflict) {
		return false, nil, fmt.Errorf("create %s: %w", id, err)
	}
	h, err := s.lockHolder(ctx, id)
	if err != nil {
		return false, nil, err
	}
	return false, h, nil
}

// lockHolder reads the lock document: its owner, _ts and ttl (a lock gone meanwhile gives a
// zero holder).
func (s *Store) lockHolder(ctx context.Context, id string) (*LockHolder, error) {
	p, err := s.path(ctx)
	if err != nil {
		return nil, err
	}
	d, err := s.docs.Read(ctx, id, pkFor(p, id, id))
	if errors.Is(err, ErrNotFound) {
		return &LockHolder{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", id, err)
	}
	return ParseLock(d.Body), nil
}

// ParseLock reads a bootstrap lock document: its owner (cfp's), _ts and ttl. Fields it cannot
// read stay zero.
func ParseLock(body []byte) *LockHolder {
	var h LockHolder
	o, err := parseObject(body)
	if err != nil {
		return &h
	}
	h.Owner, _ = o.str("owner")
	var tsl Lease
	if tsl.decodeTimestamp(o) == nil {
		h.Since = tsl.Timestamp
	}
	if v, ok := o.vals["ttl"]; ok {
		var n float64
		if json.Unmarshal(v, &n) == nil && n > 0 {
			h.TTL = time.Duration(n * float64(time.Second))
		}
	}
	return &h
}

// Unlock deletes the bootstrap lock taken by TryLock (If-Match on its ETag).
func (s *Store) Unlock(ctx context.Context) error {
	s.mu.Lock()
	etag := s.lockETag
	s.lockETag = ""
	s.mu.Unlock()
	p, err := s.path(ctx)
	if err != nil {
		return err
	}
	id := LockID(s.prefix)
	if err := s.docs.Delete(ctx, id, pkFor(p, id, id), etag); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	return nil
}

// Owned returns the leases of ls whose owner is owner (case-insensitive, as .NET matches its
// own instance name at start-up).
func Owned(ls []*Lease, owner string) []*Lease {
	var out []*Lease
	for _, l := range ls {
		if strings.EqualFold(l.Owner, owner) {
			out = append(out, l)
		}
	}
	return out
}
