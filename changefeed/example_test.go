package changefeed_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/changefeed"
)

// emulatorKey is the well-known key of the Cosmos DB emulators, `cfp emulator` included.
const emulatorKey = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

// A processor host that prints every change of shop/orders. Start `cfp emulator` first (it
// serves http://localhost:8081/), create the database, the container and a lease container
// partitioned on /id, and run as many copies as you like, each with its own instance name:
// they share the work. Ctrl-C stops a host cleanly: its leases go to the others at once.
func Example() {
	cred, err := azcosmos.NewKeyCredential(emulatorKey)
	if err != nil {
		log.Fatal(err)
	}
	client, err := azcosmos.NewClientWithKey("http://localhost:8081/", cred, changefeed.ClientOptions(nil))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	host, _ := os.Hostname()
	p, err := changefeed.NewProcessor(changefeed.Config{
		Monitored: changefeed.Container{Client: client, Database: "shop", Name: "orders"},
		Leases:    changefeed.Container{Name: "leases"},
		Processor: "order-printer",
		Instance:  fmt.Sprintf("%s-%d", host, os.Getpid()),
		StartFrom: changefeed.Beginning(),
	}, func(ctx context.Context, b changefeed.Batch) error {
		for _, item := range b.Items {
			fmt.Printf("%s\n", item)
		}
		return nil // checkpoint: these changes do not come again
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := p.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// An estimator next to the processors (or instead of them): how many changes wait, per lease.
func ExampleEstimator_Estimate() {
	cred, err := azcosmos.NewKeyCredential(emulatorKey)
	if err != nil {
		log.Fatal(err)
	}
	client, err := azcosmos.NewClientWithKey("http://localhost:8081/", cred, changefeed.ClientOptions(nil))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	est, err := changefeed.NewEstimator(changefeed.Config{
		Monitored: changefeed.Container{Client: client, Database: "shop", Name: "orders"},
		Leases:    changefeed.Container{Name: "leases"},
		Processor: "order-printer",
	})
	if err != nil {
		log.Fatal(err)
	}
	e, err := est.Estimate(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range e.Leases {
		fmt.Printf("lease %s (%s, %s): %d changes waiting, oldest %s old\n", l.Lease, l.Owner, l.State, l.Lag, l.TimeLag)
	}
	fmt.Println("total:", e.TotalLag)
}

// A handler that tells a failure to retry from one that must stop the host, and lifecycle
// events logged.
func ExampleHandler() {
	var client *azcosmos.Client // your client, built with changefeed.ClientOptions
	errPoison := errors.New("poison message")
	handle := func(ctx context.Context, b changefeed.Batch) error {
		if b.Attempt > 5 {
			// Stop the processor: Run returns a *StopError that unwraps to the cause.
			return changefeed.Stop(fmt.Errorf("lease %s: %w", b.LeaseToken, errPoison))
		}
		// ... process b.Items; an error here delivers the same batch again.
		return nil
	}
	p, err := changefeed.NewProcessor(changefeed.Config{
		Monitored: changefeed.Container{Client: client, Database: "shop", Name: "orders"},
		Leases:    changefeed.Container{Name: "leases"},
		Processor: "order-printer",
		Instance:  "host-1",
		StartFrom: changefeed.Time(time.Now().Add(-time.Hour)),
		Logger:    slog.Default(),
		OnEvent: func(e changefeed.Event) {
			switch e.Type {
			case changefeed.EventAcquired, changefeed.EventReleased, changefeed.EventLost:
				slog.Info("lease "+string(e.Type), "lease", e.Lease, "range", e.Range.String())
			case changefeed.EventError:
				if errors.Is(e.Err, changefeed.ErrThrottled) {
					slog.Warn("throttled", "lease", e.Lease)
				}
			}
		},
	}, handle)
	if err != nil {
		fmt.Println(err)
		return
	}
	err = p.Run(context.Background())
	if errors.Is(err, errPoison) {
		fmt.Println("stopped on a poison message:", err)
	}
}

// NewProcessor checks the configuration without any I/O.
func ExampleNewProcessor_invalid() {
	_, err := changefeed.NewProcessor(changefeed.Config{Processor: "order-printer"},
		func(context.Context, changefeed.Batch) error { return nil })
	fmt.Println(err)
	// Output:
	// changefeed: Monitored.Client is required
	// Monitored.Database and Monitored.Name are required
	// Leases.Name is required
}

func ExampleTime() {
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	fmt.Println(changefeed.Time(at), changefeed.Beginning(), changefeed.Now())
	// Output: 2026-12-01T09:30:00Z beginning now
}
