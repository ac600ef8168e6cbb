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

// MemDocuments is an in-memory lease container with the service's semantics: every write gets a
// new _etag and _ts, If-Match mismatches fail with ErrPreconditionFailed, duplicate ids within a
// logical partition with ErrConflict, missing documents with ErrNotFound. The partition-key path
// decides which value identifies a document's logical partition, and documents with the same id
// can live in different logical partitions of a /partitionKey container. It is safe for
// concurrent use and meant for tests of every package that uses a lease container.
type MemDocuments struct {
	path string
	// Now is the clock for _ts and TTL (default time.Now).
	Now func() time.Time
	// TTL, when true, hides documents whose "ttl" seconds have passed since their _ts, as a
	// container with TTL enabled does.
	TTL bool

	mu   sync.Mutex
	seq  uint64
	ver  uint64 // every write and delete (Version)
	docs map[memKey]Document
}

type memKey struct{ pk, id string }

var _ Documents = (*MemDocuments)(nil)

// NewMemDocuments returns an empty container partitioned on pkPath ("/id", "/partitionKey", or
// "" for a non-partitioned container).
func NewMemDocuments(pkPath string) *MemDocuments {
	return &MemDocuments{path: pkPath, docs: map[memKey]Document{}}
}

// PartitionKeyPath implements Documents.
func (m *MemDocuments) PartitionKeyPath(context.Context) (string, error) { return m.path, nil }

func (m *MemDocuments) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// key validates pk against body the way the service does and returns the document's key.
func (m *MemDocuments) key(id, pk string, body *object) (memKey, error) {
	switch m.path {
	case "":
		return memKey{id: id}, nil
	case "/id":
		if pk != id {
			return memKey{}, fmt.Errorf("partition key %q does not match id %q", pk, id)
		}
	default:
		if body != nil {
			field := strings.TrimPrefix(m.path, "/")
			v, _ := body.str(field)
			if v != pk {
				return memKey{}, fmt.Errorf("partition key %q does not match the document's %s %q", pk, field, v)
			}
		}
	}
	return memKey{pk: pk, id: id}, nil
}

func (m *MemDocuments) live(d Document) bool {
	if !m.TTL {
		return true
	}
	var meta struct {
		TTL *float64 `json:"ttl"`
		TS  int64    `json:"_ts"`
	}
	if json.Unmarshal(d.Body, &meta) != nil || meta.TTL == nil || *meta.TTL < 0 {
		return true
	}
	return m.now().Before(time.Unix(meta.TS, 0).Add(time.Duration(*meta.TTL * float64(time.Second))))
}

// stamp sets the system properties of a write and returns the stored document.
func (m *MemDocuments) stamp(k memKey, o *object) (Document, error) {
	m.seq++
	m.ver++
	etag := fmt.Sprintf(`"%08x-0000-0000-0000-%012x"`, m.seq, m.seq)
	if err := o.set(fETag, etag); err != nil {
		return Document{}, err
	}
	if err := o.set(fTS, m.now().Unix()); err != nil {
		return Document{}, err
	}
	b, err := o.MarshalJSON()
	if err != nil {
		return Document{}, err
	}
	d := Document{ID: k.id, PK: k.pk, ETag: etag, Body: b}
	m.docs[k] = d
	return copyDoc(d), nil
}

func copyDoc(d Document) Document {
	d.Body = append([]byte(nil), d.Body...)
	return d
}

// QueryPrefix implements Documents: documents sorted by id, then partition key.
func (m *MemDocuments) QueryPrefix(_ context.Context, prefix string) ([]Document, error) {
	// Only the stored documents are taken under the lock (a write stores a new body, never
	// changes one): with many hosts in one process listing a thousand leases each cycle,
	// copying the bodies and sorting under the lock queued every write behind the listings.
	m.mu.Lock()
	out := make([]Document, 0, len(m.docs))
	for k, d := range m.docs {
		if strings.HasPrefix(k.id, prefix) && m.live(d) {
			out = append(out, d)
		}
	}
	m.mu.Unlock()
	for i := range out {
		out[i] = copyDoc(out[i])
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return out[i].PK < out[j].PK
	})
	return out, nil
}

// Read implements Documents.
func (m *MemDocuments) Read(_ context.Context, id, pk string) (Document, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, err := m.key(id, pk, nil)
	if err != nil {
		return Document{}, err
	}
	d, ok := m.docs[k]
	if !ok || !m.live(d) {
		return Document{}, fmt.Errorf("read %s: %w", id, ErrNotFound)
	}
	return copyDoc(d), nil
}

func parseBody(body []byte) (*object, string, error) {
	o, err := parseObject(body)
	if err != nil {
		return nil, "", fmt.Errorf("bad request: %w", err)
	}
	id, _ := o.str(fID)
	if id == "" {
		return nil, "", errors.New("bad request: the document has no id")
	}
	return o, id, nil
}

// Create implements Documents.
func (m *MemDocuments) Create(_ context.Context, pk string, body []byte) (Document, error) {
	o, id, err := parseBody(body)
	if err != nil {
		return Document{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k, err := m.key(id, pk, o)
	if err != nil {
		return Document{}, err
	}
	if d, ok := m.docs[k]; ok && m.live(d) {
		return Document{}, fmt.Errorf("create %s: %w", id, ErrConflict)
	}
	return m.stamp(k, o)
}

// Replace implements Documents.
func (m *MemDocuments) Replace(_ context.Context, id, pk, ifMatch string, body []byte) (Document, error) {
	o, bodyID, err := parseBody(body)
	if err != nil {
		return Document{}, err
	}
	if bodyID != id {
		return Document{}, fmt.Errorf("bad request: replace %s with a document whose id is %s", id, bodyID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k, err := m.key(id, pk, o)
	if err != nil {
		return Document{}, err
	}
	d, ok := m.docs[k]
	if !ok || !m.live(d) {
		return Document{}, fmt.Errorf("replace %s: %w", id, ErrNotFound)
	}
	if ifMatch != "" && ifMatch != d.ETag {
		return Document{}, fmt.Errorf("replace %s: %w", id, ErrPreconditionFailed)
	}
	return m.stamp(k, o)
}

// Delete implements Documents.
func (m *MemDocuments) Delete(_ context.Context, id, pk, ifMatch string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, err := m.key(id, pk, nil)
	if err != nil {
		return err
	}
	d, ok := m.docs[k]
	if !ok || !m.live(d) {
		return fmt.Errorf("delete %s: %w", id, ErrNotFound)
	}
	if ifMatch != "" && ifMatch != d.ETag {
		return fmt.Errorf("delete %s: %w", id, ErrPreconditionFailed)
	}
	delete(m.docs, k)
	m.ver++
	return nil
}

// Put stores body as is under pk, replacing any document with its id there, and returns the
// stored document (with fresh _etag and _ts). Tests use it to seed a container with documents
// written by other tools.
func (m *MemDocuments) Put(pk string, body []byte) (Document, error) {
	o, id, err := parseBody(body)
	if err != nil {
		return Document{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k, err := m.key(id, pk, o)
	if err != nil {
		return Document{}, err
	}
	return m.stamp(k, o)
}

// Version changes on every write and delete, so that a reader can keep what it decoded of the
// container until the next change. Documents that expire under TTL do not change it.
func (m *MemDocuments) Version() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ver
}

// Len returns the number of live documents.
func (m *MemDocuments) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, d := range m.docs {
		if m.live(d) {
			n++
		}
	}
	return n
}
