package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
)

func bootstrapWith(t *testing.T, src *feedtest.MemSource, docs *leases.MemDocuments, instance string, f feed.LeaseFormat) (feed.BootstrapResult, error) {
	t.Helper()
	opts := fastOptions(instance)
	opts.LeaseFormat = f
	p, err := feed.NewProcessor(src, leases.NewStore(docs, testPrefix, leases.StoreOptions{}),
		feed.HandlerFunc(func(context.Context, feed.Batch) error { return nil }), opts)
	if err != nil {
		t.Fatal(err)
	}
	return p.Bootstrap(context.Background())
}

// A lease set bootstrapped with LeaseFormatJava holds the documents Java's EPK bootstrapper
// writes (epkversion/LeaseStoreManagerImpl.createLeaseIfNotExist, ServiceItemLeaseV1's
// serializer): version 1, a "<min>-<max>" token, feedRange, a null continuation, and none of
// .NET's fields.
func TestProcessor_BootstrapInJavaFormat(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := feedtest.NewMemSource(2)
		docs := leases.NewMemDocuments("/id")
		res, err := bootstrapWith(t, src, docs, "boot", feed.LeaseFormatJava)
		if err != nil || res.Created != 2 {
			t.Fatalf("Bootstrap = %+v, %v; want 2 leases created", res, err)
		}
		ls, err := leases.NewStore(docs, testPrefix, leases.StoreOptions{}).List(context.Background())
		if err != nil || len(ls) != 2 {
			t.Fatalf("List = %d leases, %v", len(ls), err)
		}
		for _, l := range ls {
			if l.Family != leases.FamilyJavaEPK || l.Token != l.Range.String() || l.Continuation != "" {
				t.Errorf("lease %s: family %s, range %v, continuation %q; want a Java EPK lease named by its range, no continuation", l.Token, l.Family, l.Range, l.Continuation)
			}
			d, err := docs.Read(context.Background(), l.ID, l.ID)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(d.Body, &got); err != nil {
				t.Fatal(err)
			}
			if got["version"] != 1.0 || got["feedRange"] == nil || got["ContinuationToken"] != nil {
				t.Errorf("lease %s document %s: want version 1, feedRange, a null ContinuationToken", l.Token, d.Body)
			}
			for _, dotnet := range []string{"FeedRange", "Mode", "properties"} {
				if _, ok := got[dotnet]; ok {
					t.Errorf("lease %s document has .NET's %s: %s", l.Token, dotnet, d.Body)
				}
			}
		}
		// A host without an explicit format joins it and keeps its format.
		if res, err := bootstrapWith(t, src, docs, "other", feed.LeaseFormatDefault); err != nil || !res.Existed {
			t.Fatalf("a default host on the Java set: Bootstrap = %+v, %v", res, err)
		}
	})
}

// An explicit format the existing leases contradict is refused before the host touches a lease:
// a Java host could not read .NET's leases, nor .NET Java's.
func TestProcessor_ExplicitLeaseFormatRefusesASetInTheOther(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		first, then feed.LeaseFormat
		family      leases.Family
	}{
		{feed.LeaseFormatDefault, feed.LeaseFormatJava, leases.FamilyDotNetV0},
		{feed.LeaseFormatDotNet, feed.LeaseFormatJava, leases.FamilyDotNetV0},
		{feed.LeaseFormatJava, feed.LeaseFormatDotNet, leases.FamilyJavaEPK},
	} {
		t.Run(string(tc.first)+"-then-"+string(tc.then), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := feedtest.NewMemSource(2)
				docs := leases.NewMemDocuments("/id")
				if _, err := bootstrapWith(t, src, docs, "first", tc.first); err != nil {
					t.Fatal(err)
				}
				_, err := bootstrapWith(t, src, docs, "second", tc.then)
				var lf *feed.LeaseFormatError
				if !errors.As(err, &lf) || lf.Family != tc.family || lf.Want != tc.then {
					t.Fatalf("Bootstrap = %v, want a *LeaseFormatError naming a %s lease", err, tc.family)
				}
				// The same format, or none, is accepted.
				if _, err := bootstrapWith(t, src, docs, "third", tc.first); err != nil {
					t.Fatalf("Bootstrap in the set's own format: %v", err)
				}
			})
		})
	}
}
