"""The library against fakecfp, which speaks the application protocol and checks every answer."""

from __future__ import annotations

import asyncio
import datetime
import os
import threading
from typing import Any, Dict, List

import pytest

from cfp_changefeed import (
    CfpNotFoundError,
    ChangeContext,
    ChangeFeedError,
    ChildExitedError,
    EngineError,
    EstimateError,
    HandlerError,
    LeaseContext,
    OptionsError,
    Processor,
    estimate,
    find_cfp,
)


def two_leases(batches: int = 3) -> List[Dict[str, Any]]:
    return [
        {
            "lease": lease,
            "range": rng,
            "batches": [[{"id": f"{lease}-{b}-{i}"} for i in range(2)] for b in range(batches)],
        }
        for lease, rng in (("0", {"min": "", "max": "80"}), ("1", {"min": "80", "max": "FF"}))
    ]


def proc(fake: Any, **kw: Any) -> Processor:
    return Processor(cfp_path=fake.path, env=fake.env, database="d", container="c", processor="p", **kw)


async def wait_for(cond: Any, what: str) -> None:
    # Awaits a condition the handlers make true; the fake ends the test if it never does.
    for _ in range(2000):
        if cond():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


async def test_every_batch_handled_and_checkpointed(fake: Any) -> None:
    fake.script(leases=two_leases())
    seen: List[str] = []
    acquired: List[LeaseContext] = []
    released: List[LeaseContext] = []
    p = proc(fake, endpoint="http://127.0.0.1:1/", key="sekrit-key==")

    @p.on_lease_acquired
    async def on_acquired(ctx: LeaseContext) -> None:
        acquired.append(ctx)

    @p.on_lease_released
    async def on_released(ctx: LeaseContext) -> None:
        released.append(ctx)

    @p.on_changes
    async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
        assert ctx.instance == "fake-host"
        seen.extend(c["id"] for c in changes)

    async with p:
        assert p.instance == "fake-host"
        await wait_for(lambda: len(seen) == 12, "12 changes")
        assert set(p.leases) == {"0", "1"}
    assert sorted(seen) == sorted(f"{lz}-{b}-{i}" for lz in "01" for b in range(3) for i in range(2))
    assert sorted(c.lease for c in acquired) == ["0", "1"]
    assert {c.lease: str(c.range) for c in acquired} == {"0": "-80", "1": "80-FF"}
    assert sorted((c.lease, c.reason) for c in released) == [("0", "shutdown"), ("1", "shutdown")]
    assert fake.violations() == []
    batch_answers = [a["answer"]["type"] for a in fake.answers() if a["to"] == "batch"]
    assert batch_answers == ["checkpoint"] * 6
    assert fake.checkpoints() == {"0": "0:3", "1": "1:3"}
    assert p.summary is not None and p.returncode == 0
    first = fake.records()[0]
    # The key reached cfp through its environment, and is nowhere on its command line.
    assert first["env"]["COSMOS_KEY"] == "sekrit-key=="
    assert not any("sekrit" in a for a in first["argv"])
    assert first["argv"][:3] == ["process", "--app-protocol", "1"]
    assert "--endpoint" in first["argv"]
    # Events come over the channel; cfp's text copy on stderr is off unless asked for.
    assert first["argv"][first["argv"].index("--events") + 1] == "none"
    # cfp runs in its own process group: a terminal's Ctrl-C is the application's to handle.
    assert first["pgid_is_own"] is True


