// Package jssdk checks cfp's emulator against the real JavaScript SDK, @azure/cosmos at the
// version pinned in package.json: jssdk_test.go builds cfp, serves `cfp emulator` on a loopback
// port and runs check.mjs, a Node script that drives the SDK through databases, containers,
// items, queries and change feeds (splits and merges included) and prints a JSON summary.
//
// The test is opt-in, because it needs Node 20 and npm (and the npm registry once, for
// `npm ci`):
//
//	CFP_JSSDK=1 go test ./test/jssdk -v
//
// The package has no code of its own: everything is in its test and in check.mjs.
package jssdk
