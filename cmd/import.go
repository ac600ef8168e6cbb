package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/load"
	"github.com/cfp-dev/cfp/internal/render"
)

// Defaults of `cfp import`.
const (
	defaultImportConcurrency = 16
	defaultPartitionKeyPath  = "/id"
	// maxReportedRejects bounds the per-line messages on stderr; the summary counts them all.
	maxReportedRejects = 100
	// progressEvery is how often the progress line on a terminal is redrawn.
	progressEvery = 200 * time.Millisecond
)

type importOptions struct {
	f                *factory
	Files            []string
	Create           bool
	PartitionKeyPath string
	Concurrency      int
	Throughput       int32
	// Like is the container ([DATABASE/]CONTAINER) whose partition key a container that
	// --create creates takes.
	Like string
	// Delete deletes the documents the lines name instead of upserting them.
	Delete bool
}

const importLong = `Read JSON documents, one per line, and upsert them into a container (-d/-c): a document
with the id of an existing one replaces it. Reads standard input, or the FILEs given ("-" is
standard input), streaming, so inputs of any size work.

[details]

Each document needs a string "id"; its partition key is read from the document at the
container's partition key path. A line that is not a JSON object, lacks an id or its
partition key, or that the service rejects, is reported on stderr with its line number and
skipped; the rest is imported, and cfp exits 3 with the number of rejected lines. A line over
2 MiB (the service's document limit) is rejected and skipped to its end; an input without a
line end in its first 64 MiB stops the import. Empty lines are ignored. System properties (_rid, _self, _etag, _attachments, _ts, _lsn) are dropped, so
the output of 'cfp tail -o jsonl' can be imported into another container.

Without --create a missing container is an error. --create creates the database and the
container when missing, partitioned on --partition-key-path (default /id), or on the
partition key of the container --like names (a copy keeps its source's key); an existing
container keeps its own partition key.

--delete deletes the documents the lines name instead: each line's id and partition key are
read as for an upsert (a whole document, or just {"id", <partition key>}); a document that is
already gone counts as deleted. With 'cfp tail --mode all-versions' this is how deletes are
made and seen on the embedded emulator.

Up to --concurrency upserts run at once (default 16); lines of one document (partition key and
id; numbers in keys compare by value, as in Cosmos DB: 1 and 1.0 are one key) are written in
input order, so the last one wins. Throttled upserts are retried after the
service's retry-after; a server error (HTTP 5xx) stops the import at once (exit 1). On a terminal a progress line is shown (for regular files a bar with the share read and the time left); a summary line (imported,
rejected, elapsed, documents per second) is always written to stderr.`

const importExample = `  # Load sample orders into the embedded emulator, creating the container
  cfp --local import -d shop -c orders --create --partition-key-path /customerId < orders.jsonl

  # Copy a container: its whole history into a new container with the same partition key
  cfp tail -d shop -c orders --from beginning -e -o jsonl > orders-all.jsonl
  cfp import -d shop -c orders-copy --create --like orders orders-all.jsonl

  # Delete the documents a file names (whole documents or {"id", <partition key>})
  head -n 3 orders.jsonl | cfp import -d shop -c orders --delete

  # Several files, fewer concurrent requests
  cfp import -d shop -c orders --concurrency 4 jan.jsonl feb.jsonl`

