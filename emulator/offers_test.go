package emulator_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

func TestOffers_ManualAndAutoscaleReadAndReplace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	c := newClient(t, e, "")
	manual := azcosmos.NewManualThroughputProperties(400)
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, &azcosmos.CreateDatabaseOptions{ThroughputProperties: &manual}); err != nil {
		t.Fatal(err)
	}
	db, _ := c.NewDatabase("db")
	if r, err := db.ReadThroughput(ctx, nil); err != nil {
		t.Fatalf("read database throughput: %v", err)
	} else if n, ok := r.ThroughputProperties.ManualThroughput(); !ok || n != 400 {
		t.Errorf("database throughput %d %v, want manual 400", n, ok)
	}
	more := azcosmos.NewManualThroughputProperties(700)
	if r, err := db.ReplaceThroughput(ctx, more, nil); err != nil {
		t.Fatalf("replace database throughput: %v", err)
	} else if n, _ := r.ThroughputProperties.ManualThroughput(); n != 700 {
		t.Errorf("replaced throughput %d, want 700", n)
	}

	auto := azcosmos.NewAutoscaleThroughputProperties(5000)
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}},
		&azcosmos.CreateContainerOptions{ThroughputProperties: &auto}); err != nil {
		t.Fatal(err)
	}
	cc, _ := db.NewContainer("c")
	if r, err := cc.ReadThroughput(ctx, nil); err != nil {
		t.Fatalf("read container throughput: %v", err)
	} else if n, ok := r.ThroughputProperties.AutoscaleMaxThroughput(); !ok || n != 5000 {
		t.Errorf("container throughput %d %v, want autoscale 5000", n, ok)
	}
	auto = azcosmos.NewAutoscaleThroughputProperties(10000)
	if _, err := cc.ReplaceThroughput(ctx, auto, nil); err != nil {
		t.Fatalf("replace container throughput: %v", err)
	}
	if r, _ := cc.ReadThroughput(ctx, nil); r.ThroughputProperties != nil {
		if n, _ := r.ThroughputProperties.AutoscaleMaxThroughput(); n != 10000 {
			t.Errorf("after replace: autoscale %d, want 10000", n)
		}
	}
}

func TestContainerReplace_KeepsPartitionKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	ttl := int32(60)
	r, err := cc.Replace(ctx, azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}, DefaultTimeToLive: &ttl}, nil)
	if err != nil {
		t.Fatalf("replace container: %v", err)
	}
	if got := r.ContainerProperties.DefaultTimeToLive; got == nil || *got != 60 {
		t.Errorf("defaultTtl after replace = %v, want 60", got)
	}
	if _, err := cc.Replace(ctx, azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/other"}}}, nil); statusOf(err) != http.StatusBadRequest {
		t.Errorf("replace changing the partition key: %v, want 400", err)
	}
}

func TestNotServed_Is400NotSupported(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{})
	for _, path := range []string{"/dbs/db/clientencryptionkeys", "/dbs/db/colls/c/operations/other", "/dbs/db/colls/c/sprocs/s/more"} {
		resp, body := rawRequest(t, e, http.MethodPost, path, nil, "{}")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "not supported by cfp emulator") {
			t.Errorf("POST %s: %d %s, want 400 not supported by cfp emulator", path, resp.StatusCode, body)
		}
	}
}

