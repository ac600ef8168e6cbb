// Package chaos holds cfp's chaos test: several `cfp process --exec` hosts share the leases of
// one `cfp emulator` while a writer adds sequence-numbered documents, a chaos loop SIGKILLs and
// restarts hosts and a partition splits midway. The test checks what the processor promises to
// a user: every document is delivered at least once, per-lease checkpoints never move
// backwards, and duplicates stay within what the kills and lease moves explain.
//
// The default is a short run for CI (skipped under -short); the long run is the same test
// with bigger flags:
//
//	go test ./test/chaos -run Chaos -chaos.docs 100000 -chaos.duration 5m -timeout 30m -v
//
// The package has no code of its own: everything is in its tests.
package chaos
