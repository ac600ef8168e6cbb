package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/emulator"
	"github.com/cfp-dev/cfp/internal/render"
)

type emulatorSplitOptions struct {
	f     *factory
	Range string
}

// rangeView is one physical partition in the JSON of `cfp emulator split`: a public contract
// (docs/scripting.md).
type rangeView struct {
	ID           string   `json:"id"`
	MinInclusive string   `json:"min_inclusive"`
	MaxExclusive string   `json:"max_exclusive"`
	Parents      []string `json:"parents"`
	LSN          uint64   `json:"lsn"`
}

// splitView is the JSON of `cfp emulator split`: the split range and its two children.
type splitView struct {
	Database  string      `json:"database"`
	Container string      `json:"container"`
	Range     string      `json:"range"`
	Children  []rangeView `json:"children"`
}

func newEmulatorSplitCmd(f *factory) *cobra.Command {
	opts := &emulatorSplitOptions{f: f}
	c := &cobra.Command{
		Use:   "split -d DATABASE -c CONTAINER --range ID",
		Short: "Split a physical partition of an emulator container",
		Long: `Split a physical partition (partition key range) of a container in the emulator into two
children at the midpoint of its range, as Cosmos DB does when a partition grows. Use it to
test how processors follow splits: the children inherit the parent's LSN, so the parent's
continuation stays valid on both, and readers of the parent get "partition gone" (410/1002).

It reaches the emulator the way other commands reach an account: a running 'cfp emulator'
through its admin API (--endpoint URL with the emulator's key, or --connection-string), or
a data directory that no process serves (--local=DIR).

Prints the two children: a table on a terminal, JSON in a pipe (database, container, range,
children with id, min_inclusive, max_exclusive, parents and lsn).`,
		Example: `  # Split range 0 of shop/orders in a running emulator
  cfp --endpoint http://localhost:8081/ emulator split -d shop -c orders --range 0

  # ... or in a data directory no process serves
  cfp --local=.cfp emulator split -d shop -c orders --range 0 -o json --jq '.children[].id'`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.requireContainer(); err != nil {
				return err
			}
			if strings.TrimSpace(opts.Range) == "" {
				return usageErrorf("--range must name a partition key range id")
			}
			return runEmulatorSplit(contextOf(c), opts)
		},
	}
	c.Flags().StringVar(&opts.Range, "range", "", "`ID` of the partition key range to split (see the ranges of 'cfp leases list' or the emulator's status)")
	_ = c.MarkFlagRequired("range")
	return c
}

func runEmulatorSplit(ctx context.Context, opts *emulatorSplitOptions) error {
	f := opts.f
	p, err := f.printer(render.FormatJSON)
	if err != nil {
		return err
	}
	adm, err := openEmulatorAdmin(f, true)
	if err != nil {
		return err
	}
	defer adm.Close()

	db, coll := f.Global.Database, f.Global.Container
	ranges, err := containerRanges(ctx, adm, db, coll)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(ranges, func(r emulator.RangeStatus) bool { return r.ID == opts.Range }) {
		return withHint(fmt.Errorf("range %s is not a live partition of %s/%s", opts.Range, db, coll),
			"--range with one of the live ranges: "+strings.Join(rangeIDs(ranges), ", "))
	}
	children, err := adm.Split(ctx, db, coll, opts.Range)
	if err != nil {
		return fmt.Errorf("split range %s of %s/%s: %w", opts.Range, db, coll, err)
	}
	if ranges, err = containerRanges(ctx, adm, db, coll); err != nil {
		return err
	}
	v := splitView{Database: db, Container: coll, Range: opts.Range, Children: []rangeView{}}
	for _, r := range ranges {
		if slices.Contains(children, r.ID) {
			v.Children = append(v.Children, newRangeView(r))
		}
	}
	return p.Print(ctx, v, func(t *render.Table) { rangeTable(f, t, v.Children...) })
}

// containerRanges returns the live partition key ranges of db/coll, in key order, from the
// emulator's status.
func containerRanges(ctx context.Context, adm emulatorAdmin, db, coll string) ([]emulator.RangeStatus, error) {
	st, err := adm.Status(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := findContainerStatus(st, db, coll)
	if err != nil {
		return nil, err
	}
	return cs.Ranges, nil
}

// newRangeView is the view of a live range.
func newRangeView(r emulator.RangeStatus) rangeView {
	return rangeView{ID: r.ID, MinInclusive: r.Min, MaxExclusive: r.Max, Parents: r.Parents, LSN: r.LSN}
}

// rangeTable makes *t the table of ranges: id, bounds, parents and LSN, one range a row.
func rangeTable(f *factory, t *render.Table, ranges ...rangeView) {
	*t = *render.NewTable(f.IO, "range", "min", "max", "parents", "lsn")
	for _, r := range ranges {
		t.Row(r.ID, r.MinInclusive, r.MaxExclusive, strings.Join(r.Parents, ","), strconv.FormatUint(r.LSN, 10))
	}
}

func findContainerStatus(st emulator.Status, db, coll string) (emulator.ContainerStatus, error) {
	for _, d := range st.Databases {
		if d.ID != db {
			continue
		}
		for _, c := range d.Containers {
			if c.ID == coll {
				return c, nil
			}
		}
		return emulator.ContainerStatus{}, fmt.Errorf("container %s/%s not found in the emulator", db, coll)
	}
	return emulator.ContainerStatus{}, fmt.Errorf("database %s not found in the emulator", db)
}

func rangeIDs(rs []emulator.RangeStatus) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

// emulatorAdmin drives an emulator: one that another process serves (through its admin API)
// or a data directory opened in process. Implementations are used by one command at a time.
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
		return localAdmin{emu}, nil
	case cfg.ConnectionString != "":
		cs, err := cosmos.ParseConnectionString(cfg.ConnectionString)
		if err != nil {
			return nil, briefUsageErrorf("%w", err)
		}
		return newRemoteAdmin(cs.Endpoint, cs.Key), nil
	}
	// An endpoint without a key means the well-known emulator key here, not Entra ID.
	return newRemoteAdmin(cfg.Endpoint, cfg.Key), nil
}

