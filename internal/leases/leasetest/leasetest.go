// Package leasetest is the conformance suite of leases.Documents: every implementation (the
// in-memory MemDocuments, the Cosmos container of internal/cosmos against the embedded emulator)
// must pass TestDocuments, so that the lease store behaves the same on all of them.
package leasetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cfp-dev/cfp/internal/leases"
)

// TestDocuments runs the conformance suite. newDocs must return an empty lease container
// partitioned on /id or /partitionKey for each call.
func TestDocuments(t *testing.T, newDocs func(t *testing.T) leases.Documents) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, c *container)
	}{
		{"CreateRead", testCreateRead},
		{"CreateConflict", testCreateConflict},
		{"ReadMissing", testReadMissing},
		{"ReplaceIfMatch", testReplaceIfMatch},
		{"ReplaceStale", testReplaceStale},
		{"ReplaceUnconditional", testReplaceUnconditional},
		{"ReplaceMissing", testReplaceMissing},
		{"Delete", testDelete},
		{"QueryPrefix", testQueryPrefix},
		{"ConcurrentReplace", testConcurrentReplace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			docs := newDocs(t)
			path, err := docs.PartitionKeyPath(context.Background())
			if err != nil {
				t.Fatalf("PartitionKeyPath: %v", err)
			}
			if path != "/id" && path != "/partitionKey" {
				t.Fatalf("PartitionKeyPath = %q, want /id or /partitionKey", path)
			}
			tc.fn(t, &container{Documents: docs, path: path})
		})
	}
}

// container wraps the Documents under test with helpers that build bodies and partition keys
// for its partition-key path.
type container struct {
	leases.Documents
	path string
}

// doc builds a body with id and fields and returns it with its partition-key value.
func (c *container) doc(t *testing.T, id string, fields map[string]any) (string, []byte) {
	t.Helper()
	m := map[string]any{"id": id}
	for k, v := range fields {
		m[k] = v
	}
	pk := id
	if c.path == "/partitionKey" {
		if v, ok := fields["partitionKey"].(string); ok {
			pk = v
		}
		m["partitionKey"] = pk
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return pk, b
}

func (c *container) create(t *testing.T, id string, fields map[string]any) leases.Document {
	t.Helper()
	pk, body := c.doc(t, id, fields)
	d, err := c.Create(context.Background(), pk, body)
	if err != nil {
		t.Fatalf("Create(%s): %v", id, err)
	}
	return d
}

func field(t *testing.T, d leases.Document, name string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(d.Body, &m); err != nil {
		t.Fatalf("document %s body is not JSON: %v", d.ID, err)
	}
	return m[name]
}

func testCreateRead(t *testing.T, c *container) {
	ctx := context.Background()
	d := c.create(t, "p..0", map[string]any{"Owner": "a", "n": 1})
	if d.ID != "p..0" || d.ETag == "" {
		t.Fatalf("Create returned id %q etag %q, want id p..0 and an etag", d.ID, d.ETag)
	}
	if got := field(t, d, "_etag"); got != d.ETag {
		t.Errorf("body _etag = %v, want the document's ETag %s", got, d.ETag)
	}
	got, err := c.Read(ctx, "p..0", d.PK)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if got.ETag != d.ETag {
		t.Errorf("Read ETag = %s, want %s", got.ETag, d.ETag)
	}
	if field(t, got, "Owner") != "a" || field(t, got, "n") != 1.0 {
		t.Errorf("Read body = %s, want Owner a and n 1", got.Body)
	}
	if _, ok := field(t, got, "_ts").(float64); !ok {
		t.Errorf("Read body has no numeric _ts: %s", got.Body)
	}
}

func testCreateConflict(t *testing.T, c *container) {
	c.create(t, "p..0", nil)
	pk, body := c.doc(t, "p..0", map[string]any{"Owner": "b"})
	_, err := c.Create(context.Background(), pk, body)
	if !errors.Is(err, leases.ErrConflict) {
		t.Fatalf("second Create = %v, want ErrConflict", err)
	}
}

func testReadMissing(t *testing.T, c *container) {
	if _, err := c.Read(context.Background(), "p..nope", "p..nope"); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Read missing = %v, want ErrNotFound", err)
	}
}

func testReplaceIfMatch(t *testing.T, c *container) {
	ctx := context.Background()
	d := c.create(t, "p..0", map[string]any{"Owner": "a"})
	_, body := c.doc(t, "p..0", map[string]any{"Owner": "b"})
	r, err := c.Replace(ctx, "p..0", d.PK, d.ETag, body)
	if err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if r.ETag == "" || r.ETag == d.ETag {
		t.Errorf("Replace ETag = %q, want a new etag (old %s)", r.ETag, d.ETag)
	}
	got, err := c.Read(ctx, "p..0", d.PK)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if field(t, got, "Owner") != "b" || got.ETag != r.ETag {
		t.Errorf("after Replace: Owner %v etag %s, want b and %s", field(t, got, "Owner"), got.ETag, r.ETag)
	}
}

