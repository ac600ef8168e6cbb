package feed

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/cfp-dev/cfp/internal/leases"
)

// PositionAt returns the continuation of lease l that resumes just before start: the LSN before
// the first change of l's range at or after start (a time, the beginning, or now), or the
// partition's latest LSN when nothing is there. It reads one item from the partition that
// serves l (Route, given the live partitions parts); a lease that no single live partition
// serves gives Route's *RouteError. It is how `leases reset --to` turns a time into the
// position it writes.
func PositionAt(ctx context.Context, src Source, l *leases.Lease, parts []Partition, start StartFrom) (string, error) {
	rt, err := Route(l, parts)
	if err != nil {
		return "", err
	}
	req := rt.Request()
	req.Start, req.MaxItems = start, 1
	page, err := src.ReadPage(ctx, req)
	if err != nil {
		return "", fmt.Errorf("read the change feed of partition %s: %w", req.PartitionID, err)
	}
	if len(page.Items) > 0 {
		lsn, _ := changeMeta(page.Items[0])
		if lsn <= 0 {
			return "", errors.New("the first change has no _lsn")
		}
		return leases.FormatLSN(lsn - 1), nil
	}
	if page.LatestLSN > 0 {
		return leases.FormatLSN(page.LatestLSN), nil
	}
	if n, ok := ContinuationLSN(page.Continuation); ok {
		return leases.FormatLSN(n), nil
	}
	return leases.FormatLSN(0), nil
}

// Position is the result of PositionAt for one lease.
type Position struct {
	Lease        *leases.Lease
	Continuation string
	Err          error
}

// PositionsAt runs PositionAt for every lease of ls, with at most concurrency reads in flight
// (at least one), and returns the results in the order of ls.
func PositionsAt(ctx context.Context, src Source, ls []*leases.Lease, parts []Partition, start StartFrom, concurrency int) []Position {
	out := make([]Position, len(ls))
	var g errgroup.Group
	g.SetLimit(max(1, concurrency))
	for i, l := range ls {
		g.Go(func() error {
			c, err := PositionAt(ctx, src, l, parts, start)
			out[i] = Position{Lease: l, Continuation: c, Err: err}
			return nil
		})
	}
	_ = g.Wait()
	return out
}
