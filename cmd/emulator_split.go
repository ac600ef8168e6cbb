package cmd

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/emulator"
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
			return explainAdmin(runEmulatorSplit(contextOf(c), opts))
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
		t.Row(r.ID, render.EPK(r.MinInclusive), r.MaxExclusive, strings.Join(r.Parents, ","), strconv.FormatUint(r.LSN, 10))
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
