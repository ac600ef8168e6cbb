package leases

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ExportVersion is the version of the export format written by NewExport.
const ExportVersion = 1

// Export is a portable copy of one prefix's lease documents and markers, as JSON. Documents are
// kept whole except the service's system properties, so every field of every family survives.
type Export struct {
	Version    int               `json:"version"`
	Prefix     string            `json:"prefix"`
	ExportedAt time.Time         `json:"exported_at"`
	Leases     []json.RawMessage `json:"leases"`
	// Markers holds the .info marker when it exists (the .lock marker is transient and never
	// exported).
	Markers []json.RawMessage `json:"markers,omitempty"`
}

// systemProperties are set by the service on every write and never imported.
var systemProperties = []string{"_rid", "_self", "_etag", "_attachments", "_ts", "_lsn"}

// NewExport builds the export of prefix from docs (documents whose ids start with prefix, as
// QueryPrefix(prefix) returns them); other documents are ignored.
func NewExport(prefix string, docs []Document, now time.Time) (Export, error) {
	e := Export{Version: ExportVersion, Prefix: prefix, ExportedAt: now.UTC(), Leases: []json.RawMessage{}}
	for _, d := range docs {
		body, id, err := stripSystem(d.Body)
		if err != nil {
			return Export{}, fmt.Errorf("export %s: %w", d.ID, err)
		}
		switch {
		case id == InfoID(prefix):
			e.Markers = append(e.Markers, body)
		case strings.HasPrefix(id, prefix+leaseSeparator):
			e.Leases = append(e.Leases, body)
		}
	}
	return e, nil
}

// Export reads the store's leases and .info marker.
func (s *Store) Export(ctx context.Context) (Export, error) {
	docs, err := s.docs.QueryPrefix(ctx, s.prefix)
	if err != nil {
		return Export{}, fmt.Errorf("export %s: %w", s.prefix, err)
	}
	return NewExport(s.prefix, docs, s.now())
}

func stripSystem(body []byte) (json.RawMessage, string, error) {
	o, err := parseObject(body)
	if err != nil {
		return nil, "", err
	}
	for _, k := range systemProperties {
		o.del(k)
	}
	id, _ := o.str(fID)
	b, err := o.MarshalJSON()
	return b, id, err
}

// Rename returns a copy of the export under another prefix: ids (and partition keys equal to
// the id) are rewritten, so that a lease set can be copied to a new processor name.
func (e Export) Rename(prefix string) (Export, error) {
	out := e
	out.Prefix = prefix
	rename := func(docs []json.RawMessage) ([]json.RawMessage, error) {
		res := make([]json.RawMessage, 0, len(docs))
		for _, d := range docs {
			o, err := parseObject(d)
			if err != nil {
				return nil, err
			}
			id, _ := o.str(fID)
			rest, ok := strings.CutPrefix(id, e.Prefix)
			if !ok {
				return nil, fmt.Errorf("document %s is not under prefix %s", id, e.Prefix)
			}
			if pk, ok := o.str(fPK); ok && pk == id {
				if err := o.set(fPK, prefix+rest); err != nil {
					return nil, err
				}
			}
			if err := o.set(fID, prefix+rest); err != nil {
				return nil, err
			}
			b, err := o.MarshalJSON()
			if err != nil {
				return nil, err
			}
			res = append(res, b)
		}
		return res, nil
	}
	var err error
	if out.Leases, err = rename(e.Leases); err != nil {
		return Export{}, fmt.Errorf("rename export: %w", err)
	}
	if out.Markers, err = rename(e.Markers); err != nil {
		return Export{}, fmt.Errorf("rename export: %w", err)
	}
	return out, nil
}

// Import actions.
const (
	ImportCreate    = "create"
	ImportReplace   = "replace"
	ImportUnchanged = "unchanged"
)

// ImportStep is the plan for one exported document.
type ImportStep struct {
	ID     string
	Action string
	Body   json.RawMessage
	// ETag and PK identify the existing document a replace overwrites (If-Match).
	ETag, PK string
	// Owner is the existing lease's owner: a live owner overwrites an imported continuation at
	// its next checkpoint, so callers should refuse or force.
	Owner string
}

// PlanImport compares an export with the documents now under its prefix: absent documents are
// created, different ones replaced, equal ones (system properties aside) left alone.
func PlanImport(e Export, existing []Document) ([]ImportStep, error) {
	if e.Version != ExportVersion {
		return nil, fmt.Errorf("import: unsupported export version %d", e.Version)
	}
	cur := map[string]Document{}
	for _, d := range existing {
		id := d.ID
		if id == "" {
			if o, err := parseObject(d.Body); err == nil {
				id, _ = o.str(fID)
			}
		}
		if _, dup := cur[id]; !dup {
			cur[id] = d
		}
	}
	var steps []ImportStep
	for _, body := range slices.Concat(e.Leases, e.Markers) {
		want, id, err := stripSystem(body)
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		if !strings.HasPrefix(id, e.Prefix) {
			return nil, fmt.Errorf("import: document %s is not under prefix %s", id, e.Prefix)
		}
		step := ImportStep{ID: id, Action: ImportCreate, Body: want}
		if d, ok := cur[id]; ok {
			have, _, err := stripSystem(d.Body)
			if err != nil {
				return nil, fmt.Errorf("import: existing %s: %w", id, err)
			}
			step.ETag, step.PK = d.ETag, d.PK
			if o, err := parseObject(d.Body); err == nil {
				step.Owner, _ = o.str(fOwner)
			}
			step.Action = ImportReplace
			if equalJSON(have, want) {
				step.Action = ImportUnchanged
			}
		}
		steps = append(steps, step)
	}
	return steps, nil
}

func equalJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	ca, _ := json.Marshal(x)
	cb, _ := json.Marshal(y)
	return bytes.Equal(ca, cb)
}

// ApplyImport runs one import step: a create, or a replace with If-Match on the planned ETag.
// The partition key follows the container's path (the partitionKey field, set to the id when
// missing, in a /partitionKey container).
func (s *Store) ApplyImport(ctx context.Context, step ImportStep) error {
	if step.Action == ImportUnchanged {
		return nil
	}
	p, err := s.path(ctx)
	if err != nil {
		return err
	}
	o, err := parseObject(step.Body)
	if err != nil {
		return fmt.Errorf("import %s: %w", step.ID, err)
	}
	pk, _ := o.str(fPK)
	if p == "/partitionKey" && pk == "" {
		pk = step.ID
		if err := o.set(fPK, pk); err != nil {
			return err
		}
	}
	if step.PK != "" {
		pk = step.PK // replace the document where it is (GUID partition keys)
		if p == "/partitionKey" {
			if err := o.set(fPK, pk); err != nil {
				return err
			}
		}
	}
	pk = pkFor(p, step.ID, pk)
	body, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	switch step.Action {
	case ImportCreate:
		_, err = s.docs.Create(ctx, pk, body)
	case ImportReplace:
		_, err = s.docs.Replace(ctx, step.ID, pk, step.ETag, body)
	default:
		err = errors.New("unknown action " + step.Action)
	}
	if err != nil {
		return fmt.Errorf("import %s: %w", step.ID, err)
	}
	return nil
}
