#!/usr/bin/env bash
# Runs the azcosmos v1.5.0 SDK's own emulator tests (every Test in emulator_*_test.go, unchanged)
# against `cfp emulator` on https://localhost:8081/ with the well-known key, and fails on any test
# that does not pass unless known-failures.txt names it (one line: test name, then the reason).
# The list only shrinks: a listed test that passes fails the run too, so the entry is removed.
#
# Usage: test/azcosmos-suite/run.sh [--report] [TEST_REGEXP] [-- EMULATOR_FLAGS...]
#   --report      print the results, exit 0 whatever they are (to measure)
#   TEST_REGEXP   run only the emulator tests whose names match (for debugging one test)
#   EMULATOR_FLAGS replace the emulator's flags (default: --consistency Strong, as the SDK's
#                 own CI starts the official emulator, /consistency=Strong, and
#                 TestGlobalEndpointManagerEmulator expects it); give none after -- to run at
#                 cfp emulator's defaults (Session: that test then fails on the consistency)
# Environment: AZCOSMOS_SUITE_PORT (default 8081) serves the emulator on another port of
# localhost, to run beside CI; the SDK's tests name https://localhost:8081/ and
# https://127.0.0.1:8081/, so the copied test files get the port instead (nothing else changes).
# The SDK module is copied from the module cache (go mod download fetches it through the module
# proxy if it is missing); its test dependencies resolve like cfp's (GOFLAGS=-mod=mod).
set -euo pipefail
# shellcheck source=../lib/emulator.sh
source "$(dirname "$0")/../lib/emulator.sh"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
report=0
if [ "${1:-}" = "--report" ]; then report=1; shift; fi
only=
if [ $# -gt 0 ] && [ "$1" != "--" ]; then only=$1; shift; fi
emu_flags=(--consistency Strong)
if [ "${1:-}" = "--" ]; then shift; emu_flags=("$@"); fi
port=${AZCOSMOS_SUITE_PORT:-8081}

mod=github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos
cd "$root"
src=$(go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "azcosmos-suite: module $mod not found in the module cache" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/azcosmos-suite.XXXXXX")
emu_pid=
cleanup() {
  if [ -n "$emu_pid" ]; then kill "$emu_pid" 2>/dev/null || true; wait "$emu_pid" 2>/dev/null || true; fi
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The SDK package as its own module, built with the SDK dependency versions cfp uses (already in
# the module cache), so only the SDK's test-only dependencies may need the proxy, once.
mkdir -p "$work/sdk" && cp -r "$src/." "$work/sdk/"
chmod -R u+w "$work/sdk"
reqs=()
for m in github.com/Azure/azure-sdk-for-go/sdk/azcore github.com/Azure/azure-sdk-for-go/sdk/azidentity \
  github.com/Azure/azure-sdk-for-go/sdk/internal golang.org/x/net; do
  reqs+=("-require=$m@$(go list -m -f '{{.Version}}' "$m")")
done
(cd "$work/sdk" && go mod edit "${reqs[@]}" && cat "$root/go.sum" >> go.sum)
if [ "$port" != 8081 ]; then
  sed -i -e "s#localhost:8081#localhost:$port#g" -e "s#127.0.0.1:8081#127.0.0.1:$port#g" "$work"/sdk/emulator*_test.go
fi

echo "== azcosmos-suite: build the SDK tests and cfp" >&2
(cd "$work/sdk" && GOFLAGS=-mod=mod go test -c -o "$work/azcosmos.test" .)
go build -o "$work/cfp" .

tests=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' "$work"/sdk/emulator_*_test.go | sort -u)
if [ -n "$only" ]; then tests=$(grep -E -- "$only" <<<"$tests" || true); fi
total=$(wc -w <<<"$tests")
[ "$total" -gt 0 ] || { echo "azcosmos-suite: no emulator test matches" >&2; exit 1; }

echo "== azcosmos-suite: start cfp emulator on localhost:$port ${emu_flags[*]}" >&2
start_emulator "$work/cfp" "$work" "localhost:$port" "${emu_flags[@]}"
emu_pid=$emulator_pid
cert=$("$work/cfp" emulator cert --data "$work/data" --path 2>/dev/null || true)

echo "== azcosmos-suite: run $total emulator tests" >&2
start=$(date +%s)
pattern="^($(tr '\n' '|' <<<"$tests" | sed 's/|$//'))\$"
set +e
(cd "$work/sdk" && EMULATOR=1 SSL_CERT_FILE="${cert:-}" "$work/azcosmos.test" -test.run "$pattern" -test.v -test.timeout 10m) >"$work/tests.log" 2>&1
set -e
secs=$(( $(date +%s) - start ))

known=$(sed -e 's/#.*//' "$here/known-failures.txt" | awk 'NF { print $1 }' | sort -u)
passed=0 failed=() fixed=()
for t in $tests; do
  if grep -q "^--- PASS: $t " "$work/tests.log"; then
    passed=$((passed + 1))
    if grep -qx "$t" <<<"$known"; then fixed+=("$t"); fi
  elif ! grep -qx "$t" <<<"$known"; then
    failed+=("$t")
  fi
done
echo "azcosmos-suite: $passed of $total emulator tests pass (${secs}s)" >&2
for t in $tests; do
  grep -q "^--- PASS: $t " "$work/tests.log" || echo "  not passing: $t" >&2
done
if [ "${#failed[@]}" -gt 0 ] || [ "${#fixed[@]}" -gt 0 ] || [ $report = 1 ]; then
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "azcosmos-suite: failing and not in known-failures.txt: ${failed[*]}" >&2
    for t in "${failed[@]}"; do
      awk -v t="$t" '$0 ~ "^=== RUN   "t"$" {p=1} p {print} $0 ~ "^--- (FAIL|SKIP): "t" " {exit}' "$work/tests.log" | tail -40 >&2
    done
  fi
  if [ "${#fixed[@]}" -gt 0 ]; then
    echo "azcosmos-suite: passing now, remove from known-failures.txt: ${fixed[*]}" >&2
  fi
  if [ -n "${AZCOSMOS_SUITE_LOG:-}" ]; then cp "$work/tests.log" "$AZCOSMOS_SUITE_LOG"; cp "$work/emulator.log" "$AZCOSMOS_SUITE_LOG.emulator"; fi
  [ $report = 1 ] && exit 0
  exit 1
fi
