package cosmos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
)

// Container is one container of an account. It implements feed.Source and is safe for
// concurrent use. Creating it does no I/O.
type Container struct {
	acct   *Account
	db     string
	name   string
	client *azcosmos.ContainerClient

	mu    sync.Mutex
	info  *ContainerInfo          // cached by Info
	parts []feed.Partition        // cached by Partitions
	ids   map[leases.Range]string // partition ids by range, for a borrowed client (clientPartitions)
}

var _ feed.Source = (*Container)(nil)

// Container returns the container db/name; it is not checked until first used.
func (a *Account) Container(db, name string) *Container {
	cc, err := a.client.NewContainer(db, name)
	if err != nil {
		// NewContainer fails only for an empty id; keep the error for the first call.
		cc = nil
	}
	return &Container{acct: a, db: db, name: name, client: cc}
}

func (c *Container) path() string { return c.db + "/" + c.name }

func (c *Container) check() error {
	if c.client == nil {
		return fmt.Errorf("container %q: database and container names must not be empty", c.path())
	}
	return nil
}

// CreateDatabaseIfNotExists creates the database db unless it exists.
func (a *Account) CreateDatabaseIfNotExists(ctx context.Context, db string) error {
	_, err := a.client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: db}, nil)
	err = translate(err, opInfo{op: "create database " + db, rbacAction: rbacWriteMetadata})
	if err != nil && !errors.Is(err, leases.ErrConflict) {
		return err
	}
	return nil
}

// ContainerOptions are the settings of a container that cfp creates.
type ContainerOptions struct {
	// Throughput is the manual throughput in RU/s (0: the account's default, or shared database
	// throughput).
	Throughput int32
	// DefaultTTL is the container's defaultTtl in seconds: nil leaves time to live off, -1 turns
	// it on without expiring items by default (items expire only when they set ttl).
	DefaultTTL *int32
	// PartitionKeyPaths, when set, replace the pkPath argument: several paths make a
	// hierarchical key. PartitionKeyVersion is the hash version (0: 2).
	PartitionKeyPaths   []string
	PartitionKeyVersion int
}

// LeaseContainerOptions are the options of a lease container cfp creates: time to live on
// (defaultTtl -1), so the .NET processor's ".lock" marker, written with "ttl": 30, expires as the
// .NET documentation recommends (docs/protocol-leases.md, "Bootstrap"); leases themselves never expire.
func LeaseContainerOptions() *ContainerOptions {
	ttl := int32(-1)
	return &ContainerOptions{DefaultTTL: &ttl}
}

// CreateContainerIfNotExists creates the container db/name partitioned on pkPath (e.g. "/id")
// unless it exists, and returns it. It does not create the database. An existing container is
// kept as it is, whatever its partition key and time to live.
func (a *Account) CreateContainerIfNotExists(ctx context.Context, db, name, pkPath string, opts *ContainerOptions) (*Container, error) {
	dbc, err := a.client.NewDatabase(db)
	if err != nil {
		return nil, fmt.Errorf("create container %s/%s: %w", db, name, err)
	}
	props := azcosmos.ContainerProperties{
		ID: name,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{
			Kind: azcosmos.PartitionKeyKindHash, Paths: []string{pkPath}, Version: 2,
		},
	}
	if opts != nil && len(opts.PartitionKeyPaths) > 0 {
		props.PartitionKeyDefinition.Paths = append([]string(nil), opts.PartitionKeyPaths...)
		if len(opts.PartitionKeyPaths) > 1 {
			props.PartitionKeyDefinition.Kind = azcosmos.PartitionKeyKindMultiHash
		}
		if opts.PartitionKeyVersion != 0 {
			props.PartitionKeyDefinition.Version = opts.PartitionKeyVersion
		}
	}
	if opts != nil && opts.DefaultTTL != nil {
		ttl := *opts.DefaultTTL
		props.DefaultTimeToLive = &ttl
	}
	var co *azcosmos.CreateContainerOptions
	if opts != nil && opts.Throughput > 0 {
		tp := azcosmos.NewManualThroughputProperties(opts.Throughput)
		co = &azcosmos.CreateContainerOptions{ThroughputProperties: &tp}
	}
	_, err = dbc.CreateContainer(ctx, props, co)
	err = translate(err, opInfo{op: "create container " + db + "/" + name, missing: "database " + db, rbacAction: rbacWriteMetadata})
	if err != nil && !errors.Is(err, leases.ErrConflict) {
		return nil, err
	}
	return a.Container(db, name), nil
}

