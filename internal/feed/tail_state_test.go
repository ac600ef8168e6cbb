package feed_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

func TestTailStateFile_RoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tail.json")
	st := feed.TailState{Version: feed.TailStateVersion, Ranges: []feed.RangeState{
		{PartitionID: "2", Range: leases.Range{Min: "", Max: "20"}, Continuation: `"16"`},
		{PartitionID: "1", Range: leases.Range{Min: "20", Max: "FF"}, Start: "2026-11-30T12:00:00Z"},
	}}
	if err := feed.WriteTailState(path, st); err != nil {
		t.Fatal(err)
	}
	// Overwriting leaves no temporary files behind.
	if err := feed.WriteTailState(path, st); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("directory holds %d files", len(ents))
	}
	start, got, err := feed.ParseTailFrom("@"+path, t0)
	if err != nil {
		t.Fatal(err)
	}
	if start != (feed.StartFrom{}) || got == nil || !reflect.DeepEqual(*got, st) {
		t.Fatalf("read back %+v, want %+v", got, st)
	}
}

func TestParseTailFrom(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version":1,"ranges":[{"partition":"0","range":{"min":"","max":"FF"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in      string
		wantErr string
	}{
		{in: "@" + filepath.Join(dir, "missing.json"), wantErr: "read tail state"},
		{in: "@" + bad, wantErr: "neither a continuation nor a start"},
		{in: "@", wantErr: "missing file name"},
		{in: "yesterday", wantErr: "RFC 3339"},
	}
	for _, tt := range tests {
		if _, _, err := feed.ParseTailFrom(tt.in, t0); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseTailFrom(%q) = %v, want error containing %q", tt.in, err, tt.wantErr)
		}
	}
	start, st, err := feed.ParseTailFrom("beginning", t0)
	if err != nil || st != nil || start.Kind != feed.StartBeginning {
		t.Fatalf("beginning: %+v %v %v", start, st, err)
	}
}

func TestTailState_CheckContainer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		st   feed.TailState
		ok   bool
	}{
		{"same resource id", feed.TailState{Database: "db", Container: "c", ContainerRID: "r1"}, true},
		{"other resource id", feed.TailState{Database: "db", Container: "c", ContainerRID: "r2"}, false},
		// a container dropped and created again under its name has a new resource id
		{"same name, other resource id", feed.TailState{Database: "db", Container: "c", ContainerRID: "r0"}, false},
		{"no resource id, same name", feed.TailState{Database: "db", Container: "c"}, true},
		{"no resource id, other container", feed.TailState{Database: "db", Container: "d"}, false},
		{"no resource id, other database", feed.TailState{Database: "db2", Container: "c"}, false},
		{"older file without the container", feed.TailState{}, true},
	}
	for _, tt := range tests {
		err := tt.st.CheckContainer("db", "c", "r1")
		if (err == nil) != tt.ok {
			t.Errorf("%s: CheckContainer = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	st := feed.TailState{Database: "db", Container: "d"}
	if got, want := st.CheckContainer("db", "c", "r1"), "was written for container db/d (resource id -), not db/c (resource id r1)"; got == nil || got.Error() != want {
		t.Errorf("CheckContainer = %v, want %q", got, want)
	}
	// an unknown resource id on the container's side compares the names
	st = feed.TailState{Database: "db", Container: "c", ContainerRID: "r1"}
	if err := st.CheckContainer("db", "c", ""); err != nil {
		t.Errorf("CheckContainer with no resource id = %v, want nil", err)
	}
}
