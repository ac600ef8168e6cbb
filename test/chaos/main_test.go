//go:build unix

package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// Environment of the recorder: the test binary runs as the `--exec` command of every host
// when recorderFileEnv is set and the host's CFP_LEASE_TOKEN is present.
const (
	recorderFileEnv = "CFP_CHAOS_RECORD_FILE"
	recorderHostEnv = "CFP_CHAOS_HOST"
	// recorderDelayEnv is a duration the recorder sleeps, at random up to, after it recorded a
	// batch and before it reports success: the window in which a SIGKILL leaves a batch
	// delivered but not checkpointed.
	recorderDelayEnv = "CFP_CHAOS_DELAY"
)

func TestMain(m *testing.M) {
	if file := os.Getenv(recorderFileEnv); file != "" && os.Getenv("CFP_LEASE_TOKEN") != "" {
		if err := record(file, os.Stdin, os.Getenv); err != nil {
			fmt.Fprintf(os.Stderr, "chaos recorder: %v\n", err)
			os.Exit(1)
		}
		if d, err := time.ParseDuration(os.Getenv(recorderDelayEnv)); err == nil && d > 0 {
			time.Sleep(rand.N(d))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// delivery is one batch as the recorder saw it: one JSON line in a host's record file.
type delivery struct {
	Host         string `json:"host"`
	Lease        string `json:"lease"`
	Range        string `json:"range"`
	Continuation string `json:"cont"`
	At           int64  `json:"at"` // Unix nanoseconds
	// Seqs are the documents' seq fields in batch order; -1 for an item without one.
	Seqs []int `json:"seqs"`
}

// record reads a batch (a JSON array of documents) from r and appends one delivery line to
// file in a single O_APPEND write, so that concurrent recorders never interleave. getenv
// gives the host's CFP_* variables.
func record(file string, r io.Reader, getenv func(string) string) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read batch: %w", err)
	}
	var items []struct {
		Seq *int `json:"seq"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Errorf("decode batch: %w", err)
	}
	d := delivery{
		Host:         getenv(recorderHostEnv),
		Lease:        getenv("CFP_LEASE_TOKEN"),
		Range:        getenv("CFP_RANGE"),
		Continuation: getenv("CFP_CONTINUATION"),
		At:           time.Now().UnixNano(),
		Seqs:         make([]int, len(items)),
	}
	for i, it := range items {
		d.Seqs[i] = -1
		if it.Seq != nil {
			d.Seqs[i] = *it.Seq
		}
	}
	if n, err := strconv.Atoi(getenv("CFP_BATCH_SIZE")); err != nil || n != len(items) {
		return fmt.Errorf("CFP_BATCH_SIZE %q does not match the %d items on stdin", getenv("CFP_BATCH_SIZE"), len(items))
	}
	line, err := json.Marshal(d)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("append delivery: %w", err)
	}
	return f.Close()
}
