package cmd

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestEntraCredentialFailureExits4: with no Microsoft Entra ID credential available, a
// command fails with exit 4 (as a refused key does) and a hint on getting one. The credential
// chain is limited to the environment credential, which has nothing to work with here, so no
// network is touched.
func TestEntraCredentialFailureExits4(t *testing.T) {
	for _, k := range []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME", "AZURE_FEDERATED_TOKEN_FILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AZURE_TOKEN_CREDENTIALS", "EnvironmentCredential")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"estimate", "-p", "proj"},
		{"leases", "list", "-p", "proj"},
		{"tail", "-e"},
	} {
		env := map[string]string{"NO_COLOR": "1"}
		all := append([]string{"--endpoint", "https://127.0.0.1:1/", "--auth", "entra", "-d", "shop", "-c", "orders"}, args...)
		code, _, stderr := runEnv(ctx, env, "", all...)
		if code != 4 || !strings.Contains(stderr, "microsoft entra id") || !strings.Contains(stderr, "Try: sign in (az login)") {
			t.Errorf("cfp %s: exit %d, stderr %q; want 4 with a sign-in hint", strings.Join(args, " "), code, stderr)
		}
		if strings.Count(stderr, "\n") > 2 {
			t.Errorf("cfp %s: stderr is not one error line and a hint: %q", strings.Join(args, " "), stderr)
		}
	}
}
