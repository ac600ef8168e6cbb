// Package jssdk checks cfp's emulator against the real JavaScript SDK, @azure/cosmos at the
// version pinned in package.json: jssdk_test.go builds cfp, serves `cfp emulator` on a loopback
// port and runs check.mjs, a Node script that drives the SDK through databases, containers,
// items, bulk, batches, queries and change feeds (splits and merges included) and prints a JSON
// summary.
//
// One of its checks is property.mjs: from a seed it generates documents and a few hundred
// queries (filters, ORDER BY, TOP, OFFSET LIMIT, DISTINCT, aggregates, GROUP BY), runs each
// through the SDK's query pipeline over 5 physical partitions, whole and page by page, and
// compares the answer with a plain JavaScript evaluation. A wrong answer fails the test; the
// emulator's 400 "not supported by cfp emulator", the SDK's own errors on order keys of several
// types and its DISTINCT dropping falsy values are counted by query shape and listed instead. A
// failure prints its seed; it replays with
//
//	CFP_JSSDK_SEED=<seed> CFP_JSSDK=1 go test ./test/jssdk -v
//
// (CFP_JSSDK_QUERIES sets the number of queries, 300 by default), or against a running
// emulator with `COSMOS_ENDPOINT=... COSMOS_KEY=... CFP_JSSDK_SEED=<seed> node property.mjs`.
//
// The test is opt-in, because it needs Node 20 and npm (and the npm registry once, for
// `npm ci`); CI runs it:
//
//	(cd test/jssdk && npm ci --no-audit --no-fund) && CFP_JSSDK=1 go test -count=1 ./test/jssdk
//
// The package has no code of its own: everything is in its test and in the scripts.
package jssdk
