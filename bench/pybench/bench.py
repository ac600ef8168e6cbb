#!/usr/bin/env python3
"""Throughput of a do-nothing Python handler (cfp_changefeed) against `cfp process` with the
stdout delegate, on the same data, side by side.

    clients/python/.venv/bin/python bench/pybench/bench.py --docs 100000 --runs 3

It builds cfp (or takes --cfp), starts `cfp emulator --addr 127.0.0.1:0` on a fresh data
directory with --partitions partitions, imports --docs documents of about --body bytes, then
runs, alternately, --runs times each:

  process  cfp process --from beginning --batch-size N > /dev/null, until its batch events
           (--events-file) add up to every document;
  python   a Processor(start_from="beginning", batch_size=N) in this process whose async
           handler only counts, until it has counted every document;

each with a new processor name (a fresh lease set, bootstrap included), timed from the start of
the child to the last document. It prints each run, the best of each, and python/process as a
throughput ratio (issue 27's goal: >= 0.3). See bench/README.md, "python".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "clients/python/src"))

from cfp_changefeed import ChangeContext, Processor  # noqa: E402

DB, CONT = "bench", "docs"


def start_emulator(cfp: str, data: Path, partitions: int) -> Tuple[subprocess.Popen, str, str]:
    p = subprocess.Popen([cfp, "emulator", "--addr", "127.0.0.1:0", "--data", str(data), "--partitions",
                          str(partitions), "-o", "json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert p.stdout is not None
    text = ""
    for line in p.stdout:
        text += line
        if line.startswith("}"):
            break
    info = json.loads(text)
    return p, info["endpoint"], info["key"]


def run_process(cfp: str, endpoint: str, env: Dict[str, str], name: str, docs: int, batch: int, tmp: Path) -> float:
    events = tmp / f"{name}.events"
    t0 = time.monotonic()
    p = subprocess.Popen([cfp, "--endpoint", endpoint, "process", "-d", DB, "-c", CONT, "-p", name,
                          "--from", "beginning", "--batch-size", str(batch), "--poll-interval", "100ms",
                          "--events-file", str(events), "--create-lease-container"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    seen, pos = 0, 0
    while seen < docs:
        if p.poll() is not None:
            raise SystemExit(f"cfp process exited {p.returncode}")
        if events.exists():
            with open(events) as f:
                f.seek(pos)
                chunk = f.read()
            end = chunk.rfind("\n") + 1
            pos += len(chunk[:end].encode())
            for line in chunk[:end].splitlines():
                ev = json.loads(line)
                if ev.get("type") == "batch":
                    seen += ev.get("items", 0)
        if seen < docs:
            time.sleep(0.01)
    took = time.monotonic() - t0
    p.send_signal(signal.SIGINT)
    p.wait()
    return took


async def run_python(cfp: str, endpoint: str, key: str, name: str, docs: int, batch: int) -> float:
    done = asyncio.Event()
    count = 0
    p = Processor(endpoint=endpoint, key=key, database=DB, container=CONT, processor=name,
                  start_from="beginning", batch_size=batch, poll_interval=0.1, cfp_path=cfp,
                  create_lease_container=True,
                  stderr=lambda line: None)

    @p.on_changes
    async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
        nonlocal count
        count += len(changes)
        if count >= docs:
            done.set()

    t0 = time.monotonic()
    await p.start()
    waiter = asyncio.ensure_future(p.wait())
    await asyncio.wait({waiter, asyncio.ensure_future(done.wait())}, return_when=asyncio.FIRST_COMPLETED)
    took = time.monotonic() - t0
    if waiter.done():
        waiter.result()
    await p.stop()
    waiter.cancel()
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=50_000)
    ap.add_argument("--body", type=int, default=200, help="approximate bytes of a document's user properties")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cfp", default=None, help="cfp binary (default: go build into a temporary directory)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pybench-"))
    try:
        cfp = a.cfp
        if cfp is None:
            cfp = str(tmp / "cfp")
            subprocess.run(["go", "build", "-o", cfp, "."], cwd=REPO, check=True)
        emu, endpoint, key = start_emulator(cfp, tmp / "data", a.partitions)
        env = dict(os.environ, COSMOS_KEY=key)
        try:
            pad = "x" * max(a.body - 40, 0)
            lines = "".join(json.dumps({"id": f"d{i:08d}", "pk": f"k{i % 997}", "n": i, "pad": pad}) + "\n"
                            for i in range(a.docs))
            subprocess.run([cfp, "--endpoint", endpoint, "import", "-d", DB, "-c", CONT, "--create",
                            "--partition-key-path", "/pk"], input=lines.encode(), env=env, check=True,
                           stderr=subprocess.DEVNULL)
            res: Dict[str, List[float]] = {"process": [], "python": []}
            for r in range(a.runs):
                for who in ("process", "python") if r % 2 == 0 else ("python", "process"):
                    name = f"{who}-{r}"
                    if who == "process":
                        took = run_process(cfp, endpoint, env, name, a.docs, a.batch_size, tmp)
                    else:
                        took = asyncio.run(run_python(cfp, endpoint, key, name, a.docs, a.batch_size))
                    res[who].append(took)
                    print(f"run {r + 1} {who:<8} {took:7.2f}s  {a.docs / took:10.0f} docs/s", flush=True)
            bp, bq = min(res["process"]), min(res["python"])
            ratios = sorted(p / q for p, q in zip(res["process"], res["python"]))
            print(f"best: process {a.docs / bp:.0f} docs/s, python {a.docs / bq:.0f} docs/s; "
                  f"python/process throughput {bp / bq:.2f} (per run: {', '.join(f'{x:.2f}' for x in ratios)}; goal >= 0.3)")
        finally:
            emu.send_signal(signal.SIGTERM)
            emu.wait()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
