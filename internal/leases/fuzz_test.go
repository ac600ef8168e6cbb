package leases_test

import (
	"encoding/base64"
	"reflect"
	"testing"

	"github.com/cfp-dev/cfp/internal/leases"
)

func FuzzDecode(f *testing.F) {
	leases.AddCorpusSeeds(f)
	f.Add([]byte(`{"id":"p.info"}`))
	f.Add([]byte(`{"id":"p..0","LeaseToken":"0","version":"1","ContinuationToken":"e30"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		l, err := leases.Decode(leases.Document{Body: body})
		if err != nil {
			return
		}
		out, err := leases.Encode(l)
		if l.StateError != nil {
			// A Java continuation cfp cannot read: cfp refuses to rewrite the lease.
			if err == nil {
				t.Fatalf("Encode of a lease whose Java state does not decode (%v) = nil error, want a refusal", l.StateError)
			}
			return
		}
		if err != nil {
			t.Fatalf("Encode of a decoded lease: %v", err)
		}
		again, err := leases.Decode(leases.Document{Body: out})
		if err != nil {
			t.Fatalf("Decode(Encode(x)): %v\nin:  %s\nout: %s", err, body, out)
		}
		if got, want := view(again), view(l); !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(Encode(x)) = %+v, want %+v\nin:  %s\nout: %s", got, want, body, out)
		}
	})
}

func FuzzDecodeJavaState(f *testing.F) {
	f.Add(base64.URLEncoding.EncodeToString([]byte(`{"V":1,"Rid":"r","Mode":"INCREMENTAL","StartFrom":{"Type":"NOW"},"Continuation":{"V":1,"Rid":"r","Continuation":[{"token":"\"5\"","range":{"min":"","max":"FF"}}],"Range":{"min":"","max":"FF"}}}`)))
	f.Add(base64.RawStdEncoding.EncodeToString([]byte(`{"V":1,"StartFrom":{"Type":"POINT_IN_TIME","PointInTimeMs":1},"Range":{"min":"AA","max":"BB"}}`)))
	f.Add("eyJWIjoxfQ")
	f.Add("not base64!")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := leases.DecodeJavaState(s)
		if err != nil {
			return
		}
		enc, err := leases.EncodeJavaState(st)
		if err != nil {
			t.Fatalf("EncodeJavaState: %v", err)
		}
		again, err := leases.DecodeJavaState(enc)
		if err != nil {
			t.Fatalf("DecodeJavaState(EncodeJavaState(x)): %v", err)
		}
		if again.Token() != st.Token() || again.Mode != st.Mode || again.Rid != st.Rid ||
			again.StartFrom.Type != st.StartFrom.Type || !again.StartFrom.PointInTime.Equal(st.StartFrom.PointInTime) {
			t.Fatalf("state changed by a round trip: %+v -> %+v", st, again)
		}
		moved, err := leases.EncodeJavaState(st.WithToken(`"99"`, leases.Range{Min: "", Max: "FF"}))
		if err != nil {
			t.Fatalf("EncodeJavaState(WithToken): %v", err)
		}
		if m, err := leases.DecodeJavaState(moved); err != nil || m.Token() != `"99"` {
			t.Fatalf("WithToken: %v, token %q", err, m.Token())
		}
	})
}
