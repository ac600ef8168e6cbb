package cosmos

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ConnectionString is a parsed Cosmos DB connection string.
type ConnectionString struct {
	// Endpoint is the AccountEndpoint value, e.g. "https://acct.documents.azure.com:443/".
	Endpoint string
	// Key is the AccountKey value (base64). Never print it.
	Key string
}

// String renders the connection string with the key redacted, so that a %v in a log line cannot
// leak it.
func (c ConnectionString) String() string {
	return "AccountEndpoint=" + c.Endpoint + ";AccountKey=REDACTED;"
}

// ParseConnectionString parses "AccountEndpoint=...;AccountKey=...;" the way the portal prints it:
// keys are case-insensitive, parts are separated by ';' (a trailing ';' and blanks around parts
// are allowed), only the first '=' of a part separates its key from its value (keys end in "==",
// so values keep theirs), and unknown keys (e.g. "Database=") are ignored. Errors never contain
// the key.
func ParseConnectionString(s string) (ConnectionString, error) {
	var cs ConnectionString
	var haveEndpoint, haveKey bool
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			return ConnectionString{}, errors.New("parse connection string: a part has no '=' (want AccountEndpoint=...;AccountKey=...;)")
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case strings.EqualFold(name, "AccountEndpoint"):
			if haveEndpoint {
				return ConnectionString{}, errors.New("parse connection string: AccountEndpoint appears twice")
			}
			cs.Endpoint, haveEndpoint = value, true
		case strings.EqualFold(name, "AccountKey"):
			if haveKey {
				return ConnectionString{}, errors.New("parse connection string: AccountKey appears twice")
			}
			cs.Key, haveKey = value, true
		}
	}
	if cs.Endpoint == "" {
		return ConnectionString{}, errors.New("parse connection string: AccountEndpoint is missing")
	}
	if cs.Key == "" {
		return ConnectionString{}, errors.New("parse connection string: AccountKey is missing")
	}
	if err := checkEndpoint(cs.Endpoint); err != nil {
		return ConnectionString{}, fmt.Errorf("parse connection string: %w", err)
	}
	return cs, nil
}

// CheckEndpoint reports whether endpoint is an absolute http(s) URL with a host. The error quotes
// the endpoint, which is not secret (callers still mask "AccountKey=..." in what they print).
func CheckEndpoint(endpoint string) error { return checkEndpoint(endpoint) }

func checkEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("endpoint %q is not a URL", endpoint)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("endpoint %q must start with https:// or http://", endpoint)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("endpoint %q has no host", endpoint)
	}
	return nil
}
