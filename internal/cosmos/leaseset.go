package cosmos

import (
	"context"
	"errors"
	"fmt"

	"github.com/cfp-dev/cfp/internal/leases"
)

// LeaseSet says which lease set of a processor to open, and where: every command of cfp and
// the changefeed package open one through OpenLeaseSet, so they agree on the set a processor
// owns and on how its container is checked and created.
type LeaseSet struct {
	// Monitored is the monitored account, whose host lease prefixes embed, and Info the
	// monitored container (its database and container rids and names). Monitored may be nil
	// only with an Explicit prefix.
	Monitored *Account
	Info      ContainerInfo
	// Leases is the lease container's account (nil: Monitored); Database and Container name the
	// lease container.
	Leases              *Account
	Database, Container string
	// Processor is the processor name; Explicit a whole prefix given by the user
	// (--lease-id-prefix, changefeed.Config.LeasePrefix), used as is when not empty.
	Processor, Explicit string
	// Create creates the lease container (partitioned on /id, LeaseContainerOptions) and its
	// database unless they exist. The monitored database is never created: it exists in the
	// monitored account.
	Create bool
	// MayBeMissing skips the check that the lease container exists, for a caller that reads a
	// missing one as empty or creates it later (cfp leases import --create): the prefix is then
	// the rid prefix (or Explicit).
	MayBeMissing bool
	// Store are the options of the returned store.
	Store leases.StoreOptions
}

// OpenLeaseSet opens (with Create, creates) and checks (unless MayBeMissing) the lease container and returns the store of the
// processor's lease set in it. The prefix follows leases.ResolvePrefix: Explicit as given; else
// the rid prefix (.NET, cfp, Java EPK) when it holds a document; else Java's PK-range set, named
// after the monitored database and container names, when only that one exists; else the rid
// prefix, where a bootstrap creates the set. Errors name the lease container and wrap the
// service's (leases.ErrNotFound for a missing container or database).
func OpenLeaseSet(ctx context.Context, s LeaseSet) (*leases.Store, error) {
	acct := s.Leases
	if acct == nil {
		acct = s.Monitored
	}
	if acct == nil {
		return nil, errors.New("open lease set: no account")
	}
	if s.Monitored == nil && s.Explicit == "" {
		return nil, errors.New("open lease set: a lease prefix needs the monitored container")
	}
	if s.Create {
		if s.Database != s.Info.Database || acct != s.Monitored {
			if err := acct.CreateDatabaseIfNotExists(ctx, s.Database); err != nil {
				return nil, fmt.Errorf("create lease database: %w", err)
			}
		}
		if _, err := acct.CreateContainerIfNotExists(ctx, s.Database, s.Container, "/id", LeaseContainerOptions()); err != nil {
			return nil, fmt.Errorf("create lease container: %w", err)
		}
	}
	docs := acct.LeaseDocuments(s.Database, s.Container)
	// A missing container fails here, named, rather than at the first lease read.
	if !s.MayBeMissing {
		if _, err := docs.PartitionKeyPath(ctx); err != nil {
			return nil, &LeaseContainerError{Database: s.Database, Container: s.Container, Err: err}
		}
	}
	prefix := s.Explicit
	if prefix == "" {
		prefix = leases.ResolvePrefix(ctx, docs, s.Monitored.LeaseSetName(s.Processor, "", s.Info))
	}
	return leases.NewStore(docs, prefix, s.Store), nil
}

// LeaseContainerError is OpenLeaseSet's failure to read the lease container (Err wraps
// leases.ErrNotFound when it does not exist), so that a command can say how to create it.
type LeaseContainerError struct {
	Database, Container string
	Err                 error
}

func (e *LeaseContainerError) Error() string {
	return fmt.Sprintf("open lease container %s/%s: %v", e.Database, e.Container, e.Err)
}

func (e *LeaseContainerError) Unwrap() error { return e.Err }
