//go:build unix

package java

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/internal/testproc"
)

// TestOneJavaHostAndOneCFPHost runs a Java host (EPK leases, latest version; then the PK-range
// family of handleChanges) and a cfp host on one lease set of a 4-partition container while
// changes are written: every change is delivered at least once, every lease ends with one
// owner, and both hosts hold two leases.
func TestOneJavaHostAndOneCFPHost(t *testing.T) {
	t.Parallel()
	for _, family := range []string{"epk", "pkrange"} {
		t.Run(family, func(t *testing.T) {
			t.Parallel()
			oneJavaHostAndOneCFPHost(t, family)
		})
	}
}

func oneJavaHostAndOneCFPHost(t *testing.T, family string) {
	r := newRig(t)
	const processor, n = "mixed", 200
	r.write(0, n/2)
	java := r.startJava(processor, "java-1", family)
	r.waitFor(90*time.Second, "4 leases owned by java-1",
		func() bool { return r.owners(processor)["java-1"] == 4 },
		func() string { return fmt.Sprint(r.owners(processor)) }, java)
	// Java's PK-range leases are named after the database and container names, not their rids:
	// -p finds them as it finds the EPK family's.
	cfp := r.startCFP(processor, "cfp-1")
	r.write(n/2, n)
	r.waitFor(90*time.Second, "every change delivered and the leases balanced 2/2",
		func() bool {
			got, _, _ := coverage(union(t, java, cfp), n)
			o := r.owners(processor)
			return got == n && o["java-1"] == 2 && o["cfp-1"] == 2
		},
		func() string {
			got, lost, dups := coverage(union(t, java, cfp), n)
			return fmt.Sprintf("owners %v, %d delivered, %d not, %d duplicates", r.owners(processor), got, lost, dups)
		}, java, cfp)
	for _, l := range r.leases(processor) {
		if l.Owner != "java-1" && l.Owner != "cfp-1" {
			t.Errorf("lease %s is owned by %q, want java-1 or cfp-1", l.Token, l.Owner)
		}
	}
	got, lost, dups := coverage(union(t, java, cfp), n)
	t.Logf("%d changes: %d delivered (java-1 %d, cfp-1 %d), %d lost, %d duplicates",
		n, got, len(java.delivered(t)), len(cfp.delivered(t)), lost, dups)
	java.stop(t)
	cfp.stop(t)
}