func newImportCmd(f *factory) *cobra.Command {
	opts := &importOptions{f: f}
	c := &cobra.Command{
		Use:     "import -d DATABASE -c CONTAINER [--create] [--delete] [FILE]...",
		Short:   "Upsert (or delete) JSON lines into a container",
		Long:    importLong,
		Example: importExample,
		RunE: func(c *cobra.Command, args []string) error {
			if err := f.requireContainer(); err != nil {
				return err
			}
			if opts.Concurrency < 1 {
				return usageErrorf("--concurrency must be at least 1, got %d", opts.Concurrency)
			}
			if c.Flags().Changed("partition-key-path") && !opts.Create {
				return usageErrorf("--partition-key-path applies to containers that --create creates: add --create")
			}
			if opts.Like != "" && !opts.Create {
				return usageErrorf("--like applies to containers that --create creates: add --create")
			}
			if _, err := load.ParsePartitionKeyPath(opts.PartitionKeyPath); err != nil {
				return usageErrorf("--partition-key-path: %w", err)
			}
			opts.Files = args
			return runImport(contextOf(c), opts)
		},
	}
	fs := c.Flags()
	fs.BoolVar(&opts.Create, "create", false, "create the database and container when missing")
	fs.StringVar(&opts.PartitionKeyPath, "partition-key-path", defaultPartitionKeyPath, "partition key `PATH` of a container that --create creates")
	fs.IntVar(&opts.Concurrency, "concurrency", defaultImportConcurrency, "at most `N` upserts in flight at once")
	fs.StringVar(&opts.Like, "like", "", "a container that --create creates takes the partition key of `[DATABASE/]CONTAINER`")
	fs.Int32Var(&opts.Throughput, "throughput", 0, "manual throughput in `RU/s` of a container that --create creates (0: the account's default)")
	fs.BoolVar(&opts.Delete, "delete", false, "delete the documents the lines name (by id and partition key) instead of upserting them")
	c.MarkFlagsMutuallyExclusive("like", "partition-key-path")
	return c
}

// importer reports one import run (the engine is load.Loader) on stderr; its methods are
// safe for concurrent use.
type importer struct {
	f      *factory
	l      *load.Loader
	delete bool
	status *render.Status
	start  time.Time

	// total is the size of the inputs when every one is a regular file (0: unknown, as for a
	// pipe), for the progress bar.
	total int64

	mu        sync.Mutex
	reported  int
	lastDrawn time.Time
}

func runImport(ctx context.Context, opts *importOptions) error {
	f := opts.f
	acct, err := f.Account(ctx)
	if err != nil {
		return err
	}

	c, paths, err := opts.container(ctx, acct)
	if err != nil {
		return err
	}
	im := &importer{f: f, delete: opts.Delete, status: render.NewStatus(f.IO), start: time.Now()}
	im.l = load.New(c, load.Options{
		Paths:       paths,
		Delete:      opts.Delete,
		Concurrency: opts.Concurrency,
		Stdin:       f.IO.In,
		OnStdin: func() {
			if f.IO.IsStdinTTY {
				im.status.Println("Reading JSON lines from the terminal; end with Ctrl-D.")
			}
		},
		OnReject: im.reject,
		OnLine:   im.progress,
	})

	inputs := opts.Files
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	im.total = inputSize(f.IO.In, inputs)
	err = im.l.Run(ctx, inputs)
	im.summary()
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if n := im.l.Rejected(); n > 0 {
		return &ExitError{Code: exitThreshold, Err: fmt.Errorf("%d of %d lines rejected", n, im.l.Lines())}
	}
	return nil
}

