// Package changefeed is a change feed processor and lag estimator for Azure Cosmos DB, in pure Go,
// over the Azure SDK's own client (azcosmos). It shares lease containers with the .NET (v3) and
// Java (v4) change feed processors.
//
// # The change feed, leases and processors
//
// A container's change feed lists its changes in order within each physical partition. A
// change feed processor reads it for you: it divides the container's key space into leases, one
// per physical partition at first, and stores them as documents in a second container, the
// lease container. A lease records who processes its range (its owner, with a timestamp that
// the owner renews) and how far it got (its continuation, written after each batch the handler
// accepted: a checkpoint).
//
// Run the same processor — the same Config.Processor name, monitored container and lease
// container — on as many hosts as you like, each with its own Config.Instance name: they split
// the leases evenly between them, take over the leases of a host that stops (at once, since a
// host that stops releases its leases) or dies (once its leases expire), and follow the
// container's partitions as they split and merge. Within a lease, batches come in order and one
// at a time; different leases are processed in parallel.
//
// Delivery is at least once. A batch is checkpointed only after the Handler returned nil for it;
// a handler error, a crash or a lost lease delivers the same changes again, from the last
// checkpoint. Make the handler idempotent (for example, upsert by id).
//
// # Sharing a lease container with .NET and Java hosts
//
// The leases are the documents the .NET and Java processors read and write, field for field:
// a lease id is "<processor><account host>_<database rid>_<container rid>..<lease token>", as
// the SDKs build it, and a changefeed host joins a .NET deployment that uses the same processor
// name, account endpoint host and lease container (and a Java one with the same lease prefix,
// see Config.LeasePrefix). The hosts balance the leases between them the way .NET's
// equal-partitions strategy does. The .NET estimator, KEDA's Cosmos DB scaler and the Azure
// Functions scale controller read the same leases, so they see the progress this package makes.
//
// Create the lease container yourself, partitioned on /id, with time to live on (default time
// to live -1, so that the bootstrap lock that .NET writes with a ttl expires); a lease container
// partitioned on /partitionKey, as Azure Functions creates, works too.
//
// # Processor and Estimator
//
// A Processor is one host: NewProcessor checks the Config, Run takes a share of the leases,
// hands every batch of changes to the Handler, checkpoints it, and returns once its context
// ends and every lease it held was released. An Estimator reads the same leases and reports,
// per lease, how many changes wait to be processed (the .NET estimator's number) and how old
// the oldest of them is.
//
// # Clients
//
// Both take the azcosmos clients you already have (Container.Client); they never close them.
// Build the monitored container's client with ClientOptions: it adds the pipeline policies
// that reads of part of a partition (after a merge) and the all-versions-and-deletes mode need.
// A client built without them serves the latest-version feed of containers that never merged,
// and reports ErrClientOptions for the reads it cannot make.
//
// Everything here runs against a `cfp emulator` endpoint as it does against Azure: the cfp
// command (github.com/cfp-dev/cfp) serves an emulator with `cfp emulator`, and runs the same
// processor on the command line with `cfp process`.
package changefeed
