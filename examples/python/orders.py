#!/usr/bin/env python3
"""Process the orders that `cfp demo` writes, with a change feed processor in Python.

    cfp demo --data demo-data --duration 10s
    cfp emulator --data demo-data --addr 127.0.0.1:8082 &
    COSMOS_ENDPOINT=http://127.0.0.1:8082/ python examples/python/orders.py --until-idle 5

It totals the orders by status as they arrive (at least once: a change delivered twice is
counted once, by id), checkpointing after each batch. Without --until-idle it runs until Ctrl-C
or SIGTERM, then stops cleanly: the leases are checkpointed and released for the other
instances. Start it twice (another --instance) and the two share the leases.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections import Counter
from typing import Any, Dict, List

from cfp_changefeed import ChangeContext, ChangeFeedError, LeaseContext, Processor, estimate


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", default=os.environ.get("COSMOS_ENDPOINT"),
                    help="account endpoint (default $COSMOS_ENDPOINT; the key comes from $COSMOS_KEY, "
                         "or is the emulator's well-known key)")
    ap.add_argument("--processor", default="orders-py", help="processor name (the lease prefix)")
    ap.add_argument("--instance", default=None, help="this instance's name (default: cfp's)")
    ap.add_argument("--until-idle", type=float, default=0,
                    help="stop after this many seconds without a change (default: run until stopped)")
    a = ap.parse_args()
    if not a.endpoint:
        print("orders.py: set COSMOS_ENDPOINT or pass --endpoint", file=sys.stderr)
        return 2

    p = Processor(
        endpoint=a.endpoint,
        database="demo",
        container="orders",
        processor=a.processor,
        instance=a.instance,
        lease_container="leases",
        start_from="beginning",
        poll_interval=0.5,
    )
    orders: Dict[str, Dict[str, Any]] = {}
    last_change = time.monotonic()

    @p.on_changes
    async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
        nonlocal last_change
        for order in changes:
            orders[order["id"]] = order
        last_change = time.monotonic()
        print(f"lease {ctx.lease}: {len(changes)} orders (attempt {ctx.attempt})", file=sys.stderr)

    @p.on_lease_acquired
    async def acquired(ctx: LeaseContext) -> None:
        print(f"acquired lease {ctx.lease} ({ctx.range})", file=sys.stderr)

    @p.on_lease_released
    async def released(ctx: LeaseContext) -> None:
        print(f"released lease {ctx.lease}: {ctx.reason}", file=sys.stderr)

    @p.on_error
    async def on_error(e: ChangeFeedError) -> None:
        print(f"error: {e}", file=sys.stderr)

    async with p:
        # Stopping is the application's business: SIGTERM (a container's stop) and Ctrl-C both
        # ask for a graceful stop.
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, p.request_stop)
        waiting = asyncio.ensure_future(p.wait())
        while not waiting.done():
            await asyncio.wait({waiting}, timeout=0.5)
            if a.until_idle and orders and time.monotonic() - last_change > a.until_idle:
                lag = await estimate(endpoint=a.endpoint, database="demo", container="orders",
                                     processor=a.processor, lease_container="leases")
                if lag.total_lag == 0:
                    break
        if waiting.done():
            waiting.result()  # raises if cfp died
        else:
            waiting.cancel()
    by_status = Counter(o["status"] for o in orders.values())
    total = sum(o["total"] for o in orders.values())
    print(f"{len(orders)} orders, {total:.2f} in all")
    for status, n in sorted(by_status.items()):
        print(f"  {status:<10} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
