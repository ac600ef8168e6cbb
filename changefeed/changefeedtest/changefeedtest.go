// Package changefeedtest runs cfp's Cosmos DB emulator inside a Go test, as net/http/httptest
// runs an HTTP server: New starts it on a loopback port with a fresh data directory and returns
// an *azcosmos.Client on it, and the test drives the partition layout and the failures its code
// must survive, which the real service does not let a test choose: Split and Merge a physical
// partition mid-test (the change feed then answers 410 "partition gone" for the old range, as
// the service does), and Fail some requests with 429, 503, 500, 410 or latency. Everything is
// released with t.Cleanup.
//
//	srv := changefeedtest.New(t, nil)
//	orders := srv.Container(t, "shop", "orders", "/customer")
//	... start the processor under test on srv.Client ...
//	srv.Split(t, "shop", "orders", srv.Ranges(t, "shop", "orders")[0])
//	srv.Fail(t, emulator.FaultRule{Status: 429, Count: 3, ChangeFeedOnly: true})
//
// The emulator serves the gateway subset of docs/protocol-gateway.md (documents, queries, the
// change feed in both modes, batches, stored procedures, partition splits and merges); it is
// pure Go and builds with CGO_ENABLED=0. The package is kept out of the changefeed package's own
// dependencies: only tests import it.
package changefeedtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/changefeed"
	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
)

// Options configure New. The zero value (or nil) serves plain HTTP with the well-known
// emulator key, and gives each new container the partitions the service would.
type Options struct {
	// Partitions forces the number of physical partitions of every new container; 0 gives each
	// the partitions the service would (one for a small container, one per 10,000 RU/s of its
	// throughput). Split and Merge change a container's layout afterwards.
	Partitions int
	// TLS serves HTTPS with a certificate the returned client trusts (for code that refuses
	// plain HTTP endpoints). azcosmos accepts both.
	TLS bool
	// Emulator holds further emulator options (Now for a test clock, ScriptTimeout, ...). Dir,
	// Key and Partitions are set by New.
	Emulator emulator.Options
	// ClientOptions are the azcosmos client's options; New sets their Transport, adds the
	// policies changefeed.ClientOptions adds, and sets a short retry delay unless Retry is set.
	ClientOptions *azcosmos.ClientOptions
}

// Server is an emulator serving one test.
type Server struct {
	// Client is an azcosmos client on the emulator, signed with Key, with
	// changefeed.ClientOptions: ready for a changefeed.Processor.
	Client *azcosmos.Client
	// Endpoint is the emulator's URL (http://127.0.0.1:port/ or https://...), for other clients.
	Endpoint string
	// Key is the account key (the well-known emulator key).
	Key string
	// Emulator is the emulator itself, for what the helpers do not cover.
	Emulator *emulator.Emulator
	// HTTPClient reaches Endpoint (it trusts the certificate with Options.TLS).
	HTTPClient *http.Client
}

