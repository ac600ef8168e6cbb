package cosmos

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/buildinfo"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// metaClient sends the one request azcosmos has no public API for: the container's partition key
// ranges with their ids and parents (ReadFeedRanges returns bare EPK boundaries from a cache that
// is stale right after a split). It shares the account's transport and signs like the SDK.
type metaClient struct {
	endpoint string
	auth     *MetaAuth
	pl       azruntime.Pipeline
}

func newMetaClient(endpoint string, auth *MetaAuth, account *azcosmos.ClientOptions) *metaClient {
	opts := &azcore.ClientOptions{Transport: account.Transport, PerRetryPolicies: account.PerRetryPolicies, Retry: account.Retry}
	opts.Telemetry.Disabled = true
	return &metaClient{
		endpoint: strings.TrimSuffix(endpoint, "/"),
		auth:     auth,
		pl:       azruntime.NewPipeline("cfp", buildinfo.Version, azruntime.PipelineOptions{PerRetry: []policy.Policy{auth}}, opts),
	}
}

// metaOp carries the signing inputs of one meta request.
type metaOp struct {
	resourceType string
	resourceLink string
}

type metaOpKey struct{}

// Do signs the request: a master-key HMAC over verb, resource type, resource link and date, or a
// Microsoft Entra ID token. It is a per-retry policy, so every attempt carries a fresh date.
func (m *MetaAuth) Do(req *policy.Request) (*http.Response, error) {
	op, _ := req.Raw().Context().Value(metaOpKey{}).(metaOp)
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Raw().Header.Set("x-ms-date", date)
	req.Raw().Header.Set("x-ms-version", "2020-11-05")
	if m.Key != nil {
		req.Raw().Header.Set("Authorization", signMaster(m.Key, req.Raw().Method, op.resourceType, op.resourceLink, date))
	} else {
		tk, err := m.Cred.GetToken(req.Raw().Context(), policy.TokenRequestOptions{Scopes: []string{m.Scope}})
		if err != nil {
			return nil, fmt.Errorf("get microsoft entra id token: %w", err)
		}
		req.Raw().Header.Set("Authorization", "type=aad&ver=1.0&sig="+tk.Token)
	}
	return req.Next()
}

// signMaster builds the master-key Authorization header (docs/protocol-gateway.md, "Transport and signatures").
func signMaster(key []byte, verb, resourceType, resourceLink, date string) string {
	toSign := strings.ToLower(verb) + "\n" + strings.ToLower(resourceType) + "\n" + resourceLink + "\n" + strings.ToLower(date) + "\n\n"
	h := hmac.New(sha256.New, key)
	h.Write([]byte(toSign))
	sig := base64.StdEncoding.EncodeToString(h.Sum(nil))
	return url.QueryEscape("type=master&ver=1.0&sig=" + sig)
}

// pkRange is one partition key range as the service returns it.
type pkRange struct {
	ID           string   `json:"id"`
	MinInclusive string   `json:"minInclusive"`
	MaxExclusive string   `json:"maxExclusive"`
	Parents      []string `json:"parents"`
}

// partitions lists the live physical partitions of dbs/db/colls/coll, sorted by range: every
// page of the pkranges feed, minus ranges named as another range's parent, checked to tile the
// key space.
func (mc *metaClient) partitions(ctx context.Context, db, coll string) ([]feed.Partition, error) {
	link := "dbs/" + db + "/colls/" + coll
	info := opInfo{op: "list partitions of " + db + "/" + coll, missing: "container " + db + "/" + coll, rbacAction: rbacReadMetadata}
	ctx = context.WithValue(ctx, metaOpKey{}, metaOp{resourceType: "pkranges", resourceLink: link})
	u := mc.endpoint + "/dbs/" + url.PathEscape(db) + "/colls/" + url.PathEscape(coll) + "/pkranges"
	var all []pkRange
	continuation := ""
	for page := 0; ; page++ {
		if page > 1000 {
			return nil, fmt.Errorf("%s: the service kept returning continuations", info.op)
		}
		req, err := azruntime.NewRequest(ctx, http.MethodGet, u)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", info.op, err)
		}
		if continuation != "" {
			req.Raw().Header.Set("x-ms-continuation", continuation)
		}
		resp, err := mc.pl.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", info.op, err)
		}
		if !statusOK(resp) {
			return nil, translate(azruntime.NewResponseError(resp), info)
		}
		body, err := azruntime.Payload(resp)
		_ = resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", info.op, err)
		}
		var doc struct {
			PartitionKeyRanges []pkRange `json:"PartitionKeyRanges"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, fmt.Errorf("%s: decode: %w", info.op, err)
		}
		all = append(all, doc.PartitionKeyRanges...)
		continuation = resp.Header.Get("x-ms-continuation")
		if continuation == "" {
			break
		}
	}
	return livePartitions(all)
}

// livePartitions drops split parents, sorts by range and checks that the rest tiles ["", "FF").
func livePartitions(all []pkRange) ([]feed.Partition, error) {
	gone := map[string]bool{}
	for _, r := range all {
		for _, p := range r.Parents {
			gone[p] = true
		}
	}
	seen := map[string]bool{}
	var out []feed.Partition
	for _, r := range all {
		if gone[r.ID] || seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		max := r.MaxExclusive
		if max == "" {
			max = "FF"
		}
		out = append(out, feed.Partition{
			ID:      r.ID,
			Range:   leases.Range{Min: r.MinInclusive, Max: max},
			Parents: append([]string(nil), r.Parents...),
		})
	}
	sort.Slice(out, func(i, j int) bool { return leases.CompareEPK(out[i].Range.Min, out[j].Range.Min) < 0 })
	next := ""
	for _, p := range out {
		if leases.CompareEPK(p.Range.Min, next) != 0 {
			return nil, fmt.Errorf("partition key ranges do not tile the key space: %q starts at %q, want %q", p.ID, p.Range.Min, next)
		}
		next = p.Range.Max
	}
	if leases.CompareEPK(next, "FF") != 0 {
		return nil, fmt.Errorf("partition key ranges do not tile the key space: they end at %q", next)
	}
	return out, nil
}

// readBody returns a response body that azcore already buffered.
func readBody(resp *http.Response) ([]byte, error) {
	if resp == nil || resp.Body == nil {
		return nil, io.EOF
	}
	return azruntime.Payload(resp)
}
