#!/usr/bin/env bash
# Runs the azure-cosmos (Python SDK) 4.17.1 emulator tests (tests/ of the release's PyPI source
# archive, unchanged, its sha256 checked; see README.md) against `cfp emulator` over TLS on a free port of the IPv6 loopback, trusting the
# emulator's certificate (REQUESTS_CA_BUNDLE; verification stays on), and fails on any test that does not
# pass unless known-failures.txt names it (one line: test id, then the reason). The list only
# shrinks: a listed test that passes fails the run too, so the entry is removed.
#
# Usage: test/python-suite/run.sh [--report] [PYTEST_K_EXPRESSION]
#   --report               print the results, exit 0 whatever they are (to measure)
#   PYTEST_K_EXPRESSION    run only the tests pytest -k selects (for debugging one test)
# The virtualenv is made once per requirements.txt in ${CFP_PYSUITE_CACHE:-~/.cache/cfp-python-suite}
# with python3 (PYTHON overrides), and pip installs the pinned requirements into it.
set -euo pipefail
# shellcheck source=../lib/emulator.sh
source "$(dirname "$0")/../lib/emulator.sh"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
report=0
if [ "${1:-}" = "--report" ]; then report=1; shift; fi
only=${1:-}

python=${PYTHON:-python3}
cache=${CFP_PYSUITE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cfp-python-suite}
venv="$cache/venv-$(cat "$here/requirements.txt" <("$python" -V 2>&1) | sha256sum | cut -c1-16)"
if [ ! -x "$venv/bin/pytest" ]; then
  echo "== python-suite: create $venv" >&2
  rm -rf "$venv" && mkdir -p "$cache"
  "$python" -m venv "$venv.tmp"
  "$venv.tmp/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
  mv "$venv.tmp" "$venv"
fi

# The SDK's own test files: tests/ of the release's source archive on PyPI, pinned by its sha256,
# fetched once into the cache and copied unchanged beside this directory's conftest.py, pytest.ini
# and shim/ in a work directory (they are not kept in this repository).
sdist_name=azure_cosmos-4.17.1.tar.gz
sdist_sha256=d692928a54d88163e96d41d8f899229ca2f6a6bf21973ece2bfc1f72d4b4edd8
suite_files="LICENSE tests/conftest.py tests/test_config.py tests/test_change_feed.py tests/test_crud.py
  tests/test_crud_container.py tests/test_crud_database.py tests/test_query.py tests/test_transactional_batch.py"
sdist="$cache/$sdist_name"
if [ ! -s "$sdist" ] || ! echo "$sdist_sha256  $sdist" | sha256sum -c --status; then
  echo "== python-suite: download $sdist_name from PyPI" >&2
  rm -rf "$cache/sdist.tmp" && mkdir -p "$cache/sdist.tmp"
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$cache/sdist.tmp" "azure-cosmos==4.17.1"
  echo "$sdist_sha256  $cache/sdist.tmp/$sdist_name" | sha256sum -c --status ||
    { echo "python-suite: $sdist_name does not have the pinned sha256" >&2; exit 1; }
  mv "$cache/sdist.tmp/$sdist_name" "$sdist" && rm -rf "$cache/sdist.tmp"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/python-suite.XXXXXX")
