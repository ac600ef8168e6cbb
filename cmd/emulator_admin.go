package cmd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
)

// emulatorAdmin drives an emulator: one that another process serves (emulator.AdminClient)
// or a data directory opened in process (emulator.LocalAdmin). Implementations are used by one
// command at a time.
type emulatorAdmin interface {
	Status(ctx context.Context) (emulator.Status, error)
	Split(ctx context.Context, db, coll, rangeID string) ([]string, error)
	// Merge merges adjacent live ranges and returns the new range's id.
	Merge(ctx context.Context, db, coll string, rangeIDs []string) (string, error)
	// InjectFaults adds a fault rule and returns the number of active rules.
	InjectFaults(ctx context.Context, rule emulator.FaultRuleJSON) (int, error)
	ClearFaults(ctx context.Context) error
	Close() error
}

var (
	_ emulatorAdmin = (*emulator.AdminClient)(nil)
	_ emulatorAdmin = emulator.LocalAdmin{}
)

// openEmulatorAdmin reaches the emulator the global flags name: --local opens the data
// directory in process (only when allowLocal: fault rules do not outlive the process),
// --endpoint or --connection-string talk to a running `cfp emulator`.
func openEmulatorAdmin(f *factory, allowLocal bool) (emulatorAdmin, error) {
	cfg, err := f.accountConfig()
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.LocalDir != "":
		if !allowLocal {
			return nil, withHint(errors.New("fault rules live in a serving emulator and end with the process: --local cannot hold them"),
				"run 'cfp emulator --data "+cfg.LocalDir+"' and pass its --endpoint")
		}
		dir, err := filepath.Abs(cfg.LocalDir)
		if err != nil {
			return nil, fmt.Errorf("data directory %s: %w", cfg.LocalDir, err)
		}
		emu, err := emulator.Open(emulator.Options{Dir: dir, Logger: f.Log})
		if err != nil {
			return nil, explainLocked(fmt.Errorf("open emulator: %w", err))
		}
		return emulator.LocalAdmin{Emu: emu}, nil
	case cfg.ConnectionString != "":
		cs, err := cosmos.ParseConnectionString(cfg.ConnectionString)
		if err != nil {
			return nil, briefUsageErrorf("%w", err)
		}
		return adminClient(cs.Endpoint, cs.Key, cfg.CAFile)
	}
	// An endpoint without a key means the well-known emulator key here, not Entra ID.
	return adminClient(cfg.Endpoint, cfg.Key, cfg.CAFile)
}

// adminClient is the admin client of the emulator at endpoint, trusting the certificates of
// caFile (--ca-file) beside the system's, as the account's client does.
func adminClient(endpoint, key, caFile string) (*emulator.AdminClient, error) {
	c := emulator.NewAdminClient(endpoint, key)
	if caFile == "" {
		return c, nil
	}
	tr, err := account.TrustingTransport(caFile)
	if err != nil {
		return nil, err
	}
	return c.WithTransport(tr), nil
}

// explainAdmin turns the admin client's errors into what the user can act on: a key that
// cannot sign is a usage error (exit 2), a rejected key (exit 4), an endpoint that is not a
// cfp emulator and one that does not answer get a Try: hint. Other errors pass unchanged.
func explainAdmin(err error) error {
	var ae *emulator.AdminError
	var unreachable *emulator.AdminUnreachableError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, emulator.ErrAdminKey):
		return &UsageError{Err: err, Brief: true}
	case errors.As(err, &ae) && ae.AuthError():
		return withHint(err, "pass the key the emulator was started with (--key-file or COSMOS_KEY; the default is the well-known emulator key)")
	case errors.Is(err, emulator.ErrNoAdminAPI):
		return withHint(err, "point --endpoint at a running 'cfp emulator'")
	case errors.As(err, &unreachable):
		return withHint(err, "is 'cfp emulator' running at "+unreachable.Endpoint+"/?")
	}
	return err
}
