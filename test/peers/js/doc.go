// Package js runs a change feed reader on JavaScript's @azure/cosmos (reader.mjs; JavaScript
// has no change feed processor) against a served `cfp emulator` over TLS, trusting its
// certificate through NODE_EXTRA_CA_CERTS. The SDK is pinned in package.json and
// package-lock.json and installed into node_modules by install.sh; the tests are skipped when
// node or the install is missing, except under CI=true, where that fails them:
//
//	./test/peers/js/install.sh && go test ./test/peers/js -v
//
// The package has no code of its own: everything is in its tests.
package js