async def test_manual_checkpoint(fake: Any) -> None:
    fake.script(leases=two_leases(batches=4))
    p = proc(fake, manual_checkpoint=True)
    handled = []

    @p.on_changes
    async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
        handled.append(ctx.continuation)
        if ctx.lease == "0" and ctx.continuation == "0:2":
            await ctx.checkpoint()

    await p.start()
    await wait_for(lambda: len(handled) == 8, "8 batches")
    # Before the stop: lease 0 checkpointed where the handler asked, lease 1 never.
    cps = [(r["checkpoint"], r["at"]) for r in fake.records() if "checkpoint" in r]
    assert cps == [("0", "0:2")]
    await p.stop()
    answers = {(a["lease"], a["continuation"]): a["answer"]["type"] for a in fake.answers() if a["to"] == "batch"}
    assert answers[("0", "0:2")] == "checkpoint"
    assert [t for k, t in answers.items() if k != ("0", "0:2")] == ["done"] * 7
    # The release checkpoints nothing more, as .NET's WithManualCheckpoint: only what the
    # handler checkpointed is written; lease 0's batches after 0:2 and all of lease 1 come again.
    released = {a["lease"]: a["answer"]["type"] for a in fake.answers() if a["to"] == "released"}
    assert released == {"0": "done", "1": "done"}
    assert fake.checkpoints() == {"0": "0:2", "1": ""}
    assert fake.violations() == []


async def test_manual_checkpoint_release_writes_no_checkpoint_flushed_or_not(fake: Any) -> None:
    # Manual checkpoints with buffering: the batches are answered done and on_lease_released
    # flushes the buffer. The release writes no checkpoint either way, as .NET's
    # WithManualCheckpoint (its CloseAsync gets no context to checkpoint with), so the
    # buffered changes come again to the next owner whether the flush worked or not. A flush
    # that raises is still reported. (Before, the release checkpointed what the app never
    # checkpointed: {"0": "0:2"} here.)
    fake.script(leases=two_leases(batches=2))
    p = proc(fake, manual_checkpoint=True)
    buffered: Dict[str, List[str]] = {"0": [], "1": []}
    errors: List[ChangeFeedError] = []
    p.on_error(errors.append)

    @p.on_changes
    async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
        buffered[ctx.lease].extend(c["id"] for c in changes)

    @p.on_lease_released
    async def flush(ctx: LeaseContext) -> None:
        if ctx.lease == "1":
            raise ConnectionError("sink down")
        buffered[ctx.lease].clear()

    await p.start()
    await wait_for(lambda: len(buffered["0"]) + len(buffered["1"]) == 8, "8 changes buffered")
    await p.stop()
    released = {a["lease"]: a["answer"]["type"] for a in fake.answers() if a["to"] == "released"}
    assert released == {"0": "done", "1": "done"}
    assert fake.checkpoints() == {"0": "", "1": ""}
    assert any(isinstance(e, HandlerError) and e.lease == "1" for e in errors)


async def test_handler_error_is_retried_and_reported(fake: Any) -> None:
    fake.script(leases=two_leases(batches=2), retries=2)
    attempts: List[int] = []
    errors: List[ChangeFeedError] = []
    p = proc(fake)

    @p.on_changes
    async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
        if ctx.lease == "1" and ctx.continuation == "1:1":
            attempts.append(ctx.attempt)
            if ctx.attempt < 3:
                raise RuntimeError("database down\nsecond line")

    @p.on_error
    def on_error(e: ChangeFeedError) -> None:
        errors.append(e)

    async with p:
        await wait_for(lambda: len([a for a in fake.answers() if a["to"] == "batch"]) == 6, "6 batch answers")
    assert attempts == [1, 2, 3]
    errs = [a["answer"] for a in fake.answers() if a["answer"]["type"] == "error"]
    assert [e["message"] for e in errs] == ["RuntimeError: database down second line"] * 2
    assert len(errors) == 2 and all(isinstance(e, HandlerError) and e.lease == "1" for e in errors)
    assert isinstance(errors[0].__cause__, RuntimeError)
    assert fake.checkpoints() == {"0": "0:2", "1": "1:2"}


