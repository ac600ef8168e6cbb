package cmd

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// kedaTotalLag computes the total lag KEDA's azure-cosmosdb scaler reports for the leases
// whose id starts with prefix, with the scaler's own requests and arithmetic
// (kedacore/keda pkg/scalers/azure_cosmosdb_scaler.go, estimateOnce and estimatePartitionLag,
// for .NET v0 leases): a cross-partition query of the lease container; per lease, one change
// feed read of at most one item from its ContinuationToken (from the beginning when it has
// none); lag = session-token LSN - first item's _lsn + 1, 0 on 304 or no item; the sum of the
// positive lags. KEDA builds prefix itself as processorName + the account's short name + ".",
// which matches Azure hosts (account.documents.azure.com) but not a host without a dot such as
// localhost, so the test passes the lease prefix.
func kedaTotalLag(t *testing.T, endpoint, db, coll, leaseColl, prefix string) int64 {
	t.Helper()
	do := func(method, resourceType, link, path string, body string, hdr map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, strings.TrimRight(endpoint, "/")+"/"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		date := time.Now().UTC().Format(http.TimeFormat)
		key, _ := base64.StdEncoding.DecodeString(auth.WellKnownKey)
		h := hmac.New(sha256.New, key)
		fmt.Fprintf(h, "%s\n%s\n%s\n%s\n\n", strings.ToLower(method), strings.ToLower(resourceType), link, strings.ToLower(date))
		req.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+base64.StdEncoding.EncodeToString(h.Sum(nil))))
		req.Header.Set("x-ms-date", date)
		req.Header.Set("x-ms-version", "2018-12-31")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}

	// The leases.
	leaseLink := "dbs/" + db + "/colls/" + leaseColl
	q, _ := json.Marshal(map[string]any{"query": "SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)",
		"parameters": []map[string]string{{"name": "@prefix", "value": prefix}}})
	resp, body := do(http.MethodPost, "docs", leaseLink, leaseLink+"/docs", string(q), map[string]string{
		"Content-Type": "application/query+json", "x-ms-documentdb-isquery": "true",
		"x-ms-documentdb-query-enablecrosspartition": "true",
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query leases: %d %s", resp.StatusCode, body)
	}
	var docs struct {
		Documents []struct {
			LeaseToken        string `json:"LeaseToken"`
			ContinuationToken string `json:"ContinuationToken"`
			Version           int    `json:"version"`
		} `json:"Documents"`
	}
	if err := json.Unmarshal(body, &docs); err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("x-ms-continuation") != "" {
		t.Fatal("the lease query has more pages; the test reads one")
	}

	var total int64
	n := 0
	collLink := "dbs/" + db + "/colls/" + coll
	for _, l := range docs.Documents {
		if l.LeaseToken == "" {
			continue // the .info and .lock markers
		}
		if l.Version != 0 {
			t.Fatalf("lease %s has version %d; the test reads v0 leases", l.LeaseToken, l.Version)
		}
		n++
		hdr := map[string]string{"x-ms-documentdb-partitionkeyrangeid": l.LeaseToken, "A-IM": "Incremental feed", "x-ms-max-item-count": "1"}
		if l.ContinuationToken != "" {
			hdr["If-None-Match"] = l.ContinuationToken
		}
		resp, body := do(http.MethodGet, "docs", collLink, collLink+"/docs", "", hdr)
		if resp.StatusCode == http.StatusNotModified {
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("change feed of %s: %d %s", l.LeaseToken, resp.StatusCode, body)
		}
		var page struct {
			Documents []struct {
				LSN json.Number `json:"_lsn"`
			} `json:"Documents"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Documents) == 0 {
			continue
		}
		st := resp.Header.Get("x-ms-session-token")
		s := st
		if i := strings.IndexByte(st, ':'); i >= 0 {
			s = st[i+1:]
		}
		if seg := strings.Split(s, "#"); len(seg) >= 2 {
			s = seg[1]
		} else {
			s = seg[0]
		}
		session, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("session token %q: %v", st, err)
		}
		first, err := page.Documents[0].LSN.Int64()
		if err != nil {
			t.Fatal(err)
		}
		if lag := session - first + 1; lag > 0 {
			total += lag
		}
	}
	if n == 0 {
		t.Fatal("KEDA's query found no lease")
	}
	return total
}

// TestEstimate_DotNetFormulaEqualsKEDAScaler: on the same leases, cfp estimate's dotnet total
// is the number KEDA's azure-cosmosdb scaler computes, once every lease has a continuation;
// for a lease without one, KEDA reads from the beginning, which is cfp's --read-from-beginning
// (the default reports .NET's sentinel 1 there).
func TestEstimate_DotNetFormulaEqualsKEDAScaler(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const prefix = "kedalocalhost_k5lnAA==_k5lnAPDiLsw="
	want := seedEstimate(t, dir, prefix) // 4 leases checkpointed at LSN 0

	ios, _, out, errOut := render.Test()
	f := &factory{
		IO:     ios,
		Global: &globalOptions{Local: dir, Database: "shop", Container: "orders", LeaseContainer: "leases", LeaseIDPrefix: prefix},
		Getenv: func(string) string { return "" },
		Now:    time.Now,
	}
	f.Log = f.newLogger()
	f.Account = f.openAccount
	defer f.closeAccount()
	ctx := context.Background()
	acct, err := f.Account(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(acct.Emulator().Handler())
	defer srv.Close()
	store := leases.NewStore(acct.LeaseDocuments("shop", "leases"), prefix, leases.StoreOptions{})

	cfpTotal := func(fromBeginning bool) int64 {
		t.Helper()
		out.Reset()
		f.Global.Output = "json"
		opts := &estimateOptions{f: f, Concurrency: 4, Expiration: leases.DefaultExpiration, ReadFromBeginning: fromBeginning, AllowEmpty: true}
		if err := runEstimate(ctx, opts); err != nil {
			t.Fatalf("estimate: %v\n%s", err, errOut)
		}
		var v estimateView
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return v.Summary.TotalLag
	}
	keda := func() int64 { return kedaTotalLag(t, srv.URL, "shop", "orders", "leases", prefix) }
	update := func(token string, mutate func(*leases.Lease)) {
		t.Helper()
		ls, err := store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.Token == token {
				if _, err := store.Update(ctx, l, func(n *leases.Lease) error { mutate(n); return nil }); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		t.Fatalf("no lease %s", token)
	}

	// Every lease checkpointed at 0: both are the change count.
	var all int64
	for _, n := range want {
		all += n
	}
	if got, k := cfpTotal(false), keda(); got != k || got != all {
		t.Errorf("checkpointed at 0: cfp %d, KEDA %d, want both %d", got, k, all)
	}
	// Lease 1 caught up (KEDA's 304 is cfp's 0), lease 2 half way.
	update("1", func(l *leases.Lease) { l.Continuation = leases.FormatLSN(want["1"]) })
	update("2", func(l *leases.Lease) { l.Continuation = leases.FormatLSN(want["2"] / 2) })
	if got, k := cfpTotal(false), keda(); got != k {
		t.Errorf("partly processed: cfp %d, KEDA %d", got, k)
	}
	// Lease 3 without a continuation: KEDA reads it from the beginning.
	update("3", func(l *leases.Lease) { l.Continuation = "" })
	k := keda()
	if got := cfpTotal(true); got != k {
		t.Errorf("a lease without continuation: cfp --read-from-beginning %d, KEDA %d", got, k)
	}
	if got := cfpTotal(false); got != k-want["3"]+1 {
		t.Errorf("a lease without continuation: cfp %d, want KEDA's %d less lease 3's %d plus the sentinel 1", got, k, want["3"])
	}
}
