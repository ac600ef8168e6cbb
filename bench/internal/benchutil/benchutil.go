// Package benchutil holds what the whole-command benchmarks in bench/ share: azcosmos clients
// of the emulator (over a socket or in process) with its well-known key, the bench database and
// container, and the generated documents they read. Building cfp and serving a `cfp emulator`
// child are in internal/testproc, which the end-to-end tests share too.
package benchutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
)

// Database and Container hold the generated documents, partitioned on /pk.
const (
	Database  = "bench"
	Container = "docs"
)

// Client returns a client of the emulator serving at endpoint, with the well-known key.
func Client(endpoint string) (*azcosmos.Client, error) {
	return client(endpoint, nil)
}

// InProcessClient returns a client of e served in this process, without a socket.
func InProcessClient(e *emulator.Emulator) (*azcosmos.Client, error) {
	return client("http://bench.localhost/", &azcosmos.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: emulator.Transport{Handler: e.Handler()}},
	})
}

func client(endpoint string, opts *azcosmos.ClientOptions) (*azcosmos.Client, error) {
	cred, err := azcosmos.NewKeyCredential(auth.WellKnownKey)
	if err != nil {
		return nil, err
	}
	return azcosmos.NewClientWithKey(endpoint, cred, opts)
}

// Setup creates the database and the container unless they exist; existed reports that the
// database was there already (a data directory kept from an earlier run).
func Setup(ctx context.Context, client *azcosmos.Client) (cc *azcosmos.ContainerClient, existed bool, err error) {
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: Database}, nil); isConflict(err) {
		existed = true
	} else if err != nil {
		return nil, false, fmt.Errorf("create database: %w", err)
	}
	db, err := client.NewDatabase(Database)
	if err != nil {
		return nil, false, err
	}
	props := azcosmos.ContainerProperties{ID: Container, PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{
		Kind: azcosmos.PartitionKeyKindHash, Paths: []string{"/pk"}, Version: 2}}
	if _, err := db.CreateContainer(ctx, props, nil); err != nil && !isConflict(err) {
		return nil, false, fmt.Errorf("create container: %w", err)
	}
	cc, err = client.NewContainer(Database, Container)
	return cc, existed, err
}

func isConflict(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusConflict
}

// propsOverhead is about the size of a generated document's user properties other than its
// payload: the id, pk and n properties and the JSON around them.
const propsOverhead = 60

// Payload returns the payload property that makes a generated document's user properties
// (everything but the system properties _rid, _ts, _etag, _lsn, ...) about body bytes long.
func Payload(body int) string { return strings.Repeat("x", max(body-propsOverhead, 1)) }

// GenerateOptions says what Generate writes.
type GenerateOptions struct {
	Docs    int    // documents d0 .. d<Docs-1>
	Writers int    // concurrent upserts
	Payload string // the payload property of every document
	// Progress, when set, receives a line every 100,000 documents.
	Progress io.Writer
}

// Generate upserts the documents {id: d<i>, pk: p<i mod 1000>, n: i, payload} with concurrent
// writers (the emulator commits concurrent writes in shared transactions).
func Generate(ctx context.Context, cc *azcosmos.ContainerClient, opts GenerateOptions) error {
	writers := max(opts.Writers, 1)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= opts.Docs {
					return
				}
				pk := "p" + strconv.Itoa(i%1000)
				body, _ := json.Marshal(map[string]any{"id": "d" + strconv.Itoa(i), "pk": pk, "n": i, "payload": opts.Payload})
				if _, err := cc.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), body, nil); err != nil {
					errs <- fmt.Errorf("upsert d%d: %w", i, err)
					return
				}
				if opts.Progress != nil && i > 0 && i%100_000 == 0 {
					fmt.Fprintf(opts.Progress, "  %d documents\n", i)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
