package emulator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
)

// crashBatchSize is the number of creates in each batch of TestHelperBatchCrashWriter.
const crashBatchSize = 100

// crashWriters is the number of goroutines of TestHelperBatchCrashWriter.
const crashWriters = 3

// TestHelperBatchCrashWriter is not a test: run by
// TestTransactionalBatch_KillNineLeavesEveryBatchWholeOrAbsent in a child process, it runs
// transactional batches of crashBatchSize creates forever from crashWriters goroutines (ids
// <run>-w<writer>-b<n>-<i>) and prints the name of each acknowledged batch, <run>-w<writer>-b<n>.
// With several writers, some batch is in flight whenever one is acknowledged.
func TestHelperBatchCrashWriter(t *testing.T) {
	dir, run := os.Getenv("CFP_EMULATOR_BATCH_CRASH_DIR"), os.Getenv("CFP_EMULATOR_BATCH_CRASH_RUN")
	if dir == "" {
		t.Skip("helper process only")
	}
	e, err := emulator.Open(emulator.Options{Dir: dir, Partitions: 1})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	c := newClient(t, e, "")
	cc, _ := c.NewContainer("db", "crash")
	if run == "r0" {
		cc = setupContainer(t, c, "db", "crash")
	}
	pk := azcosmos.NewPartitionKeyString("p")
	var mu sync.Mutex // one line at a time on stdout
	for w := range crashWriters {
		go func() {
			for n := 0; ; n++ {
				name := fmt.Sprintf("%s-w%d-b%d", run, w, n)
				b := cc.NewTransactionalBatch(pk)
				for i := range crashBatchSize {
					body, _ := json.Marshal(doc{ID: fmt.Sprintf("%s-%d", name, i), PK: "p", V: n})
					b.CreateItem(body, nil)
				}
				resp, err := cc.ExecuteTransactionalBatch(context.Background(), b, nil)
				mu.Lock()
				if err != nil || !resp.Success {
					fmt.Println("error:", err)
					os.Exit(1)
				}
				fmt.Println("acked", name)
				mu.Unlock()
			}
		}()
	}
	select {}
}

// TestTransactionalBatch_KillNineLeavesEveryBatchWholeOrAbsent kills a process running
// transactional batches with SIGKILL, a few times over one data directory, and checks that every
// batch is in the reopened directory whole (every batch acknowledged, and any other one) or not
// at all. Before batches ran in one storage transaction, nearly every kill left the batch in
// flight half applied.
func TestTransactionalBatch_KillNineLeavesEveryBatchWholeOrAbsent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const kills = 4
	acked := map[string]bool{} // <run>-w<writer>-b<n>
	for k := range kills {
		run := fmt.Sprintf("r%d", k)
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBatchCrashWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CFP_EMULATOR_BATCH_CRASH_DIR="+dir, "CFP_EMULATOR_BATCH_CRASH_RUN="+run)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill it after 1 to 3 acknowledged batches, so the kill lands in the next one.
		want, got := 1+k%3, 0
		sc := bufio.NewScanner(out)
		for got < want && sc.Scan() {
			line := sc.Text()
			if name, ok := strings.CutPrefix(line, "acked "); ok {
				acked[name] = true
				got++
			} else if strings.HasPrefix(line, "error:") {
				t.Fatalf("helper: %s", line)
			}
		}
		_ = cmd.Process.Kill() // SIGKILL
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "acked "); ok {
				acked[name] = true
			}
		}
		_ = cmd.Wait()
		if got < want {
			t.Fatalf("run %s: the helper acknowledged %d batches, want %d", run, got, want)
		}
	}

	e := openEmu(t, emulator.Options{Dir: dir, Partitions: 1})
	cc, _ := newClient(t, e, "").NewContainer("db", "crash")
	docs, _ := drainAll(t, cc)
	count := map[string]int{}
	for _, d := range docs {
		i := strings.LastIndexByte(d.ID, '-')
		count[d.ID[:i]]++
	}
	for batch, n := range count {
		if n != crashBatchSize {
			t.Errorf("batch %s has %d of its %d items after kill -9", batch, n, crashBatchSize)
		}
	}
	for batch := range acked {
		if count[batch] == 0 {
			t.Errorf("acknowledged batch %s lost after kill -9", batch)
		}
	}
}

// isolationBatch is the number of items every batch of TestTransactionalBatch_ReadersSeeWholeBatches
// upserts.
const isolationBatch = 20

