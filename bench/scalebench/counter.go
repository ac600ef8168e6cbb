package main

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/feed/dotnettest"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Request charges, in RU, of the lease container's operations: the figures cfp's emulator
// charges (emulator/charge.go), after the service's published table of request charges
// by document size and the number of indexed properties: a point read of a lease (under 1 KB)
// 1 RU; a create of a lease with its ~12 indexed properties about 4.65 RU and a replace 1.87
// times that, about 8.7 RU; a query page 2.79 RU plus 0.05 per document loaded, the lease
// query reading pages of 100 documents (the service's default page size when the SDK sets no
// maximum item count; a .NET host's listing reads pages of 1,000, dotnettest.ListPageSize),
// each page a request; a write that fails its If-Match (412) or finds no
// document (404) 1 RU (the service charges failed requests, less than the write; the
// documentation gives no figure).
const (
	queryPageSize   = 100
	operationsCount = int(opCount)
)

// op is a kind of lease-container request as the counter reports it.
type op int

const (
	opList       op = iota // a query page listing leases (QueryPrefix)
	opRecords              // a query page of cfp presence records only
	opRead                 // a point read
	opCreate               // a create (leases, markers, presence records)
	opRenew                // a replace that changed neither owner nor continuation
	opCheckpoint           // a replace that changed the continuation
	opOwner                // a replace that changed the owner (acquire, steal, release)
	opPresence             // a replace of a cfp presence record
	opDelete               // a delete
	opFailed               // a replace or delete that failed (412 If-Match, 404)
	opCount
)

var opNames = [...]string{"list", "records", "read", "create", "renew", "checkpoint", "owner", "presence", "delete", "failed write"}

// counts is a snapshot of the counter.
type counts struct {
	Requests [operationsCount]int64
	MilliRU  [operationsCount]int64
}

func (c counts) sub(o counts) counts {
	for i := range c.Requests {
		c.Requests[i] -= o.Requests[i]
		c.MilliRU[i] -= o.MilliRU[i]
	}
	return c
}

func (c counts) totalRequests() int64 {
	var n int64
	for _, v := range c.Requests {
		n += v
	}
	return n
}

func (c counts) totalRU() float64 {
	var n int64
	for _, v := range c.MilliRU {
		n += v
	}
	return float64(n) / 1000
}

// counter is a leases.Documents decorator that counts requests by kind, charges them RU by the
// table above, and waits latency before each request (a lease container over the network).
type counter struct {
	leases.Documents
	latency time.Duration
	hosts   string // the id prefix of presence records

	requests [operationsCount]atomic.Int64
	milliRU  [operationsCount]atomic.Int64

	mu   sync.Mutex
	last map[string]leaseState // by id: what the last write of each lease said
}

type leaseState struct{ owner, continuation string }

func newCounter(d leases.Documents, prefix string, latency time.Duration) *counter {
	return &counter{Documents: d, latency: latency, hosts: leases.HostIDPrefix(prefix), last: map[string]leaseState{}}
}

func (c *counter) snapshot() counts {
	var s counts
	for i := range s.Requests {
		s.Requests[i] = c.requests[i].Load()
		s.MilliRU[i] = c.milliRU[i].Load()
	}
	return s
}

func (c *counter) charge(o op, n int64, ru float64) {
	c.requests[o].Add(n)
	c.milliRU[o].Add(int64(math.Round(ru * 1000)))
}

