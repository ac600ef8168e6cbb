// Package cosmos is cfp's only door to Azure Cosmos DB: besides the public changefeed package, which
// only hands the caller's clients over to FromClient, and internal/account, which builds clients
// (key, Microsoft Entra ID, or the embedded emulator) and hands them to NewAccount, the only package
// that imports azcosmos. It manages databases and containers, implements feed.Source over
// ReadChangeFeed (one physical partition per page, splits reported instead of followed) and
// leases.Documents over a lease container, and translates the service's errors once into the
// engine's sentinel and typed errors.
package cosmos

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/buildinfo"
	"github.com/cfp-dev/cfp/internal/leases"
)

// ClientSettings are what NewClientOptions builds azcosmos client options from.
type ClientSettings struct {
	// PreferredRegions orders the regions reads go to ("West US 2", ...).
	PreferredRegions []string
	// Logger receives the retry policy's warnings (default: slog.Default()).
	Logger *slog.Logger
	// RequestTimeout bounds each attempt of each request (default DefaultRequestTimeout).
	RequestTimeout time.Duration
	// Retry bounds the retries of throttled and unavailable requests (zero: the defaults).
	Retry RetryOptions
	// UserAgent is prepended to the SDK's User-Agent (azcore keeps its first 24 characters;
	// default "cfp/<version>").
	UserAgent string
	// Priority is the priority level of every request, "low" or "high" (header
	// x-ms-cosmos-priority-level, priority-based execution); "" sends none (the service treats
	// requests as high).
	Priority string
	// ThroughputBucket is the throughput bucket of every request, 1 to 5 (header
	// x-ms-cosmos-throughput-bucket); 0 sends none.
	ThroughputBucket int
}

// NewClientOptions returns the azcosmos client options of every client cfp builds itself: the
// per-call policies of PerCallPolicies, the request policy that retries 429 and 503 and bounds
// every attempt (retry.go), and cfp's user agent. The caller may still set Transport.
func NewClientOptions(s ClientSettings) *azcosmos.ClientOptions {
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	ua := s.UserAgent
	if ua == "" {
		ua = "cfp/" + buildinfo.Version
	}
	opts := &azcosmos.ClientOptions{PreferredRegions: s.PreferredRegions}
	switch strings.ToLower(s.Priority) {
	case "low":
		p := azcosmos.PriorityLevelLow
		opts.PriorityLevel = &p
	case "high":
		p := azcosmos.PriorityLevelHigh
		opts.PriorityLevel = &p
	}
	if s.ThroughputBucket > 0 {
		b := int32(s.ThroughputBucket)
		opts.ThroughputBucket = &b
	}
	opts.Telemetry.ApplicationID = ua
	// The per-call EPK policy adds x-ms-start-epk/end-epk to change-feed reads of a sub-range
	// (azcosmos never sends them); the mode policy turns all-versions reads into Full-Fidelity
	// Feed requests (azcosmos has no mode option); the feed body policy splits ReadPage's
	// documents itself (feedbody.go).
	opts.PerCallPolicies = PerCallPolicies()
	// The request policy retries 429 and 503 and bounds every attempt (retry.go); azcore's
	// retry policy keeps the other transient statuses.
	opts.PerRetryPolicies = []policy.Policy{newRequestPolicy(log, s.RequestTimeout, s.Retry)}
	opts.Retry.StatusCodes = retryStatusCodes
	return opts
}

// MetaAuth signs the few requests cfp sends outside azcosmos (partition key ranges with ids):
// with the account key (Key, decoded) or with a Microsoft Entra ID token of Scope from Cred.
type MetaAuth struct {
	Key   []byte
	Cred  azcore.TokenCredential
	Scope string
}

