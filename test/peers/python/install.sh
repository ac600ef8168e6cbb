#!/usr/bin/env bash
# Installs the Python change feed reader's SDK (requirements.txt, pinned) into
# test/peers/python/.venv, which the Go tests in this directory use. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
start=$SECONDS
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
echo "test/peers/python: installed $(.venv/bin/python -c 'import azure.cosmos; print("azure-cosmos", azure.cosmos.__version__)') in $((SECONDS - start))s" >&2
