// Command processor runs one change feed processor host with the public changefeed package,
// against any Cosmos DB endpoint; by default a `cfp emulator` on localhost:8081 with the
// emulator's well-known key. It prints every change of the monitored container as one JSON line
// on stdout and lifecycle events on stderr, and stops cleanly on Ctrl-C.
//
//	cfp emulator &                       # serves http://localhost:8081/
//	go run ./examples/processor -create  # creates shop, orders and leases, then processes
//	go run ./examples/processor -instance second   # a second host: the leases balance
//	echo '{"id":"o1","total":12}' | COSMOS_KEY=<the emulator key> \
//	  cfp import --endpoint http://localhost:8081/ -d shop -c orders   # a change to process
//
// The key comes from COSMOS_KEY when it is set.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/changefeed"
)

// emulatorKey is the well-known key of the Cosmos DB emulators, `cfp emulator` included.
const emulatorKey = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "processor:", err)
		os.Exit(1)
	}
}

func run() error {
	host, _ := os.Hostname()
	endpoint := flag.String("endpoint", "http://localhost:8081/", "account endpoint")
	database := flag.String("database", "shop", "database of the monitored container")
	container := flag.String("container", "orders", "monitored container")
	leaseContainer := flag.String("leases", "leases", "lease container, in the same database")
	processor := flag.String("processor", "example", "processor name (the lease prefix)")
	instance := flag.String("instance", fmt.Sprintf("%s-%d", host, os.Getpid()), "this host's name")
	beginning := flag.Bool("beginning", false, "start leases without a continuation from the beginning (default: now)")
	create := flag.Bool("create", false, "create the database and containers if they are missing")
	flag.Parse()

	key := os.Getenv("COSMOS_KEY")
	if key == "" {
		key = emulatorKey
	}
	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		return err
	}
	client, err := azcosmos.NewClientWithKey(*endpoint, cred, changefeed.ClientOptions(nil))
	if err != nil {
		return err
	}
	defer client.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *create {
		if err := createAll(ctx, client, *database, *container, *leaseContainer); err != nil {
			return err
		}
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	start := changefeed.Now()
	if *beginning {
		start = changefeed.Beginning()
	}
	var out sync.Mutex // batches of different leases come from different goroutines
	p, err := changefeed.NewProcessor(changefeed.Config{
		Monitored: changefeed.Container{Client: client, Database: *database, Name: *container},
		Leases:    changefeed.Container{Name: *leaseContainer},
		Processor: *processor,
		Instance:  *instance,
		StartFrom: start,
		Logger:    log,
		OnEvent: func(e changefeed.Event) {
			switch e.Type {
			case changefeed.EventBatch, changefeed.EventCheckpoint:
			default:
				log.Info(string(e.Type), "lease", e.Lease, "range", e.Range.String(), "err", e.Err)
			}
		},
	}, func(_ context.Context, b changefeed.Batch) error {
		out.Lock()
		defer out.Unlock()
		for _, item := range b.Items {
			if _, err := fmt.Fprintf(os.Stdout, "%s\n", item); err != nil {
				return err // not processed: the batch comes again
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	log.Info("processing; Ctrl-C stops", "processor", *processor, "instance", *instance)
	if err := p.Run(ctx); err != nil {
		return err
	}
	est, err := changefeed.NewEstimator(changefeed.Config{
		Monitored: changefeed.Container{Client: client, Database: *database, Name: *container},
		Leases:    changefeed.Container{Name: *leaseContainer},
		Processor: *processor,
	})
	if err != nil {
		return err
	}
	ectx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := est.Estimate(ectx)
	if err != nil {
		return err
	}
	log.Info("stopped; leases released", "leases", len(e.Leases), "lag", e.TotalLag)
	return nil
}

// createAll creates the database, the monitored container (partitioned on /id) and the lease
// container (on /id, time to live on) unless they exist.
func createAll(ctx context.Context, client *azcosmos.Client, database, container, leases string) error {
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: database}, nil); err != nil && !exists(err) {
		return err
	}
	db, err := client.NewDatabase(database)
	if err != nil {
		return err
	}
	ttl := int32(-1)
	for _, props := range []azcosmos.ContainerProperties{
		{ID: container, PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/id"}, Version: 2}},
		{ID: leases, PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/id"}, Version: 2}, DefaultTimeToLive: &ttl},
	} {
		if _, err := db.CreateContainer(ctx, props, nil); err != nil && !exists(err) {
			return err
		}
	}
	return nil
}

func exists(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusConflict
}
