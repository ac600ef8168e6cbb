//go:build unix

package java

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/testproc"
)

// cfp runs a cfp command against the rig's emulator over TLS and returns its stdout; a
// non-zero exit fails the test.
func (r *rig) cfp(args ...string) string {
	r.t.Helper()
	cmd := exec.Command(r.bin, append([]string{"--endpoint", r.endpoint, "--ca-file", r.pem,
		"-d", database, "-c", feedName, "--lease-container", leaseName}, args...)...)
	cmd.Env = append(testproc.CleanEnv(), "COSMOS_KEY="+r.emu.Key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("cfp %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out) + stderr.String()
}

// waitIdle waits until no lease of processor has a live owner: released, or not renewed for
// longer than the lease expiration (a Java host's stop() may leave a lease owned).
func (r *rig) waitIdle(processor string) {
	r.t.Helper()
	r.waitFor(60*time.Second, "every lease of "+processor+" released or expired",
		func() bool {
			for _, l := range r.leases(processor) {
				ts, err := time.Parse(time.RFC3339Nano, l.Timestamp)
				if l.Owner != "" && (err != nil || time.Since(ts) < leaseExpiration+time.Second) {
					return false
				}
			}
			return true
		},
		func() string { return fmt.Sprint(r.owners(processor)) })
}

// javaRound starts a Java host on processor, waits until it delivered ids [from, to), lets it
// poll a while longer (for anything it would deliver beyond), stops it, and returns what it
// delivered.
func (r *rig) javaRound(t *testing.T, processor, instance string, from, to int) map[string]int {
	t.Helper()
	h := r.startJava(processor, instance, "epk")
	r.waitFor(120*time.Second, fmt.Sprintf("%s delivering doc %d to %d", instance, from, to-1),
		func() bool {
			d := h.delivered(t)
			for i := from; i < to; i++ {
				if d[docID(i)] == 0 {
					return false
				}
			}
			return true
		},
		func() string { return fmt.Sprintf("%d delivered, owners %v", len(h.delivered(t)), r.owners(processor)) }, h)
	// Every lease read again after the last change: a change before the position it resumed
	// from would have come in the first pages.
	time.Sleep(3 * pollInterval)
	h.stop(t)
	r.waitIdle(processor)
	return h.delivered(t)
}

// onlyRange fails the test for every id outside [from, to) that d holds.
func onlyRange(t *testing.T, what string, d map[string]int, from, to int) {
	t.Helper()
	for id, n := range d {
		var i int
		if _, err := fmt.Sscanf(id, "doc-%d", &i); err != nil || i < from || i >= to {
			t.Errorf("%s: %s delivered %d times, want only doc %d to %d", what, id, n, from, to-1)
		}
	}
}

// TestOperatorCommandsOnAJavaLeaseSet runs cfp's operator commands on a lease set Java hosts
// wrote: list --check finds it healthy; export then import under another processor name keeps
// Java's positions (a Java host on the copy delivers only what came after); reset --to a time
// and reset --to now move them (a Java host delivers what came after the point, nothing
// before it).
func TestOperatorCommandsOnAJavaLeaseSet(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const processor, copied = "ops", "opscopy"
	r.write(0, 60)
	d := r.javaRound(t, processor, "java-1", 0, 60)
	t.Logf("java-1 delivered %d changes", len(d))

	out := r.cfp("leases", "list", "-p", processor, "--check", "-o", "json", "--jq", ".[].family")
	if !strings.Contains(out, "check: no problems found") || strings.Count(out, "java-epk") != 4 {
		t.Fatalf("leases list --check on the Java set: want 4 java-epk leases and no problem:\n%s", out)
	}

	// export, import as another processor: a Java host resumes the copy where java-1 stopped.
	file := filepath.Join(r.dir, "ops.json")
	r.cfp("leases", "export", "-p", processor, "-f", file)
	r.cfp("leases", "import", "-p", copied, file, "--execute", "--yes", "--lease-expiration", leaseExpiration.String())
	out = r.cfp("leases", "list", "-p", copied, "--check", "-o", "json", "--jq", ".[].family")
	if !strings.Contains(out, "check: no problems found") || strings.Count(out, "java-epk") != 4 {
		t.Fatalf("leases list --check on the imported copy: want 4 java-epk leases and no problem:\n%s", out)
	}
	r.write(60, 80)
	d = r.javaRound(t, copied, "java-2", 60, 80)
	onlyRange(t, "the Java host on the imported copy", d, 60, 80)

	// reset --to a time between two batches: the later batch only.
	r.write(80, 120)
	time.Sleep(1100 * time.Millisecond) // the change feed's times have a second's resolution
	at := time.Now().UTC()
	time.Sleep(1100 * time.Millisecond)
	r.write(120, 160)
	r.cfp("leases", "reset", "-p", processor, "--to", at.Format(time.RFC3339), "--execute", "--yes",
		"--lease-expiration", leaseExpiration.String())
	d = r.javaRound(t, processor, "java-3", 120, 160)
	onlyRange(t, "the Java host after reset --to "+at.Format(time.RFC3339), d, 120, 160)

	// reset --to now: only what is written after it.
	r.write(160, 180)
	r.cfp("leases", "reset", "-p", processor, "--to", "now", "--execute", "--yes",
		"--lease-expiration", leaseExpiration.String())
	r.write(180, 200)
	d = r.javaRound(t, processor, "java-4", 180, 200)
	onlyRange(t, "the Java host after reset --to now", d, 180, 200)

	out = r.cfp("leases", "list", "-p", processor, "--check", "-o", "json", "--jq", ".[].family")
	if !strings.Contains(out, "check: no problems found") || strings.Count(out, "java-epk") != 4 {
		t.Errorf("leases list --check after the resets: want 4 java-epk leases and no problem:\n%s", out)
	}
}