// TestTransactionalBatch_ReadersSeeWholeBatches has one writer run transactional batches that
// upsert the same isolationBatch items, all at version v of the batch, while readers check that
// they never see part of a batch: a query of the partition finds every item at one version, a
// point read of the last item finds it no older than the first item read before it, and a page
// of either change-feed mode (read with a smaller page size than a batch) holds every change of
// a batch or none, as the service returns the changes of one transaction together.
func TestTransactionalBatch_ReadersSeeWholeBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	pk := azcosmos.NewPartitionKeyString("a")
	const batches = 30

	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	report := func(format string, args ...any) {
		select {
		case errs <- fmt.Errorf(format, args...):
		default:
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		for v := 1; v <= batches; v++ {
			b := cc.NewTransactionalBatch(pk)
			for i := range isolationBatch {
				body, _ := json.Marshal(doc{ID: fmt.Sprintf("x%d", i), PK: "a", V: v})
				b.UpsertItem(body, nil)
			}
			if resp, err := cc.ExecuteTransactionalBatch(ctx, b, nil); err != nil || !resp.Success {
				report("batch %d: %v", v, err)
				return
			}
		}
	}()
	// reader runs check until the writer is done, and once more after.
	reader := func(check func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				last := done.Load()
				if err := check(); err != nil {
					report("%v", err)
					return
				}
				if last {
					return
				}
			}
		}()
	}
	reader(func() error { // a query of the partition
		pager := cc.NewQueryItemsPager("SELECT * FROM c", pk, &azcosmos.QueryOptions{PageSizeHint: 100})
		versions := map[int]int{}
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("query: %w", err)
			}
			for _, raw := range page.Items {
				var d doc
				_ = json.Unmarshal(raw, &d)
				versions[d.V]++
			}
		}
		if len(versions) > 1 {
			return fmt.Errorf("a query saw items of several batches at once: version -> items %v", versions)
		}
		return nil
	})
	reader(func() error { // point reads: the first item, then the last
		first, err1 := cc.ReadItem(ctx, pk, "x0", nil)
		last, err2 := cc.ReadItem(ctx, pk, fmt.Sprintf("x%d", isolationBatch-1), nil)
		if statusOf(err1) == http.StatusNotFound || statusOf(err2) == http.StatusNotFound {
			return nil // before the first batch
		}
		if err1 != nil || err2 != nil {
			return fmt.Errorf("point reads: %v, %v", err1, err2)
		}
		var a, b doc
		_ = json.Unmarshal(first.Value, &a)
		_ = json.Unmarshal(last.Value, &b)
		if b.V < a.V {
			return fmt.Errorf("point reads saw a half-applied batch: x0 at v%d, then x%d at v%d", a.V, isolationBatch-1, b.V)
		}
		return nil
	})
	feedReader := func(mode string, versionOf func(json.RawMessage) int) func() error {
		cont := ""
		return func() error {
			for {
				h := map[string]string{"A-IM": mode, "x-ms-max-item-count": "7", "x-ms-documentdb-partitionkeyrangeid": "0"}
				if mode == "Full-Fidelity Feed" {
					h["x-ms-cosmos-changefeed-wire-format-version"] = "2021-09-15"
					if cont == "" {
						h["If-None-Match"] = "*" // the all-versions feed has no beginning
					}
				}
				if cont != "" {
					h["If-None-Match"] = cont
				}
				resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/docs", h, "")
				switch resp.StatusCode {
				case http.StatusNotModified:
					cont = resp.Header.Get("etag")
					return nil
				case http.StatusOK:
				default:
					return fmt.Errorf("%s: status %d %s", mode, resp.StatusCode, body)
				}
				cont = resp.Header.Get("etag")
				var page struct{ Documents []json.RawMessage }
				if err := json.Unmarshal(body, &page); err != nil {
					return fmt.Errorf("%s: %w", mode, err)
				}
				changes := map[int]int{}
				for _, d := range page.Documents {
					changes[versionOf(d)]++
				}
				for v, n := range changes {
					if n != isolationBatch {
						return fmt.Errorf("a %s page holds %d of the %d changes of batch v%d (page: %v)", mode, n, isolationBatch, v, changes)
					}
				}
			}
		}
	}
	reader(feedReader("Incremental Feed", func(raw json.RawMessage) int {
		var d doc
		_ = json.Unmarshal(raw, &d)
		return d.V
	}))
	reader(feedReader("Full-Fidelity Feed", func(raw json.RawMessage) int {
		var c struct{ Current doc }
		_ = json.Unmarshal(raw, &c)
		return c.Current.V
	}))
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestTransactionalBatch_FailedBatchLeavesNoChange checks that a batch whose last operation
// fails leaves nothing behind: no item, and no change in either change-feed mode (before, its
// undo wrote the items back, as new changes).
func TestTransactionalBatch_FailedBatchLeavesNoChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	pk := azcosmos.NewPartitionKeyString("a")
	upsert(t, cc, doc{ID: "keep", PK: "a", V: 1})
	upsert(t, cc, doc{ID: "gone", PK: "a", V: 1})

	// The current continuation of both change-feed modes.
	now := func(aim string) string {
		h := map[string]string{"A-IM": aim, "If-None-Match": "*", "x-ms-documentdb-partitionkeyrangeid": "0"}
		if aim == "Full-Fidelity Feed" {
			h["x-ms-cosmos-changefeed-wire-format-version"] = "2021-09-15"
		}
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/docs", h, "")
		if resp.StatusCode != http.StatusNotModified {
			t.Fatalf("%s from now: %d %s", aim, resp.StatusCode, body)
		}
		return resp.Header.Get("etag")
	}
	latest, all := now("Incremental Feed"), now("Full-Fidelity Feed")

	b := cc.NewTransactionalBatch(pk)
	b.CreateItem([]byte(`{"id":"new","pk":"a","v":1}`), nil)
	b.UpsertItem([]byte(`{"id":"keep","pk":"a","v":2}`), nil)
	b.DeleteItem("gone", nil)
	b.CreateItem([]byte(`{"id":"keep","pk":"a","v":3}`), nil) // 409
	resp, err := cc.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil || resp.Success {
		t.Fatalf("failing batch: %v success=%v", err, resp.Success)
	}
	if got := resp.OperationResults[3].StatusCode; got != http.StatusConflict {
		t.Errorf("the failing operation: %d, want 409", got)
	}

	for aim, cont := range map[string]string{"Incremental Feed": latest, "Full-Fidelity Feed": all} {
		h := map[string]string{"A-IM": aim, "If-None-Match": cont, "x-ms-documentdb-partitionkeyrangeid": "0"}
		if aim == "Full-Fidelity Feed" {
			h["x-ms-cosmos-changefeed-wire-format-version"] = "2021-09-15"
		}
		resp, body := rawRequest(t, e, http.MethodGet, "/dbs/db/colls/c/docs", h, "")
		if resp.StatusCode != http.StatusNotModified {
			t.Errorf("%s after the failed batch: %d %s, want 304 (no change)", aim, resp.StatusCode, body)
		}
	}
	if d := readDoc(t, cc, "a", "keep"); d["v"] != 1.0 {
		t.Errorf("keep after the failed batch: %v, want v 1", d)
	}
	if _, err := cc.ReadItem(ctx, pk, "gone", nil); err != nil {
		t.Errorf("gone after the failed batch: %v, want it still there", err)
	}
	if _, err := cc.ReadItem(ctx, pk, "new", nil); statusOf(err) != http.StatusNotFound {
		t.Errorf("new after the failed batch: %v, want 404", err)
	}
}

