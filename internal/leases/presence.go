package leases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Host presence records: cfp's own marker documents, one per running cfp host of a prefix.
//
// The SDKs' balancing strategy counts only the hosts that own leases, so a host that owns none
// is invisible to the others: hosts that start together each aim at every lease, and a host
// that joins aims at half of them. A cfp host therefore keeps a small record of its own in the
// lease container, refreshed every acquire cycle and deleted when it stops:
//
//	{"id":"<prefix>.host.<instance>","cfpHost":"<instance>","timestamp":"<UTC ISO-8601>","ttl":3600,
//	 "cfpIncarnation":"<random>","cfpSince":"<UTC ISO-8601>"}
//
// cfpIncarnation is random per host process and cfpSince is when it started: two processes
// that run under one instance name write the same record, and each tells the other's writes
// from its own by them (see feed's DuplicateInstanceError). Records without them are read as
// an unknown incarnation. "cfpLeases", the number of leases the host held when it wrote the
// record, changes the record when the host's share changes (a split of one of its leases, a
// merge): the other hosts, which read only the records while the set is settled, then list the
// leases again. "cfpExpiration", the lease expiration the host counts with in milliseconds,
// lets the other cfp hosts write their idle leases often enough that none looks expired to it
// (a host started with a shorter --lease-expiration; issue 22, F1).
//
// plus "partitionKey" (the id) in a /partitionKey container. Like the .info and .lock markers it
// lives outside "<prefix>..", so the .NET and Java processors, whose listing query is
// STARTSWITH(c.id, '<prefix>..'), never see it. It expires like a lease: timestamp +
// expiration < now. The ttl only removes abandoned records in a container with TTL enabled.
const (
	hostInfix = ".host."
	fHost     = "cfpHost"
	fTTL      = "ttl"
	fIncarn   = "cfpIncarnation"
	fSince    = "cfpSince"
	fHeld     = "cfpLeases"
	fExpire   = "cfpExpiration"
	// DefaultHostTTL is the ttl of a host record: how long a lease container with TTL enabled
	// keeps the record of a host that stopped without deleting it.
	DefaultHostTTL = time.Hour
)

// ErrNotHost reports a document that is not a host presence record.
var ErrNotHost = errors.New("not a host record")

// Host is the presence record of one cfp host.
type Host struct {
	// ID is the document id, "<prefix>.host.<escaped instance>".
	ID string
	// PK is the document's partition-key value in the lease container.
	PK string
	// ETag is the document's _etag.
	ETag string
	// Prefix is the lease prefix the host works on.
	Prefix string
	// Instance is the host's instance name, as it writes it in the Owner of its leases.
	Instance string
	// Timestamp is the host's last refresh (the timestamp field, else _ts).
	Timestamp time.Time
	// Incarnation identifies the process that wrote the record ("" when unknown); Since is
	// when that process started (zero when unknown).
	Incarnation string
	Since       time.Time
	// Leases is how many leases the host held when it wrote the record (-1: not written).
	Leases int
	// Expiration is the lease expiration the host counts with (0: not written): the other cfp
	// hosts keep their idle leases younger than the shortest one.
	Expiration time.Duration
}

// Expired reports whether the host stopped refreshing its record: its timestamp is older than
// expiration (the lease rule, docs/protocol-leases.md, "Timestamps and expiry"), or unknown.
func (h Host) Expired(now time.Time, expiration time.Duration) bool {
	return h.Timestamp.IsZero() || h.Timestamp.Add(expiration).Before(now)
}

// HostID returns the id of instance's presence record under prefix: "<prefix>.host.<instance>",
// with the characters a Cosmos DB id may not hold ('/', '\', '?', '#') and '%' percent-escaped.
func HostID(prefix, instance string) string {
	return prefix + hostInfix + escapeID(instance)
}

// HostIDPrefix returns the prefix shared by the ids of every host record of prefix.
func HostIDPrefix(prefix string) string { return prefix + hostInfix }

