package emulator

import (
	"errors"
	"testing"
)

func TestWritePrecondition(t *testing.T) {
	t.Parallel()
	const etag = `"v1"`
	for _, tc := range []struct {
		name    string
		op      opKind
		exists  bool
		ifMatch string
		want    opKind
		wantErr error
	}{
		{"create new", opCreate, false, "", opCreate, nil},
		{"create existing", opCreate, true, "", 0, errConflict},
		{"create existing with matching If-Match is still a conflict", opCreate, true, etag, 0, errConflict},
		{"create new with If-Match", opCreate, false, `"other"`, opCreate, nil},
		{"replace missing", opReplace, false, "", 0, errNotFound},
		{"replace missing with If-Match is not found", opReplace, false, etag, 0, errNotFound},
		{"replace existing", opReplace, true, "", opReplace, nil},
		{"replace with matching If-Match", opReplace, true, etag, opReplace, nil},
		{"replace with If-Match *", opReplace, true, "*", opReplace, nil},
		{"replace with stale If-Match", opReplace, true, `"v0"`, 0, errPrecondition},
		{"delete missing", opDelete, false, "", 0, errNotFound},
		{"delete existing", opDelete, true, "", opDelete, nil},
		{"delete with stale If-Match", opDelete, true, `"v0"`, 0, errPrecondition},
		{"delete with matching If-Match", opDelete, true, etag, opDelete, nil},
		{"upsert new", opUpsert, false, "", opCreate, nil},
		{"upsert existing", opUpsert, true, "", opReplace, nil},
		{"upsert new with If-Match", opUpsert, false, etag, 0, errPrecondition},
		{"upsert new with If-Match *", opUpsert, false, "*", 0, errPrecondition},
		{"upsert existing with matching If-Match", opUpsert, true, etag, opReplace, nil},
		{"upsert existing with stale If-Match", opUpsert, true, `"v0"`, 0, errPrecondition},
	} {
		got, err := writePrecondition(tc.op, tc.exists, etag, tc.ifMatch)
		if !errors.Is(err, tc.wantErr) || (err == nil && got != tc.want) {
			t.Errorf("%s: writePrecondition = %s, %v; want %s, %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}
