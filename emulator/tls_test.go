package emulator_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
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
	a, replaced, err := emulator.LoadOrCreateCert(dir)
	if err != nil || replaced {
		t.Fatalf("first LoadOrCreateCert: replaced %v, %v", replaced, err)
	}
	b, replaced, err := emulator.LoadOrCreateCert(dir)
	if err != nil || replaced {
		t.Fatalf("second LoadOrCreateCert: replaced %v, %v", replaced, err)
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

// TestLoadOrCreateCert_NoKeyInTheDataDirectoryCanMintCertificates plays someone who can read
// the data directory: with every private key in it, they sign a certificate for another host
// under the certificate clients trust (emulator.pem). No client may accept it. The key file is
// readable by its owner only, and what clients trust is a CA constrained to loopback names.
func TestLoadOrCreateCert_NoKeyInTheDataDirectoryCanMintCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, _, err := emulator.LoadOrCreateCert(dir); err != nil {
		t.Fatal(err)
	}
	trusted, err := os.ReadFile(emulator.CertPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(trusted) {
		t.Fatal("emulator.pem holds no certificate")
	}
	blk, _ := pem.Decode(trusted)
	anchor, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if anchor.IsCA && (!anchor.PermittedDNSDomainsCritical || !slices.Equal(anchor.PermittedDNSDomains, []string{"localhost"}) || len(anchor.PermittedIPRanges) == 0) {
		t.Errorf("emulator.pem is a CA not constrained to loopback names: DNS %v (critical %v), IPs %v",
			anchor.PermittedDNSDomains, anchor.PermittedDNSDomainsCritical, anchor.PermittedIPRanges)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	keys := 0
	for _, ent := range entries {
		b, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for rest := b; ; {
			var p *pem.Block
			if p, rest = pem.Decode(rest); p == nil {
				break
			}
			key, err := x509.ParseECPrivateKey(p.Bytes)
			if err != nil {
				continue
			}
			keys++
			if fi, _ := os.Stat(filepath.Join(dir, ent.Name())); fi.Mode().Perm() != 0o600 {
				t.Errorf("%s holds a private key and has mode %v, want 0600", ent.Name(), fi.Mode().Perm())
			}
			for _, host := range []string{"bank.example", "localhost"} {
				tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
					NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
					KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
				// Issued in the anchor's name, signed with the key found (Go checks that a parent's
				// key matches the signer, so the parent carries the key found).
				parent := *anchor
				parent.PublicKey = &key.PublicKey
				der, err := x509.CreateCertificate(rand.Reader, tmpl, &parent, &key.PublicKey, key)
				if err != nil {
					t.Fatal(err)
				}
				minted, _ := x509.ParseCertificate(der)
				if _, err := minted.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err == nil {
					t.Errorf("a certificate for %s signed with the key in %s is trusted by clients of emulator.pem", host, ent.Name())
				}
			}
		}
	}
	if keys == 0 {
		t.Error("no private key in the data directory: the emulator cannot serve TLS")
	}
}

// TestLoadOrCreateCert_ReplacesAnUnconstrainedCA opens a data directory of an older cfp, whose
// emulator.pem is a self-signed CA without name constraints with its key beside it: the pair is
// replaced (and reported replaced), and the old key is gone.
func TestLoadOrCreateCert_ReplacesAnUnconstrainedCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, DNSNames: []string{"localhost"}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kder, _ := x509.MarshalECPrivateKey(key)
	oldCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	oldKey := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	if err := os.WriteFile(emulator.CertPath(dir), oldCert, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "emulator-key.pem"), oldKey, 0o644); err != nil {
		t.Fatal(err)
	}
	c, replaced, err := emulator.LoadOrCreateCert(dir)
	if err != nil || !replaced {
		t.Fatalf("LoadOrCreateCert on an old certificate: replaced %v, %v; want replaced", replaced, err)
	}
	if leaf, _ := x509.ParseCertificate(c.Certificate[0]); leaf == nil || leaf.IsCA {
		t.Error("the served certificate has CA rights")
	}
	now, _ := os.ReadFile(emulator.CertPath(dir))
	keyNow, _ := os.ReadFile(filepath.Join(dir, "emulator-key.pem"))
	if string(now) == string(oldCert) || strings.Contains(string(keyNow), string(oldKey)) {
		t.Error("the old certificate or its key is still in the data directory")
	}
	if _, replaced, err := emulator.LoadOrCreateCert(dir); err != nil || replaced {
		t.Errorf("LoadOrCreateCert after the upgrade: replaced %v, %v; want the new one kept", replaced, err)
	}
}
