package cosmos

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/epk"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// borrowedAccount builds an azcosmos client of its own over the embedded emulator of a (as a
// user of the public package would, with or without PerCallPolicies) and opens it with
// FromClient.
func borrowedAccount(t *testing.T, a *Account, policies bool) *Account {
	t.Helper()
	opts := &azcosmos.ClientOptions{}
	opts.Transport = &emulator.Transport{Handler: a.Emulator().Handler()}
	if policies {
		opts.PerCallPolicies = PerCallPolicies()
	}
	cred, err := azcosmos.NewKeyCredential(auth.WellKnownKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azcosmos.NewClientWithKey(a.Endpoint(), cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	b, err := FromClient(client, ClientConfig{})
	if err != nil {
		t.Fatalf("FromClient() error = %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// idsAndRanges renders partitions for comparison: id, range and parents.
func idsAndRanges(ps []feed.Partition) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID + " " + p.Range.String() + " parents " + strings.Join(p.Parents, ",")
	}
	return out
}

// TestFromClient_Partitions: an account over the caller's client lists the same partitions,
// ids, ranges and (for a split it saw the parent of) parents, as the signed partition key range
// feed, before and after a split.
func TestFromClient_Partitions(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 3)
	c := newFeedContainer(t, a)
	b := borrowedAccount(t, a, false)
	if b.Host() != "localhost" {
		t.Errorf("Host() = %q, want localhost", b.Host())
	}
	bc := b.Container("db", "orders")
	if got, want := idsAndRanges(partitions(t, bc)), idsAndRanges(partitions(t, c)); !slices.Equal(got, want) {
		t.Fatalf("borrowed Partitions() = %+v, want %+v", got, want)
	}

	upsert(t, c, somePKs, 0, 12)
	first, err := bc.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "1", Start: feed.StartFrom{Kind: feed.StartBeginning}})
	if err != nil {
		t.Fatalf("ReadPage(1) error = %v", err)
	}
	if _, err := a.Emulator().Split("db", "orders", "1"); err != nil {
		t.Fatalf("Split() error = %v", err)
	}
	_, err = bc.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "1", Start: feed.StartFrom{Kind: feed.StartContinuation, Continuation: first.Continuation}})
	if !feed.IsRangeGone(err) {
		t.Fatalf("ReadPage(1) after the split error = %v, want a RangeGoneError", err)
	}
	got, want := idsAndRanges(partitions(t, bc)), idsAndRanges(partitions(t, c))
	if len(want) != 4 || !slices.Equal(got, want) {
		t.Fatalf("borrowed Partitions() after the split = %+v, want %+v (4 partitions)", got, want)
	}
}

// TestFromClient_SubRangeNeedsPolicies: a read of part of a partition through a client built
// without PerCallPolicies would return the whole partition: it fails with ErrClientPolicies
// instead, and the same client built with them reads only the sub-range.
func TestFromClient_SubRangeNeedsPolicies(t *testing.T) {
	t.Parallel()
	a := openLocal(t, 1)
	c := newFeedContainer(t, a)
	ids := upsert(t, c, somePKs, 0, 16)
	var keys []string
	for _, pk := range somePKs {
		keys = append(keys, epk.HashV2([]any{pk}))
	}
	slices.Sort(keys)
	half := leases.Range{Min: "", Max: keys[len(keys)/2]}
	req := feed.ReadRequest{PartitionID: "0", Range: half, Start: feed.StartFrom{Kind: feed.StartBeginning}}

	plain := borrowedAccount(t, a, false).Container("db", "orders")
	if _, err := plain.ReadPage(context.Background(), req); !errors.Is(err, ErrClientPolicies) {
		t.Fatalf("sub-range ReadPage without the policies error = %v, want ErrClientPolicies", err)
	}
	if _, err := plain.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0", Start: feed.StartFrom{Kind: feed.StartBeginning}}); err != nil {
		t.Fatalf("whole-partition ReadPage without the policies error = %v, want nil", err)
	}
	if _, err := plain.ReadPage(context.Background(), feed.ReadRequest{PartitionID: "0", Mode: feed.AllVersionsAndDeletes, Start: feed.StartFrom{Kind: feed.StartNow}}); !errors.Is(err, ErrClientPolicies) {
		t.Fatalf("all-versions ReadPage without the policies error = %v, want ErrClientPolicies", err)
	}

	withPolicies := borrowedAccount(t, a, true).Container("db", "orders")
	got, _ := drain(t, withPolicies, req)
	want, _ := drain(t, c, req)
	if len(want) == 0 || len(want) == len(ids) {
		t.Fatalf("test setup: range %s holds %d of %d documents", half, len(want), len(ids))
	}
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("sub-range read through the caller's client = %v, want %v", sorted(got), sorted(want))
	}
}

func TestFromClient_Nil(t *testing.T) {
	t.Parallel()
	if _, err := FromClient(nil, ClientConfig{}); err == nil {
		t.Fatal("FromClient(nil) error = nil")
	}
}