emu_pids=()
cleanup() {
  for p in "${emu_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

suite="$work/suite"
mkdir -p "$suite/tests"
cp -r "$here/conftest.py" "$here/pytest.ini" "$here/shim" "$suite/"
# shellcheck disable=SC2086 # suite_files is a list of paths
tar -xzf "$sdist" -C "$work" $(for f in $suite_files; do echo "${sdist_name%.tar.gz}/$f"; done)
cp "$work/${sdist_name%.tar.gz}/LICENSE" "$work/${sdist_name%.tar.gz}"/tests/* "$suite/tests/"

echo "== python-suite: build cfp" >&2
(cd "$root" && go build -o "$work/cfp" .)

# Shards. Three tests wait on the wall clock for client-side timeouts (a fake transport that
# answers 429 until a 30 s timeout; 3 s delays per request): 121 of the suite's 170 s on one
# process. They run in two shards of their own (60 s each), beside the rest, each shard against an emulator of its own
# (the suite's conftest creates and deletes a shared test database), so the suite takes about
# as long as its slowest test. PYTEST_K_EXPRESSION runs one shard.
slow=("test_timeout_on_throttling_error" "test_timeout_for_read_items or test_inner_exceptions_on_timeout")
if [ -n "$only" ]; then
  shards=("$only")
else
  rest="not ($(IFS='|'; echo "${slow[*]}" | sed 's/|/ or /g'))"
  shards=("${slow[@]}" "$rest")
fi

# start_shard_emulator DIR: cfp emulator on a free port of [::1], its endpoint and certificate in
# DIR/endpoint and DIR/cert.
#
# On [::1], not localhost: the SDK turns TLS verification off for the hosts localhost and
# 127.0.0.1 (_synchronized_request.py), and the suite must verify the emulator's certificate.
start_shard_emulator() {
  local dir=$1
  start_emulator "$work/cfp" "$dir" '[::1]:0'
  emu_pids+=("$emulator_pid")
  field() { "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1" <"$dir/serving.json"; }
  field tls_endpoint >"$dir/endpoint"
  field cert_file >"$dir/cert"
  [ -s "$(cat "$dir/cert")" ] || { echo "python-suite: no certificate at $(cat "$dir/cert")" >&2; exit 1; }
}

echo "== python-suite: start ${#shards[@]} cfp emulators on free ports of [::1], one per shard" >&2
for i in "${!shards[@]}"; do start_shard_emulator "$work/shard-$i"; done

# --tb=native: pytest's own traceback format parses the test's source, and a RecursionError in a
# test (the SDK's retries) then breaks pytest itself (INTERNALERROR, exit 3) on CPython 3.11.
run_shard() {
  local i=$1 dir="$work/shard-$i"
  local args=(-p no:cacheprovider -q -rfE --tb=native --junitxml "$dir/junit.xml" --rootdir "$suite" -k "${shards[$i]}")
  set +e
  (cd "$suite" && PYTHONDONTWRITEBYTECODE=1 ACCOUNT_HOST="$(cat "$dir/endpoint")" REQUESTS_CA_BUNDLE="$(cat "$dir/cert")" SSL_CERT_FILE="$(cat "$dir/cert")" \
    "$venv/bin/python" -m pytest "${args[@]}" $(cd "$suite" && ls tests/test_*.py | grep -v test_config.py)) >"$dir/tests.log" 2>&1
  echo $? >"$dir/rc"
}
echo "== python-suite: run the tests in ${#shards[@]} shards" >&2
start=$(date +%s)
shard_pids=()
for i in "${!shards[@]}"; do run_shard "$i" & shard_pids+=($!); done
wait "${shard_pids[@]}"
secs=$(( $(date +%s) - start ))
for i in "${!shards[@]}"; do
  { echo "== shard $i: -k ${shards[$i]}"; cat "$work/shard-$i/tests.log"; } >>"$work/tests.log"
  cat "$work/shard-$i/emulator.log" >>"$work/emulator.log"
done
if [ -n "${PYTHON_SUITE_LOG:-}" ]; then
  cp "$work/tests.log" "$PYTHON_SUITE_LOG"; cp "$work/emulator.log" "$PYTHON_SUITE_LOG.emulator"
fi
for i in "${!shards[@]}"; do
  r=$(cat "$work/shard-$i/rc")
  case $r in
    0|1) ;;
    # 5: nothing collected. A shard of the slow tests that collects nothing means the suite
    # renamed them; with a -k of the caller's, nothing matched.
    5) echo "python-suite: no test matches -k ${shards[$i]}" >&2; exit 1 ;;
    *) echo "python-suite: pytest exited $r (shard -k ${shards[$i]})" >&2; tail -60 "$work/shard-$i/tests.log" >&2; exit 1 ;;
  esac
done

# One line per test: its id (file::class::name[params], relative to tests/) and its outcome.
"$venv/bin/python" - "$work"/shard-*/junit.xml >"$work/results" <<'PY'
import sys
import xml.etree.ElementTree as ET
cases = [c for f in sys.argv[1:] for c in ET.parse(f).getroot().iter("testcase")]
for case in cases:
    path = case.get("classname", "").split(".")
    # classname is module[.Class]: tests.test_x.TestY -> test_x.py::TestY
    mod = [p for p in path if p.startswith("test_")]
    i = path.index(mod[0]) if mod else 0
    tid = "::".join([path[i] + ".py"] + path[i + 1:] + [case.get("name")])
    outcome = "passed"
    for child in case:
        if child.tag in ("failure", "error", "skipped"):
            outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
            break
    print(tid, outcome)
PY

# A listed test whose reason starts with "flaky:" may pass or fail (its outcome depends on the
# machine's load, not on the emulator); every other listed test must fail.
known=$(sed -e 's/#.*//' "$here/known-failures.txt" | awk 'NF { print $1 }' | sort -u)
flaky=$(sed -e 's/#.*//' "$here/known-failures.txt" | awk 'NF && $2 == "flaky:" { print $1 }' | sort -u)
total=$(wc -l <"$work/results")
count() { awk -v o="$1" '$2 == o' "$work/results" | wc -l; }
failed=() fixed=()
while read -r t outcome; do
  if [ "$outcome" = passed ] || [ "$outcome" = skipped ]; then
    if grep -qxF -- "$t" <<<"$known" && ! grep -qxF -- "$t" <<<"$flaky"; then fixed+=("$t"); fi
  elif ! grep -qxF -- "$t" <<<"$known"; then
    failed+=("$t")
  fi
done <"$work/results"
echo "python-suite: $(count passed) passed, $(count failed) failed, $(count error) errors, $(count skipped) skipped of $total tests (${secs}s)" >&2
if [ $report = 1 ]; then awk '$2 != "passed" { print "  " $2 ": " $1 }' "$work/results" >&2; fi
if [ "${#failed[@]}" -gt 0 ] || [ "${#fixed[@]}" -gt 0 ] || [ $report = 1 ]; then
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "python-suite: failing and not in known-failures.txt:" >&2
    printf '  %s\n' "${failed[@]}" >&2
    grep -E '^(FAILED|ERROR) ' "$work/tests.log" >&2 || true
  fi
  if [ "${#fixed[@]}" -gt 0 ]; then
    echo "python-suite: passing now, remove from known-failures.txt:" >&2
    printf '  %s\n' "${fixed[@]}" >&2
  fi
  if [ -n "${PYTHON_SUITE_LOG:-}" ]; then cp "$work/results" "$PYTHON_SUITE_LOG.results"; fi
  [ $report = 1 ] && exit 0
  exit 1
fi
