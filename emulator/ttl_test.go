package emulator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// ttlContainer creates database db and container coll partitioned on pkPath with defaultTtl
// (nil: time to live off).
func ttlContainer(t *testing.T, c *azcosmos.Client, db, coll, pkPath string, defaultTTL *int32) *azcosmos.ContainerClient {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: db}, nil); err != nil && statusOf(err) != http.StatusConflict {
		t.Fatalf("create database: %v", err)
	}
	d, err := c.NewDatabase(db)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID:                     coll,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pkPath}},
		DefaultTimeToLive:      defaultTTL,
	}, nil)
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	cc, err := c.NewContainer(db, coll)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// fromStart reads the all-versions feed of a one-partition container from its first change.
var fromStart = map[string]string{"x-ms-documentdb-partitionkeyrangeid": "0", "If-None-Match": `"0"`}

func ptr[T any](v T) *T { return &v }

// putRaw upserts the JSON document body into partition pk.
func putRaw(t *testing.T, cc *azcosmos.ContainerClient, pk, body string) {
	t.Helper()
	if _, err := cc.UpsertItem(context.Background(), azcosmos.NewPartitionKeyString(pk), []byte(body), nil); err != nil {
		t.Fatalf("upsert %s: %v", body, err)
	}
}

// readStatus reads item id in partition pk and returns the status (200 or the error's).
func readStatus(t *testing.T, cc *azcosmos.ContainerClient, pk, id string) int {
	t.Helper()
	_, err := cc.ReadItem(context.Background(), azcosmos.NewPartitionKeyString(pk), id, nil)
	if err != nil {
		if s := statusOf(err); s != 0 {
			return s
		}
		t.Fatalf("read %s: %v", id, err)
	}
	return http.StatusOK
}