func testReplaceStale(t *testing.T, c *container) {
	ctx := context.Background()
	d := c.create(t, "p..0", map[string]any{"Owner": "a"})
	_, body := c.doc(t, "p..0", map[string]any{"Owner": "b"})
	if _, err := c.Replace(ctx, "p..0", d.PK, d.ETag, body); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	_, body = c.doc(t, "p..0", map[string]any{"Owner": "c"})
	if _, err := c.Replace(ctx, "p..0", d.PK, d.ETag, body); !errors.Is(err, leases.ErrPreconditionFailed) {
		t.Fatalf("Replace with a stale etag = %v, want ErrPreconditionFailed", err)
	}
	if err := c.Delete(ctx, "p..0", d.PK, d.ETag); !errors.Is(err, leases.ErrPreconditionFailed) {
		t.Fatalf("Delete with a stale etag = %v, want ErrPreconditionFailed", err)
	}
	got, err := c.Read(ctx, "p..0", d.PK)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if field(t, got, "Owner") != "b" {
		t.Errorf("stale writes changed the document: Owner %v, want b", field(t, got, "Owner"))
	}
}

func testReplaceUnconditional(t *testing.T, c *container) {
	ctx := context.Background()
	d := c.create(t, "p..0", map[string]any{"Owner": "a"})
	_, body := c.doc(t, "p..0", map[string]any{"Owner": "b"})
	if _, err := c.Replace(ctx, "p..0", d.PK, "", body); err != nil {
		t.Fatalf("Replace without If-Match: %v", err)
	}
}

func testReplaceMissing(t *testing.T, c *container) {
	pk, body := c.doc(t, "p..gone", nil)
	if _, err := c.Replace(context.Background(), "p..gone", pk, "", body); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Replace missing = %v, want ErrNotFound", err)
	}
}

func testDelete(t *testing.T, c *container) {
	ctx := context.Background()
	d := c.create(t, "p..0", nil)
	if err := c.Delete(ctx, "p..0", d.PK, d.ETag); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := c.Read(ctx, "p..0", d.PK); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Read after Delete = %v, want ErrNotFound", err)
	}
	if err := c.Delete(ctx, "p..0", d.PK, ""); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("second Delete = %v, want ErrNotFound", err)
	}
	c.create(t, "p..0", nil) // the id is free again
}

func testQueryPrefix(t *testing.T, c *container) {
	ctx := context.Background()
	want := []string{"a..0", "a..1", "a..2", "a..05C1DFFFFFFFFC-FF"}
	for i, id := range want {
		fields := map[string]any{}
		if c.path == "/partitionKey" {
			fields["partitionKey"] = fmt.Sprintf("guid-%d", i) // leases in distinct logical partitions
		}
		c.create(t, id, fields)
	}
	for _, id := range []string{"a.info", "a.lock", "b..0", "xa..0"} {
		c.create(t, id, nil)
	}
	docs, err := c.QueryPrefix(ctx, "a..")
	if err != nil {
		t.Fatalf("QueryPrefix: %v", err)
	}
	var got []string
	for _, d := range docs {
		got = append(got, d.ID)
		if d.ETag == "" || len(d.Body) == 0 {
			t.Errorf("QueryPrefix document %s has no etag or body", d.ID)
		}
		if c.path == "/partitionKey" && d.PK != "" && !strings.HasPrefix(d.PK, "guid-") {
			t.Errorf("QueryPrefix document %s has PK %q, want its partitionKey value", d.ID, d.PK)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("QueryPrefix(a..) = %v, want %v", got, want)
	}
	all, err := c.QueryPrefix(ctx, "")
	if err != nil {
		t.Fatalf("QueryPrefix(\"\"): %v", err)
	}
	if len(all) != 8 {
		t.Errorf("QueryPrefix(\"\") returned %d documents, want 8", len(all))
	}
}

func testConcurrentReplace(t *testing.T, c *container) {
	ctx := context.Background()
	d := c.create(t, "p..0", map[string]any{"Owner": "none"})
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, body := c.doc(t, "p..0", map[string]any{"Owner": fmt.Sprintf("w%d", i)})
			_, errs[i] = c.Replace(ctx, "p..0", d.PK, d.ETag, body)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, leases.ErrPreconditionFailed):
			t.Errorf("concurrent Replace: %v, want nil or ErrPreconditionFailed", err)
		}
	}
	if won != 1 {
		t.Errorf("%d concurrent replaces with the same etag succeeded, want exactly 1", won)
	}
}