async def test_child_that_dies_is_reported(fake: Any) -> None:
    fake.script(leases=two_leases(batches=5), die_after_answers=4)
    reported: List[ChangeFeedError] = []
    p = proc(fake, stderr=lambda line: None)

    @p.on_changes
    async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
        pass

    @p.on_error
    async def on_error(e: ChangeFeedError) -> None:
        reported.append(e)

    await p.start()
    with pytest.raises(ChildExitedError) as ei:
        await p.wait()
    assert ei.value.returncode == 3
    assert "status 3 without being asked to stop" in str(ei.value)
    assert "fake crash after 4 answers" in str(ei.value)
    await wait_for(lambda: len(reported) == 1, "on_error called")
    assert reported[0] is ei.value
    assert p.leases == {}
    # stop() after the death raises the same error, and does not hang.
    with pytest.raises(ChildExitedError):
        await p.stop()


async def test_start_fails_with_cfp_error_line(fake: Any) -> None:
    fake.script(fail_start="database shop not found (404)")
    p = proc(fake, stderr=lambda line: None)
    p.on_changes(lambda changes, ctx: None)
    with pytest.raises(ChildExitedError) as ei:
        await p.start()
    assert ei.value.returncode == 2
    assert str(ei.value).endswith("cfp: database shop not found (404)")


# cfp ends a usage error with a pointer to --help and many errors with a "Try: ..." hint, after
# its "cfp: ..." line. Found by hand: a bad --batch-size, a wrong key and a wrong container gave
# "Run 'cfp process --help' for more." or the hint as the whole error, without the reason.
@pytest.mark.parametrize(
    "after",
    [
        ["Try: check the names in -d/--database, -c/--container"],
        # A usage error: cfp prints its usage, longer than the stderr tail the error keeps.
        ["", "Usage: cfp process [flags]", ""] + [f"      --flag-{i} N   what it does" for i in range(40)]
        + ["", "Run 'cfp process --help' for more."],
    ],
)
async def test_start_error_is_cfps_reason_not_its_hint(fake: Any, after: List[str]) -> None:
    fake.script(fail_start="--batch-size must not be negative, got -3", fail_start_after=after)
    p = proc(fake, stderr=lambda line: None)
    p.on_changes(lambda changes, ctx: None)
    with pytest.raises(ChildExitedError) as ei:
        await p.start()
    assert str(ei.value) == "cfp exited with status 2 before it started: cfp: --batch-size must not be negative, got -3"
    assert ei.value.stderr[-1] == after[-1]


async def test_a_killed_cfp_is_not_explained_by_its_notes(fake: Any) -> None:
    # Found by hand: a kill -9 of a cfp resuming leases read "cfp was killed by signal 9: cfp:
    # note: 4 of 4 leases ... already have a continuation", a note as the reason.
    fake.script(leases=two_leases(batches=1), note="2 of 2 leases already have a continuation")
    p = proc(fake, stderr=lambda line: None)
    p.on_changes(lambda changes, ctx: None)
    await p.start()
    await wait_for(lambda: len(fake.answers()) == 4, "4 answers")
    assert p.pid is not None
    os.kill(p.pid, 9)
    with pytest.raises(ChildExitedError) as ei:
        await p.wait()
    assert str(ei.value) == "cfp was killed by signal 9"
    assert ei.value.stderr == ["cfp: note: 2 of 2 leases already have a continuation"]


async def test_estimate_error_is_cfps_reason_not_its_hint(tmp_path: Any) -> None:
    exe = tmp_path / "cfp"
    exe.write_text(
        "#!/bin/sh\n"
        "echo 'cfp: no leases for processor \"never\" in lease container shop/leases; found: a' >&2\n"
        "echo \"Try: check -p/--processor, or 'cfp leases list' to see every processor\" >&2\n"
        "exit 5\n"
    )
    exe.chmod(0o755)
    with pytest.raises(EstimateError) as ei:
        await estimate(endpoint="http://127.0.0.1:1/", database="shop", container="c", processor="never", cfp_path=exe)
    assert str(ei.value) == 'cfp: no leases for processor "never" in lease container shop/leases; found: a'
    assert ei.value.returncode == 5


async def test_async_with_raises_on_exit_when_the_child_died(fake: Any) -> None:
    fake.script(leases=two_leases(batches=1), die_after_answers=2)
    p = proc(fake, stderr=lambda line: None)
    p.on_changes(lambda changes, ctx: None)
    with pytest.raises(ChildExitedError):
        async with p:
            await wait_for(lambda: not p.running, "the child exits")


