package emulator

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// committer runs write functions in shared bbolt transactions (group commit): a writer that
// finds no transaction in flight runs at once, alone; writers that arrive meanwhile are committed
// together in the next transaction, so concurrent writers share one fsync. A write returns only
// after the transaction holding it committed. Unlike bolt.DB.Batch it never waits for a timer.
//
// Functions may run more than once (when a shared transaction fails they are retried alone), so
// they must reset their own results on entry. A function's error rolls back its writes: it fails
// the shared transaction, whose functions are then retried each alone. Single writes therefore
// report domain errors through their closure and return only storage errors; a PATCH or a
// transactional batch returns its domain error to be rolled back (store.updateItems).
type committer struct {
	db  *bolt.DB
	dir string // the data directory, for errors

	mu      sync.Mutex
	pending []*commitOp
	running bool
}

type commitOp struct {
	fn   func(*bolt.Tx) error
	done chan commitResult
}

type commitResult struct {
	err  error
	lead bool // the receiver must run the next group instead
}

func (c *committer) do(fn func(*bolt.Tx) error) error {
	op := &commitOp{fn: fn, done: make(chan commitResult, 1)}
	c.mu.Lock()
	c.pending = append(c.pending, op)
	if c.running {
		c.mu.Unlock()
		res := <-op.done
		if !res.lead {
			return res.err
		}
		c.mu.Lock()
	} else {
		c.running = true
	}
	group := c.pending
	c.pending = nil
	c.mu.Unlock()

	c.run(group)

	// Hand the leadership to the oldest waiting writer, if any.
	c.mu.Lock()
	if len(c.pending) > 0 {
		c.pending[0].done <- commitResult{lead: true}
	} else {
		c.running = false
	}
	c.mu.Unlock()
	return (<-op.done).err
}

// run commits group in one transaction, or each alone when the shared one fails.
func (c *committer) run(group []*commitOp) {
	err := c.update(func(tx *bolt.Tx) error {
		for _, op := range group {
			if err := op.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(group) == 1 {
		for _, op := range group {
			op.done <- commitResult{err: err}
		}
		return
	}
	for _, op := range group {
		op.done <- commitResult{err: c.update(op.fn)}
	}
}

// update runs fn in a write transaction. A panic or fault on a corrupt data file becomes a
// *CorruptError, so that the writers waiting on the group are answered and the next group runs.
func (c *committer) update(fn func(*bolt.Tx) error) (err error) {
	defer catchCorrupt(c.dir, &err)()
	return c.db.Update(fn)
}
