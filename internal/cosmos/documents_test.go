package cosmos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/leases/leasetest"
)

// clientOptionsForTest copies the account's client options (transport included), so a test can
// open a second client on the same in-process emulator.
func (a *Account) clientOptionsForTest() *azcosmos.ClientOptions {
	o := *a.opts
	return &o
}

var leaseContainerSeq atomic.Int64

// newLeaseDocs creates a fresh lease container partitioned on pkPath.
func newLeaseDocs(t *testing.T, a *Account, pkPath string) leases.Documents {
	t.Helper()
	ctx := context.Background()
	if err := a.CreateDatabaseIfNotExists(ctx, "db"); err != nil {
		t.Fatalf("CreateDatabaseIfNotExists() error = %v", err)
	}
	name := fmt.Sprintf("leases%d", leaseContainerSeq.Add(1))
	if _, err := a.CreateContainerIfNotExists(ctx, "db", name, pkPath, nil); err != nil {
		t.Fatalf("CreateContainerIfNotExists() error = %v", err)
	}
	return a.LeaseDocuments("db", name)
}

func TestLeaseDocuments_Conformance(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 2)
	n := 0
	leasetest.TestDocuments(t, func(t *testing.T) leases.Documents {
		n++
		if n%2 == 0 {
			return newLeaseDocs(t, a, "/partitionKey")
		}
		return newLeaseDocs(t, a, "/id")
	})
}

func TestLeaseDocuments_ETags(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	d := newLeaseDocs(t, a, "/id")
	ctx := context.Background()

	if p, err := d.PartitionKeyPath(ctx); err != nil || p != "/id" {
		t.Fatalf("PartitionKeyPath() = %q, %v; want /id", p, err)
	}
	created, err := d.Create(ctx, "lease-1", []byte(`{"id":"lease-1","Owner":"a"}`))
	if err != nil {
		t.Fatalf("Create() error = %v", err)
	}
	if created.ID != "lease-1" || created.PK != "lease-1" || created.ETag == "" || !strings.Contains(string(created.Body), `"_etag"`) {
		t.Fatalf("Create() = %+v, want id, pk, etag and the stored body", created)
	}
	if _, err := d.Create(ctx, "lease-1", []byte(`{"id":"lease-1"}`)); !errors.Is(err, leases.ErrConflict) {
		t.Fatalf("Create(existing) error = %v, want ErrConflict", err)
	}
	replaced, err := d.Replace(ctx, "lease-1", "lease-1", created.ETag, []byte(`{"id":"lease-1","Owner":"b"}`))
	if err != nil {
		t.Fatalf("Replace(current etag) error = %v", err)
	}
	if replaced.ETag == created.ETag {
		t.Fatalf("Replace() kept the etag %s", replaced.ETag)
	}
	if _, err := d.Replace(ctx, "lease-1", "lease-1", created.ETag, []byte(`{"id":"lease-1","Owner":"c"}`)); !errors.Is(err, leases.ErrPreconditionFailed) {
		t.Fatalf("Replace(stale etag) error = %v, want ErrPreconditionFailed", err)
	}
	if err := d.Delete(ctx, "lease-1", "lease-1", created.ETag); !errors.Is(err, leases.ErrPreconditionFailed) {
		t.Fatalf("Delete(stale etag) error = %v, want ErrPreconditionFailed", err)
	}
	read, err := d.Read(ctx, "lease-1", "lease-1")
	if err != nil || read.ETag != replaced.ETag || !strings.Contains(string(read.Body), `"Owner":"b"`) {
		t.Fatalf("Read() = %+v, %v; want the replaced document", read, err)
	}
	if err := d.Delete(ctx, "lease-1", "lease-1", replaced.ETag); err != nil {
		t.Fatalf("Delete(current etag) error = %v", err)
	}
	_, err = d.Read(ctx, "lease-1", "lease-1")
	if !errors.Is(err, leases.ErrNotFound) || !strings.Contains(err.Error(), "lease-1") {
		t.Fatalf("Read(deleted) error = %v, want ErrNotFound naming lease-1", err)
	}
	if _, err := d.Replace(ctx, "lease-1", "lease-1", "", []byte(`{"id":"lease-1"}`)); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Replace(deleted) error = %v, want ErrNotFound", err)
	}
	if err := d.Delete(ctx, "lease-1", "lease-1", ""); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Delete(deleted) error = %v, want ErrNotFound", err)
	}
}

