package cmd

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/cfp-dev/cfp/internal/account"
	"github.com/cfp-dev/cfp/internal/cosmos"
	"github.com/cfp-dev/cfp/internal/leases"
)

// syncBuffer is a bytes.Buffer that a running command writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// openLocal opens the embedded emulator on the data directory dir, in process, giving the
// containers it creates partitions physical partitions (0: the emulator's default). The
// emulator's warnings are discarded. The caller closes the account, and must do so before cfp
// opens the same directory.
func openLocal(t testing.TB, dir string, partitions int) *account.Account {
	t.Helper()
	acct, err := account.Open(context.Background(), account.Config{
		LocalDir: dir, LocalPartitions: partitions, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return acct
}

// createContainer creates the database db when missing and, in it, the container name
// partitioned on pkPath when missing, and returns the container.
func createContainer(t testing.TB, acct *account.Account, db, name, pkPath string) *cosmos.Container {
	t.Helper()
	ctx := context.Background()
	if err := acct.CreateDatabaseIfNotExists(ctx, db); err != nil {
		t.Fatal(err)
	}
	c, err := acct.CreateContainerIfNotExists(ctx, db, name, pkPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeOrders upserts the orders o0 .. o<n-1> ({"id": ...}) into c.
func writeOrders(t testing.TB, c *cosmos.Container, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("o%d", i)
		if err := c.UpsertItem(context.Background(), id, fmt.Appendf(nil, `{"id":%q}`, id)); err != nil {
			t.Fatal(err)
		}
	}
}

// processorStore returns the lease store of processor proc over the container c of acct, its
// leases kept in the container leases of c's database.
func processorStore(t testing.TB, acct *account.Account, c *cosmos.Container, proc string) *leases.Store {
	t.Helper()
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return leases.NewStore(acct.LeaseDocuments(info.Database, "leases"),
		leases.Prefix(proc, acct.Host(), info.DatabaseRID, info.ContainerRID), leases.StoreOptions{})
}
