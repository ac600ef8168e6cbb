package cosmos

import (
	"context"
	"encoding/base64"
	"hash/fnv"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cfp-dev/cfp/emulator"
	"github.com/cfp-dev/cfp/emulator/auth"
)

// Config and Open open the accounts of this package's tests: the embedded emulator on LocalDir,
// in process, or Endpoint with Key. internal/account opens accounts in production; it imports
// this package, so these tests cannot use it.
type Config struct {
	Endpoint        string
	Key             string
	LocalDir        string
	LocalPartitions int
	LeasesOnly      bool
	Logger          *slog.Logger
	RequestTimeout  time.Duration
	Retry           RetryOptions
	// Wrap, when set, wraps the local emulator's handler (to observe requests and responses).
	Wrap func(http.Handler) http.Handler
}

// testEmulators holds the embedded emulator of each local test account, for Emulator.
var testEmulators sync.Map // *Account → *emulator.Emulator

// Emulator returns the embedded emulator of a local test account (nil otherwise).
func (a *Account) Emulator() *emulator.Emulator {
	e, _ := testEmulators.Load(a)
	emu, _ := e.(*emulator.Emulator)
	return emu
}

func Open(_ context.Context, cfg Config) (*Account, error) {
	opts := NewClientOptions(ClientSettings{Logger: cfg.Logger, RequestTimeout: cfg.RequestTimeout, Retry: cfg.Retry})
	s := AccountSettings{Options: opts, LeasesOnly: cfg.LeasesOnly, Logger: cfg.Logger}
	endpoint, key := cfg.Endpoint, cfg.Key
	var emu *emulator.Emulator
	if cfg.LocalDir != "" {
		abs, err := filepath.Abs(cfg.LocalDir)
		if err != nil {
			return nil, err
		}
		emu, err = emulator.Open(emulator.Options{Dir: abs, Key: auth.WellKnownKey, Partitions: cfg.LocalPartitions, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		var h http.Handler = emu.Handler()
		if cfg.Wrap != nil {
			h = cfg.Wrap(h)
		}
		opts.Transport = &emulator.Transport{Handler: h}
		s.OnClose = emu.Close
		endpoint, key = "http://localhost:"+localPort(abs)+"/", auth.WellKnownKey
	}
	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		return nil, err
	}
	client, err := azcosmos.NewClientWithKey(endpoint, cred, opts)
	if err != nil {
		return nil, err
	}
	raw, _ := base64.StdEncoding.DecodeString(key)
	s.Auth = &MetaAuth{Key: raw}
	a := NewAccount(client, endpoint, s)
	if emu != nil {
		testEmulators.Store(a, emu)
	}
	return a, nil
}

// localPort derives a port from the directory, as account.LocalEndpoint does, so every test
// account has its own endpoint and its own azcosmos caches.
func localPort(dir string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(dir))
	return strconv.Itoa(int(10000 + h.Sum32()%50000))
}
