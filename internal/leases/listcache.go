package leases

import (
	"bytes"
	"sync"
)

// listCache remembers the leases decoded by the store's last listing, by document, so that a
// listing decodes only the documents that changed since: an acquire cycle lists every lease of
// the processor, and between two cycles most of them are the same document (decoding one is
// about twelve times the work of copying the lease decoded last time). An entry is reused only
// for a document identical to the one it was decoded from (id, partition key, ETag and body),
// so a listing returns what decoding every document would; each caller gets its own copy.
type listCache struct {
	mu   sync.Mutex
	last map[string]listed
}

// listed is one decoded document of a listing.
type listed struct {
	pk, etag string
	body     []byte
	lease    *Lease
}

// decoder returns the decode function of one listing of n documents; done makes the documents
// it decoded the cache for the next listing (a document not listed again is forgotten).
func (c *listCache) decoder(n int) (decode func(Document) (*Lease, error), done func()) {
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	next := make(map[string]listed, n)
	decode = func(d Document) (*Lease, error) {
		if e, ok := last[d.ID]; ok && e.pk == d.PK && e.etag == d.ETag && bytes.Equal(e.body, d.Body) {
			next[d.ID] = e
			return e.lease.Clone(), nil
		}
		l, err := Decode(d)
		if err != nil {
			return nil, err
		}
		next[d.ID] = listed{pk: d.PK, etag: d.ETag, body: bytes.Clone(d.Body), lease: l.Clone()}
		return l, nil
	}
	done = func() {
		c.mu.Lock()
		c.last = next
		c.mu.Unlock()
	}
	return decode, done
}
