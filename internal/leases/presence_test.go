package leases_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

func TestHostID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ instance, want string }{
		{"web-1.contoso.com-4242", testPrefix + ".host.web-1.contoso.com-4242"},
		{`a/b\c?d#e%f`, testPrefix + ".host.a%2Fb%5Cc%3Fd%23e%25f"},
		{"x..y", testPrefix + ".host.x..y"},
	} {
		id := leases.HostID(testPrefix, tc.instance)
		if id != tc.want {
			t.Errorf("HostID(%q) = %s, want %s", tc.instance, id, tc.want)
		}
		// The SDKs list "<prefix>.." and must never see a host record.
		if strings.HasPrefix(id, testPrefix+"..") {
			t.Errorf("HostID(%q) = %s is under the lease namespace", tc.instance, id)
		}
	}
}

func TestStore_AnnounceHostsWithdraw(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/id", "/partitionKey"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			s, docs, clk := newTestStore(t, path)
			ctx := context.Background()
			createLease(t, s, "0")
			h, err := s.Announce(ctx, "web/1", 0)
			if err != nil {
				t.Fatalf("Announce: %v", err)
			}
			if h.Instance != "web/1" || h.Prefix != testPrefix || !h.Timestamp.Equal(clk.Now().Truncate(100*time.Nanosecond)) {
				t.Errorf("Announce = %+v", h)
			}
			d, err := docs.Read(ctx, h.ID, h.PK)
			if err != nil {
				t.Fatalf("read the record: %v", err)
			}
			if bodyField(t, d.Body, "ttl") != 3600.0 || bodyField(t, d.Body, "cfpHost") != "web/1" {
				t.Errorf("record body = %s, want cfpHost and ttl 3600", d.Body)
			}
			if pk := bodyField(t, d.Body, "partitionKey"); (path == "/partitionKey") != (pk == h.ID) {
				t.Errorf("record body = %s: partitionKey %v in a %s container", d.Body, pk, path)
			}

			clk.Add(10 * time.Second)
			if _, err := s.Announce(ctx, "web/1", 0); err != nil {
				t.Fatalf("second Announce: %v", err)
			}
			if _, err := s.Announce(ctx, "web-2", 90*time.Second); err != nil {
				t.Fatal(err)
			}
			hosts, err := s.Hosts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(hosts) != 2 || hosts[0].Instance != "web-2" || hosts[1].Instance != "web/1" || !hosts[1].Timestamp.Equal(clk.Now().Truncate(100*time.Nanosecond)) {
				t.Fatalf("Hosts = %+v, want web-2 and web/1 refreshed", hosts)
			}

			// One query gives both, and the lease listing of the SDKs' namespace does not change.
			ls, hs, err := s.ListWithHosts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ls) != 1 || ls[0].Token != "0" || len(hs) != 2 {
				t.Errorf("ListWithHosts = %d leases, %d hosts; want 1 and 2", len(ls), len(hs))
			}
			if ls, err := s.List(ctx); err != nil || len(ls) != 1 {
				t.Errorf("List = %d leases, %v; want only the lease", len(ls), err)
			}

			if err := s.Withdraw(ctx, "web/1"); err != nil {
				t.Fatal(err)
			}
			if err := s.Withdraw(ctx, "web/1"); err != nil {
				t.Errorf("Withdraw of a gone record = %v, want nil", err)
			}
			if hosts, _ := s.Hosts(ctx); len(hosts) != 1 || hosts[0].Instance != "web-2" {
				t.Errorf("Hosts after Withdraw = %+v, want web-2 only", hosts)
			}
		})
	}
}

