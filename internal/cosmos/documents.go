package cosmos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/leases"
)

// LeaseDocuments returns the lease container db/container as a leases.Documents. The container's
// partition-key path is read once, on first use.
func (a *Account) LeaseDocuments(db, container string) leases.Documents {
	return &leaseDocs{c: a.Container(db, container)}
}

type leaseDocs struct {
	c *Container

	mu     sync.Mutex
	pkPath string
}

var _ leases.Documents = (*leaseDocs)(nil)

func (d *leaseDocs) what() string { return "lease container " + d.c.path() }

// PartitionKeyPath returns the container's (first) partition-key path, read once.
func (d *leaseDocs) PartitionKeyPath(ctx context.Context) (string, error) {
	d.mu.Lock()
	p := d.pkPath
	d.mu.Unlock()
	if p != "" {
		return p, nil
	}
	info, err := d.c.Info(ctx)
	if err != nil {
		return "", err
	}
	if len(info.PartitionKeyPaths) == 0 {
		return "", fmt.Errorf("%s has no partition key path", d.what())
	}
	if len(info.PartitionKeyPaths) > 1 {
		return "", fmt.Errorf("%s has a hierarchical partition key %v; lease containers use one path", d.what(), info.PartitionKeyPaths)
	}
	d.mu.Lock()
	d.pkPath = info.PartitionKeyPaths[0]
	d.mu.Unlock()
	return info.PartitionKeyPaths[0], nil
}

// QueryPrefix lists the documents whose id starts with prefix, across partitions.
func (d *leaseDocs) QueryPrefix(ctx context.Context, prefix string) ([]leases.Document, error) {
	pkPath, err := d.PartitionKeyPath(ctx)
	if err != nil {
		return nil, err
	}
	sql := "SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)"
	params := map[string]any{"@prefix": prefix}
	if prefix == "" {
		sql, params = "SELECT * FROM c", nil
	}
	var out []leases.Document
	err = d.c.Query(ctx, sql, params, func(raw []byte) error {
		doc, err := documentOf(raw, pkPath, "")
		if err != nil {
			return fmt.Errorf("list %s: %w", d.what(), err)
		}
		out = append(out, doc)
		return nil
	})
	return out, err
}

// Read returns one document or leases.ErrNotFound.
func (d *leaseDocs) Read(ctx context.Context, id, pk string) (leases.Document, error) {
	if err := d.c.check(); err != nil {
		return leases.Document{}, err
	}
	resp, err := d.c.client.ReadItem(ctx, azcosmos.NewPartitionKeyString(pk), id, nil)
	reportCharge(ctx, resp.RequestCharge, err)
	if err != nil {
		return leases.Document{}, translate(err, d.op("read", id, rbacItemsRead))
	}
	return d.result(ctx, resp, pk)
}

// Create inserts body; leases.ErrConflict when the id exists.
func (d *leaseDocs) Create(ctx context.Context, pk string, body []byte) (leases.Document, error) {
	if err := d.c.check(); err != nil {
		return leases.Document{}, err
	}
	id := idOf(body)
	resp, err := d.c.client.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), body, &azcosmos.ItemOptions{EnableContentResponseOnWrite: true})
	reportCharge(ctx, resp.RequestCharge, err)
	if err != nil {
		return leases.Document{}, translate(err, d.op("create", id, rbacItemsCreate))
	}
	return d.result(ctx, resp, pk)
}

// Replace overwrites the document when its ETag still equals ifMatch (always when ifMatch is "").
func (d *leaseDocs) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	if err := d.c.check(); err != nil {
		return leases.Document{}, err
	}
	opts := &azcosmos.ItemOptions{EnableContentResponseOnWrite: true}
	if ifMatch != "" {
		etag := azcore.ETag(ifMatch)
		opts.IfMatchEtag = &etag
	}
	resp, err := d.c.client.ReplaceItem(ctx, azcosmos.NewPartitionKeyString(pk), id, body, opts)
	reportCharge(ctx, resp.RequestCharge, err)
	if err != nil {
		return leases.Document{}, translate(err, d.op("replace", id, rbacItemsReplace))
	}
	return d.result(ctx, resp, pk)
}

