package leases_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/leases"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/corpus")

// decoded is what a corpus .golden file records about a lease.
type decoded struct {
	Family       leases.Family     `json:"family"`
	ID           string            `json:"id"`
	PK           string            `json:"pk,omitempty"`
	ETag         string            `json:"etag,omitempty"`
	Token        string            `json:"token"`
	Range        *leases.Range     `json:"range,omitempty"`
	Owner        string            `json:"owner,omitempty"`
	Continuation string            `json:"continuation,omitempty"`
	LSN          *int64            `json:"lsn,omitempty"`
	Timestamp    string            `json:"timestamp,omitempty"`
	Mode         string            `json:"mode,omitempty"`
	Properties   map[string]string `json:"properties,omitempty"`
	State        *stateView        `json:"javaState,omitempty"`
}

type stateView struct {
	Mode      string             `json:"mode"`
	Rid       string             `json:"rid"`
	StartFrom string             `json:"startFrom"`
	Since     string             `json:"pointInTime,omitempty"`
	Tokens    []leases.JavaToken `json:"tokens,omitempty"`
}

func view(l *leases.Lease) decoded {
	d := decoded{
		Family: l.Family, ID: l.ID, PK: l.PK, ETag: l.ETag, Token: l.Token, Owner: l.Owner,
		Continuation: l.Continuation, Mode: l.Mode, Properties: l.Properties,
	}
	if len(d.Properties) == 0 {
		d.Properties = nil
	}
	if l.HasRange() {
		r := l.Range
		d.Range = &r
	}
	if n, ok := l.LSN(); ok {
		d.LSN = &n
	}
	if !l.Timestamp.IsZero() {
		d.Timestamp = l.Timestamp.Format(time.RFC3339Nano)
	}
	if st := l.JavaState(); st != nil {
		d.State = &stateView{Mode: st.Mode, Rid: st.Rid, StartFrom: st.StartFrom.Type, Tokens: st.Tokens}
		if !st.StartFrom.PointInTime.IsZero() {
			d.State.Since = st.StartFrom.PointInTime.Format(time.RFC3339Nano)
		}
	}
	return d
}

func corpus(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/corpus/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	return files
}

func readDoc(t *testing.T, file string) leases.Document {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return leases.Document{Body: b}
}

func TestCorpus_Decode(t *testing.T) {
	t.Parallel()
	for _, file := range corpus(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			l, err := leases.Decode(readDoc(t, file))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			got, err := json.MarshalIndent(view(l), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := strings.TrimSuffix(file, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("decoded %s:\n%s\nwant:\n%s", file, got, want)
			}
		})
	}
}

// fields parses a document into its top-level fields and their order.
func fields(t *testing.T, b []byte) (map[string]any, []string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 && dec.More() {
				keys = append(keys, v)
				// skip the value
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return m, keys
}

// owned are the fields an Encode may add to a document of each family.
var owned = map[leases.Family][]string{
	leases.FamilyDotNetV0: {"LeaseToken", "version", "properties", "FeedRange", "Mode"},
	leases.FamilyDotNetV1: {"LeaseToken", "version", "properties", "FeedRange", "Mode"},
	leases.FamilyJavaPK:   {},
	leases.FamilyJavaEPK:  {},
}

func TestCorpus_EncodeUnchanged(t *testing.T) {
	t.Parallel()
	for _, file := range corpus(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			doc := readDoc(t, file)
			l, err := leases.Decode(doc)
			if err != nil {
				t.Fatal(err)
			}
			out, err := leases.Encode(l)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			in, inKeys := fields(t, doc.Body)
			got, gotKeys := fields(t, out)
			for k, v := range in {
				if !reflect.DeepEqual(got[k], v) {
					t.Errorf("field %s: %v, want %v unchanged", k, got[k], v)
				}
			}
			for k := range got {
				if _, ok := in[k]; !ok && !contains(owned[l.Family], k) {
					t.Errorf("Encode added field %s to a %s lease", k, l.Family)
				}
			}
			if !reflect.DeepEqual(gotKeys[:len(inKeys)], inKeys) {
				t.Errorf("field order %v, want %v first", gotKeys, inKeys)
			}
		})
	}
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