async def test_leases_run_concurrently_one_batch_at_a_time_each(fake: Any) -> None:
    fake.script(leases=two_leases(batches=3))
    p = proc(fake)
    in_flight: Dict[str, int] = {"0": 0, "1": 0}
    most: Dict[str, int] = {"0": 0, "1": 0}
    lease1_done = asyncio.Event()
    order: List[str] = []

    @p.on_changes
    async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
        in_flight[ctx.lease] += 1
        most[ctx.lease] = max(most[ctx.lease], in_flight[ctx.lease])
        if ctx.lease == "0" and ctx.continuation == "0:1":
            # Lease 0 waits for all of lease 1: a slow lease does not hold the others up.
            await lease1_done.wait()
        order.append(ctx.continuation)
        if ctx.continuation == "1:3":
            lease1_done.set()
        in_flight[ctx.lease] -= 1

    async with p:
        await wait_for(lambda: len(order) == 6, "6 batches")
    assert order.index("1:3") < order.index("0:1")
    assert [c for c in order if c.startswith("0")] == ["0:1", "0:2", "0:3"]
    assert most == {"0": 1, "1": 1}


async def test_lost_lease(fake: Any) -> None:
    leases = two_leases(batches=1)
    leases[0]["then"] = "lost"
    fake.script(leases=leases)
    lost: List[str] = []
    p = proc(fake)
    p.on_changes(lambda changes, ctx: None)

    @p.on_lease_lost
    def on_lost(ctx: LeaseContext) -> None:
        lost.append(ctx.lease)

    async with p:
        await wait_for(lambda: lost == ["0"], "lease 0 lost")
        await wait_for(lambda: "0" not in p.leases, "lease 0 dropped")
    assert [a["answer"]["type"] for a in fake.answers() if a["to"] == "lost"] == ["done"]
    assert fake.violations() == []


async def test_engine_error_events_reach_on_error(fake: Any) -> None:
    infra = {"type": "error", "cause": "infra", "permanent": True, "lease": "0", "error": "403 forbidden"}
    user = {"type": "error", "cause": "user", "lease": "0", "error": "handler failed", "attempt": 1}
    fake.script(leases=two_leases(batches=1), events=[infra, user, {"type": "split", "lease": "0"}])
    errors: List[ChangeFeedError] = []
    events: List[Dict[str, Any]] = []
    p = proc(fake)
    p.on_changes(lambda changes, ctx: None)
    p.on_error(errors.append)
    p.on_event(events.append)
    async with p:
        await wait_for(lambda: len(events) == 3, "3 events")
    assert [e["type"] for e in events] == ["error", "error", "split"]
    assert len(errors) == 1 and isinstance(errors[0], EngineError)
    assert errors[0].permanent and errors[0].cause == "infra" and str(errors[0]) == "403 forbidden"


def test_run_with_plain_callbacks(fake: Any) -> None:
    fake.script(leases=two_leases(batches=2))
    p = proc(fake)
    threads = set()
    seen: List[str] = []
    lock = threading.Lock()

    @p.on_changes
    def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
        threads.add(threading.current_thread().name)
        with lock:
            seen.extend(c["id"] for c in changes)
            if len(seen) == 8:
                p.request_stop()

    p.run()
    assert len(seen) == 8
    assert threading.main_thread().name not in threads
    assert fake.checkpoints() == {"0": "0:2", "1": "1:2"}
    assert p.summary is not None


async def test_parent_closing_stdin_ends_cfp(fake: Any) -> None:
    fake.script(leases=two_leases(batches=1))
    p = proc(fake)
    p.on_changes(lambda changes, ctx: None)
    await p.start()
    await wait_for(lambda: len(fake.answers()) == 4, "4 answers")
    assert p._proc is not None and p._proc.stdin is not None
    p._proc.stdin.close()  # what the parent's exit does
    with pytest.raises(ChildExitedError):
        await p.wait()  # not asked to stop: reported
    assert any(r.get("eof") for r in fake.records())


