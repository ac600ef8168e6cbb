package cmd

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/feed/feedtest"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// TestExplainRoute_AfterSplit: the lease commands read the partition feed.Route picks, and say
// why when none serves the lease.
func TestExplainRoute_AfterSplit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := feedtest.NewMemSource(1)
	before, err := src.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	children, err := src.Split(before[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := src.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 2 || len(parts) != 2 {
		t.Fatalf("split gave %v, partitions %v", children, parts)
	}
	child := parts[0]
	sub := leases.Range{Min: child.Range.Min, Max: "08"}

	tests := []struct {
		name      string
		lease     *leases.Lease
		wantID    string
		wantRange leases.Range
		wantErr   string
	}{
		{"v0 lease of the split parent", leases.NewDotNetV0("p", before[0].ID, before[0].Range, ""), "", leases.Range{}, "is gone"},
		{"v1 lease over both children", leases.NewDotNetV1("p", before[0].Range, `"1"`, ""), "", leases.Range{}, "spans 2 partitions"},
		{"v1 lease equal to a child", leases.NewDotNetV1("p", child.Range, `"1"`, ""), child.ID, leases.Range{}, ""},
		{"v1 lease inside a child", leases.NewDotNetV1("p", sub, `"1"`, ""), child.ID, sub, ""},
		{"v0 lease of a child", leases.NewDotNetV0("p", child.ID, child.Range, ""), child.ID, leases.Range{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, err := feed.Route(tt.lease, parts)
			err = explainRoute(tt.lease, err)
			req := rt.Request()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.PartitionID != tt.wantID || req.Range != tt.wantRange {
				t.Errorf("request = %+v, want partition %s range %v", req, tt.wantID, tt.wantRange)
			}
		})
	}
}

func TestConfirm(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		tty   bool
		flags mutationFlags
		input string
		want  bool
		note  string
	}{
		{"plan only", true, mutationFlags{}, "y\n", false, "This is a plan"},
		{"pipe applies without asking", false, mutationFlags{Execute: true}, "", true, ""},
		{"terminal asks, yes", true, mutationFlags{Execute: true}, "y\n", true, "Apply? [y/N]"},
		{"terminal asks, no", true, mutationFlags{Execute: true}, "n\n", false, "Nothing was written."},
		{"terminal asks, empty answer is no", true, mutationFlags{Execute: true}, "\n", false, "Nothing was written."},
		{"terminal with --yes", true, mutationFlags{Execute: true, Yes: true}, "", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, in, _, errOut := render.Test()
			ios.SetTTY(tt.tty)
			in.WriteString(tt.input)
			got, err := confirm(ios, tt.flags, "Apply?")
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("confirm = %v, want %v", got, tt.want)
			}
			if tt.note != "" && !strings.Contains(errOut.String(), tt.note) {
				t.Errorf("stderr %q does not say %q", errOut, tt.note)
			}
			if tt.note == "" && errOut.Len() > 0 {
				t.Errorf("unexpected stderr %q", errOut)
			}
		})
	}
}

func TestPartialFailure(t *testing.T) {
	t.Parallel()
	first := errors.New("boom")
	if err := partialFailure(0, 3, nil); err != nil {
		t.Errorf("no failures: %v", err)
	}
	if err := partialFailure(3, 3, first); err != first {
		t.Errorf("all failed: %v, want the first error itself (exit 1)", err)
	}
	err := partialFailure(1, 3, first)
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != exitThreshold || !errors.Is(err, first) {
		t.Errorf("some failed: %v, want exit 3 wrapping the first error", err)
	}
}
