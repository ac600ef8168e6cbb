package cmd

import (
	"regexp"
	"strings"
)

func (f *factory) addSecret(s string) {
	if len(s) < 4 {
		return
	}
	f.secretsMu.Lock()
	defer f.secretsMu.Unlock()
	f.secrets = append(f.secrets, s)
}

// redact masks every known secret in s, and whatever follows "AccountKey=" (up to a ';',
// a quote or a blank), known or not: a malformed connection string must not leak its key
// through a field that was parsed wrongly.
func (f *factory) redact(s string) string {
	f.secretsMu.Lock()
	defer f.secretsMu.Unlock()
	for _, sec := range f.secrets {
		s = strings.ReplaceAll(s, sec, "[REDACTED]")
	}
	return redactAccountKey(s)
}

var accountKeyParam = regexp.MustCompile(`(?i)(AccountKey\s*=)[^;"'\s]*`)

// redactAccountKey masks the value of every "AccountKey=" in s.
func redactAccountKey(s string) string {
	if !strings.Contains(strings.ToLower(s), "accountkey") {
		return s
	}
	return accountKeyParam.ReplaceAllString(s, "${1}[REDACTED]")
}