def test_find_cfp(tmp_path: Any, monkeypatch: Any) -> None:
    with pytest.raises(CfpNotFoundError):
        find_cfp(tmp_path / "nope")
    exe = tmp_path / "cfp"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert find_cfp(exe) == str(exe)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_cfp() == str(exe)
    monkeypatch.setenv("PATH", os.devnull)
    with pytest.raises(CfpNotFoundError):
        find_cfp()


def test_bad_account_arguments() -> None:
    # The library's own type (a ChangeFeedError), and a ValueError as Python expects.
    with pytest.raises(OptionsError):
        Processor(endpoint="http://x/", connection_string="AccountEndpoint=x;AccountKey=y;")
    with pytest.raises(OptionsError):
        Processor(local=True, endpoint="http://x/")
    with pytest.raises(OptionsError):
        Processor(endpoint="http://x/", extra_args=["--key-file", "k"], key="k")
    with pytest.raises(OptionsError) as ei:
        Processor(endpoint="http://x/", poll_interval=-1)
    assert isinstance(ei.value, ChangeFeedError) and isinstance(ei.value, ValueError)
    with pytest.raises(OptionsError):
        Processor(endpoint="http://x/", start_from=datetime.datetime(2026, 1, 2))


def test_events_flag_given_by_the_application() -> None:
    p = Processor(local=True, extra_args=["--events-file=ev.jsonl"])
    assert "--events" not in p._args and "--events-file=ev.jsonl" in p._args


async def test_failed_acquire_handler_refuses_the_lease(fake: Any) -> None:
    fake.script(leases=two_leases(batches=1))
    calls: List[str] = []
    errors: List[ChangeFeedError] = []
    seen: List[str] = []
    p = proc(fake)

    @p.on_lease_acquired
    async def acquired(ctx: LeaseContext) -> None:
        calls.append(ctx.lease)
        if ctx.lease == "1" and calls.count("1") == 1:
            raise ConnectionError("cache not reachable")

    @p.on_changes
    async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
        assert ctx.lease in p.leases
        seen.append(ctx.lease)

    p.on_error(errors.append)
    async with p:
        await wait_for(lambda: sorted(seen) == ["0", "1"], "both leases' batches")
    acq = [a["answer"] for a in fake.answers() if a["to"] == "acquired" and a["lease"] == "1"]
    assert [x["type"] for x in acq] == ["error", "done"]
    assert acq[0]["message"] == "ConnectionError: cache not reachable"
    assert len(errors) == 1 and isinstance(errors[0], HandlerError) and errors[0].handler == "acquired"
    assert fake.violations() == []


# An application that never calls stop(): asyncio.run() ends its loop (main returned, or Ctrl-C
# cancelled it) and cancels the library's tasks. Found by hand: the process hung for good, its
# reader waiting for a cfp that waited for the end of its stdin.
_NO_STOP_APP = """
import asyncio, os, signal, sys
from cfp_changefeed import Processor
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job starts with it ignored
p = Processor(cfp_path=sys.argv[1], env={"FAKECFP_LOG": sys.argv[2], "FAKECFP_SCENARIO": sys.argv[3]},
              database="d", container="c", processor="p", stderr=lambda line: None)
@p.on_changes
async def handle(changes, ctx):
    pass
async def main():
    await p.start()
    if sys.argv[4] == "ctrl-c":
        os.kill(os.getpid(), signal.SIGINT)
        await p.wait()
try:
    asyncio.run(main())
except KeyboardInterrupt:
    print("KeyboardInterrupt")
print("exited")
"""


