package leases

import (
	"context"
	"errors"
)

// Sentinel errors of the lease container. internal/cosmos translates service status codes into
// these once; callers test with errors.Is.
var (
	// ErrNotFound: the document (or its container) does not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a document with that id already exists (409).
	ErrConflict = errors.New("already exists")
	// ErrPreconditionFailed: the If-Match ETag no longer matches: someone else wrote it (412).
	ErrPreconditionFailed = errors.New("precondition failed")
)

// Document is one raw document of the lease container.
type Document struct {
	// ID is the document id.
	ID string
	// PK is the document's partition-key value in the lease container (the id itself in an
	// /id container, the partitionKey field in a /partitionKey container).
	PK string
	// ETag is the service's _etag, used for If-Match.
	ETag string
	// Body is the whole JSON document as stored, system properties included.
	Body []byte
}

// Documents is the lease container as the lease store needs it. Implementations: the Cosmos
// container in internal/cosmos and MemDocuments for tests. All methods are safe for concurrent use.
type Documents interface {
	// PartitionKeyPath returns the container's partition-key path ("/id", "/partitionKey").
	PartitionKeyPath(ctx context.Context) (string, error)
	// QueryPrefix returns every document whose id starts with prefix, across all partitions
	// (SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)). An empty prefix lists everything.
	QueryPrefix(ctx context.Context, prefix string) ([]Document, error)
	// Read returns one document or ErrNotFound.
	Read(ctx context.Context, id, pk string) (Document, error)
	// Create inserts body and returns the stored document; ErrConflict when the id exists.
	Create(ctx context.Context, pk string, body []byte) (Document, error)
	// Replace overwrites the document when its ETag still equals ifMatch (no check when ifMatch
	// is empty); ErrPreconditionFailed on a mismatch, ErrNotFound when it is gone.
	Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (Document, error)
	// Delete removes the document (same ifMatch rules as Replace); ErrNotFound when it is gone.
	Delete(ctx context.Context, id, pk, ifMatch string) error
}