// ContainerInfo describes a container: its ids, resource ids and partition key.
type ContainerInfo struct {
	Database     string
	Container    string
	DatabaseRID  string
	ContainerRID string
	// PartitionKeyPaths are the partition key paths ("/id"; several for hierarchical keys).
	PartitionKeyPaths []string
	// PartitionKeyVersion is the EPK hash version (1 or 2).
	PartitionKeyVersion int
}

// Info reads the container and its database (cached after the first success). Errors wrap
// leases.ErrNotFound naming the missing database or container.
func (c *Container) Info(ctx context.Context) (ContainerInfo, error) {
	c.mu.Lock()
	cached := c.info
	c.mu.Unlock()
	if cached != nil {
		return *cached, nil
	}
	if err := c.check(); err != nil {
		return ContainerInfo{}, err
	}
	dbc, err := c.acct.client.NewDatabase(c.db)
	if err != nil {
		return ContainerInfo{}, fmt.Errorf("read database %s: %w", c.db, err)
	}
	dbr, err := dbc.Read(ctx, nil)
	if err != nil {
		return ContainerInfo{}, translate(err, opInfo{op: "read database " + c.db, missing: "database " + c.db, rbacAction: rbacReadMetadata})
	}
	cr, err := c.client.Read(ctx, nil)
	if err != nil {
		return ContainerInfo{}, translate(err, opInfo{op: "read container " + c.path(), missing: "container " + c.path(), rbacAction: rbacReadMetadata})
	}
	info := ContainerInfo{Database: c.db, Container: c.name}
	if dbr.DatabaseProperties != nil {
		info.DatabaseRID = dbr.DatabaseProperties.ResourceID
	}
	if p := cr.ContainerProperties; p != nil {
		info.ContainerRID = p.ResourceID
		info.PartitionKeyPaths = append([]string(nil), p.PartitionKeyDefinition.Paths...)
		info.PartitionKeyVersion = p.PartitionKeyDefinition.Version
		if info.PartitionKeyVersion == 0 {
			info.PartitionKeyVersion = 1
		}
	}
	c.mu.Lock()
	c.info = &info
	c.mu.Unlock()
	return info, nil
}

// UpsertItem writes body (a JSON object with an "id") under the partition key pkValue, a value as
// encoding/json decodes it: string, float64, json.Number, bool, nil, or a []any of those for a
// hierarchical key.
func (c *Container) UpsertItem(ctx context.Context, pkValue any, body []byte) error {
	if err := c.check(); err != nil {
		return err
	}
	pk, err := partitionKeyOf(pkValue)
	if err != nil {
		return fmt.Errorf("upsert into %s: %w", c.path(), err)
	}
	_, err = c.client.UpsertItem(ctx, pk, body, nil)
	return translate(err, opInfo{op: "upsert into " + c.path(), missing: "container " + c.path(), rbacAction: rbacItemsUpsert})
}

// DeleteItem deletes the document id under the partition key pkValue (a value as for
// UpsertItem). A document that does not exist is an error wrapping leases.ErrNotFound.
func (c *Container) DeleteItem(ctx context.Context, pkValue any, id string) error {
	if err := c.check(); err != nil {
		return err
	}
	pk, err := partitionKeyOf(pkValue)
	if err != nil {
		return fmt.Errorf("delete from %s: %w", c.path(), err)
	}
	_, err = c.client.DeleteItem(ctx, pk, id, nil)
	return translate(err, opInfo{op: "delete " + id + " from " + c.path(), missing: "document " + id, rbacAction: rbacItemsDelete})
}

