// Package account opens the Cosmos DB accounts cfp's commands work on: with an account key or a
// connection string, with Microsoft Entra ID, or the embedded emulator on a data directory, in
// process (--local). It builds the azcosmos client with cfp's pipeline (cosmos.NewClientOptions)
// and hands it to cosmos.NewAccount, so internal/cosmos, and the public changefeed package over
// it, depend on neither azidentity nor the emulator.
package account

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/cosmos"
)

// Auth kinds for Config.Auth.
const (
	AuthKey   = "key"
	AuthEntra = "entra"
)

// Config says which account to open. Exactly one account kind applies, in this order:
// LocalDir (the embedded emulator), ConnectionString, Endpoint with Key, Endpoint with
// Microsoft Entra ID (Auth "entra", or Auth "" and no key).
type Config struct {
	// Endpoint is the account endpoint, e.g. "https://acct.documents.azure.com:443/".
	Endpoint string
	// Key is the account key (base64); it never appears in errors or logs.
	Key string
	// ConnectionString is "AccountEndpoint=...;AccountKey=...;".
	ConnectionString string
	// Auth is "key", "entra", or "" (key if one is given, else Entra ID).
	Auth string
	// LocalDir opens the embedded emulator on this directory, in process.
	LocalDir string
	// LocalPartitions is the number of physical partitions the embedded emulator gives new
	// containers (0: the emulator's default).
	LocalPartitions int
	// PreferredRegions orders the regions reads go to ("West US 2", ...).
	PreferredRegions []string
	// CAFile names a PEM file of certificates to trust beside the system's, for an https
	// endpoint with a self-signed certificate (cfp emulator's emulator.pem). "" trusts the
	// system's roots only (on Linux SSL_CERT_FILE replaces them).
	CAFile string
	// LeasesOnly says the account holds only lease containers (a separate lease account): lease
	// ids embed the monitored account's host, not this one's, so a regional endpoint is fine.
	LeasesOnly bool
	// Logger receives warnings (default: slog.Default()).
	Logger *slog.Logger
	// RequestTimeout bounds each attempt of each request (default cosmos.DefaultRequestTimeout).
	RequestTimeout time.Duration
	// Retry bounds the retries of throttled and unavailable requests (zero: the defaults).
	Retry cosmos.RetryOptions
	// UserAgent is prepended to the SDK's User-Agent (azcore keeps its first 24 characters;
	// default "cfp/<version>").
	UserAgent string
	// Priority and ThroughputBucket go with every request (see cosmos.ClientSettings).
	Priority         string
	ThroughputBucket int
}

// Account is an open account: a *cosmos.Account (whose methods it has) plus, for a local account,
// the embedded emulator it serves from, which Close closes after the client. Close it when done.
type Account struct {
	*cosmos.Account
	emu *emulator.Emulator
}

// Open opens the account described by cfg. It does no network I/O for remote accounts (the SDK
// bootstraps on the first request); for LocalDir it opens the emulator's data directory, and a
// directory held by another process yields an error wrapping *emulator.LockedError.
func Open(ctx context.Context, cfg Config) (*Account, error) {
	_ = ctx // reserved: opening does no I/O today
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	opts := cosmos.NewClientOptions(cosmos.ClientSettings{
		PreferredRegions: cfg.PreferredRegions, Logger: log,
		RequestTimeout: cfg.RequestTimeout, Retry: cfg.Retry, UserAgent: cfg.UserAgent,
		Priority: cfg.Priority, ThroughputBucket: cfg.ThroughputBucket,
	})
	if cfg.CAFile != "" && cfg.LocalDir == "" {
		t, err := caTransport(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("open account: %w", err)
		}
		opts.Transport = t
	}
	settings := cosmos.AccountSettings{Options: opts, LeasesOnly: cfg.LeasesOnly, Logger: log}
	switch {
	case cfg.LocalDir != "":
		return openLocal(cfg.LocalDir, cfg.LocalPartitions, settings)
	case cfg.ConnectionString != "":
		if cfg.Auth == AuthEntra {
			return nil, errors.New("open account: --auth entra cannot be used with a connection string")
		}
		cs, err := cosmos.ParseConnectionString(cfg.ConnectionString)
		if err != nil {
			return nil, fmt.Errorf("open account: %w", err)
		}
		return openKey(cs.Endpoint, cs.Key, settings)
	case cfg.Endpoint == "":
		return nil, cosmos.ErrNoAccount
	}
	if err := cosmos.CheckEndpoint(cfg.Endpoint); err != nil {
		return nil, fmt.Errorf("open account: %w", err)
	}
	kind := cfg.Auth
	if kind == "" {
		kind = AuthEntra
		if cfg.Key != "" {
			kind = AuthKey
		}
	}
	switch kind {
	case AuthKey:
		if cfg.Key == "" {
			return nil, errors.New("open account: --auth key needs a key (COSMOS_KEY or --key-file)")
		}
		return openKey(cfg.Endpoint, cfg.Key, settings)
	case AuthEntra:
		return openEntra(cfg.Endpoint, settings)
	default:
		return nil, fmt.Errorf("open account: unknown auth %q (want key or entra)", kind)
	}
}

