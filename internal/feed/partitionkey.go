package feed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ParsePartitionKey turns a partition key a person wrote (tail's --partition-key) into the JSON
// array form TailOptions.PartitionKey takes: a JSON array or JSON string literal is taken as
// JSON, anything else as a plain string.
func ParsePartitionKey(v string) (json.RawMessage, error) {
	t := strings.TrimSpace(v)
	if strings.HasPrefix(t, "{") {
		return nil, errors.New("a partition key value is a string, number, bool or null, not an object")
	}
	if strings.HasPrefix(t, "[") || strings.HasPrefix(t, `"`) {
		var x any
		if err := json.Unmarshal([]byte(t), &x); err != nil {
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
		if arr, ok := x.([]any); ok {
			if len(arr) == 0 {
				return nil, errors.New("empty partition key")
			}
			for i, c := range arr {
				switch c.(type) {
				case []any, map[string]any:
					return nil, fmt.Errorf("component %d is an array or object, not a string, number, bool or null", i+1)
				}
			}
			var b bytes.Buffer
			if err := json.Compact(&b, []byte(t)); err != nil {
				return nil, err
			}
			return b.Bytes(), nil
		}
		b, _ := json.Marshal([]any{x})
		return b, nil
	}
	b, err := json.Marshal([]string{v})
	return b, err
}

// PartitionKeyArityError says a partition key's number of components is not the container's
// number of partition key paths: such a key names no logical partition, and a tail would match
// nothing without a word.
type PartitionKeyArityError struct {
	Components int
	// Container is "database/container"; Paths its partition key paths.
	Container string
	Paths     []string
}

func (e *PartitionKeyArityError) Error() string {
	return fmt.Sprintf("%d component(s), but %s is partitioned on %s (%d)",
		e.Components, e.Container, strings.Join(e.Paths, ", "), len(e.Paths))
}

// CheckPartitionKeyComponents checks that pk (a JSON array) has one component per partition key
// path of container ("database/container"), returning a *PartitionKeyArityError when it has
// not. Unknown paths (none given) accept any key.
func CheckPartitionKeyComponents(pk json.RawMessage, container string, paths []string) error {
	var comps []json.RawMessage
	if err := json.Unmarshal(pk, &comps); err != nil {
		return fmt.Errorf("partition key %s: %w", pk, err)
	}
	if n := len(paths); n > 0 && len(comps) != n {
		return &PartitionKeyArityError{Components: len(comps), Container: container, Paths: paths}
	}
	return nil
}
