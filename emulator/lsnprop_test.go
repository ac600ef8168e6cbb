package emulator

import "testing"

func TestWithoutLSN(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"_etag":"x","_lsn":12,"_rid":"r","id":"a"}`: `{"_etag":"x","_rid":"r","id":"a"}`,
		`{"_lsn":12}`:         `{}`,
		`{"id":"a","_lsn":7}`: `{"id":"a"}`,
		`{"A":{"_lsn":1},"_lsn":5,"s":"\"_lsn\":3"}`:       `{"A":{"_lsn":1},"s":"\"_lsn\":3"}`,
		`{"a":["_lsn",{"_lsn":2}],"id":"x"}`:               `{"a":["_lsn",{"_lsn":2}],"id":"x"}`,
		`{"k":"quote \\" then \"_lsn\":9","_lsn":1,"z":0}`: `{"k":"quote \\" then \"_lsn\":9","z":0}`,
	} {
		if got := string(withoutLSN([]byte(in))); got != want {
			t.Errorf("withoutLSN(%s) = %s, want %s", in, got, want)
		}
	}
}