// TestCFPHostsTakeOverAJavaLeaseSet lets two Java hosts create and process a lease set alone,
// stops them, and compares the Java estimator with `cfp estimate` on the changes written
// since. Then two cfp hosts take the set over: every change is delivered, those the Java hosts
// checkpointed are not delivered again, and the leases stay in Java's format, which a Java host
// started last resumes from.
func TestCFPHostsTakeOverAJavaLeaseSet(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const processor, n = "takeover", 120
	r.write(0, n/2)
	j1 := r.startJava(processor, "java-1", "epk")
	j2 := r.startJava(processor, "java-2", "epk")
	r.waitFor(90*time.Second, "the first changes delivered by the Java hosts, leases 2/2",
		func() bool {
			got, _, _ := coverage(union(t, j1, j2), n/2)
			o := r.owners(processor)
			return got == n/2 && o["java-1"] == 2 && o["java-2"] == 2
		},
		func() string {
			got, _, _ := coverage(union(t, j1, j2), n/2)
			return fmt.Sprintf("owners %v, %d of %d delivered", r.owners(processor), got, n/2)
		}, j1, j2)
	// A Java host checkpoints after its handler returns: wait until every delivered change is
	// checkpointed (nothing pending by the .NET formula), then stop both.
	r.waitFor(60*time.Second, "every change checkpointed by the Java hosts",
		func() bool {
			for _, l := range r.cfpEstimate(processor, "dotnet") {
				if l.Lag != 0 {
					return false
				}
			}
			return true
		},
		func() string { return fmt.Sprint(r.cfpEstimate(processor, "dotnet")) }, j1, j2)
	j1.stop(t)
	j2.stop(t)
	for _, l := range r.leases(processor) {
		if l.Owner != "" {
			// Java's stop() only cancels its workers; on a busy machine a worker started just
			// before it may never release its lease, which then expires.
			t.Logf("lease %s is still owned by %q after the Java hosts stopped: it expires", l.Token, l.Owner)
		}
	}

	// Changes pending on a released lease set: doc-0000, delivered already, is updated 5 times
	// (the first pending change of its range, at its latest version), then the rest written.
	for range 5 {
		r.write(0, 1)
	}
	r.write(n/2, n)
	updated := ""
	for _, h := range []*host{j1, j2} {
		if l := h.leaseOf(t, docID(0)); l != "" {
			updated = l
		}
	}
	compareEstimates(t, r, processor, n/2+1, updated, 4)

	c1 := r.startCFP(processor, "cfp-1")
	c2 := r.startCFP(processor, "cfp-2")
	// The cfp hosts owe the pending changes: doc-0000 (updated) and the second half.
	owed := func(seen map[string]int) int {
		got := 0
		if seen[docID(0)] > 0 {
			got++
		}
		for i := n / 2; i < n; i++ {
			if seen[docID(i)] > 0 {
				got++
			}
		}
		return got
	}
	r.waitFor(90*time.Second, "the pending changes delivered by the cfp hosts, leases 2/2",
		func() bool {
			o := r.owners(processor)
			return owed(union(t, c1, c2)) == n/2+1 && o["cfp-1"] == 2 && o["cfp-2"] == 2
		},
		func() string {
			return fmt.Sprintf("owners %v, %d of %d delivered by cfp", r.owners(processor), owed(union(t, c1, c2)), n/2+1)
		}, c1, c2)
	javaSeen, cfpSeen := union(t, j1, j2), union(t, c1, c2)
	again := 0
	for i := 1; i < n/2; i++ {
		again += cfpSeen[docID(i)]
	}
	if again > 0 {
		t.Errorf("the cfp hosts delivered %d changes the Java hosts had checkpointed", again)
	}
	got, lost, dups := coverage(union(t, j1, j2, c1, c2), n)
	_, _, javaDups := coverage(javaSeen, n/2)
	t.Logf("%d changes: %d delivered (Java %d, cfp %d), %d lost, %d duplicates (%d between the Java hosts)",
		n, got, len(javaSeen), len(cfpSeen), lost, dups, javaDups)
	if lost > 0 {
		t.Errorf("%d changes were never delivered", lost)
	}
	for _, l := range r.leases(processor) {
		if l.Version == nil || *l.Version != 1 || l.Continuation == "" || strings.HasPrefix(l.Continuation, `"`) {
			t.Errorf("lease %s after cfp: version %v, continuation %q; want Java's EPK format (version 1, a Java state)", l.Token, l.Version, l.Continuation)
		}
	}
	c1.stop(t)
	c2.stop(t)

	// A Java host resumes from the checkpoints the cfp hosts wrote: it delivers only what is
	// written after.
	r.write(n, n+20)
	j3 := r.startJava(processor, "java-3", "epk")
	r.waitFor(90*time.Second, "the last changes delivered by java-3",
		func() bool {
			seen := j3.delivered(t)
			for i := n; i < n+20; i++ {
				if seen[docID(i)] == 0 {
					return false
				}
			}
			return true
		},
		func() string { return fmt.Sprintf("java-3 delivered %d ids", len(j3.delivered(t))) }, j3)
	if back := len(j3.delivered(t)) - 20; back > 0 {
		t.Errorf("java-3 delivered %d changes the cfp hosts had checkpointed", back)
	}
	j3.stop(t)
}

