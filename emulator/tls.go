package emulator

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// File names of the emulator's TLS certificate inside a data directory. CertFileName is the one
// clients trust (the official emulator serves the same file as /_explorer/emulator.pem): a CA
// certificate constrained to loopback names, whose private key was discarded once it had signed
// the served certificate. keyFileName holds the served certificate chain and its private key,
// readable by its owner only.
const (
	CertFileName = "emulator.pem"
	keyFileName  = "emulator-key.pem"
)

// certValidity is how long a generated certificate is valid.
const certValidity = 10 * 365 * 24 * time.Hour

// CertPath returns the path of the emulator's certificate in the data directory dir.
func CertPath(dir string) string { return filepath.Join(dir, CertFileName) }

// LoadOrCreateCert returns the TLS certificate kept in the data directory dir, generating it on
// first use, and reports whether it replaced an earlier one. What is generated: a CA certificate
// constrained (x509 name constraints, critical) to localhost and its subdomains, 127.0.0.0/8 and
// ::1, written as CertFileName for clients to trust, and an ECDSA P-256 certificate it signs for
// localhost, 127.0.0.1 and ::1, which the emulator serves; the CA's private key is never written,
// so nobody who reads the data directory can make clients trust another certificate. The
// certificate of an older cfp, a self-signed CA without constraints whose key sat in the data
// directory, is replaced (the caller tells the user: clients must trust the new emulator.pem).
// The directory need not be held: `cfp emulator cert` calls it beside a running emulator.
func LoadOrCreateCert(dir string) (cert tls.Certificate, replaced bool, err error) {
	certPath, keyPath := CertPath(dir), filepath.Join(dir, keyFileName)
	keyPEM, kerr := os.ReadFile(keyPath)
	certPEM, cerr := os.ReadFile(certPath)
	switch {
	case kerr == nil && cerr == nil:
		if c, ok := currentCert(keyPEM, certPEM); ok {
			if fi, err := os.Stat(keyPath); err == nil && fi.Mode().Perm()&0o077 != 0 {
				_ = os.Chmod(keyPath, 0o600)
			}
			return c, false, nil
		}
		replaced = true
	case kerr != nil && !errors.Is(kerr, os.ErrNotExist):
		return tls.Certificate{}, false, fmt.Errorf("load emulator certificate key %s: %w", keyPath, kerr)
	case cerr != nil && !errors.Is(cerr, os.ErrNotExist):
		return tls.Certificate{}, false, fmt.Errorf("load emulator certificate %s: %w", certPath, cerr)
	case kerr == nil || cerr == nil:
		replaced = true // half of a pair: replaced whole
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return tls.Certificate{}, false, fmt.Errorf("create data directory: %w", err)
	}
	caPEM, servedPEM, err := newLoopbackCert(time.Now())
	if err != nil {
		return tls.Certificate{}, false, err
	}
	// The key file goes first and the certificate last, each by rename, so that a reader that
	// finds the certificate finds its key too.
	if err := writeFileAtomic(keyPath, servedPEM, 0o600); err != nil {
		return tls.Certificate{}, false, err
	}
	if err := writeFileAtomic(certPath, caPEM, 0o644); err != nil {
		return tls.Certificate{}, false, err
	}
	c, err := tls.X509KeyPair(servedPEM, servedPEM)
	return c, replaced, err
}

