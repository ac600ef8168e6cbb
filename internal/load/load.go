// Package load is the engine of `cfp import`: it reads JSON documents, one per line, from files
// or standard input and upserts (or deletes) each in a container, with up to Concurrency writes
// at once, retrying throttled writes and counting what it did. A line that is not a document,
// or a write the service refuses for that document alone, is rejected and counted; an error
// that would fail every document ends the run.
package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/cfp-dev/cfp/internal/epk"
	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/lineio"
)

// Target is the container written to (*cosmos.Container).
type Target interface {
	UpsertItem(ctx context.Context, pk any, body []byte) error
	DeleteItem(ctx context.Context, pk any, id string) error
}

// Options configure a Loader.
type Options struct {
	// Paths are the container's partition key paths, split by ParsePartitionKeyPath.
	Paths [][]string
	// Delete deletes the documents the lines name (by id and partition key) instead of
	// upserting them; one already gone counts as deleted.
	Delete bool
	// Concurrency is how many documents are written at once (at least 1).
	Concurrency int
	// Stdin is the input named "-".
	Stdin io.Reader
	// OnStdin, if set, is called when the reading of standard input starts.
	OnStdin func()
	// OnReject, if set, is called for every rejected line, with where it is ("line 3",
	// "file.jsonl:3") and why. It may be called from several goroutines at once.
	OnReject func(where string, err error)
	// OnLine, if set, is called after each non-blank line was parsed and handed on (or
	// rejected), for progress.
	OnLine func()
}

// Loader runs one import; its counters may be read while it runs.
type Loader struct {
	t    Target
	opts Options

	written  atomic.Int64
	rejected atomic.Int64
	lines    atomic.Int64
	read     atomic.Int64

	// arrayHinted is set once the jq hint for a JSON array was given.
	arrayHinted atomic.Bool
}

// New returns a Loader that writes to t.
func New(t Target, opts Options) *Loader {
	opts.Concurrency = max(opts.Concurrency, 1)
	return &Loader{t: t, opts: opts}
}

// Written is the number of documents upserted (or deleted) so far.
func (l *Loader) Written() int64 { return l.written.Load() }

// Rejected is the number of lines rejected so far.
func (l *Loader) Rejected() int64 { return l.rejected.Load() }

// Lines is the number of non-blank lines read so far.
func (l *Loader) Lines() int64 { return l.lines.Load() }

// BytesRead is the number of bytes of the lines read so far, line ends included, for
// progress (over-long lines that were skipped are not counted).
func (l *Loader) BytesRead() int64 { return l.read.Load() }

// job is one document to write.
type job struct {
	where string
	body  []byte
	pk    any
	id    string
}

// queue is how many parsed documents wait for each worker.
const queue = 32

// Run reads the inputs in order ("-" is Stdin) and writes their documents. It returns the
// error that ended the run: a write failure that is not the document's, or a read error; nil
// when every input was read (rejected lines are counted, not returned) or ctx ended (the caller
// checks ctx).
func (l *Loader) Run(ctx context.Context, inputs []string) error {
	g, gctx := errgroup.WithContext(ctx)
	// Lines of one (partition key, id) go to the same worker, in input order, so the last
	// version of a document in the input is the one that stays; different documents are
	// written by up to Concurrency workers at once.
	workers := make([]chan job, l.opts.Concurrency)
	for i := range workers {
		ch := make(chan job, queue)
		workers[i] = ch
		g.Go(func() error {
			for j := range ch {
				if err := l.write(gctx, j); err != nil {
					return err
				}
			}
			return nil
		})
	}
	var readErr error
	for _, name := range inputs {
		if readErr = l.readInput(gctx, workers, name); readErr != nil || gctx.Err() != nil {
			break
		}
	}
	for _, ch := range workers {
		close(ch)
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return readErr
}

// readInput reads one input ("-" is stdin) line by line and hands every document to the worker
// of its (partition key, id). It returns read errors; write failures that end the import are
// the workers'. It returns early, without error, when ctx ends.
func (l *Loader) readInput(ctx context.Context, workers []chan job, name string) error {
	in := l.opts.Stdin
	label := ""
	if name != "-" {
		file, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("open input: %w", err)
		}
		defer file.Close()
		in, label = file, name
	} else if l.opts.OnStdin != nil {
		l.opts.OnStdin()
	}
	r := lineio.NewReader(in)
	for {
		line, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		var tooLong *lineio.TooLongError
		if errors.As(err, &tooLong) {
			l.lines.Add(1)
			where := lineRef(label, r.Line())
			if h := tooLong.Hint(); h != "" && !l.arrayHinted.Swap(true) {
				err = fmt.Errorf("%w; %s", err, h)
			}
			l.reject(where, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", inputName(label), err)
		}
		l.read.Add(int64(len(line)))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		l.lines.Add(1)
		where := lineRef(label, r.Line())
		body, pk, id, perr := ParseLine(line, l.opts.Paths)
		if perr != nil {
			l.reject(where, perr)
			l.line()
			continue
		}
		// The body may alias the reader's buffer: the worker gets its own copy.
		body = bytes.Clone(body)
		ch := workers[shard(pk, id, len(workers))]
		select {
		case ch <- job{where: where, body: body, pk: pk, id: id}:
		case <-ctx.Done():
			return nil
		}
		l.line()
	}
}

func (l *Loader) line() {
	if l.opts.OnLine != nil {
		l.opts.OnLine()
	}
}

// shard returns the worker of a document: the same for the same partition key and id. The key
// is hashed in its canonical form (epk.Canonical, the emulator's and the EPK hashing's): Cosmos
// DB compares numbers as doubles, so 1, 1.0 and 1e0 are one partition key and their lines one
// document, written by one worker in input order. Hashing the key's text put them on different
// workers, and an older line could be written last.
func shard(pk any, id string, n int) int {
	h := fnv.New64a()
	parts, ok := pk.([]any)
	if !ok {
		parts = []any{pk}
	}
	h.Write([]byte(epk.Canonical(parts)))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return int(h.Sum64() % uint64(n))
}

func lineRef(label string, n int) string {
	if label == "" {
		return fmt.Sprintf("line %d", n)
	}
	return fmt.Sprintf("%s:%d", label, n)
}

func inputName(label string) string {
	if label == "" {
		return "standard input"
	}
	return label
}

// write upserts (or deletes) one document, retrying when throttled. A failure that concerns
// this document only is reported and counted; one that will fail every document
// (authentication, a missing container, an unreachable account, an interruption) ends the
// import.
func (l *Loader) write(ctx context.Context, j job) error {
	write := func() error { return l.t.UpsertItem(ctx, j.pk, j.body) }
	if l.opts.Delete {
		write = func() error {
			err := l.t.DeleteItem(ctx, j.pk, j.id)
			if errors.Is(err, leases.ErrNotFound) {
				return nil // already gone: deleted all the same
			}
			return err
		}
	}
	err := RetryThrottled(ctx, write)
	switch {
	case err == nil:
		l.written.Add(1)
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case IsDocumentError(err):
		l.reject(j.where, err)
		return nil
	}
	return fmt.Errorf("%s: %w", j.where, err)
}

// reject counts a rejected line and reports it.
func (l *Loader) reject(where string, err error) {
	l.rejected.Add(1)
	if l.opts.OnReject != nil {
		l.opts.OnReject(where, err)
	}
}