// Query runs sql across all partitions with named parameters ("@name" or "name") and calls fn
// with every result, raw, page by page; an error from fn stops the query and is returned as is.
func (c *Container) Query(ctx context.Context, sql string, params map[string]any, fn func(raw []byte) error) error {
	if err := c.check(); err != nil {
		return err
	}
	opts := &azcosmos.QueryOptions{QueryParameters: queryParameters(params)}
	pager := c.client.NewQueryItemsPager(sql, azcosmos.NewPartitionKey(), opts)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		reportCharge(ctx, page.RequestCharge, err)
		if err != nil {
			return translate(err, opInfo{op: "query " + c.path(), missing: "container " + c.path(), rbacAction: rbacExecuteQuery})
		}
		for _, item := range page.Items {
			if err := fn(item); err != nil {
				return err
			}
		}
	}
	return nil
}

func queryParameters(params map[string]any) []azcosmos.QueryParameter {
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]azcosmos.QueryParameter, 0, len(names))
	for _, n := range names {
		name := n
		if !strings.HasPrefix(name, "@") {
			name = "@" + name
		}
		out = append(out, azcosmos.QueryParameter{Name: name, Value: params[n]})
	}
	return out
}

// partitionKeyOf converts a decoded JSON value (or a []any of them) into an azcosmos key.
func partitionKeyOf(v any) (azcosmos.PartitionKey, error) {
	parts, ok := v.([]any)
	if !ok {
		parts = []any{v}
	}
	if len(parts) == 0 {
		return azcosmos.PartitionKey{}, errors.New("partition key has no components")
	}
	var pk azcosmos.PartitionKey
	for i, p := range parts {
		var err error
		pk, err = appendComponent(pk, i == 0, p)
		if err != nil {
			return azcosmos.PartitionKey{}, err
		}
	}
	return pk, nil
}

func appendComponent(pk azcosmos.PartitionKey, first bool, v any) (azcosmos.PartitionKey, error) {
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		if err != nil {
			return pk, fmt.Errorf("partition key number %s: %w", n, err)
		}
		v = f
	}
	switch x := v.(type) {
	case string:
		if first {
			return azcosmos.NewPartitionKeyString(x), nil
		}
		return pk.AppendString(x), nil
	case float64:
		if first {
			return azcosmos.NewPartitionKeyNumber(x), nil
		}
		return pk.AppendNumber(x), nil
	case int:
		return appendComponent(pk, first, float64(x))
	case int64:
		return appendComponent(pk, first, float64(x))
	case bool:
		if first {
			return azcosmos.NewPartitionKeyBool(x), nil
		}
		return pk.AppendBool(x), nil
	case nil:
		if first {
			return azcosmos.NullPartitionKey, nil
		}
		return pk.AppendNull(), nil
	default:
		return pk, fmt.Errorf("partition key component of type %T is not a string, number, bool or null", v)
	}
}

// partitionKeyFromJSON parses the JSON array form of a partition key (`["a"]`, `[5]`, `["a","b"]`)
// or a bare JSON scalar.
func partitionKeyFromJSON(raw json.RawMessage) (azcosmos.PartitionKey, []any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return azcosmos.PartitionKey{}, nil, fmt.Errorf("partition key %s is not JSON: %w", raw, err)
	}
	parts, ok := v.([]any)
	if !ok {
		parts = []any{v}
	}
	pk, err := partitionKeyOf(parts)
	if err != nil {
		return azcosmos.PartitionKey{}, nil, err
	}
	for i, p := range parts {
		if n, ok := p.(json.Number); ok {
			parts[i], _ = n.Float64()
		}
	}
	return pk, parts, nil
}
