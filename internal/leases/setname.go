package leases

import "context"

// SetName names a processor's lease set on one monitored container, in every form the SDKs
// write it. ResolvePrefix turns it into the one prefix to open; every command and the
// changefeed package open a lease set through it, so they agree on which set a processor owns.
type SetName struct {
	// Explicit is a prefix given by the user (--lease-id-prefix); when set it is used as is.
	Explicit string
	// Processor is the processor name that starts the prefix.
	Processor string
	// Host is the monitored account's host, lower case (.NET, cfp, Java EPK processors).
	Host string
	// JavaHost is the host as written, case kept (Java's PK-range processor); "" means Host.
	JavaHost string
	// DatabaseRID and ContainerRID are the monitored container's resource ids.
	DatabaseRID, ContainerRID string
	// Database and Container are its names (Java's PK-range processor names its leases by them).
	Database, Container string
}

// ResolvePrefix returns the prefix of the lease set named by n in docs. The rule, in order:
//
//   - Explicit when given;
//   - the rid prefix Prefix(Processor, Host, DatabaseRID, ContainerRID), which .NET, cfp and
//     Java's EPK processors write, when it holds any document (or when docs cannot be read:
//     the caller's first read reports that);
//   - the name prefix Prefix(Processor, JavaHost, Database, Container) of Java's PK-range
//     (pkversion) processor, when it holds a document and the rid prefix none;
//   - else the rid prefix, where a bootstrap creates a new set.
func ResolvePrefix(ctx context.Context, docs Documents, n SetName) string {
	if n.Explicit != "" {
		return n.Explicit
	}
	byRID := Prefix(n.Processor, n.Host, n.DatabaseRID, n.ContainerRID)
	if n.Database == "" || n.Container == "" {
		return byRID
	}
	host := n.JavaHost
	if host == "" {
		host = n.Host
	}
	byName := Prefix(n.Processor, host, n.Database, n.Container)
	if byName == byRID {
		return byRID
	}
	if found, err := docs.QueryPrefix(ctx, byRID+"."); err != nil || len(found) > 0 {
		return byRID
	}
	if found, err := docs.QueryPrefix(ctx, byName+"."); err == nil && len(found) > 0 {
		return byName
	}
	return byRID
}
