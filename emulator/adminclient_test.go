package emulator_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
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

// TestAdmin_CapturedRequestCannotBeReplayedLaterOrWithAnotherBody replays a signed admin
// request as someone who captured it would: with another body (the signature covers the body's
// SHA-256), and after the service's 15-minute x-ms-date window (403).
func TestAdmin_CapturedRequestCannotBeReplayedLaterOrWithAnotherBody(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{Partitions: 1})
	send := func(req *http.Request) (int, string) {
		t.Helper()
		resp, err := emulator.Transport{Handler: e.Handler()}.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const asked = `{"status":503,"count":1}`
	req, _ := http.NewRequest(http.MethodPost, "http://raw.test/_cfp/faults", strings.NewReader(asked))
	if err := emulator.SignRequest(req, ""); err != nil {
		t.Fatal(err)
	}
	captured := req.Header.Clone()
	if code, body := send(req); code != http.StatusOK {
		t.Fatalf("the signed request: %d %s", code, body)
	}
	e.ClearFaults()

	forged, _ := http.NewRequest(http.MethodPost, "http://raw.test/_cfp/faults", strings.NewReader(`{"status":500,"fraction":1}`))
	forged.Header = captured.Clone()
	if code, body := send(forged); code != http.StatusUnauthorized {
		t.Errorf("the captured signature with another body: %d %s, want 401", code, body)
	}

	// The same request, captured 16 minutes ago: signed then with its body, as SignRequest does.
	key, _ := base64.StdEncoding.DecodeString(auth.WellKnownKey)
	date := time.Now().Add(-16 * time.Minute).UTC().Format(http.TimeFormat)
	old, _ := http.NewRequest(http.MethodPost, "http://raw.test/_cfp/faults", strings.NewReader(asked))
	old.Header.Set("x-ms-date", date)
	typ, link := auth.ResourceFromPath("/_cfp/faults")
	old.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+auth.SignWithBody(key, "POST", typ, link, date, []byte(asked))))
	if code, body := send(old); code != http.StatusForbidden || !strings.Contains(body, "not valid at the current time") {
		t.Errorf("a request signed 16 minutes ago: %d %s, want 403", code, body)
	}
	if st, _ := e.Status(); st.FaultRules != 0 {
		t.Errorf("%d fault rules injected by replays, want 0", st.FaultRules)
	}
}
