package feed

import (
	"errors"
	"testing"
)

func TestParsePartitionKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"p1":          `["p1"]`,
		`"quoted"`:    `["quoted"]`,
		"[5]":         `[5]`,
		`["a", "b"]`:  `["a","b"]`,
		"12":          `["12"]`,
		"with space ": `["with space "]`,
	} {
		got, err := ParsePartitionKey(in)
		if err != nil || string(got) != want {
			t.Errorf("ParsePartitionKey(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"[1,", `{"a":1}`, "[]", `[["a"]]`, `[{"a":1}]`} {
		if got, err := ParsePartitionKey(in); err == nil {
			t.Errorf("ParsePartitionKey(%q) = %s, want an error", in, got)
		}
	}
}

func TestCheckPartitionKeyComponents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pk    string
		paths []string
		arity bool // want a *PartitionKeyArityError
		ok    bool
	}{
		{`["a"]`, []string{"/pk"}, false, true},
		{`["a",1]`, []string{"/tenant", "/user"}, false, true},
		{`["a"]`, nil, false, true}, // paths unknown: any key
		{`["a"]`, []string{"/tenant", "/user"}, true, false},
		{`["a","b"]`, []string{"/pk"}, true, false},
		{`"a"`, []string{"/pk"}, false, false}, // not an array
	}
	for _, tt := range tests {
		err := CheckPartitionKeyComponents([]byte(tt.pk), "db/c", tt.paths)
		var ae *PartitionKeyArityError
		if (err == nil) != tt.ok || errors.As(err, &ae) != tt.arity {
			t.Errorf("CheckPartitionKeyComponents(%s, %v) = %v; want ok %v, arity error %v", tt.pk, tt.paths, err, tt.ok, tt.arity)
		}
	}
	err := CheckPartitionKeyComponents([]byte(`["a"]`), "db/c", []string{"/tenant", "/user"})
	if want := "1 component(s), but db/c is partitioned on /tenant, /user (2)"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}
