// Package cosmos is cfp's only door to Azure Cosmos DB: besides the public changefeed package, which
// only hands the caller's clients over to FromClient, the only package that imports azcosmos.
// It opens accounts (key, Microsoft Entra ID, or the embedded emulator in process), manages
// databases and containers, implements feed.Source over ReadChangeFeed (one physical partition
// per page, splits reported instead of followed) and leases.Documents over a lease container, and
// translates the service's errors once into the engine's sentinel and typed errors.
package cosmos

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
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/buildinfo"
	"github.com/cfp-dev/cfp/internal/emulator"
	"github.com/cfp-dev/cfp/internal/emulator/auth"
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
	// RequestTimeout bounds each attempt of each request (default DefaultRequestTimeout).
	RequestTimeout time.Duration
	// Retry bounds the retries of throttled and unavailable requests (zero: the defaults).
	Retry RetryOptions
	// UserAgent is prepended to the SDK's User-Agent (azcore keeps its first 24 characters;
	// default "cfp/<version>").
	UserAgent string
}

// Account is an open Cosmos DB account. It is safe for concurrent use; Close it when done.
type Account struct {
	client   *azcosmos.Client
	endpoint string
	host     string
	log      *slog.Logger
	emu      *emulator.Emulator
	meta     *metaClient
	opts     *azcosmos.ClientOptions
	// leasesOnly: see Config.LeasesOnly.
	leasesOnly bool
	// borrowed: the client is the caller's (FromClient): Close leaves it open, and there is no
	// meta client (partitions are listed through the SDK).
	borrowed bool

	closeOnce sync.Once
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
	ua := cfg.UserAgent
	if ua == "" {
		ua = "cfp/" + buildinfo.Version
	}
	opts := &azcosmos.ClientOptions{PreferredRegions: cfg.PreferredRegions}
	opts.Telemetry.ApplicationID = ua
	// The per-call EPK policy adds x-ms-start-epk/end-epk to change-feed reads of a sub-range
	// (azcosmos never sends them); the mode policy turns all-versions reads into Full-Fidelity
	// Feed requests (azcosmos has no mode option); the feed body policy splits ReadPage's
	// documents itself (feedbody.go).
	opts.PerCallPolicies = PerCallPolicies()
	// The request policy retries 429 and 503 and bounds every attempt (retry.go); azcore's
	// retry policy keeps the other transient statuses.
	opts.PerRetryPolicies = []policy.Policy{newRequestPolicy(log, cfg.RequestTimeout, cfg.Retry)}
	opts.Retry.StatusCodes = retryStatusCodes

	if cfg.CAFile != "" && cfg.LocalDir == "" {
		t, err := caTransport(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("open account: %w", err)
		}
		opts.Transport = t
	}
	a := &Account{log: log, leasesOnly: cfg.LeasesOnly}
	switch {
	case cfg.LocalDir != "":
		if err := a.openLocal(cfg.LocalDir, cfg.LocalPartitions, opts); err != nil {
			return nil, err
		}
		return a, nil
	case cfg.ConnectionString != "":
		if cfg.Auth == AuthEntra {
			return nil, errors.New("open account: --auth entra cannot be used with a connection string")
		}
		cs, err := ParseConnectionString(cfg.ConnectionString)
		if err != nil {
			return nil, fmt.Errorf("open account: %w", err)
		}
		return a.openKey(cs.Endpoint, cs.Key, opts)
	case cfg.Endpoint == "":
		return nil, ErrNoAccount
	}
	if err := checkEndpoint(cfg.Endpoint); err != nil {
		return nil, fmt.Errorf("open account: %w", err)
	}
	auth := cfg.Auth
	if auth == "" {
		auth = AuthEntra
		if cfg.Key != "" {
			auth = AuthKey
		}
	}
	switch auth {
	case AuthKey:
		if cfg.Key == "" {
			return nil, errors.New("open account: --auth key needs a key (COSMOS_KEY or --key-file)")
		}
		return a.openKey(cfg.Endpoint, cfg.Key, opts)
	case AuthEntra:
		return a.openEntra(cfg.Endpoint, opts)
	default:
		return nil, fmt.Errorf("open account: unknown auth %q (want key or entra)", auth)
	}
}

func (a *Account) openKey(endpoint, key string, opts *azcosmos.ClientOptions) (*Account, error) {
	if err := checkEndpoint(endpoint); err != nil {
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
	client, err := azcosmos.NewClientWithKey(endpoint, cred, opts)
	if err != nil {
		return nil, fmt.Errorf("open account %s: %w", endpoint, err)
	}
	a.finish(client, endpoint, &metaAuth{key: raw}, opts)
	return a, nil
}

func (a *Account) openEntra(endpoint string, opts *azcosmos.ClientOptions) (*Account, error) {
	dac, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("open account %s: microsoft entra id: %w", endpoint, &EntraError{Err: err})
	}
	cred := entraCredential{dac}
	client, err := azcosmos.NewClient(endpoint, cred, opts)
	if err != nil {
		return nil, fmt.Errorf("open account %s: %w", endpoint, err)
	}
	u, _ := url.Parse(endpoint)
	a.finish(client, endpoint, &metaAuth{cred: cred, scope: u.Scheme + "://" + u.Hostname() + "/.default"}, opts)
	return a, nil
}

