package cmd

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/render"
)

func TestListenHosts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr     string
		loopback bool
		endpoint string
	}{
		{"localhost:8081", true, "localhost"},
		{"127.0.0.1:0", true, "127.0.0.1"},
		{"[::1]:8081", true, "::1"},
		{"api.localhost:8081", true, "api.localhost"},
		{":8081", false, "localhost"},
		{"0.0.0.0:8081", false, "localhost"},
		{"[::]:8081", false, "localhost"},
		{"192.168.1.20:8081", false, "192.168.1.20"},
		{"myhost:8081", false, "myhost"},
	}
	for _, tt := range tests {
		host := listenHost(tt.addr)
		if got := isLoopbackHost(host); got != tt.loopback {
			t.Errorf("isLoopbackHost(%q) = %v, want %v", host, got, tt.loopback)
		}
		if got := endpointHost(host); got != tt.endpoint {
			t.Errorf("endpointHost(%q) = %q, want %q", host, got, tt.endpoint)
		}
	}
}

// inProcessEmulator is `cfp emulator` running in a goroutine of the test.
type inProcessEmulator struct {
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	code           chan int
}

// startEmulator runs `cfp <args>` (an emulator command) in process, waits until it printed
// something on stdout, and stops it when the test ends.
func startEmulator(t *testing.T, tty bool, args ...string) *inProcessEmulator {
	t.Helper()
	ios, _, _, _ := render.Test()
	e := &inProcessEmulator{stdout: &syncBuffer{}, stderr: &syncBuffer{}, code: make(chan int, 1)}
	ios.Out, ios.ErrOut = e.stdout, e.stderr
	ios.IsStdoutTTY = tty
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() { e.code <- MainWithIO(ctx, args, ios, func(string) string { return "" }) }()
	t.Cleanup(func() { e.stop(t) })
	deadline := time.Now().Add(20 * time.Second)
	for e.stdout.String() == "" {
		select {
		case code := <-e.code:
			e.code <- code
			t.Fatalf("cfp %s exited %d before serving:\n%s", strings.Join(args, " "), code, e.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("cfp %s printed nothing in 20s", strings.Join(args, " "))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return e
}

// stop interrupts the emulator and returns its exit code (once; later calls return -1).
func (e *inProcessEmulator) stop(t *testing.T) int {
	t.Helper()
	e.cancel()
	select {
	case code, ok := <-e.code:
		if !ok {
			return -1
		}
		close(e.code)
		return code
	case <-time.After(20 * time.Second):
		t.Fatal("emulator did not stop within 20s of the interrupt")
		return -1
	}
}

func (e *inProcessEmulator) view(t *testing.T) emulatorView {
	t.Helper()
	var v emulatorView
	if err := json.Unmarshal([]byte(e.stdout.String()), &v); err != nil {
		t.Fatalf("stdout is not the JSON view: %v\n%s", err, e.stdout.String())
	}
	return v
}

func TestEmulator_CustomKeyFileIsNeverPrinted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const key = "bXktZW11bGF0b3Ita2V5LTAxMjM0NTY3ODktbXktZW11bGF0b3Ita2V5LTAxMjM0NTY3ODktYWJjZGVmZ2hpag=="
	keyFile := filepath.Join(dir, "emu.key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startEmulator(t, false, "emulator", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data"), "--key-file", keyFile)
	v := e.view(t)
	if v.Type != "serving" || v.KeySource != "--key-file "+keyFile || v.Key != "" || v.ConnectionString != "" {
		t.Errorf("view = %+v, want type serving, keySource --key-file, no key or connection string", v)
	}
	if v.DataBytes <= 0 || v.Retention != "24h0m0s" {
		t.Errorf("view data_bytes %d, retention %q; want the data file's size and the default retention", v.DataBytes, v.Retention)
	}
	if !regexp.MustCompile(`^http://127\.0\.0\.1:[1-9]\d*/$`).MatchString(v.Endpoint) {
		t.Errorf("endpoint %q is not the real loopback port", v.Endpoint)
	}

	// The well-known key is refused, the key from the file works.
	code, _, stderr := runCLI(t, context.Background(), `{"id":"a"}`+"\n", "--endpoint", v.Endpoint, "import", "-d", "db", "-c", "c", "--create")
	if code != exitAuth {
		t.Errorf("import with the well-known key: exit %d, want %d\n%s", code, exitAuth, stderr)
	}
	code, _, stderr = runCLI(t, context.Background(), `{"id":"a"}`+"\n", "--endpoint", v.Endpoint, "--key-file", keyFile, "import", "-d", "db", "-c", "c", "--create")
	if code != 0 || !strings.Contains(stderr, "imported 1, rejected 0,") {
		t.Errorf("import with the emulator's key: exit %d\n%s", code, stderr)
	}

	if code := e.stop(t); code != 0 {
		t.Errorf("exit %d after the interrupt, want 0\n%s", code, e.stderr.String())
	}
	if out := e.stdout.String() + e.stderr.String(); strings.Contains(out, key) {
		t.Errorf("the custom key was printed:\n%s", out)
	}
	if !strings.Contains(e.stderr.String(), "cfp: emulator stopped") {
		t.Errorf("stderr does not say the emulator stopped:\n%s", e.stderr.String())
	}
}

func TestEmulator_TableOnATerminalAndNonLoopbackWarning(t *testing.T) {
	t.Parallel()
	e := startEmulator(t, true, "emulator", "--addr", "0.0.0.0:0", "--allow-well-known-key", "--data", t.TempDir(), "--partitions", "2")
	out := e.stdout.String()
	for _, re := range []string{
		`(?m)^SETTING\s+VALUE$`,
		`(?m)^endpoint\s+http://localhost:\d+/$`,
		`(?m)^key\s+` + regexp.QuoteMeta(auth.WellKnownKey) + `$`,
		`(?m)^connection string\s+AccountEndpoint=http://localhost:\d+/;AccountKey=` + regexp.QuoteMeta(auth.WellKnownKey) + `;$`,
		`(?m)^partitions\s+2$`,
		`(?m)^data size\s+\d+(\.\d)? [KMG]?B$`,
		`(?m)^all-versions retention\s+24h0m0s$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("stdout does not match %s:\n%s", re, out)
		}
	}
	if !strings.Contains(e.stderr.String(), "cfp: warning: serving on [::]:") && !strings.Contains(e.stderr.String(), "cfp: warning: serving on 0.0.0.0:") {
		t.Errorf("no warning about the non-loopback address on stderr:\n%s", e.stderr.String())
	}
	if code := e.stop(t); code != 0 {
		t.Errorf("exit %d after the interrupt, want 0", code)
	}
}

func TestEmulator_RefusesAServedDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEmulator(t, false, "emulator", "--addr", "127.0.0.1:0", "--data", dir)
	v := e.view(t)
	code, _, stderr := runCLI(t, context.Background(), "", "emulator", "--addr", "127.0.0.1:0", "--data", dir)
	if code != exitError {
		t.Fatalf("second emulator on the directory: exit %d, want 1\n%s", code, stderr)
	}
	hostPort := strings.TrimSuffix(strings.TrimPrefix(v.Endpoint, "http://"), "/")
	want := fmt.Sprintf("cfp: data directory %s is in use: process %d serves it on %s\nTry: --endpoint http://%s/ (with the emulator's key) instead of --local=%s\n", dir, os.Getpid(), hostPort, hostPort, dir)
	if stderr != want {
		t.Errorf("stderr =\n%s\nwant\n%s", stderr, want)
	}
}

// TestEmulator_Process runs `cfp emulator` as its own process, as a user does: other cfp runs
// import through its connection string, split a partition, merge it back and inject faults
// over its admin API, are refused the served directory with --local, and SIGINT stops it cleanly.
func TestEmulator_Process(t *testing.T) {
	t.Parallel()
	// testscript.Main (TestMain) put this test binary on PATH as "cfp".
	self, err := exec.LookPath("cfp")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	dataDir := filepath.Join(work, "data")
	cmd := exec.Command(self, "emulator", "--addr", "127.0.0.1:0", "--data", dataDir)
	cmd.Dir = work
	cmd.Env = []string{"NO_COLOR=1", "HOME=" + work, "PATH=" + os.Getenv("PATH"), "GOCOVERDIR=" + os.Getenv("GOCOVERDIR")}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	firstLine := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		firstLine <- line
		_, _ = io.Copy(io.Discard, r)
		done <- cmd.Wait()
	}()
	exited := false
	defer func() {
		if !exited {
			_ = cmd.Process.Kill()
			<-done
		}
	}()

	var v emulatorView
	select {
	case line := <-firstLine:
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("first stdout line is not the JSON view: %v: %q\nstderr:\n%s", err, line, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no output within 30s; stderr:\n%s", stderr.String())
	}
	if v.PID != cmd.Process.Pid || v.DataDir != dataDir || v.KeySource != "well-known" {
		t.Errorf("view = %+v", v)
	}
	hostPort := strings.TrimSuffix(strings.TrimPrefix(v.Endpoint, "http://"), "/")
	ctx := context.Background()
	orders, err := os.ReadFile(ordersFixture)
	if err != nil {
		t.Fatal(err)
	}

	code, _, errOut := runCLI(t, ctx, string(orders), "--connection-string", v.ConnectionString,
		"import", "-d", "shop", "-c", "orders", "--create", "--partition-key-path", "/customerId")
	if code != 0 || !strings.Contains(errOut, "imported 200, rejected 0,") {
		t.Fatalf("import through the connection string: exit %d\n%s", code, errOut)
	}

	code, _, errOut = runCLI(t, ctx, "", "--local="+dataDir, "import", "-d", "shop", "-c", "orders", os.DevNull)
	if code != exitError || !strings.Contains(errOut, "Try: --endpoint http://"+hostPort+"/ ") {
		t.Errorf("--local on the served directory: exit %d, want 1 with a hint to use --endpoint\n%s", code, errOut)
	}
	if n := strings.Count(errOut, "\n"); n != 2 {
		t.Errorf("--local on the served directory: %d lines on stderr, want the error and its hint:\n%s", n, errOut)
	}

	code, out, errOut := runCLI(t, ctx, "", "--connection-string", v.ConnectionString, "emulator", "split", "-d", "shop", "-c", "orders", "--range", "0", "-o", "json")
	if code != 0 {
		t.Fatalf("split: exit %d\n%s", code, errOut)
	}
	var split splitView
	if err := json.Unmarshal([]byte(out), &split); err != nil {
		t.Fatal(err)
	}
	if len(split.Children) != 2 || split.Children[0].MinInclusive != "" || split.Children[0].MaxExclusive != split.Children[1].MinInclusive {
		t.Errorf("split children = %+v, want two adjacent halves of range 0", split.Children)
	}
	for _, c := range split.Children {
		if len(c.Parents) != 1 || c.Parents[0] != "0" {
			t.Errorf("child %s has parents %v, want [0]", c.ID, c.Parents)
		}
	}

	// The admin API merges the children back into one partition over range 0's bounds.
	code, out, errOut = runCLI(t, ctx, "", "--connection-string", v.ConnectionString, "emulator", "merge", "-d", "shop", "-c", "orders",
		"--range", split.Children[0].ID, "--range", split.Children[1].ID, "-o", "json")
	if code != 0 {
		t.Fatalf("merge: exit %d\n%s", code, errOut)
	}
	var merge mergeView
	if err := json.Unmarshal([]byte(out), &merge); err != nil {
		t.Fatal(err)
	}
	if m := merge.Merged; m.MinInclusive != "" || m.MaxExclusive != split.Children[1].MaxExclusive || len(m.Parents) != 3 {
		t.Errorf("merged = %+v, want range 0's bounds with parents 0 and both children", m)
	}

	code, out, errOut = runCLI(t, ctx, "", "--endpoint", v.Endpoint, "emulator", "faults", "--status", "503", "--count", "1", "-o", "json", "--jq", ".fault_rules")
	if code != 0 || out != "1\n" {
		t.Errorf("faults: exit %d, stdout %q\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, ctx, "", "--endpoint", v.Endpoint, "emulator", "faults", "--clear", "-o", "json", "--jq", ".fault_rules")
	if code != 0 || out != "0\n" {
		t.Errorf("faults --clear: exit %d, stdout %q\n%s", code, out, errOut)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		exited = true
		if err != nil {
			t.Errorf("after SIGINT: %v, want exit 0\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30s after SIGINT")
	}
	if !strings.Contains(stderr.String(), "cfp: emulator stopped") {
		t.Errorf("stderr:\n%s", stderr.String())
	}

	// The directory is free again and holds what was imported, split partitions included.
	if n := len(countItems(t, dataDir, "shop", "orders")); n != 200 {
		t.Errorf("after the emulator stopped the directory holds %d orders, want 200", n)
	}
}

func TestCheckExposure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host               string
		wellKnown, allowed bool
		wantErr            bool
	}{
		{"localhost", true, false, false},
		{"127.0.0.1", true, false, false},
		{"::1", true, false, false},
		{"0.0.0.0", true, false, true},
		{"", true, false, true},
		{"192.168.1.10", true, false, true},
		{"0.0.0.0", true, true, false},
		{"0.0.0.0", false, false, false},
	}
	for _, tc := range tests {
		if err := checkExposure(tc.host, tc.wellKnown, tc.allowed); (err != nil) != tc.wantErr {
			t.Errorf("checkExposure(%q, wellKnown=%v, allowed=%v) = %v, want error %v", tc.host, tc.wellKnown, tc.allowed, err, tc.wantErr)
		}
	}
}

// TestEmulator_TLSAndPlainOnOnePort: the port answers https:// (with the certificate exported in
// the data directory) and http:// alike, cfp trusts the certificate with --ca-file, and
// `cfp emulator cert` prints the same certificate the gateway serves.
func TestEmulator_TLSAndPlainOnOnePort(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	e := startEmulator(t, false, "emulator", "--addr", "127.0.0.1:0", "--data", data)
	v := e.view(t)
	if want := strings.Replace(v.Endpoint, "http://", "https://", 1); v.TLSEndpoint != want {
		t.Errorf("tls_endpoint = %q, want %q", v.TLSEndpoint, want)
	}
	if v.CertFile != filepath.Join(data, "emulator.pem") {
		t.Errorf("cert_file = %q, want emulator.pem in the data directory", v.CertFile)
	}
	code, stdout, stderr := runCLI(t, context.Background(), "", "emulator", "cert", "--data", data, "--path")
	if code != 0 || strings.TrimSpace(stdout) != v.CertFile {
		t.Fatalf("emulator cert --path: exit %d, %q\n%s", code, stdout, stderr)
	}
	code, pemOut, stderr := runCLI(t, context.Background(), "", "emulator", "cert", "--data", data)
	if code != 0 || !strings.HasPrefix(pemOut, "-----BEGIN CERTIFICATE-----") {
		t.Fatalf("emulator cert: exit %d, %q\n%s", code, pemOut, stderr)
	}

	code, _, stderr = runCLI(t, context.Background(), `{"id":"a"}`+"\n", "--endpoint", v.Endpoint, "import", "-d", "db", "-c", "c", "--create")
	if code != 0 {
		t.Fatalf("import over http: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runCLI(t, context.Background(), `{"id":"b"}`+"\n", "--endpoint", v.TLSEndpoint, "--ca-file", v.CertFile, "import", "-d", "db", "-c", "c")
	if code != 0 || !strings.Contains(stderr, "imported 1, rejected 0,") {
		t.Fatalf("import over https with --ca-file: exit %d\n%s", code, stderr)
	}
	// The admin commands trust --ca-file too.
	code, stdout, stderr = runCLI(t, context.Background(), "", "--endpoint", v.TLSEndpoint, "--ca-file", v.CertFile,
		"emulator", "split", "-d", "db", "-c", "c", "--range", "0", "-o", "json", "--jq", ".children | length")
	if code != 0 || strings.TrimSpace(stdout) != "2" {
		t.Errorf("emulator split over https with --ca-file: exit %d, %q\n%s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, context.Background(), `{"id":"c"}`+"\n", "--endpoint", v.TLSEndpoint, "import", "-d", "db", "-c", "c")
	if code == 0 || !strings.Contains(stderr, "certificate") {
		t.Errorf("import over https without trusting the certificate: exit %d, want a certificate error\n%s", code, stderr)
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(pemOut))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get(v.TLSEndpoint + "_explorer/emulator.pem")
	if err != nil {
		t.Fatal(err)
	}
	served, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(served) != pemOut {
		t.Errorf("GET /_explorer/emulator.pem: %d %q, want the exported certificate", resp.StatusCode, served)
	}
}

// TestEmulator_WellKnownKeyRefusalChecksTheDecodedKeyAndTheBoundAddress checks the refusal to
// serve a non-loopback address with the well-known key where the flags do not show it: the key
// in a key file wrapped over lines (base64 without -w0), and a *.localhost name that resolves to
// another interface (a listen hook stands in for the resolver).
func TestEmulator_WellKnownKeyRefusalChecksTheDecodedKeyAndTheBoundAddress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wrapped := filepath.Join(dir, "wrapped.key")
	if err := os.WriteFile(wrapped, []byte(auth.WellKnownKey[:40]+"\n"+auth.WellKnownKey[40:]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code, _, stderr := runCLI(t, ctx, "", "emulator", "--addr", "0.0.0.0:0", "--data", filepath.Join(dir, "d1"), "--key-file", wrapped)
	if code != exitUsage || !strings.Contains(stderr, "refusing to serve") {
		t.Errorf("the well-known key wrapped in a key file on 0.0.0.0: exit %d, want %d refusing\n%s", code, exitUsage, stderr)
	}

	ios, _, _, errOut := render.Test()
	f := &factory{IO: ios, Global: &globalOptions{}, Getenv: func(string) string { return "" }, Now: time.Now}
	f.Log = f.newLogger()
	served := false
	opts := &emulatorOptions{f: f, Data: filepath.Join(dir, "d2"), Addr: "lan.localhost:0", Partitions: 1, MaxOrderBy: 10,
		listen: func(network, _ string) (net.Listener, error) { return net.Listen("tcp4", "0.0.0.0:0") },
		ready:  func(emulatorView) { served = true; cancel() }}
	err := runEmulator(ctx, opts)
	var ue *UsageError
	if served || !errors.As(err, &ue) || !strings.Contains(err.Error(), "refusing to serve lan.localhost:0, bound to 0.0.0.0:") {
		t.Errorf("a .localhost name bound to 0.0.0.0 with the well-known key: served %v, err %v\n%s", served, err, errOut.String())
	}
}

// TestEmulatorCert_ReplacesAnOlderUnconstrainedCertificate runs `cfp emulator cert` on a data
// directory of an older cfp (an unconstrained self-signed CA, its key beside it): the pair is
// replaced, stderr says so and what to do, and stdout is only the new path.
func TestEmulatorCert_ReplacesAnOlderUnconstrainedCertificate(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, DNSNames: []string{"localhost"}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kder, _ := x509.MarshalECPrivateKey(key)
	if err := os.WriteFile(filepath.Join(data, "emulator.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "emulator-key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, context.Background(), "", "emulator", "cert", "--data", data, "--path")
	if code != 0 || strings.TrimSpace(stdout) != filepath.Join(data, "emulator.pem") {
		t.Fatalf("emulator cert --path: exit %d, %q\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "cfp: warning: replaced the TLS certificate of "+data) || !strings.Contains(stderr, "trust the new emulator.pem") {
		t.Errorf("stderr does not report the replacement:\n%s", stderr)
	}
	if _, _, stderr := runCLI(t, context.Background(), "", "emulator", "cert", "--data", data, "--path"); stderr != "" {
		t.Errorf("second run: stderr %q, want nothing (the new certificate is kept)", stderr)
	}
}
