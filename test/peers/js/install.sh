#!/usr/bin/env bash
# Installs the JavaScript change feed reader's SDK (@azure/cosmos, pinned in package.json and
# package-lock.json) into test/peers/js/node_modules, which the Go tests in this directory use.
set -euo pipefail
cd "$(dirname "$0")"
start=$SECONDS
npm ci --no-audit --no-fund --loglevel=error
echo "test/peers/js: installed @azure/cosmos $(node -p 'require("./node_modules/@azure/cosmos/package.json").version') in $((SECONDS - start))s" >&2
