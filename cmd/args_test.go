package cmd

import (
	"slices"
	"strings"
	"testing"
)

// TestRelativeArgs pins which "-<duration>" arguments move behind "--" (positions given as
// arguments) and which stay (values of flags that take one).
func TestRelativeArgs(t *testing.T) {
	t.Parallel()
	root := DocsRoot()
	for _, tt := range []struct{ in, want string }{
		{"replay-from -2h -d shop -c orders", "replay-from -d shop -c orders -- -2h"},
		{"replay-from -d shop -c orders -90m", "replay-from -d shop -c orders -- -90m"},
		{"replay-from -d shop -2h -- x", "replay-from -d shop -- -2h x"},
		{"tail --from -1h -e", "tail --from -1h -e"},
		{"tail --until -5m --from -1h", "tail --until -5m --from -1h"},
		{"leases reset --to -1h", "leases reset --to -1h"},
		{"tail -n -1", "tail -n -1"},           // not a duration
		{"tail -e -1h", "tail -e -- -1h"},      // -e takes no value
		{"tail --from=-1h", "tail --from=-1h"}, // nothing to move
		{"replay-from -- -2h", "replay-from -- -2h"},
	} {
		got := strings.Join(relativeArgs(root, strings.Fields(tt.in)), " ")
		if got != tt.want {
			t.Errorf("relativeArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestLocalWithSpace pins how "--local DIR" is read.
func TestLocalWithSpace(t *testing.T) {
	t.Parallel()
	root := DocsRoot()
	dir := t.TempDir()
	for _, tt := range []struct{ in, want, wantErr string }{
		{in: "--local tail -e", want: "--local tail -e"},
		{in: "--local " + dir + " tail -e", want: "--local=" + dir + " tail -e"},
		{in: "import --local " + dir + " -d shop", want: "import --local=" + dir + " -d shop"},
		{in: "tail --local nowhere/yet -e", want: "tail --local=nowhere/yet -e"}, // tail takes no argument
		{in: "import --local orders.jsonl", want: "import --local orders.jsonl"}, // the default directory and a file
		{in: "replay-from --local beginning", want: "replay-from --local beginning"},
		{in: "import --local " + dir + "/none -d shop", wantErr: "write --local=" + dir + "/none"},
		{in: "import --local=" + dir, want: "import --local=" + dir},
	} {
		got, err := localWithSpace(root, strings.Fields(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("localWithSpace(%q) = %q, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, strings.Fields(tt.want)) {
			t.Errorf("localWithSpace(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
