package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/feed"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/lineio"
	"github.com/cfp-dev/cfp/internal/render"
)

// Defaults of `cfp import`.
const (
	defaultImportConcurrency = 16
	defaultPartitionKeyPath  = "/id"
	// maxReportedRejects bounds the per-line messages on stderr; the summary counts them all.
	maxReportedRejects = 100
	// importRetries is how often a throttled upsert is retried (after the SDK's own retries).
	importRetries = 8
	// progressEvery is how often the progress line on a terminal is redrawn.
	progressEvery = 200 * time.Millisecond
)

// importSystemProperties are the fields Cosmos DB maintains itself; documents copied from another
// container (cfp tail -o jsonl) carry them and they are dropped before the upsert.
var importSystemProperties = []string{"_rid", "_self", "_etag", "_attachments", "_ts", "_lsn"}

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
id) are written in input order, so the last one wins. Throttled upserts are retried after the
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
			if _, err := parsePartitionKeyPath(opts.PartitionKeyPath); err != nil {
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

// importer holds the state of one import run; its methods are safe for concurrent use.
type importer struct {
	f      *factory
	c      *cosmos.Container
	paths  [][]string
	delete bool
	status *render.Status
	start  time.Time

	imported atomic.Int64
	rejected atomic.Int64
	lines    atomic.Int64

	// arrayHinted is set once the jq hint for a JSON array was given.
	arrayHinted atomic.Bool

	// total is the size of the inputs when every one is a regular file (0: unknown, as for a
	// pipe); read counts the bytes of the lines read so far, for the progress bar.
	total int64
	read  atomic.Int64

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
	im := &importer{f: f, c: c, paths: paths, delete: opts.Delete, status: render.NewStatus(f.IO), start: time.Now()}

	inputs := opts.Files
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	im.total = inputSize(f.IO.In, inputs)
	g, gctx := errgroup.WithContext(ctx)
	// Lines of one (partition key, id) go to the same worker, in input order, so the last
	// version of a document in the input is the one that stays; different documents are
	// written by up to --concurrency workers at once.
	workers := make([]chan importJob, opts.Concurrency)
	for i := range workers {
		ch := make(chan importJob, importQueue)
		workers[i] = ch
		g.Go(func() error {
			for job := range ch {
				if err := im.upsert(gctx, job); err != nil {
					return err
				}
			}
			return nil
		})
	}
	var readErr error
	for _, name := range inputs {
		if readErr = im.readInput(gctx, workers, name); readErr != nil || gctx.Err() != nil {
			break
		}
	}
	for _, ch := range workers {
		close(ch)
	}
	err = g.Wait()
	im.summary()
	switch {
	case err != nil:
		return err
	case readErr != nil:
		return readErr
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if n := im.rejected.Load(); n > 0 {
		return &ExitError{Code: exitThreshold, Err: fmt.Errorf("%d of %d lines rejected", n, im.lines.Load())}
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
		err := retryThrottled(ctx, func() (err error) {
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
		err := retryThrottled(ctx, func() error { return acct.CreateDatabaseIfNotExists(ctx, db) })
		if err != nil {
			return nil, nil, err
		}
		err = retryThrottled(ctx, func() error {
			_, err := acct.CreateContainerIfNotExists(ctx, db, name, o.PartitionKeyPath, copts)
			return err
		})
		if err != nil {
			return nil, nil, err
		}
	}
	c := acct.Container(db, name)
	var info cosmos.ContainerInfo
	err := retryThrottled(ctx, func() (err error) {
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
		if paths[i], err = parsePartitionKeyPath(p); err != nil {
			return nil, nil, fmt.Errorf("container %s/%s: %w", db, name, err)
		}
	}
	return c, paths, nil
}

// importJob is one document to upsert.
type importJob struct {
	where string
	body  []byte
	pk    any
	id    string
}

// importQueue is how many parsed documents wait for each worker.
const importQueue = 32

// readInput reads one input ("-" is stdin) line by line and hands every document to the worker
// of its (partition key, id). It returns read errors; upsert failures that end the import are
// the workers'. It returns early, without error, when ctx ends.
func (im *importer) readInput(ctx context.Context, workers []chan importJob, name string) error {
	var in io.Reader = im.f.IO.In
	label := ""
	if name != "-" {
		file, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("open input: %w", err)
		}
		defer file.Close()
		in, label = file, name
	} else if im.f.IO.IsStdinTTY {
		im.status.Println("Reading JSON lines from the terminal; end with Ctrl-D.")
	}
	r := lineio.NewReader(in)
	for {
		line, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		var tooLong *lineio.TooLongError
		if errors.As(err, &tooLong) {
			im.lines.Add(1)
			where := importLineRef(label, r.Line())
			if h := tooLong.Hint(); h != "" && !im.arrayHinted.Swap(true) {
				err = fmt.Errorf("%w; %s", err, h)
			}
			im.reject(where, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", importInputName(label), err)
		}
		im.read.Add(int64(len(line)) + 1)
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		im.lines.Add(1)
		where := importLineRef(label, r.Line())
		body, pk, id, perr := parseImportLine(line, im.paths)
		if perr != nil {
			im.reject(where, perr)
			im.progress()
			continue
		}
		// The body may alias the reader's buffer: the worker gets its own copy.
		body = bytes.Clone(body)
		ch := workers[importShard(pk, id, len(workers))]
		select {
		case ch <- importJob{where: where, body: body, pk: pk, id: id}:
		case <-ctx.Done():
			return nil
		}
		im.progress()
	}
}

// importShard returns the worker of a document: the same for the same partition key and id.
func importShard(pk any, id string, n int) int {
	h := fnv.New64a()
	key, _ := json.Marshal(pk)
	h.Write(key)
	h.Write([]byte{0})
	h.Write([]byte(id))
	return int(h.Sum64() % uint64(n))
}

func importLineRef(label string, n int) string {
	if label == "" {
		return fmt.Sprintf("line %d", n)
	}
	return fmt.Sprintf("%s:%d", label, n)
}

func importInputName(label string) string {
	if label == "" {
		return "standard input"
	}
	return label
}

// upsert writes one document, retrying when throttled. A failure that concerns this document
// only is reported and counted; one that will fail every document (authentication, a missing
// container, an unreachable account, an interruption) ends the import.
func (im *importer) upsert(ctx context.Context, job importJob) error {
	write := func() error { return im.c.UpsertItem(ctx, job.pk, job.body) }
	if im.delete {
		write = func() error {
			err := im.c.DeleteItem(ctx, job.pk, job.id)
			if errors.Is(err, leases.ErrNotFound) {
				return nil // already gone: deleted all the same
			}
			return err
		}
	}
	err := retryThrottled(ctx, write)
	switch {
	case err == nil:
		im.imported.Add(1)
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case isDocumentError(err):
		im.reject(job.where, err)
		return nil
	}
	return fmt.Errorf("%s: %w", job.where, err)
}

// retryThrottled calls fn until it succeeds, fails with anything but throttling, or was
// throttled importRetries times (after the SDK's own retries), waiting the service's
// retry-after or an exponential backoff, whichever is longer.
func retryThrottled(ctx context.Context, fn func() error) error {
	backoff := feed.Backoff{Min: 50 * time.Millisecond, Max: 5 * time.Second}
	for attempt := 0; ; attempt++ {
		err := fn()
		var te *feed.ThrottledError
		if !errors.As(err, &te) || attempt >= importRetries {
			return err
		}
		wait := max(te.RetryAfter, backoff.Wait(attempt+1))
		if serr := importSleep(ctx, wait); serr != nil {
			return serr
		}
	}
}

// isDocumentError reports whether an upsert error concerns one document (the service answered
// for it) rather than the whole import. A server error (5xx) is the service failing, not the
// document: it would fail every following line too, so it ends the import.
func isDocumentError(err error) bool {
	var se *cosmos.StatusError
	var te *feed.ThrottledError
	if errors.As(err, &se) && se.Status >= 500 {
		return false
	}
	return errors.As(err, &se) || errors.As(err, &te) ||
		errors.Is(err, leases.ErrConflict) || errors.Is(err, leases.ErrPreconditionFailed)
}

func importSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reject counts a rejected line and reports it on stderr (the first maxReportedRejects).
func (im *importer) reject(where string, err error) {
	im.rejected.Add(1)
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
	imported, rejected := im.imported.Load(), im.rejected.Load()
	elapsed := now.Sub(im.start)
	if im.total <= 0 {
		im.status.Update("importing: %d %s, %d rejected (%s)", imported, im.verb(), rejected, importRate(imported, elapsed))
		return
	}
	read := min(im.read.Load(), im.total)
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
	imported := im.imported.Load()
	im.status.Done("%s %d, rejected %d, in %s (%s)", im.verb(), imported, im.rejected.Load(), elapsed.Round(time.Millisecond), importRate(imported, elapsed))
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

// parseImportLine checks one input line and returns the document to upsert (system
// properties dropped) and its partition key value at paths (a []any for hierarchical keys).
func parseImportLine(line []byte, paths [][]string) (body []byte, pk any, id string, err error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		if !json.Valid(line) {
			return nil, nil, "", fmt.Errorf("invalid JSON: %w", jsonSyntaxError(line))
		}
		return nil, nil, "", errors.New("not a JSON object")
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(line, &doc); err != nil {
		return nil, nil, "", fmt.Errorf("invalid JSON: %w", jsonSyntaxError(line))
	}
	if raw, ok := doc["id"]; !ok {
		return nil, nil, "", errors.New(`no "id"`)
	} else if err := json.Unmarshal(raw, &id); err != nil {
		return nil, nil, "", errors.New(`"id" is not a string`)
	}
	if id == "" {
		return nil, nil, "", errors.New(`"id" is empty`)
	}
	values := make([]any, len(paths))
	for i, path := range paths {
		if values[i], err = pkValueAt(doc, path); err != nil {
			return nil, nil, "", err
		}
	}
	pk = values[0]
	if len(values) > 1 {
		pk = values
	}
	body = line
	if hasSystemProperties(doc) {
		for _, p := range importSystemProperties {
			delete(doc, p)
		}
		if body, err = json.Marshal(doc); err != nil {
			return nil, nil, "", fmt.Errorf("re-encode without system properties: %w", err)
		}
	}
	return body, pk, id, nil
}

func hasSystemProperties(doc map[string]json.RawMessage) bool {
	for _, p := range importSystemProperties {
		if _, ok := doc[p]; ok {
			return true
		}
	}
	return false
}

// jsonSyntaxError returns the decoder's own complaint about an invalid line.
func jsonSyntaxError(line []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return errors.New("malformed")
}

// pkValueAt returns the partition key value at path in doc: a string, json.Number, bool or nil.
func pkValueAt(doc map[string]json.RawMessage, path []string) (any, error) {
	where := "/" + strings.Join(path, "/")
	cur := doc
	for i, seg := range path {
		raw, ok := cur[seg]
		if !ok {
			return nil, fmt.Errorf("no partition key at %s", where)
		}
		if i < len(path)-1 {
			if err := json.Unmarshal(raw, &cur); err != nil {
				return nil, fmt.Errorf("no partition key at %s: %s is not an object", where, "/"+strings.Join(path[:i+1], "/"))
			}
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("partition key at %s: %w", where, err)
		}
		switch v.(type) {
		case string, json.Number, bool, nil:
			return v, nil
		default:
			return nil, fmt.Errorf("partition key at %s is an object or array, not a string, number, bool or null", where)
		}
	}
	return nil, fmt.Errorf("empty partition key path")
}

// parsePartitionKeyPath splits a partition key path ("/customerId", "/address/city",
// `/"odd name"`) into its property names.
func parsePartitionKeyPath(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return nil, fmt.Errorf("partition key path %q must start with / and name a property, like /customerId", p)
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
			s = s[1 : len(s)-1]
		}
		if s == "" {
			return nil, fmt.Errorf("partition key path %q has an empty segment", p)
		}
		segs[i] = s
	}
	return segs, nil
}
