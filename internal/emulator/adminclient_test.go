package emulator_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cfp-dev/cfp/internal/emulator"
)

// TestAdminClient_SplitMergeFaults drives a served emulator through its admin API: the status
// lists the container's ranges, a split makes two children, a merge joins them again, and fault
// rules are counted and cleared.
func TestAdminClient_SplitMergeFaults(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	setupContainer(t, newClient(t, e, ""), "db", "c")
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	adm := emulator.NewAdminClient(srv.URL+"/", "")
	defer adm.Close()

	ranges := func() []emulator.RangeStatus {
		t.Helper()
		st, err := adm.Status(ctx)
		if err != nil {
			t.Fatalf("Status() error = %v", err)
		}
		for _, d := range st.Databases {
			for _, c := range d.Containers {
				if d.ID == "db" && c.ID == "c" {
					return c.Ranges
				}
			}
		}
		t.Fatalf("db/c not in the status: %+v", st)
		return nil
	}
	before := ranges()
	if len(before) != 1 {
		t.Fatalf("ranges = %+v, want one", before)
	}
	children, err := adm.Split(ctx, "db", "c", before[0].ID)
	if err != nil || len(children) != 2 {
		t.Fatalf("Split() = %v, %v; want two children", children, err)
	}
	if got := ranges(); len(got) != 2 {
		t.Fatalf("ranges after the split = %+v, want two", got)
	}
	merged, err := adm.Merge(ctx, "db", "c", children)
	if err != nil || merged == "" {
		t.Fatalf("Merge() = %q, %v", merged, err)
	}
	if got := ranges(); len(got) != 1 || got[0].ID != merged {
		t.Fatalf("ranges after the merge = %+v, want only %s", got, merged)
	}

	n, err := adm.InjectFaults(ctx, emulator.FaultRuleJSON{Status: http.StatusTooManyRequests, Count: 1, ChangeFeedOnly: true})
	if err != nil || n != 1 {
		t.Fatalf("InjectFaults() = %d, %v; want 1 active rule", n, err)
	}
	if err := adm.ClearFaults(ctx); err != nil {
		t.Fatalf("ClearFaults() error = %v", err)
	}
	if st, _ := adm.Status(ctx); st.FaultRules != 0 {
		t.Errorf("fault rules after ClearFaults = %d, want 0", st.FaultRules)
	}

	// A split of a range that is gone is an answer of the API, not a transport error.
	var ae *emulator.AdminError
	if _, err := adm.Split(ctx, "db", "c", before[0].ID); !errors.As(err, &ae) || ae.AuthError() {
		t.Errorf("Split() of a gone range: %v, want an *AdminError that is no auth error", err)
	}
}

// TestAdminClient_Errors: a wrong key, an endpoint that is no emulator, one that does not
// answer and a key that cannot sign each give their own error.
func TestAdminClient_Errors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{})
	emu := httptest.NewServer(e.Handler())
	t.Cleanup(emu.Close)
	other := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(other.Close)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	var ae *emulator.AdminError
	if _, err := emulator.NewAdminClient(emu.URL, "d3Jvbmcga2V5IHdyb25nIGtleQ==").Status(ctx); !errors.As(err, &ae) || !ae.AuthError() {
		t.Errorf("wrong key: %v, want an *AdminError with AuthError", err)
	}
	if _, err := emulator.NewAdminClient(other.URL, "").Status(ctx); !errors.Is(err, emulator.ErrNoAdminAPI) {
		t.Errorf("not an emulator: %v, want ErrNoAdminAPI", err)
	}
	var unreachable *emulator.AdminUnreachableError
	if _, err := emulator.NewAdminClient(gone.URL, "").Status(ctx); !errors.As(err, &unreachable) || unreachable.Endpoint != gone.URL {
		t.Errorf("nothing listens: %v, want an *AdminUnreachableError for %s", err, gone.URL)
	}
	if _, err := emulator.NewAdminClient(emu.URL, "not base64!").Status(ctx); !errors.Is(err, emulator.ErrAdminKey) {
		t.Errorf("key that cannot sign: %v, want ErrAdminKey", err)
	}
}