func (c *counter) wait(ctx context.Context) error {
	if c.latency <= 0 {
		return nil
	}
	t := time.NewTimer(c.latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// indexedTerms counts the scalars of a JSON document (array elements included, system
// properties not): what the default indexing policy indexes.
func indexedTerms(body []byte) int {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return emulator.RefIndexedTerms
	}
	var count func(v any) int
	count = func(v any) int {
		switch x := v.(type) {
		case map[string]any:
			n := 0
			for _, c := range x {
				n += count(c)
			}
			return n
		case []any:
			n := 0
			for _, c := range x {
				n += count(c)
			}
			return n
		}
		return 1
	}
	n := 0
	for k, v := range doc {
		if !strings.HasPrefix(k, "_") {
			n += count(v)
		}
	}
	return n
}

func (c *counter) QueryPrefix(ctx context.Context, prefix string) ([]leases.Document, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	docs, err := c.Documents.QueryPrefix(ctx, prefix)
	pageSize := queryPageSize
	if n := dotnettest.QueryPageSize(ctx); n > 0 {
		pageSize = n // a .NET host's listing: pages of 1,000
	}
	pages := max(1, (len(docs)+pageSize-1)/pageSize)
	ru := 0.0
	for p := range pages {
		page := docs[min(len(docs), p*pageSize):min(len(docs), (p+1)*pageSize)]
		size := 0
		for _, d := range page {
			size += len(d.Body)
		}
		ru += emulator.ChargeQueryPage(len(page), size)
	}
	kind := opList
	if strings.HasPrefix(prefix, c.hosts) {
		kind = opRecords
	}
	c.charge(kind, int64(pages), ru)
	return docs, err
}

func (c *counter) Read(ctx context.Context, id, pk string) (leases.Document, error) {
	if err := c.wait(ctx); err != nil {
		return leases.Document{}, err
	}
	d, err := c.Documents.Read(ctx, id, pk)
	c.charge(opRead, 1, emulator.ChargeRead(len(d.Body)))
	return d, err
}

func (c *counter) Create(ctx context.Context, pk string, body []byte) (leases.Document, error) {
	if err := c.wait(ctx); err != nil {
		return leases.Document{}, err
	}
	d, err := c.Documents.Create(ctx, pk, body)
	c.charge(opCreate, 1, emulator.ChargeWrite(len(body), indexedTerms(body), false))
	if err == nil {
		c.classify(d.ID, body)
	}
	return d, err
}

func (c *counter) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	if err := c.wait(ctx); err != nil {
		return leases.Document{}, err
	}
	d, err := c.Documents.Replace(ctx, id, pk, ifMatch, body)
	switch {
	case err != nil:
		c.charge(opFailed, 1, emulator.Meta)
	case strings.HasPrefix(id, c.hosts):
		c.charge(opPresence, 1, emulator.ChargeWrite(len(body), indexedTerms(body), true))
	default:
		c.charge(c.classify(id, body), 1, emulator.ChargeWrite(len(body), indexedTerms(body), true))
	}
	return d, err
}

func (c *counter) Delete(ctx context.Context, id, pk, ifMatch string) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	err := c.Documents.Delete(ctx, id, pk, ifMatch)
	if err != nil {
		c.charge(opFailed, 1, emulator.Meta)
	} else {
		c.charge(opDelete, 1, emulator.ChargeWrite(1024, emulator.RefIndexedTerms, false))
	}
	return err
}

// classify remembers what a successful write of a lease said and returns the kind of replace
// it was against the previous write.
func (c *counter) classify(id string, body []byte) op {
	var l struct {
		Owner        *string `json:"Owner"`
		Continuation *string `json:"ContinuationToken"`
	}
	_ = json.Unmarshal(body, &l)
	var s leaseState
	if l.Owner != nil {
		s.owner = *l.Owner
	}
	if l.Continuation != nil {
		s.continuation = *l.Continuation
	}
	c.mu.Lock()
	prev, ok := c.last[id]
	c.last[id] = s
	c.mu.Unlock()
	switch {
	case !ok || prev.owner != s.owner:
		return opOwner
	case prev.continuation != s.continuation:
		return opCheckpoint
	}
	return opRenew
}

// errKilled is every request of a killed host.
var errKilled = errors.New("host killed")

// killable is one host's view of the lease container: once killed, every request fails, as a
// killed process sends none; nothing it held is released.
type killable struct {
	leases.Documents
	dead atomic.Bool
}

func (k *killable) check() error {
	if k.dead.Load() {
		return errKilled
	}
	return nil
}

func (k *killable) PartitionKeyPath(ctx context.Context) (string, error) {
	if err := k.check(); err != nil {
		return "", err
	}
	return k.Documents.PartitionKeyPath(ctx)
}

func (k *killable) QueryPrefix(ctx context.Context, prefix string) ([]leases.Document, error) {
	if err := k.check(); err != nil {
		return nil, err
	}
	return k.Documents.QueryPrefix(ctx, prefix)
}

func (k *killable) Read(ctx context.Context, id, pk string) (leases.Document, error) {
	if err := k.check(); err != nil {
		return leases.Document{}, err
	}
	return k.Documents.Read(ctx, id, pk)
}

func (k *killable) Create(ctx context.Context, pk string, body []byte) (leases.Document, error) {
	if err := k.check(); err != nil {
		return leases.Document{}, err
	}
	return k.Documents.Create(ctx, pk, body)
}

func (k *killable) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	if err := k.check(); err != nil {
		return leases.Document{}, err
	}
	return k.Documents.Replace(ctx, id, pk, ifMatch, body)
}

func (k *killable) Delete(ctx context.Context, id, pk, ifMatch string) error {
	if err := k.check(); err != nil {
		return err
	}
	return k.Documents.Delete(ctx, id, pk, ifMatch)
}