// container returns the target container and its partition key paths, creating it first with
// --create.
func (o *importOptions) container(ctx context.Context, acct *account.Account) (*cosmos.Container, [][]string, error) {
	db, name := o.f.Global.Database, o.f.Global.Container
	copts := &cosmos.ContainerOptions{Throughput: o.Throughput}
	if o.Create && o.Like != "" {
		likeDB, likeName := db, o.Like
		if d, n, ok := strings.Cut(o.Like, "/"); ok {
			likeDB, likeName = d, n
		}
		var like cosmos.ContainerInfo
		err := load.RetryThrottled(ctx, func() (err error) {
			like, err = acct.Container(likeDB, likeName).Info(ctx)
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("--like: %w", err)
		}
		copts.PartitionKeyPaths, copts.PartitionKeyVersion = like.PartitionKeyPaths, like.PartitionKeyVersion
		o.PartitionKeyPath = strings.Join(like.PartitionKeyPaths, ",")
	}
	if o.Create {
		err := load.RetryThrottled(ctx, func() error { return acct.CreateDatabaseIfNotExists(ctx, db) })
		if err != nil {
			return nil, nil, err
		}
		err = load.RetryThrottled(ctx, func() error {
			_, err := acct.CreateContainerIfNotExists(ctx, db, name, o.PartitionKeyPath, copts)
			return err
		})
		if err != nil {
			return nil, nil, err
		}
	}
	c := acct.Container(db, name)
	var info cosmos.ContainerInfo
	err := load.RetryThrottled(ctx, func() (err error) {
		info, err = c.Info(ctx)
		return err
	})
	if errors.Is(err, leases.ErrNotFound) {
		return nil, nil, withHint(err, "--create --partition-key-path /pk to create it, partitioned on /pk")
	}
	if err != nil {
		return nil, nil, err
	}
	if len(info.PartitionKeyPaths) == 0 {
		return nil, nil, fmt.Errorf("container %s/%s has no partition key path", db, name)
	}
	if have := strings.Join(info.PartitionKeyPaths, ","); o.Create && have != o.PartitionKeyPath {
		o.f.warnf("container %s/%s already exists, partitioned on %s: using that, not %s", db, name, have, o.PartitionKeyPath)
	}
	paths := make([][]string, len(info.PartitionKeyPaths))
	for i, p := range info.PartitionKeyPaths {
		if paths[i], err = load.ParsePartitionKeyPath(p); err != nil {
			return nil, nil, fmt.Errorf("container %s/%s: %w", db, name, err)
		}
	}
	return c, paths, nil
}

// reject reports a rejected line on stderr (the first maxReportedRejects; the loader counts
// them all).
func (im *importer) reject(where string, err error) {
	im.mu.Lock()
	im.reported++
	n := im.reported
	im.mu.Unlock()
	switch {
	case n <= maxReportedRejects:
		im.status.Println("cfp: %s: %s", where, oneLine(im.f.redact(err.Error())))
	case n == maxReportedRejects+1:
		im.status.Println("cfp: more rejected lines are not shown (the summary counts them)")
	}
}

// progress redraws the progress line on a terminal, at most every progressEvery.
func (im *importer) progress() {
	if !im.f.IO.IsStderrTTY {
		return
	}
	now := time.Now()
	im.mu.Lock()
	if now.Sub(im.lastDrawn) < progressEvery {
		im.mu.Unlock()
		return
	}
	im.lastDrawn = now
	im.mu.Unlock()
	imported, rejected := im.l.Written(), im.l.Rejected()
	elapsed := now.Sub(im.start)
	if im.total <= 0 {
		im.status.Update("importing: %d %s, %d rejected (%s)", imported, im.verb(), rejected, importRate(imported, elapsed))
		return
	}
	read := min(im.l.BytesRead(), im.total)
	pct := int(read * 100 / im.total)
	eta := "-"
	if read > 0 {
		eta = time.Duration(float64(elapsed) * float64(im.total-read) / float64(read)).Round(time.Second).String()
	}
	im.status.Update("importing %s %3d%% of %s, %d %s, %d rejected, ETA %s",
		progressBar(pct, 100, 10), pct, humanBytes(im.total), imported, im.verb(), rejected, eta)
}

// inputSize returns the total size of the inputs when each is a regular file (standard input
// redirected from one counts), else 0: a pipe has no size to show progress against.
func inputSize(stdin io.Reader, inputs []string) int64 {
	var total int64
	for _, name := range inputs {
		var st os.FileInfo
		var err error
		if name == "-" {
			f, ok := stdin.(*os.File)
			if !ok {
				return 0
			}
			st, err = f.Stat()
		} else {
			st, err = os.Stat(name)
		}
		if err != nil || !st.Mode().IsRegular() {
			return 0
		}
		total += st.Size()
	}
	return total
}

// summary writes the final line on stderr, always.
func (im *importer) summary() {
	elapsed := time.Since(im.start)
	imported := im.l.Written()
	im.status.Done("%s %d, rejected %d, in %s (%s)", im.verb(), imported, im.l.Rejected(), elapsed.Round(time.Millisecond), importRate(imported, elapsed))
}

// verb names what the import does to each document: "imported" or "deleted".
func (im *importer) verb() string {
	if im.delete {
		return "deleted"
	}
	return "imported"
}

func importRate(n int64, d time.Duration) string {
	if d <= 0 {
		return "- docs/s"
	}
	return fmt.Sprintf("%.0f docs/s", float64(n)/d.Seconds())
}
