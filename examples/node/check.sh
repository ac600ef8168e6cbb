#!/usr/bin/env bash
# Runs the steps of docs/user-guide.md, "From Node.js", as written, in a copy of the committed
# tree (as a fresh clone has it): cfp demo writes the orders, cfp emulator serves them (on a
# free port instead of 8081), npm install ./clients/node, then the example processes every order
# the demo wrote. CI runs it (.ci/run); CFP names the cfp binary to put on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
emu_pid=
cleanup() {
  if [ -n "$emu_pid" ]; then kill "$emu_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
bindir=$work/bin
mkdir -p "$bindir" "$work/clone"
cp "${CFP:?set CFP to the cfp binary}" "$bindir/cfp"
export PATH=$bindir:$PATH
git -C "$root" archive HEAD clients/node examples/node | tar -x -C "$work/clone"
cd "$work/clone"

cfp demo --duration 10s --data demo-data -o json > demo.json
written=$(sed -n 's/.*"written": *\([0-9]*\).*/\1/p' demo.json | head -n1)
cfp emulator --data demo-data --addr 127.0.0.1:0 > emu.json 2> emu.err &
emu_pid=$!
for _ in $(seq 100); do grep -q endpoint emu.json 2>/dev/null && break; sleep 0.1; done
export COSMOS_ENDPOINT=$(sed -n 's/.*"endpoint":"\([^"]*\)".*/\1/p' emu.json)
npm install --no-audit --no-fund --silent ./clients/node
timeout 120 node examples/node/orders.mjs --until-caught-up > orders.out 2> orders.err || {
  cat orders.err >&2
  exit 1
}
processed=$(sort -u orders.out | grep -c '^order-')
echo "examples/node: the demo wrote $written orders, the example processed $processed"
tail -n1 orders.err
if [ "$processed" != "$written" ]; then
  echo "examples/node: every order the demo wrote should be processed" >&2
  exit 1
fi