func openKey(endpoint, key string, s cosmos.AccountSettings) (*Account, error) {
	if err := cosmos.CheckEndpoint(endpoint); err != nil {
		return nil, fmt.Errorf("open account: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(raw) == 0 {
		return nil, errors.New("open account: the account key is not valid base64 (copy the primary or secondary key from the portal)")
	}
	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		return nil, errors.New("open account: the account key is not valid")
	}
	client, err := azcosmos.NewClientWithKey(endpoint, cred, s.Options)
	if err != nil {
		return nil, fmt.Errorf("open account %s: %w", endpoint, err)
	}
	s.Auth = &cosmos.MetaAuth{Key: raw}
	return &Account{Account: cosmos.NewAccount(client, endpoint, s)}, nil
}

func openEntra(endpoint string, s cosmos.AccountSettings) (*Account, error) {
	dac, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("open account %s: microsoft entra id: %w", endpoint, &EntraError{Err: err})
	}
	cred := entraCredential{dac}
	client, err := azcosmos.NewClient(endpoint, cred, s.Options)
	if err != nil {
		return nil, fmt.Errorf("open account %s: %w", endpoint, err)
	}
	u, _ := url.Parse(endpoint)
	s.Auth = &cosmos.MetaAuth{Cred: cred, Scope: u.Scheme + "://" + u.Hostname() + "/.default"}
	return &Account{Account: cosmos.NewAccount(client, endpoint, s)}, nil
}

func openLocal(dir string, partitions int, s cosmos.AccountSettings) (*Account, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open local account %s: %w", dir, err)
	}
	emu, err := emulator.Open(emulator.Options{Dir: abs, Key: auth.WellKnownKey, Partitions: partitions, Logger: s.Logger})
	if err != nil {
		return nil, fmt.Errorf("open local account %s: %w", abs, err)
	}
	endpoint := LocalEndpoint(abs)
	s.Options.Transport = &emulator.Transport{Handler: emu.Handler()}
	cred, err := azcosmos.NewKeyCredential(auth.WellKnownKey)
	if err != nil {
		_ = emu.Close()
		return nil, fmt.Errorf("open local account %s: %w", abs, err)
	}
	client, err := azcosmos.NewClientWithKey(endpoint, cred, s.Options)
	if err != nil {
		_ = emu.Close()
		return nil, fmt.Errorf("open local account %s: %w", abs, err)
	}
	raw, _ := base64.StdEncoding.DecodeString(auth.WellKnownKey)
	s.Auth = &cosmos.MetaAuth{Key: raw}
	s.OnClose = emu.Close
	return &Account{Account: cosmos.NewAccount(client, endpoint, s), emu: emu}, nil
}

// Emulator returns the embedded emulator of a local account (nil otherwise), for tests and for
// `cfp emulator`-style fault injection.
func (a *Account) Emulator() *emulator.Emulator { return a.emu }

// LocalEndpoint is the endpoint azcosmos uses for the embedded emulator on the absolute
// directory dir: "http://localhost:<port>/" with a port in 10000-59999 derived from a stable hash
// of the path. Lease ids embed only the host name ("localhost"), while the port keeps azcosmos's
// process-wide caches (keyed by endpoint) apart per data directory.
func LocalEndpoint(dir string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(filepath.Clean(dir)))
	return fmt.Sprintf("http://localhost:%d/", 10000+h.Sum32()%50000)
}

// EntraError is a failure to get a Microsoft Entra ID token: no credential is available, or
// the one found was refused. Commands exit 4 on it, like on a refused key.
type EntraError struct{ Err error }

func (e *EntraError) Error() string { return "microsoft entra id: " + e.Err.Error() }
func (e *EntraError) Unwrap() error { return e.Err }

// AuthError reports true: the credential failed.
func (e *EntraError) AuthError() bool { return true }

// Hint says how to provide a credential.
func (e *EntraError) Hint() string {
	return "sign in (az login), or set AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET or a managed identity; or use an account key (COSMOS_KEY, --key-file)"
}

// entraCredential marks every token failure of its credential as an *EntraError.
type entraCredential struct{ azcore.TokenCredential }

func (c entraCredential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tk, err := c.TokenCredential.GetToken(ctx, opts)
	if err != nil && ctx.Err() == nil {
		return tk, &EntraError{Err: err}
	}
	return tk, err
}

// caTransport is an HTTP client that trusts the system's roots and the PEM certificates in file.
func caTransport(file string) (*http.Client, error) {
	tr, err := TrustingTransport(file)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tr}, nil
}

// TrustingTransport returns an HTTP transport that trusts the PEM certificates of file beside
// the system's (--ca-file): the SDK's and the emulator admin client's.
func TrustingTransport(file string) (http.RoundTripper, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read --ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", file)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}