func TestCorpus_RoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)
	for _, file := range corpus(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			doc := readDoc(t, file)
			l, err := leases.Decode(doc)
			if err != nil {
				t.Fatal(err)
			}
			before := view(l)
			l.Owner = "cfp-test"
			l.Continuation = `"777"`
			l.Timestamp = now
			out, err := leases.Encode(l)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			again, err := leases.Decode(leases.Document{Body: out})
			if err != nil {
				t.Fatalf("Decode(Encode): %v\n%s", err, out)
			}
			after := view(again)
			if lsn, ok := again.LSN(); !ok || lsn != 777 || again.Owner != "cfp-test" {
				t.Errorf("re-decoded owner %q LSN %d, want cfp-test and 777", again.Owner, lsn)
			}
			if l.Family == leases.FamilyDotNetV0 || l.Family == leases.FamilyDotNetV1 {
				if ts := fieldString(t, out, "timestamp"); ts != "2025-01-02T03:04:05.1234567Z" {
					t.Errorf(".NET timestamp = %s, want 7 fraction digits and Z", ts)
				}
			} else if ts := fieldString(t, out, "timestamp"); ts != "2025-01-02T03:04:05.123456789Z" {
				t.Errorf("Java timestamp = %s, want Instant form", ts)
			}
			// Everything but owner, continuation and timestamp decodes the same.
			before.Owner, before.Continuation, before.LSN, before.Timestamp = "", "", nil, ""
			after.Owner, after.Continuation, after.LSN, after.Timestamp = "", "", nil, ""
			if before.State != nil && after.State != nil {
				if len(after.State.Tokens) == 0 || after.State.Tokens[0].Token != `"777"` {
					t.Errorf("java state tokens = %+v, want \"777\"", after.State.Tokens)
				}
				before.State.Tokens, after.State.Tokens = nil, nil
			}
			if before.State == nil && after.State != nil {
				// A lease without a state gets a new one (INCREMENTAL, from NOW).
				if after.State.Mode != "INCREMENTAL" || after.State.StartFrom != "NOW" {
					t.Errorf("new java state = %+v, want INCREMENTAL from NOW", after.State)
				}
				after.State, after.Mode = nil, ""
			}
			if !reflect.DeepEqual(before, after) {
				t.Errorf("round trip changed the lease:\n%+v\nwant\n%+v", after, before)
			}
			// Every field the lease does not own is kept.
			in, _ := fields(t, doc.Body)
			got, _ := fields(t, out)
			for k, v := range in {
				switch k {
				case "Owner", "ContinuationToken", "timestamp":
					continue
				}
				if !reflect.DeepEqual(got[k], v) {
					t.Errorf("field %s: %v, want %v", k, got[k], v)
				}
			}
			if orig, ok := in["ContinuationToken"].(string); ok && l.Family == leases.FamilyJavaEPK {
				if alphabet(orig) != alphabet(got["ContinuationToken"].(string)) {
					t.Errorf("java state alphabet %s, want %s", alphabet(got["ContinuationToken"].(string)), alphabet(orig))
				}
			}
		})
	}
}

func fieldString(t *testing.T, b []byte, name string) string {
	t.Helper()
	m, _ := fields(t, b)
	s, _ := m[name].(string)
	return s
}

// alphabet names the Base64 flavour of s by its distinctive characters.
func alphabet(s string) string {
	a := "?"
	switch {
	case strings.ContainsAny(s, "-_"):
		a = "url"
	case strings.ContainsAny(s, "+/"):
		a = "std"
	}
	if len(s)%4 != 0 {
		return a + "-unpadded"
	}
	return a
}