// TestTransactionalBatch_FailedBatchesKeepOthersWrites runs batches that upsert shared items and
// then fail, while another client upserts the same items: every write the other client had
// acknowledged last must be what is stored in the end (before, a failed batch's undo wrote back
// the versions it had read, over the other client's acknowledged writes).
func TestTransactionalBatch_FailedBatchesKeepOthersWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	c := newClient(t, e, "")
	cc := setupContainer(t, c, "db", "c")
	pk := azcosmos.NewPartitionKeyString("a")
	const items, rounds = 10, 40
	upsert(t, cc, doc{ID: "anchor", PK: "a"})

	var stop atomic.Bool
	var wg sync.WaitGroup
	var batchErr error
	var failedBatches atomic.Int64
	wg.Add(1)
	go func() { // batches that fail at their last operation
		defer wg.Done()
		for !stop.Load() {
			b := cc.NewTransactionalBatch(pk)
			for i := range items {
				b.UpsertItem([]byte(fmt.Sprintf(`{"id":"s%d","pk":"a","v":-1}`, i)), nil)
			}
			b.CreateItem([]byte(`{"id":"anchor","pk":"a"}`), nil) // 409
			resp, err := cc.ExecuteTransactionalBatch(ctx, b, nil)
			if err != nil || resp.Success {
				batchErr = fmt.Errorf("failing batch: %v, success %v", err, resp.Success)
				return
			}
			failedBatches.Add(1)
		}
	}()
	lastAcked := map[string]int{}
	for r := 1; r <= rounds; r++ {
		for i := range items {
			d := doc{ID: "s" + strconv.Itoa(i), PK: "a", V: r}
			upsert(t, cc, d)
			lastAcked[d.ID] = r
		}
	}
	stop.Store(true)
	wg.Wait()
	if batchErr != nil {
		t.Fatal(batchErr)
	}
	if failedBatches.Load() == 0 {
		t.Fatal("no failing batch ran")
	}
	lost := 0
	for id, v := range lastAcked {
		if got := readDoc(t, cc, "a", id)["v"]; got != float64(v) {
			lost++
			t.Errorf("%s is at v%v, want v%d, the last acknowledged write", id, got, v)
		}
	}
	if lost > 0 {
		t.Logf("%d of %d acknowledged writes lost to %d failed batches", lost, items, failedBatches.Load())
	}
}

