package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// systemProperties are the fields Cosmos DB maintains itself; documents copied from another
// container (cfp tail -o jsonl) carry them and they are dropped before the upsert.
var systemProperties = []string{"_rid", "_self", "_etag", "_attachments", "_ts", "_lsn"}

// ParseLine checks one input line and returns the document to upsert (system
// properties dropped) and its partition key value at paths (a []any for hierarchical keys).
func ParseLine(line []byte, paths [][]string) (body []byte, pk any, id string, err error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		if !json.Valid(line) {
			return nil, nil, "", fmt.Errorf("invalid JSON: %w", jsonSyntaxError(line))
		}
		return nil, nil, "", errors.New("not a JSON object")
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(line, &doc); err != nil {
		return nil, nil, "", fmt.Errorf("invalid JSON: %w", jsonSyntaxError(line))
	}
	if raw, ok := doc["id"]; !ok {
		return nil, nil, "", errors.New(`no "id"`)
	} else if err := json.Unmarshal(raw, &id); err != nil {
		return nil, nil, "", errors.New(`"id" is not a string`)
	}
	if id == "" {
		return nil, nil, "", errors.New(`"id" is empty`)
	}
	values := make([]any, len(paths))
	for i, path := range paths {
		if values[i], err = pkValueAt(doc, path); err != nil {
			return nil, nil, "", err
		}
	}
	pk = values[0]
	if len(values) > 1 {
		pk = values
	}
	body = line
	if hasSystemProperties(doc) {
		for _, p := range systemProperties {
			delete(doc, p)
		}
		if body, err = json.Marshal(doc); err != nil {
			return nil, nil, "", fmt.Errorf("re-encode without system properties: %w", err)
		}
	}
	return body, pk, id, nil
}

func hasSystemProperties(doc map[string]json.RawMessage) bool {
	for _, p := range systemProperties {
		if _, ok := doc[p]; ok {
			return true
		}
	}
	return false
}

// jsonSyntaxError returns the decoder's own complaint about an invalid line.
func jsonSyntaxError(line []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return errors.New("malformed")
}

// pkValueAt returns the partition key value at path in doc: a string, json.Number, bool or nil.
func pkValueAt(doc map[string]json.RawMessage, path []string) (any, error) {
	where := "/" + strings.Join(path, "/")
	cur := doc
	for i, seg := range path {
		raw, ok := cur[seg]
		if !ok {
			return nil, fmt.Errorf("no partition key at %s", where)
		}
		if i < len(path)-1 {
			if err := json.Unmarshal(raw, &cur); err != nil {
				return nil, fmt.Errorf("no partition key at %s: %s is not an object", where, "/"+strings.Join(path[:i+1], "/"))
			}
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("partition key at %s: %w", where, err)
		}
		switch v.(type) {
		case string, json.Number, bool, nil:
			return v, nil
		default:
			return nil, fmt.Errorf("partition key at %s is an object or array, not a string, number, bool or null", where)
		}
	}
	return nil, fmt.Errorf("empty partition key path")
}

// ParsePartitionKeyPath splits a partition key path ("/customerId", "/address/city",
// `/"odd name"`) into its property names.
func ParsePartitionKeyPath(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return nil, fmt.Errorf("partition key path %q must start with / and name a property, like /customerId", p)
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
			s = s[1 : len(s)-1]
		}
		if s == "" {
			return nil, fmt.Errorf("partition key path %q has an empty segment", p)
		}
		segs[i] = s
	}
	return segs, nil
}
