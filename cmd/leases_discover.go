package cmd

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/render"
)

// runLeasesDiscover lists the processors of the lease container.
func runLeasesDiscover(ctx context.Context, opts *leasesListOptions) error {
	f := opts.f
	p, err := f.printer(render.FormatJSON)
	if err != nil {
		return err
	}
	t, err := f.openLeaseContainer(ctx)
	if err != nil {
		return err
	}
	docs, err := t.docs.QueryPrefix(ctx, "")
	if err != nil {
		return fmt.Errorf("list lease container: %w", err)
	}
	known := leases.Monitored{Database: f.Global.Database, Container: f.Global.Container}
	infos := leases.Discover(docs, known)
	host, err := t.monitoredHost(ctx, f)
	if err != nil {
		return err
	}
	now := f.Now()
	views := make([]processorView, 0, len(infos))
	for _, in := range infos {
		if in.Invalid > 0 {
			f.warnf("prefix %s: skipped %d document(s) that are not leases", in.Prefix, in.Invalid)
		}
		v := processorView{Prefix: in.Prefix, Family: string(in.Family), Leases: in.Leases, Owners: in.Owners,
			Initialized: in.HasInfo, LastActivity: timeView(in.LastActivity)}
		if v.Owners == nil {
			v.Owners = []string{}
		}
		if name, ok := processorName(in, host, known); ok {
			v.Processor = &name
		}
		views = append(views, v)
	}
	if len(views) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "No processors found in the lease container.")
	}
	err = p.Print(ctx, views, func(tb *render.Table) {
		*tb = *render.NewTable(f.IO, "processor", "prefix", "family", "leases", "owners", "last activity")
		tb.Truncatable(1)
		for i, v := range views {
			tb.Row(deref(v.Processor), v.Prefix, v.Family, strconv.Itoa(v.Leases), strings.Join(v.Owners, ","), f.IO.Timestamp(infos[i].LastActivity, now))
		}
	})
	if err != nil || !opts.Check {
		return err
	}
	serious := 0
	for _, in := range infos {
		set := leases.SetOf(docs, in.Prefix, nil) // documents that are not leases were counted by leases.Discover
		findings := leases.Check(set.Leases, now, opts.Expiration, leases.WithMarkers(in.HasInfo, set.LockTime), leases.WithLockTTL(set.LockTTL))
		serious += printFindings(f.IO, in.Prefix, findings, f.lockFix(in.Prefix))
	}
	return checkResult(f.IO, serious)
}
