package cmd

import (
	"encoding/json"
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

func TestLeaseAccountConfig(t *testing.T) {
	t.Parallel()
	const (
		ep   = "https://leases.documents.azure.com:443/"
		mon  = "https://acct.documents.azure.com:443/"
		cs   = "AccountEndpoint=" + ep + ";AccountKey=bGVhc2VrZXk=;"
		fkey = "ZmlsZWtleQ=="
	)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "lease.key")
	if err := os.WriteFile(keyFile, []byte(fkey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty.key")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		want     accountConfig
		separate bool
		wantErr  string
	}{
		{name: "none: the monitored account", env: map[string]string{"COSMOS_ENDPOINT": mon, "COSMOS_KEY": "a2V5"}},
		{name: "endpoint and env key", env: map[string]string{"CFP_LEASE_ENDPOINT": ep, "CFP_LEASE_KEY": "bGVhc2VrZXk="},
			want: accountConfig{Endpoint: ep, Key: "bGVhc2VrZXk=", Auth: "key"}, separate: true},
		{name: "key file", args: []string{"--lease-endpoint", ep, "--lease-key-file", keyFile},
			want: accountConfig{Endpoint: ep, Key: fkey, Auth: "key"}, separate: true},
		{name: "key file beats env key", env: map[string]string{"CFP_LEASE_KEY": "ZW52a2V5"}, args: []string{"--lease-endpoint", ep, "--lease-key-file", keyFile},
			want: accountConfig{Endpoint: ep, Key: fkey, Auth: "key"}, separate: true},
		{name: "endpoint alone is entra", args: []string{"--lease-endpoint", ep},
			want: accountConfig{Endpoint: ep, Auth: "entra"}, separate: true},
		// COSMOS_KEY is the monitored account's key, never the lease account's.
		{name: "COSMOS_KEY is not the lease key", env: map[string]string{"COSMOS_ENDPOINT": mon, "COSMOS_KEY": "a2V5", "CFP_LEASE_ENDPOINT": ep},
			want: accountConfig{Endpoint: ep, Auth: "entra"}, separate: true},
		{name: "flag beats env", env: map[string]string{"CFP_LEASE_ENDPOINT": "https://other/"}, args: []string{"--lease-endpoint", ep},
			want: accountConfig{Endpoint: ep, Auth: "entra"}, separate: true},
		{name: "loopback takes the emulator key", args: []string{"--lease-endpoint", "http://127.0.0.1:18082/"},
			want: accountConfig{Endpoint: "http://127.0.0.1:18082/", Key: auth.WellKnownKey, Auth: "key"}, separate: true},
		{name: "loopback with --lease-auth entra stays entra", args: []string{"--lease-endpoint", "http://localhost:8081/", "--lease-auth", "entra"},
			want: accountConfig{Endpoint: "http://localhost:8081/", Auth: "entra"}, separate: true},
		{name: "connection string", env: map[string]string{"CFP_LEASE_CONNECTION_STRING": cs},
			want: accountConfig{ConnectionString: cs, Auth: "key"}, separate: true},
		{name: "with a local monitored account", env: map[string]string{"CFP_LOCAL": dir}, args: []string{"--lease-endpoint", ep},
			want: accountConfig{Endpoint: ep, Auth: "entra"}, separate: true},

		{name: "lease key without lease account", env: map[string]string{"CFP_LEASE_KEY": "bGVhc2VrZXk="},
			wantErr: "CFP_LEASE_KEY is set but no lease account is"},
		{name: "lease key file without lease account", args: []string{"--lease-key-file", keyFile},
			wantErr: "--lease-key-file needs a lease account"},
		{name: "lease auth without lease account", args: []string{"--lease-auth", "key"},
			wantErr: "--lease-auth needs a lease account"},
		{name: "two in env", env: map[string]string{"CFP_LEASE_ENDPOINT": ep, "CFP_LEASE_CONNECTION_STRING": cs},
			wantErr: "more than one lease account configured"},
		{name: "connection string and key", env: map[string]string{"CFP_LEASE_CONNECTION_STRING": cs, "CFP_LEASE_KEY": "a2V5"},
			wantErr: "--lease-connection-string holds the lease account's key"},
		{name: "connection string and entra", env: map[string]string{"CFP_LEASE_CONNECTION_STRING": cs}, args: []string{"--lease-auth", "entra"},
			wantErr: "--lease-auth entra does not use a connection string"},
		{name: "entra with key", env: map[string]string{"CFP_LEASE_ENDPOINT": ep, "CFP_LEASE_KEY": "a2V5"}, args: []string{"--lease-auth", "entra"},
			wantErr: "--lease-auth entra does not use a key"},
		{name: "key auth without key", args: []string{"--lease-endpoint", ep, "--lease-auth", "key"},
			wantErr: "--lease-auth key needs a key"},
		{name: "empty key file", args: []string{"--lease-endpoint", ep, "--lease-key-file", emptyFile},
			wantErr: "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ios, _, _, _ := render.Test()
			f := &factory{IO: ios, Global: &globalOptions{}, Getenv: func(k string) string { return tt.env[k] }}
			var got accountConfig
			var separate bool
			var gotErr error
			root := newRootCmd(f)
			root.AddCommand(newProbeCmd(func() { got, separate, gotErr = f.leaseAccountConfig() }))
			root.SetArgs(append(tt.args, "probe"))
			root.SetOut(io.Discard)
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" {
				var u *UsageError
				if gotErr == nil || !strings.Contains(gotErr.Error(), tt.wantErr) || !errors.As(gotErr, &u) {
					t.Fatalf("err = %v, want a usage error containing %q", gotErr, tt.wantErr)
				}
				if strings.Contains(gotErr.Error(), "\n") {
					t.Errorf("err = %q, want one line", gotErr)
				}
				return
			}
			if gotErr != nil {
				t.Fatal(gotErr)
			}
			if separate != tt.separate || fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("config = %+v (separate %v), want %+v (separate %v)", got, separate, tt.want, tt.separate)
			}
			// A lease key is a secret like the account's: masked wherever cfp prints.
			for _, secret := range []string{got.Key, got.ConnectionString, connectionStringKey(got.ConnectionString)} {
				if secret != "" && secret != auth.WellKnownKey && strings.Contains(f.redact("x "+secret+" y"), secret) {
					t.Errorf("secret %q is not redacted", secret)
				}
			}
		})
	}
}

