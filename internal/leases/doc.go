// Package leases owns the lease model of the change feed processors that cfp interoperates with:
// the .NET v3 (v0 PK-range and v1 EPK) and Java v4 (PK-range and EPK) lease documents, their ids,
// prefixes and marker documents, the codecs that read and write each family field for field, the
// store that acquires, renews, checkpoints and releases leases with If-Match replaces over a
// lease container (Documents), and the pure operator logic behind `cfp leases`: discovery of the
// processors in a lease container, hygiene checks, reset planning and export/import.
//
// docs/protocol-leases.md describes the formats and the SDKs' behaviour these follow; where it
// and the SDKs' sources disagree, the sources are right and the page is to be fixed.
package leases
