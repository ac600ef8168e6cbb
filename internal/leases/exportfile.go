package leases

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNotExport means a JSON document is not a lease export of a known version.
var ErrNotExport = errors.New("not a lease export")

// ParseExport reads an export as NewExport writes it. A document that is not JSON gives the
// decoder's error; one of another version, or without a prefix, wraps ErrNotExport.
func ParseExport(b []byte) (Export, error) {
	var e Export
	if err := json.Unmarshal(b, &e); err != nil {
		return Export{}, err
	}
	if e.Version != ExportVersion || e.Prefix == "" {
		return Export{}, fmt.Errorf("%w (version %d, prefix %q)", ErrNotExport, e.Version, e.Prefix)
	}
	return e, nil
}

// Continuations returns each exported lease's continuation by token ("" for a lease that has
// none), decoding the leases as Decode does.
func (e Export) Continuations() (map[string]string, error) {
	out := map[string]string{}
	for _, raw := range e.Leases {
		var id struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &id)
		l, err := Decode(Document{ID: id.ID, Body: raw})
		if err != nil {
			return nil, err
		}
		out[l.Token] = l.Continuation
	}
	return out, nil
}