// queryIDs returns the sorted ids of every item, by a cross-partition query.
func queryIDs(t *testing.T, cc *azcosmos.ContainerClient) []string {
	t.Helper()
	pager := cc.NewQueryItemsPager("SELECT * FROM c", azcosmos.NewPartitionKey(), nil)
	var ids []string
	for pager.More() {
		p, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		for _, raw := range p.Items {
			var d doc
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, d.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func feedIDs(t *testing.T, cc *azcosmos.ContainerClient) []string {
	t.Helper()
	docs, _ := drainAll(t, cc)
	var ids []string
	for _, d := range docs {
		ids = append(ids, d.ID)
	}
	slices.Sort(ids)
	return ids
}

func containerTTL(t *testing.T, cc *azcosmos.ContainerClient) *int32 {
	t.Helper()
	resp, err := cc.Read(context.Background(), nil)
	if err != nil {
		t.Fatalf("read container: %v", err)
	}
	return resp.ContainerProperties.DefaultTimeToLive
}

func TestTTL_ExpiredItemVanishesFromReadsQueriesAndFeed(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := openEmu(t, emulator.Options{Partitions: 2, Now: clk.Now, TTLSweepInterval: -1})
	cc := ttlContainer(t, newClient(t, e, ""), "db", "c", "/pk", ptr[int32](-1))
	if got := containerTTL(t, cc); got == nil || *got != -1 {
		t.Fatalf("container defaultTtl = %v, want -1", got)
	}
	putRaw(t, cc, "a", `{"id":"short","pk":"a","ttl":10}`)
	putRaw(t, cc, "b", `{"id":"forever","pk":"b"}`)
	putRaw(t, cc, "c", `{"id":"never","pk":"c","ttl":-1}`)
	putRaw(t, cc, "d", `{"id":"nested","pk":"d","x":{"ttl":1}}`)

	clk.Advance(9 * time.Second)
	if s := readStatus(t, cc, "a", "short"); s != http.StatusOK {
		t.Fatalf("read before expiry: %d, want 200", s)
	}
	clk.Advance(time.Second)
	if s := readStatus(t, cc, "a", "short"); s != http.StatusNotFound {
		t.Errorf("read at expiry: %d, want 404", s)
	}
	want := []string{"forever", "nested", "never"}
	if got := queryIDs(t, cc); !slices.Equal(got, want) {
		t.Errorf("query after expiry = %v, want %v", got, want)
	}
	if got := feedIDs(t, cc); !slices.Equal(got, want) {
		t.Errorf("change feed after expiry = %v, want %v", got, want)
	}
	clk.Advance(100 * 24 * time.Hour)
	if got := queryIDs(t, cc); !slices.Equal(got, want) {
		t.Errorf("query 100 days later = %v, want %v", got, want)
	}
	// A replace of an expired item finds nothing; a create makes a fresh one.
	_, err := cc.ReplaceItem(context.Background(), azcosmos.NewPartitionKeyString("a"), "short", []byte(`{"id":"short","pk":"a"}`), nil)
	if statusOf(err) != http.StatusNotFound {
		t.Errorf("replace of an expired item: %v, want 404", err)
	}
	if _, err := cc.CreateItem(context.Background(), azcosmos.NewPartitionKeyString("a"), []byte(`{"id":"short","pk":"a","ttl":10}`), nil); err != nil {
		t.Errorf("create over an expired item: %v", err)
	}
	if s := readStatus(t, cc, "a", "short"); s != http.StatusOK {
		t.Errorf("read of the re-created item: %d, want 200", s)
	}
}

func TestTTL_DefaultTTL(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := openEmu(t, emulator.Options{Partitions: 1, Now: clk.Now, TTLSweepInterval: -1})
	c := newClient(t, e, "")
	off := ttlContainer(t, c, "db", "off", "/pk", nil)
	minute := ttlContainer(t, c, "db", "minute", "/pk", ptr[int32](60))
	if got := containerTTL(t, off); got != nil {
		t.Errorf("container without defaultTtl reads back defaultTtl %d", *got)
	}
	if got := containerTTL(t, minute); got == nil || *got != 60 {
		t.Errorf("container defaultTtl = %v, want 60", got)
	}
	putRaw(t, off, "p", `{"id":"ignored","pk":"p","ttl":5}`)
	putRaw(t, minute, "p", `{"id":"default","pk":"p"}`)
	putRaw(t, minute, "p", `{"id":"longer","pk":"p","ttl":120}`)
	putRaw(t, minute, "p", `{"id":"never","pk":"p","ttl":-1}`)

	clk.Advance(59 * time.Second)
	putRaw(t, minute, "p", `{"id":"default2","pk":"p"}`) // written later, expires later
	clk.Advance(time.Second)
	if got, want := queryIDs(t, minute), []string{"default2", "longer", "never"}; !slices.Equal(got, want) {
		t.Errorf("after 60 s = %v, want %v", got, want)
	}
	clk.Advance(time.Hour)
	if got, want := queryIDs(t, minute), []string{"never"}; !slices.Equal(got, want) {
		t.Errorf("after an hour = %v, want %v", got, want)
	}
	if s := readStatus(t, off, "p", "ignored"); s != http.StatusOK {
		t.Errorf("item ttl in a container without defaultTtl expired: read %d", s)
	}
}

func TestTTL_InvalidValuesAreRejected(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1, TTLSweepInterval: -1})
	c := newClient(t, e, "")
	d := ttlContainer(t, c, "db", "ok", "/pk", ptr[int32](-1)) // creates the database
	_ = d
	resp, body := rawRequest(t, e, http.MethodPost, "/dbs/db/colls", nil, `{"id":"zero","partitionKey":{"paths":["/pk"]},"defaultTtl":0}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("defaultTtl 0: %d %s, want 400", resp.StatusCode, body)
	}
	_, err := d.CreateItem(context.Background(), azcosmos.NewPartitionKeyString("p"), []byte(`{"id":"x","pk":"p","ttl":0}`), nil)
	if statusOf(err) != http.StatusBadRequest {
		t.Errorf("item ttl 0: %v, want 400", err)
	}
}

// A lease container's .lock marker ({"id":..., "ttl":30}, docs/protocol-leases.md, "Bootstrap") expires when the
// container has defaultTtl -1: the sweeper deletes it, logging the delete as a TTL expiry, and
// the next instance's create of the lock succeeds.
func TestTTL_SweeperExpiresLockMarker(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := openEmu(t, emulator.Options{Partitions: 1, Now: clk.Now, TTLSweepInterval: 5 * time.Millisecond})
	cc := ttlContainer(t, newClient(t, e, ""), "db", "leases", "/id", ptr[int32](-1))
	ctx := context.Background()
	lock := []byte(`{"id":"host.info.lock","ttl":30}`)
	if _, err := cc.CreateItem(ctx, azcosmos.NewPartitionKeyString("host.info.lock"), lock, nil); err != nil {
		t.Fatal(err)
	}
	putRaw(t, cc, "lease-0", `{"id":"lease-0","Owner":"a"}`)
	if _, err := cc.CreateItem(ctx, azcosmos.NewPartitionKeyString("host.info.lock"), lock, nil); statusOf(err) != http.StatusConflict {
		t.Fatalf("second lock create while held: %v, want 409", err)
	}

	clk.Advance(30 * time.Second)
	var del *avChange
	deadline := time.Now().Add(5 * time.Second)
	for del == nil && time.Now().Before(deadline) {
		_, changes := avFeed(t, e, "leases", fromStart)
		for i, c := range changes {
			if c.Metadata.OperationType == "delete" {
				del = &changes[i]
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if del == nil {
		t.Fatal("the sweeper logged no delete of the expired lock within 5 s")
	}
	if del.Metadata.ID != "host.info.lock" || del.Metadata.TimeToLiveExpired == nil || !*del.Metadata.TimeToLiveExpired {
		t.Errorf("delete = %v timeToLiveExpired=%v, want host.info.lock expired by TTL", del, del.Metadata.TimeToLiveExpired)
	}
	if string(del.Metadata.PartitionKey) != `{"id":"host.info.lock"}` {
		t.Errorf("delete partitionKey = %s", del.Metadata.PartitionKey)
	}
	if del.Metadata.LSN != 3 || del.Metadata.PreviousImageLSN != 1 {
		t.Errorf("delete lsn %d previous %d, want 3 and 1 (the partition's next LSN)", del.Metadata.LSN, del.Metadata.PreviousImageLSN)
	}
	if del.Previous["id"] != "host.info.lock" {
		t.Errorf("delete previous image = %v", del.Previous)
	}
	if _, err := cc.CreateItem(ctx, azcosmos.NewPartitionKeyString("host.info.lock"), lock, nil); err != nil {
		t.Errorf("lock create after expiry: %v", err)
	}
	if s := readStatus(t, cc, "lease-0", "lease-0"); s != http.StatusOK {
		t.Errorf("lease without ttl in a defaultTtl -1 container: read %d", s)
	}
	// A user delete is not a TTL expiry.
	if _, err := cc.DeleteItem(ctx, azcosmos.NewPartitionKeyString("lease-0"), "lease-0", nil); err != nil {
		t.Fatal(err)
	}
	_, changes := avFeed(t, e, "leases", fromStart)
	last := changes[len(changes)-1]
	if last.Metadata.OperationType != "delete" || last.Metadata.TimeToLiveExpired == nil || *last.Metadata.TimeToLiveExpired {
		t.Errorf("user delete = %v timeToLiveExpired=%v, want false", last, last.Metadata.TimeToLiveExpired)
	}
}

func TestTTL_SweepExpiredLogsOneDeleteAndBumpsLSN(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := openEmu(t, emulator.Options{Partitions: 1, Now: clk.Now, TTLSweepInterval: -1})
	cc := ttlContainer(t, newClient(t, e, ""), "db", "c", "/pk", ptr[int32](10))
	putRaw(t, cc, "p", `{"id":"a","pk":"p"}`)
	putRaw(t, cc, "p", `{"id":"b","pk":"p","ttl":-1}`)
	clk.Advance(10 * time.Second)
	n, err := e.SweepExpired()
	if err != nil || n != 1 {
		t.Fatalf("SweepExpired = %d, %v; want 1", n, err)
	}
	if n, err := e.SweepExpired(); err != nil || n != 0 {
		t.Errorf("second SweepExpired = %d, %v; want 0", n, err)
	}
	resp, changes := avFeed(t, e, "c", fromStart)
	if got := changeList(changes); got != "create a@1, create b@2, delete a@3" {
		t.Errorf("all-versions feed = %s", got)
	}
	if et := resp.Header.Get("etag"); et != `"3"` {
		t.Errorf("feed etag %s, want the LSN of the TTL delete", et)
	}
}

func TestTTL_RestartKeepsState(t *testing.T) {
	t.Parallel()
	clk := newClock()
	dir := t.TempDir()
	opts := emulator.Options{Dir: dir, Partitions: 1, Now: clk.Now, TTLSweepInterval: -1}
	e, err := emulator.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	cc := ttlContainer(t, newClient(t, e, ""), "db", "c", "/pk", ptr[int32](100))
	putRaw(t, cc, "p", `{"id":"a","pk":"p"}`)
	putRaw(t, cc, "p", `{"id":"b","pk":"p","ttl":-1}`)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	clk.Advance(100 * time.Second)
	e = openEmu(t, opts)
	cc, err = newClient(t, e, "").NewContainer("db", "c")
	if err != nil {
		t.Fatal(err)
	}
	if got := containerTTL(t, cc); got == nil || *got != 100 {
		t.Errorf("defaultTtl after restart = %v, want 100", got)
	}
	if s := readStatus(t, cc, "p", "a"); s != http.StatusNotFound {
		t.Errorf("expired item after restart: read %d, want 404", s)
	}
	if s := readStatus(t, cc, "p", "b"); s != http.StatusOK {
		t.Errorf("item with ttl -1 after restart: read %d, want 200", s)
	}
	if n, err := e.SweepExpired(); err != nil || n != 1 {
		t.Errorf("SweepExpired after restart = %d, %v; want 1", n, err)
	}
}
