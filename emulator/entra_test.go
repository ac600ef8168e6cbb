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

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
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

// rawTokenCredential hands out a fixed token.
type rawTokenCredential string

func (c rawTokenCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(c), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// TestEntraEmulatorTokens_KeyNotInTokenAndExpRequired checks that an emulator with a key of its
// own accepts only tokens that carry a MAC under the key, not the key itself (a captured token
// would give the key away), and that every token must expire, within MaxTokenLifetime.
func TestEntraEmulatorTokens_KeyNotInTokenAndExpRequired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("a custom emulator key ", 4)))
	e := openEmu(t, emulator.Options{Key: key, AcceptEmulatorTokens: true})
	tok, err := auth.EmulatorToken(key, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := entraClient(t, e, rawTokenCredential(tok)).CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "d"}, nil); err != nil {
		t.Errorf("a token signed with the key: %v", err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	head := enc([]byte(`{"typ":"JWT","alg":"RS256"}`))
	for name, tok := range map[string]string{
		"the custom key's text as signature": head + "." + enc([]byte(`{"exp":`+fmt.Sprint(time.Now().Add(time.Hour).Unix())+`}`)) + "." + enc([]byte(key)),
		"no exp (the well-known form)":       head + "." + enc([]byte(`{"tid":"EmulatorFederation"}`)) + "." + enc([]byte(key)),
		"exp a year ahead":                   mustToken(t, key, time.Now().Add(365*24*time.Hour)),
		"expired":                            mustToken(t, key, time.Now().Add(-time.Minute)),
	} {
		if _, err := entraClient(t, e, rawTokenCredential(tok)).CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "x"}, nil); statusOf(err) != 401 {
			t.Errorf("%s: %v, want 401", name, err)
		}
	}
	// The well-known key is public: the SDKs' emulator credential (its text as the signature)
	// stays accepted, with an exp.
	wk := openEmu(t, emulator.Options{AcceptEmulatorTokens: true})
	noExp := head + "." + enc([]byte(`{"tid":"EmulatorFederation"}`)) + "." + enc([]byte(auth.WellKnownKey))
	if _, err := entraClient(t, wk, rawTokenCredential(noExp)).CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "x"}, nil); statusOf(err) != 401 {
		t.Errorf("well-known key, token without exp: %v, want 401", err)
	}
}

func mustToken(t *testing.T, key string, exp time.Time) string {
	t.Helper()
	tok, err := auth.EmulatorToken(key, exp)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