func TestStore_Announce_RecreatesADeletedRecord(t *testing.T) {
	t.Parallel()
	s, docs, _ := newTestStore(t, "/id")
	ctx := context.Background()
	h, err := s.Announce(ctx, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := docs.Delete(ctx, h.ID, h.PK, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Announce(ctx, "a", 0); err != nil {
		t.Fatalf("Announce after the record was deleted: %v", err)
	}
	if hosts, _ := s.Hosts(ctx); len(hosts) != 1 {
		t.Errorf("Hosts = %+v, want the record back", hosts)
	}
}

func TestStore_Hosts_SkipsForeignDocuments(t *testing.T) {
	t.Parallel()
	var skipped []string
	docs := leases.NewMemDocuments("/id")
	s := leases.NewStore(docs, testPrefix, leases.StoreOptions{OnSkip: func(id string, err error) {
		if !errors.Is(err, leases.ErrNotHost) {
			t.Errorf("skip %s: %v, want ErrNotHost", id, err)
		}
		skipped = append(skipped, id)
	}})
	ctx := context.Background()
	if _, err := s.Announce(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"id":"` + testPrefix + `.host.junk","hello":1}`,
		`{"id":"` + testPrefix + `.host.b","cfpHost":"c"}`,
	} {
		if _, err := docs.Put(bodyID(t, body), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	hosts, err := s.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 1 || hosts[0].Instance != "a" {
		t.Errorf("Hosts = %+v, want a only", hosts)
	}
	if len(skipped) != 2 {
		t.Errorf("skipped %v, want the two foreign documents", skipped)
	}
}

func bodyID(t *testing.T, body string) string {
	t.Helper()
	id, _ := bodyField(t, []byte(body), "id").(string)
	return id
}

func TestHost_Expired(t *testing.T) {
	t.Parallel()
	h := leases.Host{Instance: "a", Timestamp: checkNow.Add(-time.Minute)}
	if h.Expired(checkNow, 2*time.Minute) {
		t.Error("a record refreshed 1m ago expired under a 2m expiration")
	}
	if !h.Expired(checkNow, 30*time.Second) {
		t.Error("a record refreshed 1m ago is live under a 30s expiration")
	}
	if !(leases.Host{Instance: "a"}).Expired(checkNow, time.Hour) {
		t.Error("a record without a timestamp is live")
	}
}

func TestLiveHosts(t *testing.T) {
	t.Parallel()
	owned := func(owner string, age time.Duration) *leases.Lease {
		l := v1("", "FF", owner)
		l.Timestamp = checkNow.Add(-age)
		return l
	}
	host := func(instance string, age time.Duration) leases.Host {
		return leases.Host{Instance: instance, Timestamp: checkNow.Add(-age)}
	}
	for _, tc := range []struct {
		name  string
		ls    []*leases.Lease
		hosts []leases.Host
		want  string
	}{
		{"owners and idle hosts", []*leases.Lease{owned("dotnet-1", 0), owned("", 0)}, []leases.Host{host("cfp-1", 0), host("cfp-2", 10*time.Second)}, "[cfp-1 cfp-2 dotnet-1]"},
		{"an owner with a record counts once", []*leases.Lease{owned("Cfp-1", 0)}, []leases.Host{host("cfp-1", 0)}, "[Cfp-1]"},
		{"an expired record does not count", nil, []leases.Host{host("cfp-1", 2*time.Minute)}, "[]"},
		{"an expired owner does not count", []*leases.Lease{owned("cfp-1", 2*time.Minute)}, nil, "[]"},
		{"a record outlived by its expired lease does not count", []*leases.Lease{owned("cfp-1", 2*time.Minute)}, []leases.Host{host("cfp-1", 30*time.Second)}, "[]"},
		{"an owner with a live and an expired lease counts", []*leases.Lease{owned("cfp-1", 2*time.Minute), owned("cfp-1", 0)}, []leases.Host{host("cfp-1", 0)}, "[cfp-1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := fmt.Sprint(leases.LiveHosts(tc.ls, tc.hosts, checkNow, time.Minute))
			if got != tc.want {
				t.Errorf("LiveHosts = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestDiscover_HostRecords checks that presence records are markers of their prefix: counted
// as hosts, never as leases or invalid documents, whatever the instance name looks like.
func TestDiscover_HostRecords(t *testing.T) {
	t.Parallel()
	s, docs, _ := newTestStore(t, "/id")
	ctx := context.Background()
	createLease(t, s, "0")
	if err := s.MarkInitialized(ctx); err != nil {
		t.Fatal(err)
	}
	instances := []string{"web-2", "a..b", "x.info", "y.lock", "web/1"}
	for _, in := range instances {
		if _, err := s.Announce(ctx, in, 0); err != nil {
			t.Fatal(err)
		}
	}
	// A prefix that has only a host record (a host waiting for the bootstrap).
	waiting := leases.NewStore(docs, "waitinglocalhost_db_coll", leases.StoreOptions{})
	if _, err := waiting.Announce(ctx, "w", 0); err != nil {
		t.Fatal(err)
	}
	all, err := docs.QueryPrefix(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got := leases.Discover(all)
	if len(got) != 2 {
		t.Fatalf("Discover found %d prefixes, want 2: %+v", len(got), got)
	}
	p := got[0]
	if p.Prefix != testPrefix {
		p = got[1]
	}
	var names []string
	for _, h := range p.Hosts {
		names = append(names, h.Instance)
	}
	slices.Sort(instances)
	if p.Leases != 1 || p.Invalid != 0 || !p.HasInfo || p.HasLock || fmt.Sprint(names) != fmt.Sprint(instances) {
		t.Errorf("Discover = %+v (hosts %v), want 1 lease, no invalid document, .info, hosts %v", p, names, instances)
	}
	w := got[0]
	if w.Prefix == testPrefix {
		w = got[1]
	}
	if w.Leases != 0 || w.Invalid != 0 || len(w.Hosts) != 1 || w.Hosts[0].Instance != "w" {
		t.Errorf("waiting prefix = %+v, want one host record", w)
	}
	var ls []*leases.Lease
	for _, d := range all {
		if pre, _, ok := leases.SplitID(d.ID); ok && pre == testPrefix {
			l, err := leases.Decode(d)
			if err != nil {
				t.Fatalf("document %s under the lease namespace: %v", d.ID, err)
			}
			ls = append(ls, l)
		}
	}
	if fs := leases.Check(ls, time.Now(), time.Minute); len(fs) != 0 {
		t.Errorf("Check = %v, want no findings: host records are not leases", kinds(fs))
	}
}

// TestStore_AnnounceIncarnation: the record keeps the writer's incarnation and start, ReadHost
// reads them back, and a plain Announce (an older cfp) leaves them unknown.
func TestStore_AnnounceIncarnation(t *testing.T) {
	t.Parallel()
	s, _, clk := newTestStore(t, "/id")
	ctx := context.Background()
	if _, err := s.ReadHost(ctx, "a"); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("ReadHost of a missing record = %v, want ErrNotFound", err)
	}
	since := clk.Now().Add(-time.Minute).UTC()
	if _, err := s.AnnounceIncarnation(ctx, leases.Host{Instance: "a", Incarnation: "i1", Since: since}, 0); err != nil {
		t.Fatal(err)
	}
	h, err := s.ReadHost(ctx, "a")
	if err != nil || h.Incarnation != "i1" || !h.Since.Equal(since) || h.Instance != "a" {
		t.Fatalf("ReadHost = %+v, %v; want incarnation i1 since %s", h, err, since)
	}
	if _, err := s.Announce(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	if h, err := s.ReadHost(ctx, "a"); err != nil || h.Incarnation != "" || !h.Since.IsZero() {
		t.Fatalf("after a plain Announce: %+v, %v; want no incarnation", h, err)
	}
}

// TestStore_AnnounceExpiration: a record carries its host's lease expiration (cfpExpiration,
// in milliseconds) when one is given, and reads back 0 without it.
func TestStore_AnnounceExpiration(t *testing.T) {
	t.Parallel()
	s, _, _ := newTestStore(t, "/id")
	ctx := context.Background()
	if _, err := s.AnnounceIncarnation(ctx, leases.Host{Instance: "a", Leases: 2, Expiration: 4500 * time.Millisecond}, 0); err != nil {
		t.Fatal(err)
	}
	if h, err := s.ReadHost(ctx, "a"); err != nil || h.Expiration != 4500*time.Millisecond || h.Leases != 2 {
		t.Fatalf("ReadHost = %+v, %v; want expiration 4.5s and 2 leases", h, err)
	}
	if _, err := s.Announce(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	if h, err := s.ReadHost(ctx, "a"); err != nil || h.Expiration != 0 {
		t.Fatalf("after a plain Announce: %+v, %v; want no expiration", h, err)
	}
}