// compareEstimates checks that the Java estimator (getCurrentState) and `cfp estimate
// --formula java` report the same lag for every lease of processor, and that the .NET formula
// (cfp's default) totals pending changes; on the lease updated, whose first pending change was
// written collapsed+1 times, the .NET formula counts collapsed LSNs fewer than Java's.
//
// Java's getCurrentState (epkversion ChangeFeedProcessorImplBase) reads each lease's range from
// now and reports latest LSN - the lease's checkpoint LSN: every write since the checkpoint. The
// .NET estimator reads one change from the lease's continuation and reports latest LSN - that
// change's _lsn + 1: a document written several times shows up once, at its last LSN, so the
// writes before it are not counted.
func compareEstimates(t *testing.T, r *rig, processor string, pending int, updated string, collapsed int64) {
	t.Helper()
	js := r.javaEstimate(processor)
	cj := r.cfpEstimate(processor, "java")
	cd := r.cfpEstimate(processor, "dotnet")
	if len(js) != 4 || len(cj) != 4 || len(cd) != 4 {
		t.Fatalf("estimates of %d (Java), %d (cfp java) and %d (cfp dotnet) leases, want 4 each", len(js), len(cj), len(cd))
	}
	var javaTotal, dotnetTotal int64
	for i, s := range js {
		if cj[i].Lease != s.Lease || cd[i].Lease != s.Lease {
			t.Fatalf("lease %d: Java %s, cfp %s and %s", i, s.Lease, cj[i].Lease, cd[i].Lease)
		}
		if cj[i].Lag != s.Lag {
			t.Errorf("lease %s: Java's getCurrentState says lag %d, cfp estimate --formula java %d", s.Lease, s.Lag, cj[i].Lag)
		}
		want := s.Lag
		if s.Lease == updated {
			want -= collapsed
		}
		if cd[i].Lag != want {
			t.Errorf("lease %s: cfp estimate (dotnet) says lag %d, want %d (Java's %d less the writes collapsed)", s.Lease, cd[i].Lag, want, s.Lag)
		}
		javaTotal += s.Lag
		dotnetTotal += cd[i].Lag
		t.Logf("lease %s: Java %d, cfp java %d, cfp dotnet %d (checkpoint %v, latest %v)",
			s.Lease, s.Lag, cj[i].Lag, cd[i].Lag, deref(cd[i].Check), deref(cd[i].Latest))
	}
	t.Logf("%d changes pending: total lag Java %d, cfp dotnet %d", pending, javaTotal, dotnetTotal)
	if dotnetTotal != int64(pending) {
		t.Errorf("cfp estimate (dotnet) totals %d, want the %d changes pending", dotnetTotal, pending)
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestKilledHostsLeasesAreTakenOver kills hosts with SIGKILL in a mixed lease set: a Java host
// (a cfp host takes its leases when they expire), then a cfp host (a Java host takes its
// leases). No change is lost; a killed host's last batches may be delivered again.
func TestKilledHostsLeasesAreTakenOver(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const processor, step = "kill", 60
	r.write(0, step)
	j1 := r.startJava(processor, "java-1", "epk")
	r.waitFor(90*time.Second, "4 leases owned by java-1",
		func() bool { return r.owners(processor)["java-1"] == 4 },
		func() string { return fmt.Sprint(r.owners(processor)) }, j1)
	c1 := r.startCFP(processor, "cfp-1")
	r.waitFor(90*time.Second, "the leases balanced 2/2 between java-1 and cfp-1",
		func() bool { o := r.owners(processor); return o["java-1"] == 2 && o["cfp-1"] == 2 },
		func() string { return fmt.Sprint(r.owners(processor)) }, j1, c1)

	j1.kill()
	r.write(step, 2*step)
	r.waitFor(90*time.Second, "cfp-1 holding every lease and every change delivered",
		func() bool {
			got, _, _ := coverage(union(t, j1, c1), 2*step)
			return got == 2*step && r.owners(processor)["cfp-1"] == 4
		},
		func() string {
			got, _, _ := coverage(union(t, j1, c1), 2*step)
			return fmt.Sprintf("owners %v, %d of %d delivered", r.owners(processor), got, 2*step)
		}, c1)

	j2 := r.startJava(processor, "java-2", "epk")
	r.waitFor(90*time.Second, "the leases balanced 2/2 between java-2 and cfp-1",
		func() bool { o := r.owners(processor); return o["java-2"] == 2 && o["cfp-1"] == 2 },
		func() string { return fmt.Sprint(r.owners(processor)) }, j2, c1)
	c1.kill()
	r.write(2*step, 3*step)
	r.waitFor(90*time.Second, "java-2 holding every lease and every change delivered",
		func() bool {
			got, _, _ := coverage(union(t, j1, c1, j2), 3*step)
			return got == 3*step && r.owners(processor)["java-2"] == 4
		},
		func() string {
			got, _, _ := coverage(union(t, j1, c1, j2), 3*step)
			return fmt.Sprintf("owners %v, %d of %d delivered", r.owners(processor), got, 3*step)
		}, j2)
	got, lost, dups := coverage(union(t, j1, c1, j2), 3*step)
	t.Logf("%d changes: %d delivered (java-1 %d, cfp-1 %d, java-2 %d), %d lost, %d duplicates",
		3*step, got, len(j1.delivered(t)), len(c1.delivered(t)), len(j2.delivered(t)), lost, dups)
	j2.stop(t)
}

// TestSplitUnderMixedHosts splits a partition under a Java host and a cfp host sharing a lease
// set, while changes are written before and after: no change is lost, and every lease of the
// set ends with one of the two as its owner.
func TestSplitUnderMixedHosts(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const processor, step = "split", 80
	r.write(0, step)
	j1 := r.startJava(processor, "java-1", "epk")
	r.waitFor(90*time.Second, "4 leases owned by java-1",
		func() bool { return r.owners(processor)["java-1"] == 4 },
		func() string { return fmt.Sprint(r.owners(processor)) }, j1)
	c1 := r.startCFP(processor, "cfp-1")
	r.waitFor(90*time.Second, "the leases balanced 2/2 between java-1 and cfp-1",
		func() bool { o := r.owners(processor); return o["java-1"] == 2 && o["cfp-1"] == 2 },
		func() string { return fmt.Sprint(r.owners(processor)) }, j1, c1)
	for _, rng := range []string{"0", "3"} {
		cmd := exec.Command(r.bin, "emulator", "split", "--endpoint", r.endpoint, "--ca-file", r.pem,
			"-d", database, "-c", feedName, "--range", rng, "-o", "json")
		cmd.Env = append(testproc.CleanEnv(), "COSMOS_KEY="+r.emu.Key)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cfp emulator split --range %s: %v\n%s", rng, err, out)
		}
	}
	r.write(step, 2*step)
	r.waitFor(120*time.Second, "every change delivered and every lease owned by java-1 or cfp-1",
		func() bool {
			got, _, _ := coverage(union(t, j1, c1), 2*step)
			if got != 2*step {
				return false
			}
			for _, l := range r.leases(processor) {
				if l.Owner != "java-1" && l.Owner != "cfp-1" {
					return false
				}
			}
			return true
		},
		func() string {
			got, _, _ := coverage(union(t, j1, c1), 2*step)
			return fmt.Sprintf("owners %v, %d of %d delivered", r.owners(processor), got, 2*step)
		}, j1, c1)
	got, lost, dups := coverage(union(t, j1, c1), 2*step)
	t.Logf("%d changes over a split of 2 of 4 partitions: %d delivered (java-1 %d, cfp-1 %d), %d lost, %d duplicates; leases %v",
		2*step, got, len(j1.delivered(t)), len(c1.delivered(t)), lost, dups, r.owners(processor))
	j1.stop(t)
	c1.stop(t)
}

// TestJavaHostJoinsASetCFPBootstrapped starts a cfp host first, on a lease set it creates with
// --lease-format java, lets it checkpoint every lease, then starts a Java host: the Java host
// reads the leases cfp created and checkpointed, takes its share and delivers the changes
// written after it joined; nothing is lost. Before --lease-format, cfp created .NET v0 leases
// and the Java host failed on the first checkpointed one ("Illegal base64 character 22": Java
// Base64-decodes every lease's ContinuationToken as its state when it lists the leases).
func TestJavaHostJoinsASetCFPBootstrapped(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const processor, n = "cfpfirst", 200
	r.write(0, n/2)
	cfp := r.startCFP(processor, "cfp-1", "--lease-format", "java")
	r.waitFor(90*time.Second, "4 leases owned by cfp-1 and the first changes delivered",
		func() bool {
			got, _, _ := coverage(cfp.delivered(t), n/2)
			return r.owners(processor)["cfp-1"] == 4 && got == n/2
		},
		func() string { return fmt.Sprint(r.owners(processor)) }, cfp)
	for _, l := range r.leases(processor) {
		if l.Version == nil || *l.Version != 1 || l.Continuation == "" || strings.HasPrefix(l.Continuation, `"`) {
			t.Errorf("lease %s: version %v, continuation %q; want a Java EPK lease (version 1, a Base64 state)", l.Token, deref32(l.Version), l.Continuation)
		}
	}
	java := r.startJava(processor, "java-1", "epk")
	r.waitFor(90*time.Second, "the leases balanced 2/2",
		func() bool {
			o := r.owners(processor)
			return o["java-1"] == 2 && o["cfp-1"] == 2
		},
		func() string { return fmt.Sprint(r.owners(processor)) }, java, cfp)
	r.write(n/2, n)
	r.waitFor(90*time.Second, "every change delivered, the leases still balanced 2/2",
		func() bool {
			got, _, _ := coverage(union(t, java, cfp), n)
			o := r.owners(processor)
			return got == n && o["java-1"] == 2 && o["cfp-1"] == 2
		},
		func() string {
			got, lost, dups := coverage(union(t, java, cfp), n)
			return fmt.Sprintf("owners %v, %d delivered, %d not, %d duplicates", r.owners(processor), got, lost, dups)
		}, java, cfp)
	if len(java.delivered(t)) == 0 {
		t.Errorf("the Java host delivered nothing")
	}
	got, lost, dups := coverage(union(t, java, cfp), n)
	t.Logf("%d changes: %d delivered (java-1 %d, cfp-1 %d), %d lost, %d duplicates",
		n, got, len(java.delivered(t)), len(cfp.delivered(t)), lost, dups)
	java.stop(t)
	cfp.stop(t)
}

func deref32(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
