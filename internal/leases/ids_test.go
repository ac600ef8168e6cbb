package leases_test

import (
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

func TestIDs(t *testing.T) {
	t.Parallel()
	p := leases.Prefix("orderEvents", "contoso-orders.documents.azure.com", "Z4hMAA==", "Z4hMAIs0cjs=")
	if p != "orderEventscontoso-orders.documents.azure.com_Z4hMAA==_Z4hMAIs0cjs=" {
		t.Fatalf("Prefix = %s", p)
	}
	if got := leases.LeaseID(p, "0"); got != p+"..0" {
		t.Errorf("LeaseID = %s", got)
	}
	if leases.InfoID(p) != p+".info" || leases.LockID(p) != p+".lock" {
		t.Errorf("markers = %s %s", leases.InfoID(p), leases.LockID(p))
	}
	tests := []struct {
		id, prefix, token string
		ok                bool
	}{
		{p + "..0", p, "0", true},
		{p + "..-05C1DFFFFFFFFC", p, "-05C1DFFFFFFFFC", true},
		{p + "..05C1DFFFFFFFFC-FF", p, "05C1DFFFFFFFFC-FF", true},
		{"a..b..3", "a..b", "3", true},
		{p + ".info", "", "", false},
		{p + ".lock", "", "", false},
		{p + "..", "", "", false},
		{"..0", "", "", false},
	}
	for _, tc := range tests {
		prefix, token, ok := leases.SplitID(tc.id)
		if prefix != tc.prefix || token != tc.token || ok != tc.ok {
			t.Errorf("SplitID(%q) = %q, %q, %v; want %q, %q, %v", tc.id, prefix, token, ok, tc.prefix, tc.token, tc.ok)
		}
	}
}

func TestLease_StateAndLSN(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 5, 24, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		owner string
		age   time.Duration
		state string
	}{
		{"", 0, leases.StateUnowned},
		{"  ", 0, leases.StateUnowned},
		{"a", 59 * time.Second, leases.StateOwned},
		{"a", 60 * time.Second, leases.StateOwned}, // expiry is strictly after timestamp+60s
		{"a", 61 * time.Second, leases.StateExpired},
	}
	for _, tc := range tests {
		l := &leases.Lease{Owner: tc.owner, Timestamp: now.Add(-tc.age)}
		if got := l.State(now, time.Minute); got != tc.state {
			t.Errorf("owner %q age %s: State = %s, want %s", tc.owner, tc.age, got, tc.state)
		}
		if got, want := l.Expired(now, time.Minute), tc.state != leases.StateOwned; got != want {
			t.Errorf("owner %q age %s: Expired = %v, want %v", tc.owner, tc.age, got, want)
		}
	}
	for in, want := range map[string]int64{`"48213"`: 48213, "7": 7, `"0"`: 0} {
		if n, ok := leases.ParseLSN(in); !ok || n != want {
			t.Errorf("ParseLSN(%s) = %d, %v; want %d", in, n, ok, want)
		}
	}
	for _, in := range []string{"", `""`, "*", `"-1"`, "eyJWIjoxfQ"} {
		if _, ok := leases.ParseLSN(in); ok {
			t.Errorf("ParseLSN(%q) ok, want not an LSN", in)
		}
	}
}

func TestParseTimestamp(t *testing.T) {
	t.Parallel()
	want := time.Date(2024, 5, 24, 14, 22, 42, 541742000, time.UTC)
	for _, in := range []string{
		"2024-05-24T14:22:42.541742Z",
		"2024-05-24T14:22:42.541742Z[UTC]",
		"2024-05-24T16:22:42.541742+02:00[Europe/Berlin]",
		"2024-05-24T14:22:42.5417420",
	} {
		got, err := leases.ParseTimestamp(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTimestamp(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := leases.ParseTimestamp("yesterday"); err == nil {
		t.Error("ParseTimestamp(yesterday) succeeded")
	}
	if got := leases.FormatDotNetTime(time.Date(2024, 5, 24, 14, 22, 42, 541742199, time.FixedZone("x", 3600))); got != "2024-05-24T13:22:42.5417421Z" {
		t.Errorf("FormatDotNetTime = %s", got)
	}
	if got := leases.FormatJavaTime(time.Date(2024, 5, 24, 14, 22, 42, 541000000, time.UTC)); got != "2024-05-24T14:22:42.541Z" {
		t.Errorf("FormatJavaTime = %s", got)
	}
}

func TestDecode_NotALease(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"id":"p.info"}`, `{"id":"p.lock","ttl":30}`, `{"id":"p..0","LeaseToken":""}`, `[1]`, `{"id":"p..0","LeaseToken":"0"} x`} {
		if _, err := leases.Decode(leases.Document{Body: []byte(body)}); err == nil {
			t.Errorf("Decode(%s) succeeded, want an error", body)
		}
	}
}

func TestNewDotNetV0_FieldSet(t *testing.T) {
	t.Parallel()
	l := leases.NewDotNetV0("p", "0", leases.Range{Min: "", Max: "05C1DFFFFFFFFC"}, "")
	b, err := leases.Encode(l)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"p..0","version":0,"LeaseToken":"0","FeedRange":{"Range":{"min":"","max":"05C1DFFFFFFFFC"}},"Owner":null,"ContinuationToken":null,"properties":{},"timestamp":null,"Mode":"Incremental Feed"}`
	if string(b) != want {
		t.Errorf("Encode(NewDotNetV0) =\n%s\nwant\n%s", b, want)
	}
}

func TestLease_ChildAndMerged(t *testing.T) {
	t.Parallel()
	parent := leases.NewDotNetV0("p", "0", leases.FullRange, "")
	parent.Continuation = `"100"`
	parent.Properties["k"] = "v"
	c := parent.Child("1", leases.Range{Min: "", Max: "80"})
	if c.ID != "p..1" || c.Token != "1" || c.Family != leases.FamilyDotNetV0 || c.Continuation != `"100"` || c.Properties["k"] != "v" || c.Owner != "" {
		t.Errorf("v0 child = %+v", c)
	}
	m := parent.Merged()
	if m.Family != leases.FamilyDotNetV1 || m.Token != "-FF" || m.ID != "p..-FF" || m.Continuation != `"100"` {
		t.Errorf("merged = %+v", m)
	}
	v1 := leases.NewDotNetV1("p", leases.Range{Min: "40", Max: "FF"}, `"5"`, "")
	if c := v1.Child("7", leases.Range{Min: "80", Max: "FF"}); c.Token != "80-FF" || c.Family != leases.FamilyDotNetV1 {
		t.Errorf("v1 child = %+v", c)
	}
	if v1.Merged() != v1 {
		t.Error("an EPK lease must survive a merge unchanged")
	}
	// A Java EPK child carries the parent's state over the child range.
	java := decodeFile(t, "testdata/corpus/java-epk.json")
	jc := java.Child("2", leases.Range{Min: "", Max: "03"})
	b, err := leases.Encode(jc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := leases.Decode(leases.Document{Body: b})
	if err != nil {
		t.Fatal(err)
	}
	st := back.JavaState()
	if back.Family != leases.FamilyJavaEPK || back.Token != "-03" || back.Continuation != `"48213"` ||
		st == nil || st.Range != (leases.Range{Min: "", Max: "03"}) || st.Tokens[0].Range != st.Range || st.Mode != "INCREMENTAL" {
		t.Errorf("java child = %+v state %+v", back, st)
	}
}

func decodeFile(t *testing.T, file string) *leases.Lease {
	t.Helper()
	l, err := leases.Decode(readDoc(t, file))
	if err != nil {
		t.Fatal(err)
	}
	return l
}
