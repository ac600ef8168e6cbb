"""End to end: the library with the real `cfp process --app-protocol 1` against `cfp emulator`.

The binary is $CFP_BIN or cfp built from this repository. Figures (changes, duplicates, time to
take over) are printed; run with -s to see them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Set

import pytest

from cfp_changefeed import ChangeContext, LeaseContext, Processor, estimate

from cfpenv import Emulator, cfp_binary, has_app_protocol

HERE = Path(__file__).resolve().parent
DB, CONT = "shop", "orders"
# Every wait below is for something the processes make happen; the bound only turns a hang into
# a failure with a message.
BOUND = 90.0


@pytest.fixture(scope="session")
def cfp(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = cfp_binary(tmp_path_factory.mktemp("bin"))
    if not has_app_protocol(path):
        if os.environ.get("CFP_E2E_REQUIRED"):
            pytest.fail(f"{path} has no process --app-protocol")
        pytest.skip(f"{path} has no process --app-protocol yet")
    return path


@pytest.fixture
def emu(cfp: str, tmp_path: Path) -> Iterator[Emulator]:
    e = Emulator(cfp, tmp_path / "emu", partitions=4)
    try:
        yield e
    finally:
        e.close()


def docs(start: int, n: int, pk: Callable[[int], str] = lambda i: f"pk-{i % 64}") -> List[Dict[str, Any]]:
    return [{"id": f"doc-{i:05d}", "pk": pk(i), "seq": i} for i in range(start, start + n)]


def wait_until(cond: Callable[[], bool], what: str, bound: float = BOUND) -> None:
    end = time.monotonic() + bound
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"not within {bound:g}s: {what}")
        time.sleep(0.1)


async def await_until(cond: Callable[[], bool], what: str, bound: float = BOUND) -> None:
    end = time.monotonic() + bound
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"not within {bound:g}s: {what}")
        await asyncio.sleep(0.05)


class App:
    """tests/e2e_app.py as a separate application process."""

    def __init__(self, cfp: str, emu: Emulator, tmp: Path, instance: str, processor: str, *extra: str) -> None:
        self.instance = instance
        self.record = tmp / f"{instance}.jsonl"
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "e2e_app.py"), "--endpoint", emu.endpoint, "--database", DB,
             "--container", CONT, "--processor", processor, "--instance", instance,
             "--record", str(self.record), "--cfp", cfp, *extra],
            stdout=subprocess.PIPE, stderr=open(tmp / f"{instance}.log", "ab"), env=emu.env(), text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        assert line[:1] == ["ready"], f"{instance} did not start: {(tmp / f'{instance}.log').read_text()[-2000:]}"
        self.cfp_pid = int(line[1])

    def lines(self) -> List[Dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(x) for x in self.record.read_text().splitlines() if x.endswith("}")]

    def ids(self) -> List[str]:
        return [i for r in self.lines() if "ids" in r for i in r["ids"]]

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(BOUND)


def host_ids(path: Path) -> List[str]:
    if not path.exists():
        return []
    return [json.loads(x)["id"] for x in path.read_text().splitlines() if x.endswith("}")]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


LEASE_FLAGS = ["--poll-interval", "200ms", "--lease-acquire-interval", "1s", "--lease-renew-interval", "1s",
               "--lease-expiration", "4s"]


def test_two_apps_and_a_cfp_host_share_one_lease_set(cfp: str, emu: Emulator, tmp_path: Path) -> None:
    """Two Python processes and one `cfp process` host: a split, a kill -9, nothing lost."""
    n, rounds = 600, 6
    emu.write(DB, CONT, docs(0, n // rounds))
    a = App(cfp, emu, tmp_path, "py-a", "shared")
    # b is slow, so the kill -9 lands between a delivery and its answer: duplicates, never losses.
    b = App(cfp, emu, tmp_path, "py-b", "shared", "--handler-delay", "0.3")
    host_out = tmp_path / "host.jsonl"
    host = subprocess.Popen(
        [cfp, "--endpoint", emu.endpoint, "process", "-d", DB, "-c", CONT, "-p", "shared", "--instance", "cfp-host",
         "--from", "beginning", "--create-lease-container", *LEASE_FLAGS, "--events", "none"],
        stdout=open(host_out, "wb"), stderr=open(tmp_path / "host.log", "wb"), env=emu.env(),
    )
    extra: List[str] = []
    try:
        wait_until(lambda: {lz.get("owner") for lz in emu.leases(DB, CONT, "shared")} == {"py-a", "py-b", "cfp-host"},
                   "the three processes balance the 4 leases")
        for r in range(1, rounds):
            wait_until(lambda: len(set(a.ids()) | set(b.ids()) | set(host_ids(host_out))) >= r * n // rounds // 2,
                       "the processors keep up")
            if r == 2:
                emu.split(DB, CONT, "0")
            emu.write(DB, CONT, docs(r * n // rounds, n // rounds))
            if r == 3:
                # b works, then dies in the middle. (Should the split have left it without a
                # lease until its next acquire, more changes are written until it has work.)
                end = time.monotonic() + BOUND
                while not b.ids():
                    assert time.monotonic() < end, "the slow process never handled a change"
                    more = [{"id": f"extra-{len(extra) + i:03d}", "pk": f"pk-{i}", "seq": -1} for i in range(64)]
                    extra.extend(d["id"] for d in more)
                    emu.write(DB, CONT, more)
                    t = time.monotonic()
                    while not b.ids() and time.monotonic() - t < 2:
                        time.sleep(0.1)
                os.kill(b.proc.pid, signal.SIGKILL)
                b.proc.wait()
                b_killed_with = len(b.ids())
                # Its cfp outlives it only to release its leases: it exits by itself.
                wait_until(lambda: not alive(b.cfp_pid), "the killed process's cfp exits")

        want = {d["id"] for d in docs(0, n)} | set(extra)

        def delivered() -> List[str]:
            return a.ids() + b.ids() + host_ids(host_out)

        wait_until(lambda: want <= set(delivered()), "every change delivered")
        # b's cfp saw its parent's end (stdin closed) and gave its leases up.
        wait_until(lambda: all(lz.get("owner") in ("py-a", "cfp-host") for lz in emu.leases(DB, CONT, "shared")),
                   "the killed process's leases taken over")
        all_ids = delivered()
        dup = len(all_ids) - len(want)
        per = {"py-a": len(a.ids()), "py-b": b_killed_with, "cfp-host": len(host_ids(host_out))}
        leases = emu.leases(DB, CONT, "shared")
        print(f"\nshared lease set: {len(want)} changes, {len(all_ids)} deliveries, {dup} duplicates, "
              f"per process {per}, {len(leases)} leases after the split")
        assert set(all_ids) == want  # none lost, nothing foreign
        assert len(leases) == 5  # 4 partitions, one split into two
        assert per["py-a"] > 0 and per["py-b"] > 0 and per["cfp-host"] > 0
        assert a.stop() == 0
        assert any(r.get("ev") == "released" and r.get("reason") == "shutdown" for r in a.lines())
    finally:
        for p in (a.proc, b.proc):
            if p.poll() is None:
                p.kill()
        host.send_signal(signal.SIGINT)
        rc = host.wait(BOUND)
    assert rc in (0, 130)


async def test_stop_releases_leases_for_the_other_process(cfp: str, emu: Emulator) -> None:
    """stop() releases the leases; the other process takes them without waiting for expiry."""
    emu.write(DB, CONT, docs(0, 40))
    acquire = 2.0

    def make(instance: str) -> Processor:
        p = Processor(endpoint=emu.endpoint, key=emu.key, database=DB, container=CONT, processor="handoff",
                      instance=instance, start_from="beginning", poll_interval=0.2, create_lease_container=True,
                      # Expiry is far beyond the test: only a release can move a lease in time.
                      lease_acquire_interval=acquire, lease_renew_interval=5, lease_expiration=600, cfp_path=cfp)
        p.on_changes(lambda changes, ctx: None)
        return p

    p1, p2 = make("one"), make("two")
    taken: List[float] = []

    @p2.on_lease_acquired
    async def got(ctx: LeaseContext) -> None:
        taken.append(time.monotonic())

    await p1.start()
    await await_until(lambda: len(p1.leases) == 4, "one holds all 4 leases")
    await p2.start()
    await await_until(lambda: len(p2.leases) == 2 and len(p1.leases) == 2, "two takes half of them")
    before = len(taken)
    t0 = time.monotonic()
    await p1.stop()
    await await_until(lambda: len(p2.leases) == 4, "two takes the leases one released", bound=acquire * 10)
    took = taken[-1] - t0
    print(f"\ntakeover after stop(): {took:.2f}s ({took / acquire:.2f} acquire intervals of {acquire:g}s), "
          f"{len(taken) - before} leases")
    leases = emu.leases(DB, CONT, "handoff")
    assert {lz["owner"] for lz in leases} == {"two"}
    await p2.stop()
    assert all(lz["owner"] is None for lz in emu.leases(DB, CONT, "handoff"))


async def test_slow_handler_applies_backpressure(cfp: str, emu: Emulator) -> None:
    """A blocked lease gets no further batch and its checkpoint does not move; others go on."""
    emu.write(DB, CONT, docs(0, 1, pk=lambda i: "hot") + docs(1000, 64))
    gate = asyncio.Event()
    gate.set()
    hot_lease: List[str] = []
    batches: Dict[str, int] = {}
    seen: Set[str] = set()
    p = Processor(endpoint=emu.endpoint, key=emu.key, database=DB, container=CONT, processor="slow",
                  start_from="beginning", poll_interval=0.1, batch_size=10, create_lease_container=True, cfp_path=cfp)

    @p.on_changes
    async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
        batches[ctx.lease] = batches.get(ctx.lease, 0) + 1
        if any(c["pk"] == "hot" for c in changes):
            if not hot_lease:
                hot_lease.append(ctx.lease)
            await gate.wait()
        seen.update(c["id"] for c in changes)

    async def lags() -> Dict[str, int]:
        est = await estimate(endpoint=emu.endpoint, key=emu.key, database=DB, container=CONT, processor="slow",
                             cfp_path=cfp)
        return {x.lease: x.lag for x in est.leases}

    async def caught_up(leases: Callable[[str], bool], what: str) -> Dict[str, int]:
        end = time.monotonic() + BOUND
        while True:
            got = await lags()
            if got and all(v == 0 for k, v in got.items() if leases(k)):
                return got
            if time.monotonic() > end:
                raise AssertionError(f"not within {BOUND:g}s: {what} ({got})")
            await asyncio.sleep(0.3)

    async with p:
        await await_until(lambda: len(seen) == 65, "the first 65 changes")
        await caught_up(lambda k: True, "every lease checkpointed")
        lease = hot_lease[0]
        gate.clear()
        before = batches[lease]
        emu.write(DB, CONT, docs(1, 200, pk=lambda i: "hot") + docs(2000, 64))
        await await_until(lambda: batches[lease] == before + 1, "the hot lease's blocked batch")
        # The other leases go on to the end while the hot one waits.
        got = await caught_up(lambda k: k != lease, "the other leases catch up")
        # While its handler holds a batch, cfp sends the lease nothing more and checkpoints nothing.
        assert batches[lease] == before + 1
        assert got[lease] >= 200
        print(f"\nbackpressure: blocked lease {lease} lag {got[lease]} with one batch in the handler; "
              f"the other leases' lag {[v for k, v in got.items() if k != lease]}")
        gate.set()
        await await_until(lambda: {d["id"] for d in docs(1, 200)} <= seen, "the hot lease catches up")
        await caught_up(lambda k: True, "every lease checkpointed again")
        assert batches[lease] >= before + 20


def test_manual_checkpoints_and_kill(cfp: str, emu: Emulator, tmp_path: Path) -> None:
    """A process that never checkpoints (manual) and dies: its changes come again; automatic
    checkpoints: they do not."""
    n = 120
    emu.write(DB, CONT, docs(0, n))
    want = {d["id"] for d in docs(0, n)}
    m = App(cfp, emu, tmp_path, "manual", "cp", "--manual")
    wait_until(lambda: set(m.ids()) == want, "the manual process handles every change")
    os.kill(m.proc.pid, signal.SIGKILL)
    m.proc.wait()
    # Its cfp saw stdin close with nothing answered for release: no checkpoint was written.
    wait_until(lambda: all(lz["owner"] is None for lz in emu.leases(DB, CONT, "cp")), "the leases released")
    assert all(lz["continuation"] is None for lz in emu.leases(DB, CONT, "cp"))
    a = App(cfp, emu, tmp_path, "auto-1", "cp")
    wait_until(lambda: set(a.ids()) == want, "every change again after the kill")
    assert a.stop() == 0
    b = App(cfp, emu, tmp_path, "auto-2", "cp")
    emu.write(DB, CONT, docs(n, 1))
    wait_until(lambda: b.ids() == [f"doc-{n:05d}"], "only the new change")
    assert b.stop() == 0
    print(f"\nmanual checkpoints: {n} changes, {len(a.ids())} delivered again after kill -9 of a process "
          f"that never checkpointed, {len(b.ids())} (the new one) after a graceful stop with checkpoints")