@pytest.mark.parametrize("how", ["returns", "ctrl-c"])
def test_loop_that_ends_without_stop_ends_cfp_and_exits(fake: Any, how: str) -> None:
    import subprocess
    import sys

    fake.script(leases=two_leases(batches=1))
    app = fake.dir / "app.py"
    app.write_text(_NO_STOP_APP)
    # The timeout only turns a hang into a failure.
    r = subprocess.run(
        [sys.executable, str(app), str(fake.path), str(fake.log), str(fake.scenario), how],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "exited"
    if how == "ctrl-c":
        assert "KeyboardInterrupt" in r.stdout
    assert any(rec.get("eof") for rec in fake.records()), "cfp did not see its input end"
    assert "cfp exited" not in r.stderr, "the application's own end reported as cfp failing"


async def test_estimate_of_a_set_without_leases(tmp_path: Any) -> None:
    # As cfp estimate: no leases is an error (a typo in processor must not look healthy), unless
    # allow_empty=True (Node's allowEmpty); the stub prints what cfp prints then.
    exe = tmp_path / "cfp"
    exe.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = --allow-empty ] && {\n'
        '  echo \'{"prefix":"p","leases":[],"summary":{"total_lag":1,"leases":0}}\'; exit 0; }; done\n'
        "echo 'cfp: no leases for processor \"p\" in lease container shop/leases' >&2\n"
        "exit 5\n"
    )
    exe.chmod(0o755)
    kw: Dict[str, Any] = dict(endpoint="http://127.0.0.1:1/", database="shop", container="c", processor="p", cfp_path=exe)
    with pytest.raises(EstimateError) as ei:
        await estimate(**kw)
    assert ei.value.returncode == 5
    e = await estimate(allow_empty=True, **kw)
    assert e.leases == [] and e.total_lag == 1


@pytest.mark.parametrize("kind", ["async", "plain"])
async def test_one_batch_per_lease_even_when_cfp_resends_after_a_timeout(fake: Any, kind: str) -> None:
    # cfp counts a batch as failed once --exec-timeout ran out and sends it again while the first
    # call may still run. Found in review: both calls ran at once, though the guide promises one
    # batch per lease at a time.
    fake.script(timeout_resend=True)
    p = proc(fake)
    calls: List[Any] = []
    running = [0]
    gate = threading.Event()
    marker = asyncio.Event()

    def enter(ctx: ChangeContext) -> None:
        running[0] += 1
        calls.append((ctx.attempt, running[0]))

    if kind == "async":

        @p.on_changes
        async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
            enter(ctx)
            while ctx.attempt == 1 and not gate.is_set():
                await asyncio.sleep(0.005)
            running[0] -= 1

    else:

        @p.on_changes
        def handle_plain(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
            enter(ctx)
            if ctx.attempt == 1:
                gate.wait(60)
            running[0] -= 1

    @p.on_event
    async def on_event(e: Dict[str, Any]) -> None:
        if e.get("type") == "marker":
            marker.set()

    async with p:
        await marker.wait()  # both batches were taken in before it
        await wait_for(lambda: len(calls) >= 1, "the first call")
        await asyncio.sleep(0.05)  # room for a wrong second call to show up
        assert calls == [(1, 1)], "the resent batch ran beside the first call"
        gate.set()
        await wait_for(lambda: len(calls) == 2 and running[0] == 0, "the second call")
    assert calls == [(1, 1), (2, 1)]
    assert [a["answer"]["id"] for a in fake.answers()] == [1, 2]


async def test_handlers_registered_in_the_async_with_block(fake: Any) -> None:
    # The Processor docstring's form (help(Processor)): found in review to raise "the Processor
    # is not started" from wait(), as __aenter__ had no handler to start with.
    fake.script(leases=two_leases(batches=1))
    seen: List[str] = []
    async with proc(fake) as p:

        @p.on_changes
        async def handle(changes: List[Dict[str, Any]], ctx: ChangeContext) -> None:
            seen.extend(c["id"] for c in changes)
            if len(seen) == 4:
                p.request_stop()

        await p.wait()
    assert sorted(seen) == ["0-0-0", "0-0-1", "1-0-0", "1-0-1"]
    assert p.summary is not None and fake.violations() == []