func TestContainer_NormalisedDefinitionAndQuotaInfo(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	if resp, body := rawRequest(t, e, http.MethodPost, "/dbs", nil, `{"id":"db"}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create database: %d %s", resp.StatusCode, body)
	}
	if resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls", nil,
		`{"id":"c","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"indexingMode":"Consistent","includedPaths":[{"path":"/*"}]}}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create container: %d %s", resp.StatusCode, body)
	}
	resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c", map[string]string{"x-ms-documentdb-populatequotainfo": "true"}, "")
	for _, want := range []string{`"excludedPaths":[{"path":"/\"_etag\"/?"}]`, `"indexingMode":"consistent"`, `"automatic":true`,
		`"geospatialConfig":{"type":"Geography"}`, `"mode":"LastWriterWins"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("container read lacks %s: %s", want, body)
		}
	}
	if got := resp.Header.Get("x-ms-documentdb-collection-index-transformation-progress"); got != "100" {
		t.Errorf("index transformation progress = %q, want 100", got)
	}
}

// TestOffers_ContainerWithoutThroughputGetsTheDefault: a container created without throughput in
// a database without any has 400 RU/s of its own, as in a provisioned account (reading it was 404
// before, and the JavaScript SDK's container tests that read it failed); one in a database with
// shared throughput still has none.
func TestOffers_ContainerWithoutThroughputGetsTheDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "own")
	r, err := cc.ReadThroughput(ctx, nil)
	if err != nil {
		t.Fatalf("read the throughput of a container created without any: %v", err)
	}
	if n, ok := r.ThroughputProperties.ManualThroughput(); !ok || n != 400 {
		t.Errorf("container throughput %d (manual %v), want manual 400", n, ok)
	}

	manual := azcosmos.NewManualThroughputProperties(1000)
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "shared"}, &azcosmos.CreateDatabaseOptions{ThroughputProperties: &manual}); err != nil {
		t.Fatal(err)
	}
	db, _ := c.NewDatabase("shared")
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	sc, _ := db.NewContainer("c")
	if _, err := sc.ReadThroughput(ctx, nil); statusOf(err) != http.StatusNotFound {
		t.Errorf("a container sharing its database's throughput: read answered %v, want 404", err)
	}
}

// TestPartitions_PerThroughput: without a forced count a new container gets the physical
// partitions the service gives it, one per 10,000 RU/s of its throughput (manual, or the
// autoscale maximum), at least one; Options.Partitions forces a count whatever the throughput.
func TestPartitions_PerThroughput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ranges := func(t *testing.T, db *azcosmos.DatabaseClient, id string, tp *azcosmos.ThroughputProperties) int {
		t.Helper()
		var o *azcosmos.CreateContainerOptions
		if tp != nil {
			o = &azcosmos.CreateContainerOptions{ThroughputProperties: tp}
		}
		if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: id, PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, o); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		cc, _ := db.NewContainer(id)
		frs, err := cc.ReadFeedRanges(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(frs)
	}
	manual := func(n int32) *azcosmos.ThroughputProperties {
		p := azcosmos.NewManualThroughputProperties(n)
		return &p
	}
	auto := func(n int32) *azcosmos.ThroughputProperties {
		p := azcosmos.NewAutoscaleThroughputProperties(n)
		return &p
	}

	c := newClient(t, openEmu(t, emulator.Options{}), "")
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := c.NewDatabase("db")
	for _, tc := range []struct {
		id   string
		tp   *azcosmos.ThroughputProperties
		want int
	}{
		{"default", nil, 1}, {"m400", manual(400), 1}, {"m10000", manual(10000), 1}, {"m10100", manual(10100), 2},
		{"m40000", manual(40000), 4}, {"a4000", auto(4000), 1}, {"a30000", auto(30000), 3},
	} {
		if got := ranges(t, db, tc.id, tc.tp); got != tc.want {
			t.Errorf("container %s: %d partition key ranges, want %d", tc.id, got, tc.want)
		}
	}
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "shared"}, &azcosmos.CreateDatabaseOptions{ThroughputProperties: manual(50000)}); err != nil {
		t.Fatal(err)
	}
	shared, _ := c.NewDatabase("shared")
	if got := ranges(t, shared, "s", nil); got != 1 {
		t.Errorf("a container sharing its database's throughput: %d ranges, want 1", got)
	}

	forced := newClient(t, openEmu(t, emulator.Options{Partitions: 3}), "")
	if _, err := forced.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	fdb, _ := forced.NewDatabase("db")
	for i, tp := range []*azcosmos.ThroughputProperties{nil, manual(400), manual(90000)} {
		if got := ranges(t, fdb, fmt.Sprintf("c%d", i), tp); got != 3 {
			t.Errorf("Partitions 3, container %d: %d ranges, want 3", i, got)
		}
	}
}
