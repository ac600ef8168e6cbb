//go:build unix

package java

import (
	"fmt"
	"testing"
	"time"
)

// TestOneJavaHostAndOneCFPHost runs a Java host (EPK leases, latest version) and a cfp host on
// one lease set of a 4-partition container while changes are written: every change is
// delivered at least once, every lease ends with one owner, and both hosts hold two leases.
func TestOneJavaHostAndOneCFPHost(t *testing.T) {
	r := newRig(t)
	const processor, n = "mixed", 200
	r.write(0, n/2)
	java := r.startJava(processor, "java-1", "epk")
	r.waitFor(90*time.Second, "4 leases owned by java-1",
		func() bool { return r.owners(processor)["java-1"] == 4 },
		func() string { return fmt.Sprint(r.owners(processor)) }, java)
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
