#!/usr/bin/env python3
"""An application process for the end-to-end tests: a Processor that records what it handles.

Each batch is one O_APPEND line in --record ({"inst", "lease", "continuation", "ids"}), and each
lease event too ({"inst", "ev", "lease", "t"}), so a kill -9 loses nothing already recorded. The
application, not the library, turns SIGTERM into a graceful stop (request_stop).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from typing import Any, Dict, List

from cfp_changefeed import ChangeContext, LeaseContext, Processor


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--database", required=True)
    ap.add_argument("--container", required=True)
    ap.add_argument("--processor", required=True)
    ap.add_argument("--instance", required=True)
    ap.add_argument("--record", required=True)
    ap.add_argument("--manual", action="store_true", help="manual checkpoints: never checkpoint a batch")
    ap.add_argument("--handler-delay", type=float, default=0.0)
    ap.add_argument("--lease-acquire-interval", type=float, default=1.0)
    ap.add_argument("--lease-renew-interval", type=float, default=1.0)
    ap.add_argument("--lease-expiration", type=float, default=4.0)
    ap.add_argument("--cfp", default=None)
    a = ap.parse_args()
    fd = os.open(a.record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(**kv: Any) -> None:
        kv["inst"] = a.instance
        os.write(fd, (json.dumps(kv) + "\n").encode())

    async def run() -> int:
        p = Processor(
            endpoint=a.endpoint,  # the key comes from COSMOS_KEY in the environment
            database=a.database,
            container=a.container,
            processor=a.processor,
            instance=a.instance,
            start_from="beginning",
            poll_interval=0.2,
            lease_acquire_interval=a.lease_acquire_interval,
            lease_renew_interval=a.lease_renew_interval,
            lease_expiration=a.lease_expiration,
            create_lease_container=True,
            manual_checkpoint=a.manual,
            cfp_path=a.cfp,
        )

        @p.on_changes
        async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
            record(lease=ctx.lease, continuation=ctx.continuation, ids=[c["id"] for c in changes])
            if a.handler_delay:
                await asyncio.sleep(a.handler_delay)

        @p.on_lease_acquired
        async def acquired(ctx: LeaseContext) -> None:
            record(ev="acquired", lease=ctx.lease, t=time.time())

        @p.on_lease_released
        async def released(ctx: LeaseContext) -> None:
            record(ev="released", lease=ctx.lease, reason=ctx.reason, t=time.time())

        @p.on_lease_lost
        async def lost(ctx: LeaseContext) -> None:
            record(ev="lost", lease=ctx.lease, t=time.time())

        await p.start()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, p.request_stop)
        print(f"ready {p.pid}", flush=True)
        await p.wait()
        record(ev="stopped", t=time.time(), summary=p.summary)
        return 0

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
