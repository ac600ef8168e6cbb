package account

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/internal/cosmos"
)

const testKey = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestOpen_ErrorsNeverLeakTheKey(t *testing.T) {
	t.Parallel()
	wrong := "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ=="
	_, err := Open(context.Background(), Config{Endpoint: "https://acct.documents.azure.com/", Key: "not base64 " + wrong})
	if err == nil || strings.Contains(err.Error(), wrong) {
		t.Fatalf("Open() with a malformed key error = %v, want one without the key", err)
	}
	_, err = Open(context.Background(), Config{ConnectionString: "AccountEndpoint=nope;AccountKey=" + wrong})
	if err == nil || strings.Contains(err.Error(), wrong) {
		t.Fatalf("Open() with a bad connection string error = %v, want one without the key", err)
	}
	if _, err := Open(context.Background(), Config{}); !errors.Is(err, cosmos.ErrNoAccount) {
		t.Fatalf("Open(empty config) error = %v, want ErrNoAccount", err)
	}
	_, err = Open(context.Background(), Config{ConnectionString: "AccountEndpoint=https://acct.documents.azure.com/;AccountKey=" + testKey, Auth: AuthEntra})
	if err == nil || !strings.Contains(err.Error(), "--auth entra") || strings.Contains(err.Error(), testKey) {
		t.Fatalf("Open(connection string, entra) error = %v, want a refusal without the key", err)
	}
}

func TestOpen_RegionalEndpointWarns(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	a, err := Open(context.Background(), Config{
		Endpoint: "https://acct-westeurope.documents.azure.com:443/", Key: testKey,
		Logger: slog.New(slog.NewTextHandler(&buf, nil)),
	})
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer a.Close()
	if a.Host() != "acct-westeurope.documents.azure.com" || a.Emulator() != nil {
		t.Errorf("Host() = %q, Emulator() = %v", a.Host(), a.Emulator())
	}
	if !strings.Contains(buf.String(), "regional endpoint") || strings.Contains(buf.String(), testKey) {
		t.Errorf("log = %q, want a regional-endpoint warning without the key", buf.String())
	}
	buf.Reset()
	l, err := Open(context.Background(), Config{
		Endpoint: "https://leases-westeurope.documents.azure.com:443/", Key: testKey, LeasesOnly: true,
		Logger: slog.New(slog.NewTextHandler(&buf, nil)),
	})
	if err != nil {
		t.Fatalf("Open(lease account) error = %v", err)
	}
	defer l.Close()
	if buf.Len() != 0 {
		t.Errorf("a lease-only account warned: %q", buf.String())
	}
}

// TestOpen_LocalDirHeld: a local account holds its directory until Close, which closes the
// embedded emulator (twice is fine); then the directory opens again, with its data.
func TestOpen_LocalDirHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a, err := Open(ctx, Config{LocalDir: dir, Logger: quiet})
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	if a.Emulator() == nil {
		t.Fatal("Emulator() of a local account is nil")
	}
	if err := a.CreateDatabaseIfNotExists(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateContainerIfNotExists(ctx, "db", "orders", "/pk", nil); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, Config{LocalDir: dir, Logger: quiet})
	var locked *emulator.LockedError
	if !errors.As(err, &locked) {
		t.Errorf("second Open() of a held directory error = %v, want *emulator.LockedError", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close() error = %v", err)
	}
	b, err := Open(ctx, Config{LocalDir: dir, Logger: quiet})
	if err != nil {
		t.Fatalf("Open() after Close error = %v", err)
	}
	defer b.Close()
	if info, err := b.Container("db", "orders").Info(ctx); err != nil || info.ContainerRID == "" {
		t.Errorf("Info() after reopening = %+v, %v; want the container created before", info, err)
	}
	if a.Host() != "localhost" || b.Endpoint() != a.Endpoint() {
		t.Errorf("Host() = %q, endpoints %s vs %s; want localhost and a stable endpoint", a.Host(), a.Endpoint(), b.Endpoint())
	}
}

func TestLocalEndpoint(t *testing.T) {
	t.Parallel()
	a, b := LocalEndpoint("/data/one"), LocalEndpoint("/data/two")
	if a != LocalEndpoint("/data/one/") {
		t.Errorf("LocalEndpoint is not stable for the same directory: %s vs %s", a, LocalEndpoint("/data/one/"))
	}
	if a == b {
		t.Errorf("two directories share the endpoint %s", a)
	}
	for _, e := range []string{a, b} {
		var port int
		if _, err := fmt.Sscanf(e, "http://localhost:%d/", &port); err != nil || port < 10000 || port > 59999 {
			t.Errorf("LocalEndpoint = %s, want http://localhost:<10000-59999>/", e)
		}
	}
}
