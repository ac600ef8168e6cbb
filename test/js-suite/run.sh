#!/usr/bin/env bash
# Runs the @azure/cosmos SDK's own functional tests (the files files.txt names, unchanged, from a
# checkout of azure-sdk-for-js at the tag of the SDK version package.json pins) against
# `cfp emulator` on a free loopback port over TLS, and fails on any test that does not pass unless
# known-failures.txt names it (its full name, then "  # " and the reason). The list only shrinks:
# a listed test that passes fails the run too, so the entry is removed.
#
# Usage: JS_SUITE_SRC=DIR test/js-suite/run.sh [--report] [VITEST_ARGS...]
#   JS_SUITE_SRC  the SDK's folder in an azure-sdk-for-js checkout at tag @azure/cosmos_<version>
#                 (DIR/test/public/common exists; the repository's root works too); default
#                 test/js-suite/sdk, where its package.json and the files.txt files would be kept
#   --report      print the results, exit 0 whatever they are (to measure)
#   VITEST_ARGS   passed to vitest, e.g. a file filter or -t 'test name' (for debugging)
# The SDK and vitest install from package-lock.json (npm ci). Node trusts the emulator's
# certificate through NODE_EXTRA_CA_CERTS; TLS verification is never turned off.
set -euo pipefail
# shellcheck source=../lib/emulator.sh
source "$(dirname "$0")/../lib/emulator.sh"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
report=0
if [ "${1:-}" = "--report" ]; then report=1; shift; fi

src=${JS_SUITE_SRC:-$here/sdk}
[ -d "$src" ] || { echo "js-suite: no SDK tests: set JS_SUITE_SRC to the SDK's folder in an azure-sdk-for-js checkout (see test/js-suite/README.md)" >&2; exit 2; }
[ -d "$src/sdk/cosmosdb/cosmos" ] && src="$src/sdk/cosmosdb/cosmos"
[ -d "$src/test/public/common" ] || { echo "js-suite: $src has no test/public/common" >&2; exit 2; }
want=$(node -p 'require(process.argv[1]).dependencies["@azure/cosmos"]' "$here/package.json")
have=$(node -p 'require(process.argv[1]).version' "$src/package.json" 2>/dev/null || echo unknown)
if [ "$have" != "$want" ]; then
  echo "js-suite: the tests in $src are of @azure/cosmos $have, package.json pins $want" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/js-suite.XXXXXX")
emu_pid=
cleanup() {
  if [ -n "$emu_pid" ]; then kill "$emu_pid" 2>/dev/null || true; wait "$emu_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "== js-suite: npm ci, copy the tests, build cfp" >&2
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)
rm -rf "$here/work" && mkdir -p "$here/work"
(cd "$src" && sed -e 's/#.*//' "$here/files.txt" | while read -r glob; do
  [ -n "$glob" ] || continue
  for f in $glob; do
    [ -f "$f" ] || continue
    mkdir -p "$here/work/$(dirname "$f")" && cp "$f" "$here/work/$f"
  done
done)
(cd "$root" && go build -o "$tmp/cfp" .)

echo "== js-suite: start cfp emulator on a free loopback port" >&2
start_emulator "$tmp/cfp" "$tmp" 127.0.0.1:0 --consistency Session
emu_pid=$emulator_pid
field() { node -p "JSON.parse(require('fs').readFileSync(process.argv[1], 'utf8')).$1" "$tmp/serving.json"; }
# https://127.0.0.1:PORT/ (the certificate names 127.0.0.1): the tests' config turns TLS
# verification off for an endpoint that starts with https://localhost.
export ACCOUNT_HOST ACCOUNT_KEY NODE_EXTRA_CA_CERTS
ACCOUNT_HOST=$(field tls_endpoint)
ACCOUNT_KEY=$(field key)
NODE_EXTRA_CA_CERTS=$(field cert_file)
unset NODE_TLS_REJECT_UNAUTHORIZED

echo "== js-suite: run the SDK tests against $ACCOUNT_HOST" >&2
start=$(date +%s)
set +e
(cd "$here" && npx vitest run --config vitest.config.mjs "$@") >"$tmp/vitest.log" 2>&1
set -e
secs=$(( $(date +%s) - start ))
[ -s "$here/work/results.json" ] || { tail -60 "$tmp/vitest.log" >&2; echo "js-suite: vitest wrote no results" >&2; exit 1; }
if [ -n "${JS_SUITE_LOG:-}" ]; then cp "$tmp/vitest.log" "$JS_SUITE_LOG"; cp "$tmp/emulator.log" "$JS_SUITE_LOG.emulator"; fi
echo "js-suite: vitest took ${secs}s" >&2
if [ $report = 1 ]; then
  node "$here/compare.mjs" "$here/work/results.json" "$here/known-failures.txt" --report
else
  node "$here/compare.mjs" "$here/work/results.json" "$here/known-failures.txt"
fi