// TestChangeFeedAll_BatchIsOneChange checks that the operations of a transactional batch share
// one LSN in the all-versions feed, each with the previous image it replaced, including an item
// written twice in the batch, and that a later write's previous image is the batch's last
// version of the item.
func TestChangeFeedAll_BatchIsOneChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEmu(t, emulator.Options{Partitions: 1})
	cc := setupContainer(t, newClient(t, e, ""), "db", "c")
	pk := azcosmos.NewPartitionKeyString("a")
	upsert(t, cc, doc{ID: "x", PK: "a", V: 0})
	resp, _ := avFeed(t, e, "c", map[string]string{"If-None-Match": "*", "x-ms-documentdb-partitionkeyrangeid": "0"})
	from := resp.Header.Get("etag")

	b := cc.NewTransactionalBatch(pk)
	b.UpsertItem([]byte(`{"id":"x","pk":"a","v":1}`), nil)
	b.ReplaceItem("x", []byte(`{"id":"x","pk":"a","v":2}`), nil)
	b.CreateItem([]byte(`{"id":"y","pk":"a","v":1}`), nil)
	if r, err := cc.ExecuteTransactionalBatch(ctx, b, nil); err != nil || !r.Success {
		t.Fatalf("batch: %v", err)
	}
	upsert(t, cc, doc{ID: "x", PK: "a", V: 3})

	resp, changes := avFeed(t, e, "c", map[string]string{"If-None-Match": from, "x-ms-documentdb-partitionkeyrangeid": "0", "x-ms-max-item-count": "1"})
	if len(changes) != 3 {
		t.Fatalf("first page with a page size of 1: %s, want the batch's 3 operations", changeList(changes))
	}
	type want struct {
		op, id  string
		v, prev float64 // prev -1: no previous image
	}
	for i, w := range []want{{"replace", "x", 1, 0}, {"replace", "x", 2, 1}, {"create", "y", 1, -1}} {
		c := changes[i]
		if c.Metadata.OperationType != w.op || c.Current["id"] != w.id || c.Current["v"] != w.v {
			t.Errorf("change %d: %s v%v, want %s %s v%v", i, c, c.Current["v"], w.op, w.id, w.v)
		}
		if c.Metadata.LSN != changes[0].Metadata.LSN {
			t.Errorf("change %d at LSN %d, the batch's first at %d", i, c.Metadata.LSN, changes[0].Metadata.LSN)
		}
		if w.prev < 0 && c.Previous != nil || w.prev >= 0 && (c.Previous == nil || c.Previous["v"] != w.prev) {
			t.Errorf("change %d (%s): previous image %v, want v%v", i, c, c.Previous, w.prev)
		}
	}
	_, changes = avFeed(t, e, "c", map[string]string{"If-None-Match": resp.Header.Get("etag"), "x-ms-documentdb-partitionkeyrangeid": "0"})
	if len(changes) != 1 || changes[0].Previous["v"] != 2.0 {
		t.Errorf("the write after the batch: %s, want one replace of x with the batch's last version v2 as previous image", changeList(changes))
	} else if changes[0].Metadata.PreviousImageLSN != changes[0].Metadata.LSN-1 {
		t.Errorf("the write after the batch: previousImageLSN %d, want the batch's %d", changes[0].Metadata.PreviousImageLSN, changes[0].Metadata.LSN-1)
	}
}
