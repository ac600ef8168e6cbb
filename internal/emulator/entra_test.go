package emulator_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/emulator"
	"github.com/cfp-dev/cfp/internal/emulator/auth"
)

// emulatorTokenCredential is the credential the SDKs' emulator tests use: a JWT whose signature
// part is the account key's text.
type emulatorTokenCredential struct {
	key string
	exp time.Time
}

func (c emulatorTokenCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	enc := base64.RawURLEncoding.EncodeToString
	tok := enc([]byte(`{"typ":"JWT","alg":"RS256"}`)) + "." +
		enc(fmt.Appendf(nil, `{"tid":"EmulatorFederation","exp":%d}`, c.exp.Unix())) + "." + enc([]byte(c.key))
	return azcore.AccessToken{Token: tok, ExpiresOn: c.exp}, nil
}

func entraClient(t *testing.T, e *emulator.Emulator, cred azcore.TokenCredential) *azcosmos.Client {
	t.Helper()
	c, err := azcosmos.NewClient(fmt.Sprintf("http://emu-%d.test/", hostSeq.Add(1)), cred, &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport:                       emulator.Transport{Handler: e.Handler()},
		Retry:                           policy.RetryOptions{MaxRetries: -1},
		InsecureAllowCredentialWithHTTP: true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestEntraEmulatorTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	good := emulatorTokenCredential{key: auth.WellKnownKey, exp: time.Now().Add(time.Hour)}

	on := openEmu(t, emulator.Options{AcceptEmulatorTokens: true})
	if _, err := entraClient(t, on, good).CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "d"}, nil); err != nil {
		t.Errorf("emulator token accepted: %v", err)
	}
	for name, cred := range map[string]emulatorTokenCredential{
		"another key": {key: "b3RoZXI=", exp: time.Now().Add(time.Hour)},
		"expired":     {key: auth.WellKnownKey, exp: time.Now().Add(-time.Minute)},
	} {
		if _, err := entraClient(t, on, cred).CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "x"}, nil); statusOf(err) != 401 {
			t.Errorf("%s: %v, want 401", name, err)
		}
	}
	off := openEmu(t, emulator.Options{})
	if _, err := entraClient(t, off, good).CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "d"}, nil); statusOf(err) != 401 {
		t.Errorf("emulator token without AcceptEmulatorTokens: %v, want 401", err)
	}
}

func TestAccount_DefaultConsistency(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{DefaultConsistency: "Strong"})
	_, body := rawRequest(t, e, "GET", "/", nil, "")
	if want := `"userConsistencyPolicy":{"defaultConsistencyLevel":"Strong"}`; !strings.Contains(string(body), want) {
		t.Errorf("account: %s, want %s", body, want)
	}
	if err := (emulator.Options{Dir: t.TempDir(), DefaultConsistency: "Sometimes"}).Validate(); err == nil {
		t.Error("an unknown consistency level was accepted")
	}
}