// localAdmin is an emulator data directory opened in process.
type localAdmin struct{ emu *emulator.Emulator }

func (l localAdmin) Status(context.Context) (emulator.Status, error) { return l.emu.Status() }
func (l localAdmin) Split(_ context.Context, db, coll, rangeID string) ([]string, error) {
	return l.emu.Split(db, coll, rangeID)
}
func (l localAdmin) Merge(_ context.Context, db, coll string, rangeIDs []string) (string, error) {
	return l.emu.Merge(db, coll, rangeIDs)
}
func (l localAdmin) InjectFaults(_ context.Context, rule emulator.FaultRuleJSON) (int, error) {
	return 0, errors.New("fault rules need a serving emulator")
}
func (l localAdmin) ClearFaults(context.Context) error { return nil }
func (l localAdmin) Close() error                      { return l.emu.Close() }

// remoteAdmin calls the /_cfp/ admin endpoints of a running emulator, signed with its key.
type remoteAdmin struct {
	base string
	key  string
	hc   *http.Client
}

func newRemoteAdmin(endpoint, key string) *remoteAdmin {
	return &remoteAdmin{
		base: strings.TrimSuffix(endpoint, "/"),
		key:  key,
		hc:   &http.Client{Timeout: 30 * time.Second},
	}
}

// adminError is an error answer of the admin API.
type adminError struct {
	Op      string
	Status  int
	Message string
}

func (e *adminError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.Op, e.Status, e.Message)
}

// AuthError reports a rejected key: the command exits 4.
func (e *adminError) AuthError() bool { return e.Status == http.StatusUnauthorized }

// Hint says what to check for a rejected key.
func (e *adminError) Hint() string {
	if e.Status == http.StatusUnauthorized {
		return "pass the key the emulator was started with (--key-file or COSMOS_KEY; the default is the well-known emulator key)"
	}
	return ""
}

func (r *remoteAdmin) do(ctx context.Context, op, method, path string, in, out any) error {
	var body io.Reader = http.NoBody
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := emulator.SignRequest(req, r.key); err != nil {
		return briefUsageErrorf("%s: %w", op, err)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return withHint(fmt.Errorf("%s: %w", op, err), "is 'cfp emulator' running at "+r.base+"/?")
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: read answer: %w", op, err)
	}
	if resp.StatusCode == http.StatusNotFound && !json.Valid(b) {
		return withHint(fmt.Errorf("%s: %s has no emulator admin API", op, r.base), "point --endpoint at a running 'cfp emulator'")
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(b, &e)
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return &adminError{Op: op, Status: resp.StatusCode, Message: e.Message}
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s: decode answer: %w", op, err)
		}
	}
	return nil
}

func (r *remoteAdmin) Status(ctx context.Context) (emulator.Status, error) {
	var st emulator.Status
	err := r.do(ctx, "read emulator status", http.MethodGet, "/_cfp/status", nil, &st)
	return st, err
}

func (r *remoteAdmin) Split(ctx context.Context, db, coll, rangeID string) ([]string, error) {
	var resp emulator.SplitResponse
	err := r.do(ctx, "split", http.MethodPost, "/_cfp/split", emulator.SplitRequest{DB: db, Coll: coll, Range: rangeID}, &resp)
	return resp.Children, err
}

func (r *remoteAdmin) Merge(ctx context.Context, db, coll string, rangeIDs []string) (string, error) {
	var resp emulator.MergeResponse
	err := r.do(ctx, "merge", http.MethodPost, "/_cfp/merge", emulator.MergeRequest{DB: db, Coll: coll, Ranges: rangeIDs}, &resp)
	return resp.Merged, err
}

func (r *remoteAdmin) InjectFaults(ctx context.Context, rule emulator.FaultRuleJSON) (int, error) {
	var resp struct {
		FaultRules int `json:"faultRules"`
	}
	err := r.do(ctx, "inject faults", http.MethodPost, "/_cfp/faults", rule, &resp)
	return resp.FaultRules, err
}

func (r *remoteAdmin) ClearFaults(ctx context.Context) error {
	return r.do(ctx, "clear faults", http.MethodDelete, "/_cfp/faults", nil, nil)
}

func (r *remoteAdmin) Close() error {
	r.hc.CloseIdleConnections()
	return nil
}