func (a *Account) openLocal(dir string, partitions int, opts *azcosmos.ClientOptions) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("open local account %s: %w", dir, err)
	}
	emu, err := emulator.Open(emulator.Options{Dir: abs, Key: auth.WellKnownKey, Partitions: partitions, Logger: a.log})
	if err != nil {
		return fmt.Errorf("open local account %s: %w", abs, err)
	}
	endpoint := LocalEndpoint(abs)
	opts.Transport = &emulator.Transport{Handler: emu.Handler()}
	cred, err := azcosmos.NewKeyCredential(auth.WellKnownKey)
	if err != nil {
		_ = emu.Close()
		return fmt.Errorf("open local account %s: %w", abs, err)
	}
	client, err := azcosmos.NewClientWithKey(endpoint, cred, opts)
	if err != nil {
		_ = emu.Close()
		return fmt.Errorf("open local account %s: %w", abs, err)
	}
	raw, _ := base64.StdEncoding.DecodeString(auth.WellKnownKey)
	a.emu = emu
	a.finish(client, endpoint, &metaAuth{key: raw}, opts)
	return nil
}

func (a *Account) finish(client *azcosmos.Client, endpoint string, ma *metaAuth, opts *azcosmos.ClientOptions) {
	a.client = client
	a.opts = opts
	a.endpoint = endpoint
	u, _ := url.Parse(endpoint)
	a.host = strings.ToLower(u.Hostname())
	a.meta = newMetaClient(endpoint, ma, opts)
	if region, ok := RegionalHost(a.host); ok && !a.leasesOnly {
		a.log.Warn("the endpoint is a regional endpoint: lease ids embed the endpoint host, so processors started through it write a lease set separate from the global endpoint's; use the global endpoint with --preferred-regions instead",
			"host", a.host, "region", region)
	}
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

// LocalEndpoint is the endpoint azcosmos uses for the embedded emulator on the absolute
// directory dir: "http://localhost:<port>/" with a port in 10000-59999 derived from a stable hash
// of the path. Lease ids embed only the host name ("localhost"), while the port keeps azcosmos's
// process-wide caches (keyed by endpoint) apart per data directory.
func LocalEndpoint(dir string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(filepath.Clean(dir)))
	return fmt.Sprintf("http://localhost:%d/", 10000+h.Sum32()%50000)
}

// Close closes the SDK client (releasing its process-wide caches), unless the account was opened
// with FromClient, and the embedded emulator, if any. It is idempotent.
func (a *Account) Close() error {
	var err error
	a.closeOnce.Do(func() {
		if a.client != nil && !a.borrowed {
			a.client.Close()
		}
		if a.emu != nil {
			err = a.emu.Close()
		}
	})
	return err
}

// Host is the endpoint's host name, lower case and without port: what lease id prefixes embed.
func (a *Account) Host() string { return a.host }

// JavaHost is the endpoint's host as written, case kept: Java's processors build lease prefixes
// from URI.getHost(), which keeps it, where .NET's Uri.Host (and Host) lower-case it.
func (a *Account) JavaHost() string {
	u, err := url.Parse(a.endpoint)
	if err != nil {
		return a.host
	}
	return u.Hostname()
}

// Endpoint is the account endpoint the SDK was configured with.
func (a *Account) Endpoint() string { return a.endpoint }

// Emulator returns the embedded emulator of a local account (nil otherwise), for tests and for
// `cfp emulator`-style fault injection.
func (a *Account) Emulator() *emulator.Emulator { return a.emu }

// azureRegions are the normalised names of Azure regions, as they appear in regional endpoint
// hosts ("<account>-<region>.documents.azure.com").
var azureRegions = map[string]bool{}

func init() {
	for _, r := range strings.Fields(`
		eastus eastus2 eastus3 westus westus2 westus3 centralus northcentralus southcentralus westcentralus
		canadacentral canadaeast brazilsouth brazilsoutheast mexicocentral chilecentral
		northeurope westeurope uksouth ukwest francecentral francesouth germanywestcentral germanynorth
		switzerlandnorth switzerlandwest norwayeast norwaywest swedencentral swedensouth polandcentral
		italynorth spaincentral austriaeast belgiumcentral denmarkeast finlandcentral greececentral
		eastasia southeastasia japaneast japanwest koreacentral koreasouth centralindia southindia westindia
		jioindiawest jioindiacentral australiaeast australiasoutheast australiacentral australiacentral2
		newzealandnorth indonesiacentral malaysiawest malaysiasouth taiwannorth taiwannorthwest
		uaenorth uaecentral qatarcentral israelcentral saudiarabiacentral southafricanorth southafricawest
		chinaeast chinaeast2 chinaeast3 chinanorth chinanorth2 chinanorth3
		usgovvirginia usgovarizona usgovtexas usdodeast usdodcentral`) {
		azureRegions[r] = true
	}
}

// RegionalHost reports whether host is a regional endpoint host
// ("<account>-<region>.documents.azure.com", also in sovereign clouds) and returns the region.
func RegionalHost(host string) (region string, ok bool) {
	host = strings.ToLower(host)
	label, rest, found := strings.Cut(host, ".")
	if !found || !strings.HasPrefix(rest, "documents.") {
		return "", false
	}
	i := strings.LastIndexByte(label, '-')
	if i <= 0 {
		return "", false
	}
	region = label[i+1:]
	return region, azureRegions[region]
}

// metaAuth signs the few requests cfp sends outside azcosmos (partition key ranges with ids).
type metaAuth struct {
	key   []byte
	cred  azcore.TokenCredential
	scope string
}

// statusOK reports whether resp is a 2xx or 304.
func statusOK(resp *http.Response) bool {
	return (resp.StatusCode >= 200 && resp.StatusCode < 300) || resp.StatusCode == http.StatusNotModified
}

// caTransport is an HTTP client that trusts the system's roots and the PEM certificates in file.
func caTransport(file string) (*http.Client, error) {
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
	return &http.Client{Transport: tr}, nil
}