// AccountSettings configure NewAccount.
type AccountSettings struct {
	// Auth signs cfp's own requests; nil lists partitions through the SDK alone, as FromClient.
	Auth *MetaAuth
	// Options are the options client was built with (NewClientOptions), reused by the meta client.
	Options *azcosmos.ClientOptions
	// LeasesOnly says the account holds only lease containers (a separate lease account): lease
	// ids embed the monitored account's host, not this one's, so a regional endpoint is fine.
	LeasesOnly bool
	// Logger receives warnings (default: slog.Default()).
	Logger *slog.Logger
	// OnClose, if set, runs once after Close closed the client (internal/account closes the
	// embedded emulator with it); its error is Close's.
	OnClose func() error
}

// Account is an open Cosmos DB account. It is safe for concurrent use; Close it when done.
type Account struct {
	client   *azcosmos.Client
	endpoint string
	host     string
	log      *slog.Logger
	meta     *metaClient
	opts     *azcosmos.ClientOptions
	// leasesOnly: see AccountSettings.LeasesOnly.
	leasesOnly bool
	// borrowed: the client is the caller's (FromClient): Close leaves it open, and there is no
	// meta client (partitions are listed through the SDK).
	borrowed bool
	// view: an account FromClient returned for the client of an account NewAccount built; it
	// shares that account's abilities, and Close leaves the client to that account.
	view    bool
	onClose func() error

	closeOnce sync.Once
	closeErr  error
}

// NewAccount returns an Account over client, which cfp built (with NewClientOptions) for endpoint
// and owns: Close closes it. It does no I/O.
func NewAccount(client *azcosmos.Client, endpoint string, s AccountSettings) *Account {
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &Account{client: client, opts: s.Options, endpoint: endpoint, log: log, leasesOnly: s.LeasesOnly, onClose: s.OnClose}
	u, _ := url.Parse(endpoint)
	a.host = strings.ToLower(u.Hostname())
	if s.Auth != nil {
		a.meta = newMetaClient(endpoint, s.Auth, s.Options)
	}
	if region, ok := RegionalHost(a.host); ok && !a.leasesOnly {
		a.log.Warn("the endpoint is a regional endpoint: lease ids embed the endpoint host, so processors started through it write a lease set separate from the global endpoint's; use the global endpoint with --preferred-regions instead",
			"host", a.host, "region", region)
	}
	built.Store(client, a)
	return a
}

// built are the accounts NewAccount built, by their client, until they close: FromClient on
// such a client (cfp's own commands, which run the processor through the changefeed package)
// returns a view of that account, with its own signed partition listing and pipeline.
var built sync.Map // *azcosmos.Client -> *Account

// Client is the account's SDK client.
func (a *Account) Client() *azcosmos.Client { return a.client }

// Close closes the SDK client (releasing its process-wide caches), unless the account was opened
// with FromClient, then runs AccountSettings.OnClose. It is idempotent.
func (a *Account) Close() error {
	a.closeOnce.Do(func() {
		if a.view {
			return
		}
		if a.client != nil && !a.borrowed {
			built.CompareAndDelete(a.client, a)
			a.client.Close()
		}
		if a.onClose != nil {
			a.closeErr = a.onClose()
		}
	})
	return a.closeErr
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

// LeaseSetName names processor's lease set on the container of info in this (the monitored)
// account, in every form the SDKs write it, for leases.ResolvePrefix; explicit is a prefix the
// user gave (--lease-id-prefix), used as is when not empty.
func (a *Account) LeaseSetName(processor, explicit string, info ContainerInfo) leases.SetName {
	return leases.SetName{
		Explicit: explicit, Processor: processor, Host: a.Host(), JavaHost: a.JavaHost(),
		DatabaseRID: info.DatabaseRID, ContainerRID: info.ContainerRID,
		Database: info.Database, Container: info.Container,
	}
}

// Endpoint is the account endpoint the SDK was configured with.
func (a *Account) Endpoint() string { return a.endpoint }

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

// statusOK reports whether resp is a 2xx or 304.
func statusOK(resp *http.Response) bool {
	return (resp.StatusCode >= 200 && resp.StatusCode < 300) || resp.StatusCode == http.StatusNotModified
}
