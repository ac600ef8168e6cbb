package cmd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/render"
)

type emulatorMergeOptions struct {
	f      *factory
	Ranges []string
}

// mergeView is the JSON of `cfp emulator merge`: the merged ranges and the partition that
// replaced them. A public contract (docs/scripting.md).
type mergeView struct {
	Database  string    `json:"database"`
	Container string    `json:"container"`
	Ranges    []string  `json:"ranges"`
	Merged    rangeView `json:"merged"`
}

func newEmulatorMergeCmd(f *factory) *cobra.Command {
	opts := &emulatorMergeOptions{f: f}
	c := &cobra.Command{
		Use:   "merge -d DATABASE -c CONTAINER --range ID --range ID",
		Short: "Merge adjacent physical partitions of an emulator container",
		Long: `Merge two (or more) adjacent physical partitions (partition key ranges) of a container in
the emulator into one new partition, as Cosmos DB does when it shrinks a container. Use it to
test how processors follow merges: readers of the merged ranges get "partition gone"
(410/1002); the new partition lists them as parents and starts at the highest of their LSNs;
items keep their LSNs, so each old range's continuation, read on the new partition with the old
range's EPK bounds (x-ms-start-epk/x-ms-end-epk), returns exactly the changes it had not
delivered. A .NET v0 (partition id) lease then becomes a v1 lease over its old range; EPK
leases are kept and read the new partition with their range.

It reaches the emulator like 'cfp emulator split': a running 'cfp emulator' through its admin
API (--endpoint URL with the emulator's key, or --connection-string), or a data directory that
no process serves (--local=DIR).

Prints the new partition: a table on a terminal, JSON in a pipe (database, container, ranges,
merged with id, min_inclusive, max_exclusive, parents and lsn).`,
		Example: `  # Merge ranges 0 and 1 of shop/orders in a running emulator
  cfp --endpoint http://localhost:8081/ emulator merge -d shop -c orders --range 0 --range 1

  # ... or in a data directory no process serves
  cfp --local=.cfp emulator merge -d shop -c orders --range 2 --range 3 -o json --jq .merged.id`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.requireContainer(); err != nil {
				return err
			}
			for i, r := range opts.Ranges {
				opts.Ranges[i] = strings.TrimSpace(r)
				if opts.Ranges[i] == "" {
					return usageErrorf("--range must name a partition key range id")
				}
				if slices.Contains(opts.Ranges[:i], opts.Ranges[i]) {
					return usageErrorf("--range %s is given twice", opts.Ranges[i])
				}
			}
			if len(opts.Ranges) < 2 {
				return usageErrorf("a merge needs two or more --range flags, got %d", len(opts.Ranges))
			}
			return explainAdmin(runEmulatorMerge(contextOf(c), opts))
		},
	}
	c.Flags().StringArrayVar(&opts.Ranges, "range", nil, "`ID` of a partition key range to merge (repeat: two or more adjacent ranges)")
	_ = c.MarkFlagRequired("range")
	return c
}

func runEmulatorMerge(ctx context.Context, opts *emulatorMergeOptions) error {
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
	if err := checkAdjacent(ranges, opts.Ranges); err != nil {
		return withHint(fmt.Errorf("%w in %s/%s", err, db, coll), "--range with adjacent live ranges, in key order: "+strings.Join(rangeIDs(ranges), ", "))
	}
	merged, err := adm.Merge(ctx, db, coll, opts.Ranges)
	if err != nil {
		return fmt.Errorf("merge ranges %s of %s/%s: %w", strings.Join(opts.Ranges, ", "), db, coll, err)
	}
	if ranges, err = containerRanges(ctx, adm, db, coll); err != nil {
		return err
	}
	v := mergeView{Database: db, Container: coll, Ranges: opts.Ranges}
	i := slices.IndexFunc(ranges, func(r emulator.RangeStatus) bool { return r.ID == merged })
	if i < 0 {
		return fmt.Errorf("merged range %s is not a live partition of %s/%s", merged, db, coll)
	}
	v.Merged = newRangeView(ranges[i])
	return p.Print(ctx, v, func(t *render.Table) { rangeTable(f, t, v.Merged) })
}

// checkAdjacent checks that ids name live ranges (live, in key order) that follow one another.
func checkAdjacent(live []emulator.RangeStatus, ids []string) error {
	var pos []int
	for _, id := range ids {
		i := slices.IndexFunc(live, func(r emulator.RangeStatus) bool { return r.ID == id })
		if i < 0 {
			return fmt.Errorf("range %s is not a live partition", id)
		}
		pos = append(pos, i)
	}
	slices.Sort(pos)
	for k := 1; k < len(pos); k++ {
		if pos[k] != pos[k-1]+1 {
			return fmt.Errorf("ranges %s and %s are not adjacent", live[pos[k-1]].ID, live[pos[k]].ID)
		}
	}
	return nil
}
