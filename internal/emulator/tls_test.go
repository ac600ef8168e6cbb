package emulator_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/internal/emulator"
	"github.com/cfp-dev/cfp/internal/emulator/auth"
)

// serveTLSOrPlain serves e on a loopback port that answers TLS and plain HTTP, and returns the
// port's address and a pool that trusts the emulator's certificate.
func serveTLSOrPlain(t *testing.T, e *emulator.Emulator) (string, *x509.CertPool) {
	t.Helper()
	cfg, err := e.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx, emulator.NewTLSOrPlainListener(ln, cfg)) }()
	t.Cleanup(func() { cancel(); <-done })
	pemBytes, err := os.ReadFile(emulator.CertPath(e.Dir()))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("emulator.pem holds no certificate")
	}
	return ln.Addr().String(), pool
}

func TestTLSOrPlain_SDKOverTLSAndPlainHTTPOnOnePort(t *testing.T) {
	t.Parallel()
	e := openEmu(t, emulator.Options{})
	addr, pool := serveTLSOrPlain(t, e)
	cred, _ := azcosmos.NewKeyCredential(auth.WellKnownKey)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := azcosmos.NewClientWithKey("https://"+addr+"/", cred, &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: tr, Timeout: 10 * time.Second},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateDatabase(context.Background(), azcosmos.DatabaseProperties{ID: "tls"}, nil); err != nil {
		t.Fatalf("create database over TLS: %v", err)
	}

	// The same port, plain HTTP, serves the certificate as the official emulator does.
	resp, err := http.Get("http://" + addr + "/_explorer/emulator.pem")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want, _ := os.ReadFile(emulator.CertPath(e.Dir()))
	if resp.StatusCode != http.StatusOK || string(body) != string(want) {
		t.Errorf("GET /_explorer/emulator.pem over http: %d %q", resp.StatusCode, body)
	}

	// Over TLS the account advertises https endpoints (the SDK routes to them).
	for _, scheme := range []string{"https", "http"} {
		req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+"/", nil)
		if err := emulator.SignRequest(req, ""); err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := `"databaseAccountEndpoint":"` + scheme + `://` + addr + `/"`; !strings.Contains(string(body), want) {
			t.Errorf("account read over %s: %s, want %s", scheme, body, want)
		}
	}

	// A client that never speaks holds no other client up.
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	db, _ := c.NewDatabase("tls")
	if _, err := db.Read(context.Background(), nil); err != nil {
		t.Errorf("read database over TLS beside an idle connection: %v", err)
	}
}

func TestLoadOrCreateCert_KeptInTheDataDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := emulator.LoadOrCreateCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := emulator.LoadOrCreateCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Certificate[0]) != string(b.Certificate[0]) {
		t.Error("a second LoadOrCreateCert generated a new certificate instead of keeping the first")
	}
	leaf, err := x509.ParseCertificate(a.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"localhost", "127.0.0.1", "::1"} {
		if err := leaf.VerifyHostname(host); err != nil {
			t.Errorf("certificate does not cover %s: %v", host, err)
		}
	}
}
