package cmd

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"

	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// seedWideLeases makes the leases that made every row wrap at 80 columns: 8 partitions, so
// ranges are 67 characters, half of them held as .NET EPK leases (whose token is the range),
// owned by instances with pod-like names.
func seedWideLeases(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	acct := openLocal(t, dir, 8)
	defer acct.Close()
	c := createContainer(t, acct, "shop", "orders", "/id")
	createContainer(t, acct, "shop", "leases", "/id")
	writeOrders(t, c, 16)
	parts, err := c.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store := processorStore(t, acct, c, "proj")
	for i, p := range parts {
		l := leases.NewDotNetV0(store.Prefix(), p.ID, p.Range, "")
		if i%2 == 1 {
			l = leases.NewDotNetV1(store.Prefix(), p.Range, "", "")
		}
		l.Continuation = leases.FormatLSN(0)
		created, err := store.Create(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Acquire(ctx, created, fmt.Sprintf("orders-projector-7d9f8c6b5-%05d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTables_FitEightyColumns: on an 80-column terminal, no row of the lease tables wraps;
// --wide shows the identifiers whole.
func TestTables_FitEightyColumns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedWideLeases(t, dir)
	for _, args := range [][]string{
		{"leases", "list"},
		{"estimate"},
	} {
		for _, wide := range []bool{false, true} {
			ios, _, out, errOut := render.Test()
			ios.SetTTY(true)
			ios.Width = 80
			argv := append([]string{"--local=" + dir, "-d", "shop", "-c", "orders", "-p", "proj"}, args...)
			if wide {
				argv = append(argv, "--wide")
			}
			if code := MainWithIO(context.Background(), argv, ios, func(string) string { return "" }); code != 0 {
				t.Fatalf("%v: exit %d: %s", argv, code, errOut)
			}
			rows := 0
			for line := range strings.Lines(out.String()) {
				line = strings.TrimSuffix(line, "\n")
				if strings.Contains(line, "owned") {
					rows++
				}
				if w := lipgloss.Width(line); w > 80 && !wide {
					t.Errorf("%v: a %d-column row wraps at 80: %q", args, w, line)
				}
			}
			if rows == 0 {
				t.Errorf("%v: no lease rows:\n%s", argv, out)
			}
			whole := strings.Contains(out.String(), "08000000000000000000000000000000")
			if whole != wide {
				t.Errorf("%v: ranges whole = %v, want %v:\n%s", argv, whole, wide, out)
			}
		}
	}
}
