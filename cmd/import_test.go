package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/render"
)

var updateOrders = flag.Bool("update-orders", false, "rewrite ../testdata/orders.jsonl from genOrders")

const ordersFixture = "../testdata/orders.jsonl"

// genOrders returns n sample order documents as JSON lines, the same for the same n: ids
// "order-0001"..., a customerId (the partition key of the samples) shared by several orders,
// and a status, items and totals that look like a shop's.
func genOrders(n int) []byte {
	type item struct {
		SKU      string  `json:"sku"`
		Quantity int     `json:"quantity"`
		Price    float64 `json:"price"`
	}
	type order struct {
		ID         string    `json:"id"`
		CustomerID string    `json:"customerId"`
		Status     string    `json:"status"`
		Items      []item    `json:"items"`
		Total      float64   `json:"total"`
		Currency   string    `json:"currency"`
		CreatedAt  time.Time `json:"createdAt"`
		Region     string    `json:"region"`
	}
	r := rand.New(rand.NewPCG(2026, 11))
	statuses := []string{"created", "paid", "shipped", "delivered", "cancelled"}
	regions := []string{"westeurope", "northeurope", "eastus", "westus2"}
	skus := []string{"BOOK-001", "BOOK-017", "MUG-RED", "MUG-BLUE", "TEE-S", "TEE-M", "TEE-L", "PEN-4PK", "LAMP-01", "DESK-MAT"}
	start := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		o := order{
			ID:         fmt.Sprintf("order-%04d", i),
			CustomerID: fmt.Sprintf("cust-%03d", 1+r.IntN(40)),
			Status:     statuses[r.IntN(len(statuses))],
			Currency:   "EUR",
			CreatedAt:  start.Add(time.Duration(i)*37*time.Minute + time.Duration(r.IntN(600))*time.Second),
			Region:     regions[r.IntN(len(regions))],
		}
		for range 1 + r.IntN(4) {
			it := item{SKU: skus[r.IntN(len(skus))], Quantity: 1 + r.IntN(3), Price: float64(199+r.IntN(5000)) / 100}
			o.Items = append(o.Items, it)
			o.Total += float64(it.Quantity) * it.Price
		}
		o.Total = float64(int(o.Total*100+0.5)) / 100
		line, err := json.Marshal(o)
		if err != nil {
			panic(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func TestOrdersFixture_IsGenerated(t *testing.T) {
	t.Parallel()
	want := genOrders(200)
	if *updateOrders {
		if err := os.WriteFile(ordersFixture, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(ordersFixture)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd -run OrdersFixture -update-orders)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from genOrders(200): run go test ./cmd -run OrdersFixture -update-orders", ordersFixture)
	}
	if n := bytes.Count(got, []byte("\n")); n != 200 {
		t.Fatalf("fixture has %d lines, want 200", n)
	}
}

// runCLI runs cfp in process with stdin and returns the exit code, stdout and stderr.
// COSMOS_KEY is the well-known emulator key.
func runCLI(t *testing.T, ctx context.Context, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ios, in, out, errOut := render.Test()
	in.WriteString(stdin)
	env := map[string]string{"NO_COLOR": "1", "COSMOS_KEY": auth.WellKnownKey}
	code = MainWithIO(ctx, args, ios, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

// countItems counts the documents of db/coll in the local data directory dir, and returns
// them by id.
func countItems(t *testing.T, dir, db, coll string) map[string]map[string]any {
	t.Helper()
	ctx := context.Background()
	acct := openLocal(t, dir, 4)
	defer acct.Close()
	docs := map[string]map[string]any{}
	err := acct.Container(db, coll).Query(ctx, "SELECT * FROM c", nil, func(raw []byte) error {
		var d map[string]any
		if err := json.Unmarshal(raw, &d); err != nil {
			return err
		}
		docs[d["id"].(string)] = d
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func TestImport_OrdersWithAMalformedLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	orders, err := os.ReadFile(ordersFixture)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(orders), "\n")
	// Line 51 is broken JSON, line 102 has no customerId; both are reported and skipped.
	input := strings.Join(lines[:50], "") + "{\"id\":\"broken\",\n" + strings.Join(lines[50:100], "") +
		`{"id":"no-key"}` + "\n" + strings.Join(lines[100:], "")

	code, stdout, stderr := runCLI(t, context.Background(), input,
		"--local="+dir, "import", "-d", "shop", "-c", "orders", "--create", "--partition-key-path", "/customerId")
	if code != 3 {
		t.Fatalf("exit %d, want 3; stderr:\n%s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing", stdout)
	}
	for _, re := range []string{
		`(?m)^cfp: line 51: invalid JSON: unexpected EOF$`,
		`(?m)^cfp: line 102: no partition key at /customerId$`,
		`(?m)^imported 200, rejected 2, in \S+ \(\d+ docs/s\)$`,
		`(?m)^cfp: 2 of 202 lines rejected$`,
	} {
		if !regexp.MustCompile(re).MatchString(stderr) {
			t.Errorf("stderr does not match %s:\n%s", re, stderr)
		}
	}

	docs := countItems(t, dir, "shop", "orders")
	if len(docs) != 200 {
		t.Fatalf("container holds %d documents, want 200", len(docs))
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	got := docs["order-0001"]
	for k, v := range first {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("order-0001 %s = %v, want %v", k, got[k], v)
		}
	}

	// Importing again upserts: same count, exit 0 without the bad lines.
	code, _, stderr = runCLI(t, context.Background(), string(orders), "--local="+dir, "import", "-d", "shop", "-c", "orders")
	if code != 0 || !strings.Contains(stderr, "imported 200, rejected 0,") {
		t.Fatalf("second import: exit %d, stderr:\n%s", code, stderr)
	}
	if n := len(countItems(t, dir, "shop", "orders")); n != 200 {
		t.Fatalf("after re-import the container holds %d documents, want 200", n)
	}
}

// serveEmulator serves a fresh emulator data directory on a loopback port for the test's
// duration and returns it with its endpoint.
func serveEmulator(t *testing.T) (*emulator.Emulator, string) {
	t.Helper()
	emu, err := emulator.Open(emulator.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- emu.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		_ = emu.Close()
	})
	return emu, "http://" + ln.Addr().String() + "/"
}

func TestImport_RetriesThrottledUpserts(t *testing.T) {
	t.Parallel()
	emu, endpoint := serveEmulator(t)
	var in strings.Builder
	for i := range 60 {
		fmt.Fprintf(&in, `{"id":"d%d","pk":"p%d"}`+"\n", i, i%3)
	}
	ctx := context.Background()
	code, _, stderr := runCLI(t, ctx, "", "--endpoint", endpoint, "import", "-d", "db", "-c", "c", "--create", "--partition-key-path", "/pk", os.DevNull)
	if code != 0 {
		t.Fatalf("creating the container: exit %d\n%s", code, stderr)
	}
	// Half the upserts are throttled, more often than the SDK retries on its own.
	if err := emu.InjectFaults(emulator.FaultRule{Status: 429, RetryAfter: time.Millisecond, Fraction: 0.5}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, ctx, in.String(), "--endpoint", endpoint, "import", "-d", "db", "-c", "c", "--concurrency", "4")
	emu.ClearFaults()
	if code != 0 {
		t.Fatalf("exit %d, want 0 (throttled upserts are retried)\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "imported 60, rejected 0,") {
		t.Fatalf("stderr:\n%s", stderr)
	}
}

func TestImport_WrongKeyIsAnAuthFailure(t *testing.T) {
	t.Parallel()
	_, endpoint := serveEmulator(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("c2VjcmV0a2V5c2VjcmV0a2V5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, context.Background(), `{"id":"a"}`+"\n",
		"--endpoint", endpoint, "--key-file", keyFile, "import", "-d", "db", "-c", "c", "--create")
	if code != 4 {
		t.Fatalf("exit %d, want 4\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "unauthorized (HTTP 401)") || !strings.HasPrefix(lines[1], "Try: check the account key") {
		t.Errorf("stderr is not one error line and a hint:\n%s", stderr)
	}
	if strings.Contains(stdout+stderr, "c2VjcmV0a2V5c2VjcmV0a2V5") {
		t.Errorf("the key leaked:\n%s%s", stdout, stderr)
	}
}

func TestImport_ProgressOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	orders, err := os.ReadFile(ordersFixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, tty := range []bool{true, false} {
		ios, in, _, errOut := render.Test()
		ios.IsStderrTTY = tty
		in.Write(orders)
		args := []string{"--local=" + t.TempDir(), "import", "-d", "shop", "-c", "orders", "--create", "--partition-key-path", "/customerId"}
		if code := MainWithIO(context.Background(), args, ios, func(string) string { return "" }); code != 0 {
			t.Fatalf("tty=%v: exit %d\n%s", tty, code, errOut)
		}
		stderr := errOut.String()
		if got := strings.Contains(stderr, "importing: "); got != tty {
			t.Errorf("tty=%v: progress shown = %v, want %v:\n%q", tty, got, tty, stderr)
		}
		if !strings.Contains(stderr, "imported 200, rejected 0,") {
			t.Errorf("tty=%v: no summary:\n%q", tty, stderr)
		}
	}
}

// TestImport_ProgressBarOfAFile checks the progress of a regular file on a terminal: a bar
// with the percentage of the bytes read, the size and an ETA; a pipe (no size) shows counts.
func TestImport_ProgressBarOfAFile(t *testing.T) {
	t.Parallel()
	ios, _, _, errOut := render.Test()
	ios.IsStderrTTY = true
	args := []string{"--local=" + t.TempDir(), "import", "-d", "shop", "-c", "orders", "--create", "--partition-key-path", "/customerId", ordersFixture}
	if code := MainWithIO(context.Background(), args, ios, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	stderr := errOut.String()
	if !regexp.MustCompile(`importing \[[#-]{10}\] +\d+% of 51\.9 KB, \d+ imported, 0 rejected, ETA \S+`).MatchString(stderr) {
		t.Errorf("no progress bar for a file:\n%q", stderr)
	}
	if !strings.Contains(stderr, "imported 200, rejected 0,") {
		t.Errorf("no summary:\n%q", stderr)
	}

	// Standard input redirected from the file (< orders.jsonl) has a size too.
	in, err := os.Open(ordersFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ios, _, _, errOut = render.Test()
	ios.IsStderrTTY, ios.In = true, in
	args = []string{"--local=" + t.TempDir(), "import", "-d", "shop", "-c", "orders", "--create", "--partition-key-path", "/customerId"}
	if code := MainWithIO(context.Background(), args, ios, func(string) string { return "" }); code != 0 {
		t.Fatalf("stdin: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(errOut.String(), "% of 51.9 KB") {
		t.Errorf("no progress bar for standard input from a file:\n%q", errOut)
	}
}
