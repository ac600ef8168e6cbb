// Package python runs a change feed reader on Python's azure-cosmos (reader.py; Python has no
// change feed processor) against a served `cfp emulator` over TLS, trusting its certificate
// through REQUESTS_CA_BUNDLE. The SDK is pinned in requirements.txt and installed into .venv
// by install.sh; the tests are skipped when python3 or the install is missing, except under
// CI=true, where that fails them:
//
//	./test/peers/python/install.sh && go test ./test/peers/python -v
//
// The package has no code of its own: everything is in its tests.
package python
