package cosmos

import (
	"context"
	"errors"
	"testing"

	"github.com/cfp-dev/cfp/internal/leases"
)

// TestOpenLeaseSet: the one opener of a processor's lease set finds Java's name-based set when
// only it exists, keeps the rid set otherwise, takes an explicit prefix as given, creates the
// lease container when asked and names a missing one.
func TestOpenLeaseSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	acct := openLocal(t, 2)
	if err := acct.CreateDatabaseIfNotExists(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if _, err := acct.CreateContainerIfNotExists(ctx, "shop", "orders", "/id", nil); err != nil {
		t.Fatal(err)
	}
	info, err := acct.Container("shop", "orders").Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set := func(processor, explicit string) LeaseSet {
		return LeaseSet{Monitored: acct, Info: info, Database: "shop", Container: "leases", Processor: processor, Explicit: explicit}
	}

	_, err = OpenLeaseSet(ctx, set("p", ""))
	if !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("a missing lease container: err = %v, want ErrNotFound", err)
	}
	missing := set("p", "")
	missing.MayBeMissing = true
	if s, err := OpenLeaseSet(ctx, missing); err != nil || s.Prefix() != leases.Prefix("p", acct.Host(), info.DatabaseRID, info.ContainerRID) {
		t.Fatalf("MayBeMissing: %v, %v; want the rid prefix", s, err)
	}
	create := set("p", "")
	create.Create = true
	if _, err := OpenLeaseSet(ctx, create); err != nil {
		t.Fatalf("Create: %v", err)
	}

	docs := acct.LeaseDocuments("shop", "leases")
	byRID := func(p string) string { return leases.Prefix(p, acct.Host(), info.DatabaseRID, info.ContainerRID) }
	byName := func(p string) string { return leases.Prefix(p, acct.JavaHost(), "shop", "orders") }
	for _, id := range []string{leases.InfoID(byName("java")), leases.InfoID(byName("both")), leases.InfoID(byRID("both"))} {
		if _, err := docs.Create(ctx, id, []byte(`{"id":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, processor, explicit, want string
	}{
		{"a new set takes the rid prefix", "new", "", byRID("new")},
		{"only Java's set exists", "java", "", byName("java")},
		{"both exist: the rid set", "both", "", byRID("both")},
		{"an explicit prefix", "java", "mine", "mine"},
	} {
		s, err := OpenLeaseSet(ctx, set(tc.processor, tc.explicit))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s.Prefix() != tc.want {
			t.Errorf("%s: prefix %q, want %q", tc.name, s.Prefix(), tc.want)
		}
	}
}

// TestFromClient_ViewOfABuiltAccount: the client of an account NewAccount built gives, through
// FromClient, a view with that account's own partition listing (meta), whose Close leaves the
// client open; once the account closed, the same client is a caller's client again.
func TestFromClient_ViewOfABuiltAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := openLocal(t, 1)
	v, err := FromClient(a.Client(), ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if v.meta == nil || v.meta != a.meta || v.borrowed || v.Host() != a.Host() {
		t.Errorf("view: meta %p (want %p), borrowed %v, host %q (want %q)", v.meta, a.meta, v.borrowed, v.Host(), a.Host())
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateDatabaseIfNotExists(ctx, "shop"); err != nil {
		t.Errorf("the account after its view closed: %v", err)
	}
	client := a.Client()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := FromClient(client, ClientConfig{}); err != nil || !b.borrowed || b.meta != nil {
		t.Errorf("after the account closed: %+v, %v; want a borrowed account", b, err)
	}
}