// New starts an emulator for t on a loopback port and returns it with a client. The emulator,
// its server and its client are closed when t ends.
func New(t testing.TB, opts *Options) *Server {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	eo := opts.Emulator
	eo.Dir = t.TempDir()
	eo.Key = auth.WellKnownKey
	if opts.Partitions > 0 {
		eo.Partitions = opts.Partitions
	}
	e, err := emulator.Open(eo)
	if err != nil {
		t.Fatalf("changefeedtest: open the emulator: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	var srv *httptest.Server
	if opts.TLS {
		srv = httptest.NewTLSServer(e.Handler())
	} else {
		srv = httptest.NewServer(e.Handler())
	}
	t.Cleanup(srv.Close)

	cred, err := azcosmos.NewKeyCredential(auth.WellKnownKey)
	if err != nil {
		t.Fatalf("changefeedtest: %v", err)
	}
	co := azcosmos.ClientOptions{}
	if opts.ClientOptions != nil {
		co = *opts.ClientOptions
	}
	if co.Retry.RetryDelay == 0 && co.Retry.MaxRetryDelay == 0 {
		co.Retry = policy.RetryOptions{RetryDelay: time.Millisecond, MaxRetryDelay: 50 * time.Millisecond}
	}
	// The client reaches the server's socket under a host name of its own: azcosmos caches
	// container definitions and partition layouts per endpoint for the whole process, and a
	// later test's server can get an earlier one's port.
	tr := srv.Client().Transport.(*http.Transport).Clone()
	addr := srv.Listener.Addr().String()
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	scheme := "http"
	if opts.TLS {
		scheme, tr.TLSClientConfig.ServerName = "https", "127.0.0.1"
	}
	t.Cleanup(tr.CloseIdleConnections)
	co.Transport = &http.Client{Transport: tr}
	endpoint := fmt.Sprintf("%s://emulator-%d-%d.changefeedtest/", scheme, os.Getpid(), endpointSeq.Add(1))
	client, err := azcosmos.NewClientWithKey(endpoint, cred, changefeed.ClientOptions(&co))
	if err != nil {
		t.Fatalf("changefeedtest: new client: %v", err)
	}
	t.Cleanup(client.Close)
	return &Server{Client: client, Endpoint: srv.URL + "/", Key: auth.WellKnownKey, Emulator: e, HTTPClient: srv.Client()}
}

// endpointSeq numbers the clients' endpoints.
var endpointSeq atomic.Int64

// Container creates database db (if it does not exist) and container coll partitioned on
// pkPath, and returns its client.
func (s *Server) Container(t testing.TB, db, coll, pkPath string) *azcosmos.ContainerClient {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: db}, nil); err != nil && !isConflict(err) {
		t.Fatalf("changefeedtest: create database %s: %v", db, err)
	}
	d, err := s.Client.NewDatabase(db)
	if err != nil {
		t.Fatalf("changefeedtest: %v", err)
	}
	props := azcosmos.ContainerProperties{ID: coll, PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pkPath}}}
	if _, err := d.CreateContainer(ctx, props, nil); err != nil {
		t.Fatalf("changefeedtest: create container %s/%s: %v", db, coll, err)
	}
	cc, err := d.NewContainer(coll)
	if err != nil {
		t.Fatalf("changefeedtest: %v", err)
	}
	return cc
}

func isConflict(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusConflict
}

// Ranges returns the ids of the live physical partitions of db/coll, in the order of their key
// ranges.
func (s *Server) Ranges(t testing.TB, db, coll string) []string {
	t.Helper()
	st, err := s.Emulator.Status()
	if err != nil {
		t.Fatalf("changefeedtest: status: %v", err)
	}
	for _, d := range st.Databases {
		if d.ID != db {
			continue
		}
		for _, c := range d.Containers {
			if c.ID != coll {
				continue
			}
			ids := make([]string, len(c.Ranges))
			for i, r := range c.Ranges {
				ids[i] = r.ID
			}
			return ids
		}
	}
	t.Fatalf("changefeedtest: no container %s/%s", db, coll)
	return nil
}

// Split splits the live partition rangeID of db/coll in two at the middle of its key range and
// returns the two new ranges' ids. Readers of rangeID then get 410 "partition gone" and move to
// the children, as with a split on the service.
func (s *Server) Split(t testing.TB, db, coll, rangeID string) []string {
	t.Helper()
	children, err := s.Emulator.Split(db, coll, rangeID)
	if err != nil {
		t.Fatalf("changefeedtest: %v", err)
	}
	return children
}

// Merge merges adjacent live partitions of db/coll (two or more) into one and returns its id.
func (s *Server) Merge(t testing.TB, db, coll string, rangeIDs ...string) string {
	t.Helper()
	merged, err := s.Emulator.Merge(db, coll, slices.Clone(rangeIDs))
	if err != nil {
		t.Fatalf("changefeedtest: %v", err)
	}
	return merged
}

// Fail makes the emulator fail or slow down the requests rule selects (see emulator.FaultRule:
// a status of 429, 500, 503, 410 or 400, a latency, a count, a fraction, change-feed reads only).
// Rules apply in the order added; every rule is removed when t ends, or by ClearFaults.
func (s *Server) Fail(t testing.TB, rule emulator.FaultRule) {
	t.Helper()
	if err := s.Emulator.InjectFaults(rule); err != nil {
		t.Fatalf("changefeedtest: %v", err)
	}
	t.Cleanup(s.Emulator.ClearFaults)
}

// ClearFaults removes every fault rule.
func (s *Server) ClearFaults() { s.Emulator.ClearFaults() }