// currentCert returns the served certificate in keyPEM when it is this cfp's kind: a chain of a
// certificate without CA rights and the constrained CA that certPEM holds.
func currentCert(keyPEM, certPEM []byte) (tls.Certificate, bool) {
	c, err := tls.X509KeyPair(keyPEM, keyPEM)
	if err != nil || len(c.Certificate) != 2 {
		return tls.Certificate{}, false
	}
	blk, _ := pem.Decode(certPEM)
	if blk == nil || !bytes.Equal(blk.Bytes, c.Certificate[1]) {
		return tls.Certificate{}, false
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil || leaf.IsCA {
		return tls.Certificate{}, false
	}
	ca, err := x509.ParseCertificate(c.Certificate[1])
	if err != nil || !ca.PermittedDNSDomainsCritical || len(ca.PermittedDNSDomains) == 0 {
		return tls.Certificate{}, false
	}
	return c, true
}

func writeFileAtomic(path string, b []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(perm)
	if err == nil {
		_, err = tmp.Write(b)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// loopbackNames are the names the served certificate covers and the CA may sign for.
var (
	loopbackDNS = []string{"localhost"}
	loopbackIPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	loopbackNet = []*net.IPNet{
		{IP: net.IPv4(127, 0, 0, 0).To4(), Mask: net.CIDRMask(8, 32)},
		{IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)},
	}
)

// newLoopbackCert returns the PEM of a new CA constrained to loopback names (caPEM) and the PEM
// of a certificate it signed for the loopback names followed by the CA and the certificate's
// private key (servedPEM). The CA's key is dropped.
func newLoopbackCert(now time.Time) (caPEM, servedPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate emulator CA key: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate emulator key: %w", err)
	}
	serial := func() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) }
	caSerial, err := serial()
	if err != nil {
		return nil, nil, fmt.Errorf("generate emulator certificate serial: %w", err)
	}
	leafSerial, err := serial()
	if err != nil {
		return nil, nil, fmt.Errorf("generate emulator certificate serial: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:                caSerial,
		Subject:                     pkix.Name{CommonName: "cfp emulator loopback CA", Organization: []string{"cfp emulator"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(certValidity),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         loopbackDNS,
		PermittedIPRanges:           loopbackNet,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create emulator CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, fmt.Errorf("create emulator CA certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          leafSerial,
		Subject:               pkix.Name{CommonName: "localhost", Organization: []string{"cfp emulator"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              loopbackDNS,
		IPAddresses:           loopbackIPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create emulator certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode emulator key: %w", err)
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	servedPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), caPEM...)
	servedPEM = append(servedPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
	return caPEM, servedPEM, nil
}

// NewTLSOrPlainListener wraps ln so that each accepted connection is served as TLS (with cfg)
// when its first byte is a TLS handshake record (0x16), and as plain HTTP otherwise: one port
// answers both https:// and http://. The protocol is chosen on the connection's first Read, in
// the connection's own goroutine and never in Accept, within at most SniffTimeout (and the
// server's own read deadline) for the first byte and the TLS handshake; closing a connection
// never waits for its decision. A silent client is handled (and counted, and timed out) like any
// other new connection and holds no one else up. Serve tells the handler which connections
// speak TLS (the account's endpoints are then https).
func NewTLSOrPlainListener(ln net.Listener, cfg *tls.Config) net.Listener {
	return &sniffListener{Listener: ln, cfg: cfg, timeout: SniffTimeout}
}

// SniffTimeout bounds the wait for a connection's first byte and its TLS handshake
// (NewTLSOrPlainListener).
const SniffTimeout = 5 * time.Second

type sniffListener struct {
	net.Listener
	cfg     *tls.Config
	timeout time.Duration
}

// Accept returns the next connection, its protocol still to be told by its first byte.
func (l *sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, cfg: l.cfg, timeout: l.timeout}, nil
}

// sniffConn is an accepted connection that becomes TLS or stays plain on its first Read. Reads
// and writes may then run concurrently, as on a *tls.Conn. Close and Abort never wait for the
// decision: they close the socket, which ends a Read blocked on it.
type sniffConn struct {
	net.Conn
	cfg     *tls.Config
	timeout time.Duration

	deciding sync.Mutex // serialises decide; held while the first byte and handshake are awaited

	mu           sync.Mutex // guards the fields below; never held while blocking
	decided      bool
	rw           net.Conn // the TLS conn or the peeked plain conn, once decided
	isTLS        bool
	readDeadline time.Time // the last deadline the server set, restored after the sniff
}

// SetReadDeadline sets the socket's read deadline and remembers it, for decide to restore.
func (c *sniffConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDeadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines (see SetReadDeadline).
func (c *sniffConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDeadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

// decide reads the first byte and picks the protocol, completing a TLS handshake, within
// c.timeout (and the caller's deadline, when sooner).
func (c *sniffConn) decide() (net.Conn, error) {
	c.deciding.Lock()
	defer c.deciding.Unlock()
	c.mu.Lock()
	rw, decided, outer := c.rw, c.decided, c.readDeadline
	c.mu.Unlock()
	if decided {
		return rw, nil
	}
	limit := time.Now().Add(c.timeout)
	if !outer.IsZero() && outer.Before(limit) {
		limit = outer
	}
	if err := c.Conn.SetDeadline(limit); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(c.Conn, 16)
	first, err := br.Peek(1)
	if err != nil {
		return nil, err
	}
	rw = &peekedConn{Conn: c.Conn, r: br}
	isTLS := first[0] == 0x16
	if isTLS {
		tc := tls.Server(rw, c.cfg)
		if err := tc.Handshake(); err != nil {
			_ = c.Conn.Close()
			return nil, err
		}
		rw = tc
	}
	// Back to the server's deadlines: none for writes, its own for reads.
	if err := c.Conn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if err := c.Conn.SetReadDeadline(c.readDeadline); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	c.rw, c.isTLS, c.decided = rw, isTLS, true
	c.mu.Unlock()
	return rw, nil
}

func (c *sniffConn) Read(p []byte) (int, error) {
	rw, err := c.decide()
	if err != nil {
		return 0, err
	}
	return rw.Read(p)
}

func (c *sniffConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	rw := c.rw
	c.mu.Unlock()
	if rw == nil {
		// Nothing was read yet (a server writes only after reading): answer in plain text.
		return c.Conn.Write(p)
	}
	return rw.Write(p)
}

// Close closes the connection (with a TLS close_notify once TLS was decided).
func (c *sniffConn) Close() error {
	c.mu.Lock()
	rw := c.rw
	c.mu.Unlock()
	if rw != nil {
		return rw.Close()
	}
	return c.Conn.Close()
}

// Abort closes the socket at once, without a TLS close_notify that a client not reading could
// hold up.
func (c *sniffConn) Abort() error { return c.Conn.Close() }

// IsTLS reports whether the connection turned out to speak TLS.
func (c *sniffConn) IsTLS() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.isTLS
}

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// connKey is the request context key of the served connection (Serve's ConnContext).
type connKey struct{}

// requestIsTLS reports whether r arrived over TLS, directly or through NewTLSOrPlainListener.
func requestIsTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	c, ok := r.Context().Value(connKey{}).(interface{ IsTLS() bool })
	return ok && c.IsTLS()
}

// TLSConfig returns the server TLS configuration for the data directory's certificate
// (LoadOrCreateCert), for NewTLSOrPlainListener.
func (e *Emulator) TLSConfig() (*tls.Config, error) {
	c, err := e.certificate()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}

// certificate loads (once) the data directory's certificate.
func (e *Emulator) certificate() (tls.Certificate, error) {
	e.certMu.Lock()
	defer e.certMu.Unlock()
	if e.cert == nil {
		c, replaced, err := LoadOrCreateCert(e.opts.Dir)
		if err != nil {
			return tls.Certificate{}, err
		}
		if replaced {
			e.log.Warn("replaced the data directory's TLS certificate by one constrained to loopback names: TLS clients must trust the new one (and should stop trusting the old)", "cert", CertPath(e.opts.Dir))
		}
		e.cert = &c
	}
	return *e.cert, nil
}

// serveCertPEM answers GET /_explorer/emulator.pem, unauthenticated as on the official
// emulator: the certificate clients should trust (CertFileName, the served chain's CA), PEM
// encoded.
func (e *Emulator) serveCertPEM(w http.ResponseWriter) {
	c, err := e.certificate()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error(), 0)
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Header().Del(hdrCharge)
	_, _ = w.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[len(c.Certificate)-1]}))
}
