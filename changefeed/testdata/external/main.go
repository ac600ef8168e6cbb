// Command external is the program of TestExternalModule: built in a throwaway module that
// requires github.com/cfp-dev/cfp, it uses only the public changefeed package and azcosmos. It
// writes X_FIRST orders to a served emulator (X_ENDPOINT, X_KEY), runs two processors on one
// lease container until every order arrived, stops them, writes X_LATER more and estimates the
// lag. It prints one JSON object: the items delivered, in delivery order, and the estimate.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/changefeed"
)

type summary struct {
	Items    []json.RawMessage `json:"items"`
	RunErrs  []string          `json:"run_errors"`
	TotalLag int64             `json:"total_lag"`
	Leases   int               `json:"leases"`
	Owned    int               `json:"owned_after_stop"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "external:", err)
		os.Exit(1)
	}
}

func run() error {
	first, _ := strconv.Atoi(os.Getenv("X_FIRST"))
	later, _ := strconv.Atoi(os.Getenv("X_LATER"))
	cred, err := azcosmos.NewKeyCredential(os.Getenv("X_KEY"))
	if err != nil {
		return err
	}
	client, err := azcosmos.NewClientWithKey(os.Getenv("X_ENDPOINT"), cred, changefeed.ClientOptions(nil))
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	orders, err := setup(ctx, client)
	if err != nil {
		return err
	}
	if err := write(ctx, orders, 0, first); err != nil {
		return err
	}

	var mu sync.Mutex
	var out summary
	seen := map[string]bool{}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	handler := func(_ context.Context, b changefeed.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range b.Items {
			var doc struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(it, &doc); err != nil {
				return err
			}
			seen[doc.ID] = true
			out.Items = append(out.Items, it)
		}
		if len(seen) == first {
			stop()
		}
		return nil
	}
	cfg := changefeed.Config{
		Monitored:       changefeed.Container{Client: client, Database: "shop", Name: "orders"},
		Leases:          changefeed.Container{Name: "leases"},
		Processor:       "external",
		StartFrom:       changefeed.Beginning(),
		PollInterval:    50 * time.Millisecond,
		AcquireInterval: 250 * time.Millisecond,
		RenewInterval:   time.Second,
		Expiration:      15 * time.Second,
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, name := range []string{"host-a", "host-b"} {
		cfg.Instance = name
		p, err := changefeed.NewProcessor(cfg, handler)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Run(runCtx)
		}()
	}
	select {
	case <-runCtx.Done():
	case <-time.After(45 * time.Second):
		stop()
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		return fmt.Errorf("%d of %d orders arrived within 45s", n, first)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			out.RunErrs = append(out.RunErrs, err.Error())
		}
	}

	if err := write(ctx, orders, first, later); err != nil {
		return err
	}
	est, err := changefeed.NewEstimator(cfg)
	if err != nil {
		return err
	}
	e, err := est.Estimate(ctx)
	if err != nil {
		return err
	}
	out.TotalLag, out.Leases = e.TotalLag, len(e.Leases)
	for _, l := range e.Leases {
		if l.State == changefeed.LeaseOwned {
			out.Owned++
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// setup creates the database, the monitored container (on /pk) and the lease container (on /id,
// time to live on).
func setup(ctx context.Context, client *azcosmos.Client) (*azcosmos.ContainerClient, error) {
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "shop"}, nil); err != nil {
		return nil, err
	}
	db, err := client.NewDatabase("shop")
	if err != nil {
		return nil, err
	}
	ttl := int32(-1)
	for _, c := range []azcosmos.ContainerProperties{
		{ID: "orders", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}, Version: 2}},
		{ID: "leases", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/id"}, Version: 2}, DefaultTimeToLive: &ttl},
	} {
		if _, err := db.CreateContainer(ctx, c, nil); err != nil {
			return nil, err
		}
	}
	return client.NewContainer("shop", "orders")
}

// write upserts orders o<from> .. o<from+n-1>, spread over partition keys.
func write(ctx context.Context, orders *azcosmos.ContainerClient, from, n int) error {
	for i := from; i < from+n; i++ {
		pk := fmt.Sprintf("customer-%d", i%23)
		doc := fmt.Sprintf(`{"id":"o%d","pk":%q,"n":%d}`, i, pk, i)
		if _, err := orders.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), []byte(doc), nil); err != nil {
			return err
		}
	}
	return nil
}
