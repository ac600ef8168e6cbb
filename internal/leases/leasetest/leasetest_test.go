package leasetest_test

import (
	"testing"

	"github.com/cfp-dev/cfp/internal/leases"
	"github.com/cfp-dev/cfp/internal/leases/leasetest"
)

func TestMemDocuments(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/id", "/partitionKey"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			leasetest.TestDocuments(t, func(*testing.T) leases.Documents { return leases.NewMemDocuments(path) })
		})
	}
}
