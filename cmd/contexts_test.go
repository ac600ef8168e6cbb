package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/render"
)

// TestAccountPrecedence: flag > environment > context, for the account as a whole (an account
// flag overrides an account variable of another kind instead of clashing with it) and for the
// key, database and container.
func TestAccountPrecedence(t *testing.T) {
	t.Parallel()
	const (
		ep      = "https://acct.documents.azure.com:443/"
		ctxEP   = "https://ctx.documents.azure.com:443/"
		envKey  = "ZW52a2V5"
		ctxKey  = "Y3R4a2V5"
		fileKey = "ZmlsZWtleQ=="
	)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte(fileKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "xdg")
	writeContexts(t, cfg, contextFile{CurrentContext: "cur", Contexts: []cfpContext{
		{Name: "cur", Endpoint: ctxEP, KeyEnv: "CTX_KEY", Database: "ctxdb", Container: "ctxc"},
		{Name: "local", Local: "/data/ctx"},
		{Name: "entra", Endpoint: ctxEP, Auth: "entra"},
		{Name: "nokey", Endpoint: ctxEP, KeyEnv: "UNSET_KEY"},
	}})
	base := map[string]string{"XDG_CONFIG_HOME": cfg, "CTX_KEY": ctxKey}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name          string
		env           map[string]string
		args          []string
		want          accountConfig
		wantDB, wantC string
		wantErr       string
	}{
		{name: "current context", env: base,
			want: accountConfig{Endpoint: ctxEP, Key: ctxKey, Auth: "key"}, wantDB: "ctxdb", wantC: "ctxc"},
		{name: "CFP_CONTEXT picks another", env: with("CFP_CONTEXT", "local"), want: accountConfig{LocalDir: "/data/ctx"}},
		{name: "--context beats CFP_CONTEXT", env: with("CFP_CONTEXT", "local"), args: []string{"--context", "entra"},
			want: accountConfig{Endpoint: ctxEP, Auth: "entra"}},
		{name: "env account beats the context", env: with("COSMOS_ENDPOINT", ep, "COSMOS_KEY", envKey),
			want: accountConfig{Endpoint: ep, Key: envKey, Auth: "key"}, wantDB: "ctxdb", wantC: "ctxc"},
		{name: "env database beats the context", env: with("COSMOS_DATABASE", "envdb"),
			want: accountConfig{Endpoint: ctxEP, Key: ctxKey, Auth: "key"}, wantDB: "envdb", wantC: "ctxc"},
		{name: "flag database beats env and context", env: with("COSMOS_DATABASE", "envdb"), args: []string{"-d", "flagdb"},
			want: accountConfig{Endpoint: ctxEP, Key: ctxKey, Auth: "key"}, wantDB: "flagdb", wantC: "ctxc"},
		{name: "flag account beats env and context", env: with("CFP_LOCAL", "/data/env"), args: []string{"--endpoint", ep},
			want: accountConfig{Endpoint: ep, Auth: "entra"}, wantDB: "ctxdb", wantC: "ctxc"},
		{name: "--endpoint with CFP_LOCAL exported (the emulator's in-use hint)", env: map[string]string{"CFP_LOCAL": ".cfp"},
			args: []string{"--endpoint", "http://127.0.0.1:8081/"}, want: accountConfig{Endpoint: "http://127.0.0.1:8081/", Key: auth.WellKnownKey, Auth: "key"}},
		{name: "--local with COSMOS_ENDPOINT exported", env: map[string]string{"COSMOS_ENDPOINT": ep}, args: []string{"--local"},
			want: accountConfig{LocalDir: ".cfp"}},
		{name: "two account variables still clash", env: with("COSMOS_ENDPOINT", ep, "CFP_LOCAL", "x"), wantErr: "more than one account configured"},
		{name: "the context's key, not COSMOS_KEY", env: with("COSMOS_KEY", envKey),
			want: accountConfig{Endpoint: ctxEP, Key: ctxKey, Auth: "key"}, wantDB: "ctxdb", wantC: "ctxc"},
		{name: "--key-file beats the context's key", env: base, args: []string{"--key-file", keyFile},
			want: accountConfig{Endpoint: ctxEP, Key: fileKey, Auth: "key"}, wantDB: "ctxdb", wantC: "ctxc"},
		{name: "an entra context ignores COSMOS_KEY", env: with("CFP_CONTEXT", "entra", "COSMOS_KEY", envKey),
			want: accountConfig{Endpoint: ctxEP, Auth: "entra"}},
		{name: "unset key variable", env: with("CFP_CONTEXT", "nokey"), wantErr: "context nokey: UNSET_KEY (its account key) is not set"},
		{name: "unknown context", env: base, args: []string{"--context", "nope"}, wantErr: `no context "nope"`},
		{name: "no config file, no context", env: map[string]string{"XDG_CONFIG_HOME": filepath.Join(dir, "none")}, wantErr: "no Cosmos DB account configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ios, _, _, _ := render.Test()
			f := &factory{IO: ios, Global: &globalOptions{}, Getenv: func(k string) string { return tt.env[k] }}
			var got accountConfig
			var gotErr error
			root := newRootCmd(f)
			root.AddCommand(newProbeCmd(func() { got, gotErr = f.accountConfig() }))
			root.SetArgs(append(tt.args, "probe"))
			root.SetOut(io.Discard)
			root.SetErr(io.Discard)
			if err := root.Execute(); err != nil {
				gotErr = err
			}
			if tt.wantErr != "" {
				var u *UsageError
				if gotErr == nil || !strings.Contains(gotErr.Error(), tt.wantErr) || !errors.As(gotErr, &u) {
					t.Fatalf("err = %v, want a usage error containing %q", gotErr, tt.wantErr)
				}
				return
			}
			if gotErr != nil {
				t.Fatal(gotErr)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("config = %+v, want %+v", got, tt.want)
			}
			if f.Global.Database != tt.wantDB || f.Global.Container != tt.wantC {
				t.Errorf("database, container = %q, %q; want %q, %q", f.Global.Database, f.Global.Container, tt.wantDB, tt.wantC)
			}
		})
	}
}