// TestLeaseAccount_FlagConflicts: both lease account flags on one command line are a usage error.
func TestLeaseAccount_FlagConflicts(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--lease-endpoint", "https://a/", "--lease-connection-string", "AccountEndpoint=https://a/;AccountKey=a2V5;"},
		{"--lease-key-file", "k", "--lease-connection-string", "AccountEndpoint=https://a/;AccountKey=a2V5;"},
	} {
		code, _, errOut := run(t, nil, append(args, "config")...)
		// The warning about a connection string on the command line may come first.
		if code != 2 || !strings.Contains(errOut, "\ncfp: if any flags in the group [lease-") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and the conflict", args, code, errOut)
		}
		if strings.Contains(errOut, "a2V5") {
			t.Errorf("%v: stderr has the key: %q", args, errOut)
		}
	}
}

func TestConfig_LeaseAccount(t *testing.T) {
	t.Parallel()
	const key = "bGVhc2VrZXlsZWFzZWtleQ=="
	tests := []struct {
		name string
		env  map[string]string
		want *leaseAccountView
		// row is the table's lease account row (setting, value, source).
		row string
	}{
		{"same account", map[string]string{"COSMOS_ENDPOINT": "https://acct.documents.azure.com:443/"},
			nil, "lease account\tsame as account\tdefault"},
		{"endpoint and key", map[string]string{"COSMOS_ENDPOINT": "https://acct.documents.azure.com:443/",
			"CFP_LEASE_ENDPOINT": "https://leases.documents.azure.com:443/", "CFP_LEASE_KEY": key},
			&leaseAccountView{Account: "endpoint", Endpoint: "https://leases.documents.azure.com:443/", Auth: "key", KeySource: "CFP_LEASE_KEY"},
			"lease account\tendpoint\tCFP_LEASE_ENDPOINT"},
		{"loopback", map[string]string{"CFP_LOCAL": "mon", "CFP_LEASE_ENDPOINT": "http://127.0.0.1:8082/"},
			&leaseAccountView{Account: "endpoint", Endpoint: "http://127.0.0.1:8082/", Auth: "key", KeySource: "well-known"},
			"lease account\tendpoint\tCFP_LEASE_ENDPOINT"},
		{"connection string", map[string]string{"CFP_LOCAL": "mon",
			"CFP_LEASE_CONNECTION_STRING": "AccountEndpoint=https://leases.documents.azure.com:443/;AccountKey=" + key + ";"},
			&leaseAccountView{Account: "connection-string", Endpoint: "https://leases.documents.azure.com:443/", Auth: "key", KeySource: "connection string"},
			"lease account\tconnection-string\tCFP_LEASE_CONNECTION_STRING"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, tt.env, "config", "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			var v configView
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("output is not a config view: %v\n%s", err, out)
			}
			if fmt.Sprint(v.LeaseAccount) != fmt.Sprint(tt.want) {
				t.Errorf("lease_account = %+v, want %+v", v.LeaseAccount, tt.want)
			}
			code, table, errOut := run(t, tt.env, "config", "-o", "table")
			if code != 0 {
				t.Fatalf("table: exit %d, stderr %q", code, errOut)
			}
			if !strings.Contains(table, "\n"+tt.row+"\n") {
				t.Errorf("table lacks the row %q:\n%s", tt.row, table)
			}
			if strings.Contains(out+table, key) {
				t.Errorf("config printed the lease key:\n%s\n%s", out, table)
			}
		})
	}
}

// TestAccountConfig_ResolvedOncePerRun: both account configurations are resolved once per run,
// so every command and helper that asks sees the same answer (the key files are read once).
func TestAccountConfig_ResolvedOncePerRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile, leaseKeyFile := filepath.Join(dir, "key"), filepath.Join(dir, "lease.key")
	for _, k := range []string{keyFile, leaseKeyFile} {
		if err := os.WriteFile(k, []byte("a2V5a2V5a2V5\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ios, _, _, _ := render.Test()
	f := &factory{IO: ios, Global: &globalOptions{}, Getenv: func(string) string { return "" }}
	root := newRootCmd(f)
	var errs []error
	root.AddCommand(newProbeCmd(func() {
		for range 2 {
			_, err := f.accountConfig()
			_, _, lerr := f.leaseAccountConfig()
			errs = append(errs, err, lerr)
			// Gone after the first resolution: a second one would fail to read them.
			_ = os.Remove(keyFile)
			_ = os.Remove(leaseKeyFile)
		}
	}))
	root.SetArgs([]string{"--endpoint", "https://a.documents.azure.com:443/", "--key-file", keyFile,
		"--lease-endpoint", "https://b.documents.azure.com:443/", "--lease-key-file", leaseKeyFile, "probe"})
	root.SetOut(io.Discard)
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("resolution %d: %v", i, err)
		}
	}
}
