package leases

import (
	"context"
	"testing"
)

// A Java EPK lease created the way Java's bootstrapper creates it (null continuation, so no
// state and no mode) gets, at cfp's first checkpoint, a state in the mode of the processor
// writing: an all-versions host wrote "INCREMENTAL" before, and then refused its own lease set
// on its next start (switching ChangeFeedMode).
func TestStore_FirstCheckpointOfAJavaLeaseCarriesTheProcessorsMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct{ mode, want string }{
		{ModeFullFidelity, JavaModeFullFidelity},
		{"", JavaModeIncremental},
	} {
		docs := NewMemDocuments("/id")
		s := NewStore(docs, "p", StoreOptions{Mode: tc.mode})
		l, err := s.Create(ctx, NewJavaEPK("p", Range{Min: "", Max: "FF"}))
		if err != nil {
			t.Fatal(err)
		}
		if l, err = s.Acquire(ctx, l, "h"); err != nil {
			t.Fatal(err)
		}
		if _, err = s.Checkpoint(ctx, l, "h", `"12"`); err != nil {
			t.Fatal(err)
		}
		got, err := NewStore(docs, "p", StoreOptions{}).Get(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		st := got.JavaState()
		if st == nil || st.Mode != tc.want || got.Continuation != `"12"` || got.Family != FamilyJavaEPK {
			t.Errorf("mode %q: checkpointed lease %+v, state %+v; want a Java state in mode %s resuming after 12", tc.mode, got, st, tc.want)
		}
	}
}