func writeContexts(t *testing.T, xdg string, cf contextFile) {
	t.Helper()
	if err := cf.save(filepath.Join(xdg, "cfp", "config.json")); err != nil {
		t.Fatal(err)
	}
}

// TestSetContext_KeysByReference: set-context stores a key only by reference, refuses an
// inline one unless --key-inline is asked (with a warning), and writes the file with mode 0600.
func TestSetContext_KeysByReference(t *testing.T) {
	t.Parallel()
	xdg := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": xdg, "COSMOS_KEY": "c2VjcmV0a2V5"}
	const ep = "https://acct.documents.azure.com:443/"
	code, _, errOut := run(t, env, "config", "set-context", "a", "--endpoint", ep, "--key", "c2VjcmV0a2V5")
	if code != 2 || !strings.Contains(errOut, "stores keys by reference") {
		t.Errorf("--key: exit %d, stderr %q; want 2 and a refusal", code, errOut)
	}
	code, _, errOut = run(t, env, "config", "set-context", "a", "--endpoint", ep, "--key-env", "MY_KEY")
	if code != 0 {
		t.Fatalf("--key-env: exit %d, stderr %q", code, errOut)
	}
	path := filepath.Join(xdg, "cfp", "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "c2VjcmV0a2V5") || !strings.Contains(string(b), `"key_env": "MY_KEY"`) {
		t.Errorf("config file = %s; want the variable's name, not the key", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("config file mode %v, want 0600", fi.Mode().Perm())
	}
	code, _, errOut = run(t, env, "config", "set-context", "b", "--endpoint", ep, "--key-inline")
	if code != 0 || !strings.Contains(errOut, "clear text") || strings.Contains(errOut, "c2VjcmV0a2V5") {
		t.Errorf("--key-inline: exit %d, stderr %q; want 0 and a warning without the key", code, errOut)
	}
	code, out, _ := run(t, env, "config", "get-contexts", "-o", "json")
	if code != 0 || strings.Contains(out, "c2VjcmV0a2V5") || !strings.Contains(out, `"key_source": "inline"`) {
		t.Errorf("get-contexts: exit %d, stdout %s; want the key's source, never the key", code, out)
	}
}

// FuzzLoadContexts: any config file either loads or fails with an error naming the file, and
// what loads saves and loads back the same.
func FuzzLoadContexts(f *testing.F) {
	f.Add([]byte(`{"current_context":"dev","contexts":[{"name":"dev","local":"/d","database":"shop"}]}`))
	f.Add([]byte(`{"contexts":[{"name":"p","endpoint":"https://a/","key_env":"K"}]}`))
	f.Add([]byte(`{"contexts":null}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "cfp", "config.json")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		cf, err := loadContexts(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := cf.save(path); err != nil {
			t.Fatal(err)
		}
		again, err := loadContexts(path)
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
		if fmt.Sprint(again) != fmt.Sprint(cf) {
			t.Errorf("reloaded %+v, saved %+v", again, cf)
		}
	})
}