func escapeID(s string) string {
	if !strings.ContainsAny(s, `/\?#%`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '/', '\\', '?', '#', '%':
			fmt.Fprintf(&b, "%%%02X", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// DecodeHost reads a host presence record. A document without the cfpHost field, or whose id
// does not end in ".host.<instance>", gives an error wrapping ErrNotHost.
func DecodeHost(doc Document) (Host, error) {
	o, err := parseObject(doc.Body)
	if err != nil {
		return Host{}, fmt.Errorf("decode host record %q: %w", doc.ID, err)
	}
	h := Host{ID: doc.ID, PK: doc.PK, ETag: doc.ETag}
	if id, _ := o.str(fID); id != "" {
		h.ID = id
	}
	instance, _ := o.str(fHost)
	if instance == "" {
		return Host{}, fmt.Errorf("decode host record %q: no %s: %w", h.ID, fHost, ErrNotHost)
	}
	prefix, ok := strings.CutSuffix(h.ID, hostInfix+escapeID(instance))
	if !ok || prefix == "" {
		return Host{}, fmt.Errorf("decode host record %q: the id does not name host %q: %w", h.ID, instance, ErrNotHost)
	}
	h.Prefix, h.Instance = prefix, instance
	if h.ETag == "" {
		h.ETag, _ = o.str(fETag)
	}
	var ts Lease
	if err := ts.decodeTimestamp(o); err != nil {
		return Host{}, fmt.Errorf("decode host record %q: %w", h.ID, err)
	}
	h.Timestamp = ts.Timestamp
	h.Incarnation, _ = o.str(fIncarn)
	if s, _ := o.str(fSince); s != "" {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			h.Since = t
		}
	}
	h.Leases = -1
	if _, raw, ok := o.lookup(fHeld); ok {
		var n int
		if err := json.Unmarshal(raw, &n); err == nil && n >= 0 {
			h.Leases = n
		}
	}
	if _, raw, ok := o.lookup(fExpire); ok {
		var ms int64
		if err := json.Unmarshal(raw, &ms); err == nil && ms > 0 {
			h.Expiration = time.Duration(ms) * time.Millisecond
		}
	}
	return h, nil
}

// Announce writes instance's presence record with a fresh timestamp: it replaces the record
// (whatever its ETag: only this host writes it) or creates it. ttl is the record's time to live
// in a container with TTL enabled (DefaultHostTTL when not positive). It is idempotent and safe
// for concurrent use.
func (s *Store) Announce(ctx context.Context, instance string, ttl time.Duration) (Host, error) {
	return s.AnnounceIncarnation(ctx, Host{Instance: instance, Leases: -1}, ttl)
}

// AnnounceIncarnation is Announce that also writes h.Incarnation and h.Since (when set), so
// that another process writing the record of the same instance can be told apart, h.Leases
// (when not negative) and h.Expiration (when positive).
func (s *Store) AnnounceIncarnation(ctx context.Context, h Host, ttl time.Duration) (Host, error) {
	instance := h.Instance
	ctx = WithCharge(ctx, ChargePresence, "")
	if strings.TrimSpace(instance) == "" {
		return Host{}, errors.New("announce host: empty instance name")
	}
	if ttl <= 0 {
		ttl = DefaultHostTTL
	}
	p, err := s.path(ctx)
	if err != nil {
		return Host{}, err
	}
	id := HostID(s.prefix, instance)
	pk := pkFor(p, id, id)
	o := newObject()
	for _, f := range []struct {
		k string
		v any
	}{{fID, id}, {fHost, instance}, {fTimestamp, FormatDotNetTime(s.now())}, {fTTL, int((ttl + time.Second - 1) / time.Second)}} {
		if err := o.set(f.k, f.v); err != nil {
			return Host{}, err
		}
	}
	if h.Incarnation != "" {
		if err := o.set(fIncarn, h.Incarnation); err != nil {
			return Host{}, err
		}
	}
	if !h.Since.IsZero() {
		if err := o.set(fSince, h.Since.UTC().Format(time.RFC3339Nano)); err != nil {
			return Host{}, err
		}
	}
	if h.Leases >= 0 {
		if err := o.set(fHeld, h.Leases); err != nil {
			return Host{}, err
		}
	}
	if h.Expiration > 0 {
		if err := o.set(fExpire, h.Expiration.Milliseconds()); err != nil {
			return Host{}, err
		}
	}
	if p == "/partitionKey" {
		if err := o.set(fPK, id); err != nil {
			return Host{}, err
		}
	}
	body, err := o.MarshalJSON()
	if err != nil {
		return Host{}, err
	}
	// Replace first (the common case: a refresh), create when it is missing; a create that
	// loses to another writer of the same record (the same instance name twice) replaces.
	d, err := s.docs.Replace(ctx, id, pk, "", body)
	if errors.Is(err, ErrNotFound) {
		d, err = s.docs.Create(ctx, pk, body)
		if errors.Is(err, ErrConflict) {
			d, err = s.docs.Replace(ctx, id, pk, "", body)
		}
	}
	if err != nil {
		return Host{}, fmt.Errorf("announce host %s: %w", instance, err)
	}
	if d.PK == "" {
		d.PK = pk
	}
	if len(d.Body) == 0 {
		d.Body = body
	}
	if d.ID == "" {
		d.ID = id
	}
	return DecodeHost(d)
}

// ReadHost reads instance's presence record; ErrNotFound when there is none.
func (s *Store) ReadHost(ctx context.Context, instance string) (Host, error) {
	ctx = WithCharge(ctx, ChargePresence, "")
	p, err := s.path(ctx)
	if err != nil {
		return Host{}, err
	}
	id := HostID(s.prefix, instance)
	d, err := s.docs.Read(ctx, id, pkFor(p, id, id))
	if err != nil {
		return Host{}, fmt.Errorf("read host %s: %w", instance, err)
	}
	return DecodeHost(d)
}

// Withdraw deletes instance's presence record; a record that is already gone is fine.
func (s *Store) Withdraw(ctx context.Context, instance string) error {
	ctx = WithCharge(ctx, ChargePresence, "")
	p, err := s.path(ctx)
	if err != nil {
		return err
	}
	id := HostID(s.prefix, instance)
	if err := s.docs.Delete(ctx, id, pkFor(p, id, id), ""); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("withdraw host %s: %w", instance, err)
	}
	return nil
}

// Hosts returns the presence records of the prefix, expired ones included, sorted by instance.
// Documents under "<prefix>.host." that are not host records are reported to OnSkip.
func (s *Store) Hosts(ctx context.Context) ([]Host, error) {
	ctx = WithCharge(ctx, ChargeLeaseList, "")
	docs, err := s.docs.QueryPrefix(ctx, HostIDPrefix(s.prefix))
	if err != nil {
		return nil, fmt.Errorf("list hosts %s: %w", s.prefix, err)
	}
	_, hosts := s.split(docs, Decode)
	return hosts, nil
}

// ListWithHosts returns every lease under the prefix, as List does, and the prefix's host
// presence records, as Hosts does, from one prefix query ("<prefix>.").
func (s *Store) ListWithHosts(ctx context.Context) ([]*Lease, []Host, error) {
	ctx = WithCharge(ctx, ChargeLeaseList, "")
	docs, err := s.docs.QueryPrefix(ctx, s.prefix+".")
	if err != nil {
		return nil, nil, fmt.Errorf("list leases %s: %w", s.prefix, err)
	}
	decode, done := s.listed.decoder(len(docs))
	defer done()
	ls, hosts := s.split(docs, decode)
	return ls, hosts, nil
}

// split sorts documents under the prefix into leases and host records; markers and documents
// of other prefixes are dropped, other documents under "<prefix>.." or "<prefix>.host." are
// reported to OnSkip. Leases are decoded with decode.
func (s *Store) split(docs []Document, decode func(Document) (*Lease, error)) ([]*Lease, []Host) {
	ls := make([]*Lease, 0, len(docs))
	var hosts []Host
	skip := func(id string, err error) {
		if s.opts.OnSkip != nil {
			s.opts.OnSkip(id, err)
		}
	}
	for _, d := range docs {
		switch {
		case strings.HasPrefix(d.ID, s.prefix+leaseSeparator):
			l, err := decode(d)
			if err == nil && l.StateError != nil {
				err = l.StateError
			}
			if err != nil {
				skip(d.ID, err)
				continue
			}
			ls = append(ls, l)
		case strings.HasPrefix(d.ID, HostIDPrefix(s.prefix)):
			h, err := DecodeHost(d)
			if err != nil || h.Prefix != s.prefix {
				if err == nil {
					err = fmt.Errorf("host record of prefix %s: %w", h.Prefix, ErrNotHost)
				}
				skip(d.ID, err)
				continue
			}
			hosts = append(hosts, h)
		}
	}
	slices.SortFunc(hosts, func(a, b Host) int { return strings.Compare(a.Instance, b.Instance) })
	return ls, hosts
}

// LiveHosts returns the instances of the hosts that are alive at now, sorted: the live owners
// of ls and the hosts whose presence record has not expired. A record does not count when its
// instance owns an expired lease: a live cfp host renews every lease it holds, so its record
// outlived it (it was killed) and only the lease expiry says so in time.
func LiveHosts(ls []*Lease, hosts []Host, now time.Time, expiration time.Duration) []string {
	live := map[string]bool{}
	dead := map[string]bool{}
	var out []string
	for _, l := range ls {
		if strings.TrimSpace(l.Owner) == "" {
			continue
		}
		if l.Expired(now, expiration) {
			dead[strings.ToLower(l.Owner)] = true
			continue
		}
		if !live[strings.ToLower(l.Owner)] {
			live[strings.ToLower(l.Owner)] = true
			out = append(out, l.Owner)
		}
	}
	for _, h := range hosts {
		k := strings.ToLower(h.Instance)
		if live[k] || dead[k] || h.Expired(now, expiration) {
			continue
		}
		live[k] = true
		out = append(out, h.Instance)
	}
	slices.Sort(out)
	return out
}