// Delete removes the document (same ifMatch rules as Replace).
func (d *leaseDocs) Delete(ctx context.Context, id, pk, ifMatch string) error {
	if err := d.c.check(); err != nil {
		return err
	}
	var opts *azcosmos.ItemOptions
	if ifMatch != "" {
		etag := azcore.ETag(ifMatch)
		opts = &azcosmos.ItemOptions{IfMatchEtag: &etag}
	}
	resp, err := d.c.client.DeleteItem(ctx, azcosmos.NewPartitionKeyString(pk), id, opts)
	reportCharge(ctx, resp.RequestCharge, err)
	return translate(err, d.op("delete", id, rbacItemsDelete))
}

func (d *leaseDocs) op(verb, id, action string) opInfo {
	return opInfo{
		op:         verb + " lease " + id + " in " + d.c.path(),
		missing:    "lease " + id + " (or " + d.what() + ")",
		rbacAction: action,
	}
}

// result builds the Document of an item response: its body, its ETag (header, or _etag when the
// header is missing) and the partition-key value the caller addressed it with.
func (d *leaseDocs) result(ctx context.Context, resp azcosmos.ItemResponse, pk string) (leases.Document, error) {
	pkPath, err := d.PartitionKeyPath(ctx)
	if err != nil {
		return leases.Document{}, err
	}
	doc, err := documentOf(resp.Value, pkPath, pk)
	if err != nil {
		return leases.Document{}, fmt.Errorf("%s: %w", d.what(), err)
	}
	if resp.ETag != "" {
		doc.ETag = string(resp.ETag)
	}
	return doc, nil
}

// documentOf decodes the id, _etag and partition-key value of a raw document; body stays as is.
// pk, when not empty, is used instead of reading the partition-key path.
func documentOf(raw []byte, pkPath, pk string) (leases.Document, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return leases.Document{}, fmt.Errorf("decode document: %w", err)
	}
	doc := leases.Document{Body: raw, PK: pk}
	if err := json.Unmarshal(top["id"], &doc.ID); err != nil {
		return leases.Document{}, fmt.Errorf("decode document: id: %w", err)
	}
	if e, ok := top["_etag"]; ok {
		_ = json.Unmarshal(e, &doc.ETag)
	}
	if doc.PK == "" {
		doc.PK = valueAt(top, pkPath)
	}
	return doc, nil
}

// valueAt returns the string at a partition-key path ("/a/b") of a decoded object, or the raw JSON
// text of a non-string value ("" when absent).
func valueAt(top map[string]json.RawMessage, path string) string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	cur := top
	for i, s := range segs {
		v, ok := cur[s]
		if !ok {
			return ""
		}
		if i == len(segs)-1 {
			var str string
			if json.Unmarshal(v, &str) == nil {
				return str
			}
			return string(v)
		}
		cur = nil
		if json.Unmarshal(v, &cur) != nil {
			return ""
		}
	}
	return ""
}

// idOf extracts the id of a JSON body for error messages ("?" when absent).
func idOf(body []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &v) != nil || v.ID == "" {
		return "?"
	}
	return v.ID
}

// reportCharge reports a request's charge to ctx's recorder (leases.ReportCharge): the
// response's, or a failed request's from its error's response (a 412 or 409 costs RU too).
func reportCharge(ctx context.Context, charge float32, err error) {
	if err != nil {
		charge = 0
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.RawResponse != nil {
			if v, perr := strconv.ParseFloat(re.RawResponse.Header.Get("x-ms-request-charge"), 64); perr == nil {
				leases.ReportCharge(ctx, v)
				return
			}
		}
	}
	// The SDK parses the header into a float32: back to the decimal the service sent.
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(charge), 'g', -1, 32), 64)
	leases.ReportCharge(ctx, v)
}
