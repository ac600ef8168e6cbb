//go:build linux || darwin

package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// driveLeaseView drives the live lease view on an 80x24 terminal with the keys a user would
// press: ? shows the keys and Esc closes them, / and a filter narrow the table to the matching
// lease, Esc clears it, down selects the next lease, enter opens it whole and Esc goes back, q
// quits. It returns the screen after the view ended.
func driveLeaseView(t *testing.T, s *ptyScreen, title, owner string) {
	t.Helper()
	table := func(l []string) bool {
		return strings.HasPrefix(l[0], title) && tableHeaders(l) == 1 && strings.HasPrefix(l[len(l)-1], liveFooter)
	}
	lines := s.waitFor("the lease table", table)
	oneFrame(t, lines, 24, title, liveFooter)

	s.keys("?")
	s.waitFor("the keys", func(l []string) bool {
		return count(l, "filter by lease, owner or verdict") == 1 && tableHeaders(l) == 0
	})
	s.keys("esc")
	s.waitFor("the table again", table)

	// / and an owner's name: one lease left, and the filter line says so.
	s.keys("/")
	s.waitFor("the filter prompt", func(l []string) bool { return count(l, "/▏  (") == 1 })
	s.keys(owner)
	lines = s.waitFor("the filtered table", func(l []string) bool { return count(l, "/"+owner+"▏  (1 of ") == 1 })
	if n := count(lines, "  owned  ") + count(lines, " owned  "); n == 0 {
		t.Errorf("the filtered table shows no lease:\n%s", strings.Join(lines, "\n"))
	}
	s.keys("esc")
	lines = s.waitFor("the whole table", func(l []string) bool { return table(l) && count(l, "/"+owner) == 0 })

	// down selects the second lease; enter opens it whole.
	first := selectedRow(lines)
	s.keys("down")
	lines = s.waitFor("the second lease selected", func(l []string) bool { return selectedRow(l) != "" && selectedRow(l) != first })
	token := strings.Fields(strings.TrimPrefix(selectedRow(lines), "> "))[0]
	s.keys("enter")
	lines = s.waitFor("the opened lease", func(l []string) bool {
		return count(l, "FIRST PENDING") == 1 && count(l, "CHECKPOINT") == 1 && count(l, "presence: ") == 1
	})
	if tableHeaders(lines) != 0 || !strings.HasPrefix(lines[23], "esc back") {
		t.Errorf("the opened lease is not alone on the screen:\n%s", strings.Join(lines, "\n"))
	}
	if head, _, _ := strings.Cut(token, "…"); !strings.Contains(strings.Join(lines, "\n"), "lease "+head) {
		t.Errorf("the opened lease is not the selected %s:\n%s", token, strings.Join(lines, "\n"))
	}
	s.keys("esc")
	lines = s.waitFor("the table after the lease", table)
	if selectedRow(lines) == first {
		t.Errorf("back from the lease, the selection went back to the first row:\n%s", strings.Join(lines, "\n"))
	}
	s.keys("q")
}

// tableHeaders counts the lease table's header lines on the screen.
func tableHeaders(lines []string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "  LEASE  ") {
			n++
		}
	}
	return n
}

// selectedRow is the line of the selected lease ("> ..."), "" when none.
func selectedRow(lines []string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, "> ") {
			return l
		}
	}
	return ""
}

// TestLive_EstimateWatchKeys: cfp estimate --watch on an 80x24 terminal, driven with ?, /,
// down, enter, Esc and q; q ends it with exit 0 and leaves the last estimate.
func TestLive_EstimateWatchKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seedWideLeases(t, dir)
	s := startOnPty(t, dir, 80, 24, "--local="+dir, "estimate", "-d", "shop", "-c", "orders", "-p", "proj", "--watch", "500ms")
	driveLeaseView(t, s, "cfp estimate  shop/orders  processor proj", "00003")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d after q:\n%s", code, strings.Join(s.screen(), "\n"))
	}
	if lines := s.screen(); count(lines, "Total lag 16") != 1 || count(lines, liveFooter) != 0 {
		t.Errorf("the final screen is not the last estimate:\n%s", strings.Join(lines, "\n"))
	}
}

// TestLive_ProcessKeys: cfp process on an 80x24 terminal shows the lease view with the changes
// counted, not printed; it is driven as estimate's, and q shuts the host down gracefully
// (exit 0, its leases released, the summary on the screen after).
func TestLive_ProcessKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	acct := openLocal(t, dir, 4)
	c := createContainer(t, acct, "shop", "orders", "/id")
	writeOrders(t, c, 16)
	acct.Close()
	s := startOnPty(t, dir, 80, 24, "--local="+dir, "process", "-d", "shop", "-c", "orders", "-p", "proj",
		"--create-lease-container", "--from", "beginning", "--instance", "web-1", "--poll-interval", "500ms",
		"--lease-acquire-interval", "1s", "--lease-renew-interval", "1s", "--lease-expiration", "5s")
	lines := s.waitFor("all 16 changes counted", func(l []string) bool {
		return count(l, "this host web-1: 4 lease(s) held; 16 change(s) in") == 1 && tableHeaders(l) == 1
	})
	if strings.Contains(s.output(), `{"id":"o`) {
		t.Errorf("documents printed across the view:\n%s", strings.Join(lines, "\n"))
	}
	driveLeaseView(t, s, "cfp process  shop/orders  processor proj", "2")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d after q:\n%s", code, strings.Join(s.screen(), "\n"))
	}
	screen := strings.Join(s.screen(), "\n")
	if !strings.Contains(screen, "released") || strings.Contains(screen, liveFooter) || strings.Contains(screen, `{"id"`) {
		t.Errorf("after q: no graceful shutdown on the screen, or debris of the view:\n%s", screen)
	}
}

// TestLive_ProcessViewOnStderrKeepsStdout: with stdout redirected to a file and stderr the
// terminal, cfp process draws the view on stderr and writes every document to stdout as off a
// terminal; q still shuts the host down gracefully.
func TestLive_ProcessViewOnStderrKeepsStdout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	acct := openLocal(t, dir, 2)
	c := createContainer(t, acct, "shop", "orders", "/id")
	writeOrders(t, c, 6)
	acct.Close()
	s := startProgramOnPty(t, dir, 80, 24, "sh", "-c", `exec cfp --local="$1" process -d shop -c orders -p proj --create-lease-container --from beginning --instance web-1 --poll-interval 500ms --lease-acquire-interval 1s --lease-renew-interval 1s --lease-expiration 5s > out.jsonl`, "sh", dir)
	s.waitFor("the view with every change processed", func(l []string) bool {
		return strings.HasPrefix(l[0], "cfp process  shop/orders") && count(l, "this host web-1: 2 lease(s) held; 6 change(s) in") == 1
	})
	if strings.Contains(s.output(), `{"id":"o`) {
		t.Errorf("documents written to the terminal:\n%s", strings.Join(s.screen(), "\n"))
	}
	s.keys("q")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d after q:\n%s", code, strings.Join(s.screen(), "\n"))
	}
	out, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), `{"id":"o`); n != 6 {
		t.Errorf("stdout has %d documents, want 6:\n%s", n, out)
	}
}
