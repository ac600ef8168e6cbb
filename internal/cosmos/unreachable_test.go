package cosmos

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfp-dev/cfp/emulator/auth"
)

// closedEndpoint returns an http endpoint on a loopback port nothing listens on.
func closedEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr + "/"
}

// TestUnreachableEndpoint_FailsAtOnce: a refused connection is not retried (azcosmos used to
// retry it three times a second apart, for its account bootstrap and again for the request,
// about 10 s in all) and fails with an *UnreachableError naming the endpoint. The deadline is
// generous on purpose: the test asserts that the call returned with that error, not a timing;
// the time taken is logged.
func TestUnreachableEndpoint_FailsAtOnce(t *testing.T) {
	t.Parallel()
	ep := closedEndpoint(t)
	a, err := Open(context.Background(), Config{Endpoint: ep, Key: auth.WellKnownKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, step := range []struct {
		name string
		call func() error
	}{
		{"container info", func() error { _, err := a.Container("shop", "orders").Info(ctx); return err }},
		{"partitions", func() error { _, err := a.Container("shop", "orders").Partitions(ctx); return err }},
	} {
		start := time.Now()
		err := step.call()
		t.Logf("%s: failed after %s", step.name, time.Since(start).Round(time.Millisecond))
		var ue *UnreachableError
		if !errors.As(err, &ue) {
			t.Fatalf("%s: error = %v, want an *UnreachableError", step.name, err)
		}
		if want := "cannot reach " + ep + " (connection refused)"; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error = %q, want it to contain %q", step.name, err, want)
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: returned only at the test's deadline", step.name)
		}
	}
}

func TestUnreachableReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, "connection refused"},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, ""},
		{&net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}, "host not found"},
		{&net.DNSError{Err: "i/o timeout", Name: "slow.example", IsTimeout: true}, ""},
		{context.DeadlineExceeded, ""},
	}
	for _, tt := range tests {
		if got := unreachableReason(tt.err); got != tt.want {
			t.Errorf("unreachableReason(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