func TestLeaseDocuments_QueryPrefixPaging(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 3)
	d := newLeaseDocs(t, a, "/partitionKey")
	ctx := context.Background()
	const n = 230 // more than one query page
	for i := range n {
		id := fmt.Sprintf("proc.host_db_coll..%d", i)
		body := fmt.Sprintf(`{"id":%q,"partitionKey":"pk-%d"}`, id, i%7)
		if _, err := d.Create(ctx, fmt.Sprintf("pk-%d", i%7), []byte(body)); err != nil {
			t.Fatalf("Create(%s) error = %v", id, err)
		}
	}
	for _, id := range []string{"other.host_db_coll..0", "proc.host_db_coll.info"} {
		if _, err := d.Create(ctx, "x", []byte(fmt.Sprintf(`{"id":%q,"partitionKey":"x"}`, id))); err != nil {
			t.Fatalf("Create(%s) error = %v", id, err)
		}
	}
	docs, err := d.QueryPrefix(ctx, "proc.host_db_coll..")
	if err != nil {
		t.Fatalf("QueryPrefix() error = %v", err)
	}
	seen := map[string]bool{}
	for _, doc := range docs {
		if !strings.HasPrefix(doc.ID, "proc.host_db_coll..") || seen[doc.ID] {
			t.Fatalf("QueryPrefix() returned %q (duplicate %v)", doc.ID, seen[doc.ID])
		}
		seen[doc.ID] = true
		if !strings.HasPrefix(doc.PK, "pk-") || doc.ETag == "" {
			t.Fatalf("QueryPrefix() document %+v lacks its pk or etag", doc)
		}
	}
	if len(seen) != n {
		t.Fatalf("QueryPrefix() = %d documents, want %d", len(seen), n)
	}
	all, err := d.QueryPrefix(ctx, "")
	if err != nil || len(all) != n+2 {
		t.Fatalf("QueryPrefix(\"\") = %d documents, %v; want %d", len(all), err, n+2)
	}
}

func TestCreateContainerIfNotExists_LeaseContainerHasTTLOn(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	ctx := context.Background()
	if err := a.CreateDatabaseIfNotExists(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateContainerIfNotExists(ctx, "db", "leases", "/id", LeaseContainerOptions()); err != nil {
		t.Fatalf("CreateContainerIfNotExists(lease options) error = %v", err)
	}
	if _, err := a.CreateContainerIfNotExists(ctx, "db", "plain", "/id", nil); err != nil {
		t.Fatalf("CreateContainerIfNotExists(nil) error = %v", err)
	}
	ttlOf := func(name string) *int32 {
		t.Helper()
		cc, err := a.client.NewContainer("db", name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := cc.Read(ctx, nil)
		if err != nil {
			t.Fatalf("read container %s: %v", name, err)
		}
		return r.ContainerProperties.DefaultTimeToLive
	}
	if got := ttlOf("leases"); got == nil || *got != -1 {
		t.Errorf("lease container defaultTtl = %v, want -1", got)
	}
	if got := ttlOf("plain"); got != nil {
		t.Errorf("container created without options has defaultTtl %d, want none", *got)
	}
	// The lease container accepts the .NET processor's lock marker with its ttl.
	d := a.LeaseDocuments("db", "leases")
	if _, err := d.Create(ctx, "x.lock", []byte(`{"id":"x.lock","ttl":30}`)); err != nil {
		t.Fatalf("create lock marker: %v", err)
	}
}
