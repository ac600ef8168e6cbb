package cmd

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestConfigCheck_Local(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	acct := openLocal(t, dir, 3)
	createContainer(t, acct, "shop", "orders", "/customerId")
	createContainer(t, acct, "shop", "leases", "/id")
	if err := acct.Close(); err != nil {
		t.Fatal(err)
	}

	env := map[string]string{"CFP_LOCAL": dir, "COSMOS_DATABASE": "shop"}
	code, out, errOut := run(t, env, "config", "--check", "-c", "orders", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var v configView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("output is not a config view: %v\n%s", err, out)
	}
	if len(v.Checks) != 3 {
		t.Fatalf("checks = %+v, want account, container and lease container", v.Checks)
	}
	for _, c := range v.Checks {
		if !c.OK {
			t.Errorf("check %s failed: %s", c.Check, c.Detail)
		}
	}
	if d := v.Checks[1].Detail; !strings.Contains(d, "/customerId") || !strings.Contains(d, "3 physical partitions") {
		t.Errorf("container check = %q, want its partition key and partition count", d)
	}

	// A container that does not exist fails the check: exit 1, one line and a hint.
	code, out, errOut = run(t, env, "config", "--check", "-c", "missing", "-o", "json")
	if code != 1 {
		t.Errorf("missing container: exit %d, want 1", code)
	}
	if !strings.Contains(out, `"ok": false`) {
		t.Errorf("missing container: stdout %q, want the failed check", out)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "cfp: ") || !strings.Contains(lines[0], "missing") || !strings.HasPrefix(lines[1], "Try: ") {
		t.Errorf("missing container: stderr %q, want one error line naming it and a Try line", errOut)
	}
}

func TestConfig_KeySource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"env key", map[string]string{"COSMOS_ENDPOINT": "http://localhost:8081/", "COSMOS_KEY": "c2VjcmV0"}, "COSMOS_KEY"},
		// No key for a loopback endpoint: cfp uses the emulator's well-known key, not COSMOS_KEY.
		{"loopback without key", map[string]string{"COSMOS_ENDPOINT": "http://127.0.0.1:8081/"}, "well-known"},
		{"remote without key", map[string]string{"COSMOS_ENDPOINT": "https://acct.documents.azure.com:443/"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, tc.env, "config", "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			var v configView
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("output is not a config view: %v\n%s", err, out)
			}
			if v.KeySource != tc.want {
				t.Errorf("key_source = %q, want %q", v.KeySource, tc.want)
			}
		})
	}
}
