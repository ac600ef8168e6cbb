"""The change feed processor: a ``cfp process --app-protocol 1`` child and its handlers.

The library starts cfp as a child process and speaks with it over its stdin and stdout, one JSON
object per line (the protocol is in cfp's docs/scripting.md, "Application protocol"). cfp owns
the leases, reads the change feed, balances with the other hosts of the processor (cfp, .NET or
Java) and writes the checkpoints; this process runs the handlers. One process handles every
lease its cfp holds: a lease has at most one message in flight, leases run concurrently.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import (
    Any,
    Awaitable,
    Callable,
    Deque,
    Dict,
    Generator,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    TypeVar,
    Union,
)

from . import _options
from ._binary import find_cfp
from .errors import ChangeFeedError, ChildExitedError, EngineError, ProtocolError, is_reason

log = logging.getLogger("cfp_changefeed")

PROTOCOL_VERSION = 1

# A line of cfp may be a whole batch; the protocol bounds what is in flight (one message per
# lease), not the size of one message, so the reader's line limit is generous.
_LINE_LIMIT = 1 << 30
_STDERR_TAIL = 20
_MAX_ERROR_MESSAGE = 1000

Document = Dict[str, Any]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Range:
    """A lease's range of effective partition keys: ``min`` inclusive, ``max`` exclusive (hex)."""

    min: str
    max: str

    @classmethod
    def from_json(cls, v: Any) -> "Range":
        if isinstance(v, Mapping):
            return cls(str(v.get("min") or ""), str(v.get("max") or ""))
        return cls("", "")

    def __str__(self) -> str:
        return f"{self.min}-{self.max}"


class _Ready:
    """An awaitable that is already done, so ``ctx.checkpoint()`` works awaited or not."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # pragma: no cover  (makes this a generator)


@dataclass
class LeaseContext:
    """What a lease lifecycle handler gets: the lease it is about."""

    lease: str
    range: Range
    instance: str
    processor: str
    continuation: str = ""
    """on_lease_acquired: the lease's checkpoint ("" without one)."""
    reason: str = ""
    """on_lease_released: shutdown, rebalance or split (its partition split or merged)."""


@dataclass
class ChangeContext:
    """What ``on_changes`` gets beside the changes."""

    lease: str
    range: Range
    continuation: str
    """The position after this batch: what a checkpoint of it writes."""
    attempt: int
    """1 for the first delivery of the batch, 2 for its first retry, ..."""
    instance: str
    processor: str
    _checkpoint: bool = field(default=False, repr=False)

    def checkpoint(self) -> Awaitable[None]:
        """Checkpoint this batch (and the earlier batches of the lease) when the handler returns.

        With ``manual_checkpoint=True`` a batch is checkpointed only when its handler calls this;
        the others count as processed and are covered by the lease's next checkpoint (a later
        batch's; giving the lease up writes none, as .NET's ``WithManualCheckpoint``). Without
        it every batch is checkpointed and this changes nothing. The checkpoint is written by
        cfp after the handler returns (a handler that raises checkpoints nothing). ``await
        ctx.checkpoint()`` and a plain ``ctx.checkpoint()`` (in a sync handler) do the same.
        """
        self._checkpoint = True
        return _Ready()


ChangesHandler = Callable[[List[Document], ChangeContext], Union[None, Awaitable[None]]]
LeaseHandler = Callable[[LeaseContext], Union[None, Awaitable[None]]]
ErrorHandler = Callable[[ChangeFeedError], Union[None, Awaitable[None]]]
EventHandler = Callable[[Dict[str, Any]], Union[None, Awaitable[None]]]


class HandlerError(ChangeFeedError):
    """A handler raised; the exception is ``__cause__``. For ``on_changes`` the batch is not
    processed: cfp delivers it again (``--delegate-retries``), then applies ``--on-error``."""

    def __init__(self, message: str, lease: Optional[str], handler: str) -> None:
        super().__init__(message)
        self.lease = lease
        self.handler = handler


class Processor:
    """A change feed processor host for this Python process.

    ::

        async with Processor(endpoint=..., key=..., database="shop", container="orders",
                             processor="orders-py") as p:
            @p.on_changes
            async def handle(changes, ctx):
                ...
            await p.wait()

    Handlers are registered before ``start()``: ``async with`` starts the processor as its body
    begins when ``on_changes`` has a handler already, else at the body's first ``await
    p.wait()``, so that the handlers can be registered in the block, as above. They may be
    ``async def`` (run on the event loop) or plain functions (run in the loop's default thread
    pool, so a blocking handler does not hold the other leases up).

    Account: ``endpoint`` (with ``key``, or cfp's other credentials from the environment), or
    ``connection_string``, or ``local=True`` / ``local="DIR"`` (cfp's embedded emulator on
    DIR, default .cfp). Secrets reach the child through its environment only. Everything cfp
    reads from the environment (COSMOS_ENDPOINT, COSMOS_KEY, CFP_CONTEXT, ...) works too.
    """

    def __init__(
        self,
        *,
        endpoint: Optional[str] = None,
        key: Optional[str] = None,
        connection_string: Optional[str] = None,
        local: Union[bool, str, "os.PathLike[str]", None] = None,
        ca_file: Union[str, "os.PathLike[str]", None] = None,
        database: Optional[str] = None,
        container: Optional[str] = None,
        processor: Optional[str] = None,
        instance: Optional[str] = None,
        lease_container: Optional[str] = None,
        lease_database: Optional[str] = None,
        start_from: Optional[_options.StartFrom] = None,
        mode: Optional[str] = None,
        batch_size: Optional[int] = None,
        poll_interval: Optional[_options.Duration] = None,
        lease_acquire_interval: Optional[_options.Duration] = None,
        lease_renew_interval: Optional[_options.Duration] = None,
        lease_expiration: Optional[_options.Duration] = None,
        create_lease_container: bool = False,
        manual_checkpoint: bool = False,
        extra_args: Sequence[str] = (),
        env: Optional[Mapping[str, str]] = None,
        cfp_path: Union[str, "os.PathLike[str]", None] = None,
        stderr: Optional[Callable[[str], None]] = None,
    ) -> None:
        conn, child_env = _options.connection(
            endpoint=endpoint,
            key=key,
            connection_string=connection_string,
            local=local,
            ca_file=ca_file,
            env=dict(env) if env else None,
        )
        args = ["process", "--app-protocol", str(PROTOCOL_VERSION)] + conn
        args += _options.container_flags(
            database=database,
            container=container,
            processor=processor,
            lease_container=lease_container,
            lease_database=lease_database,
        )
        if instance:
            args += ["--instance", instance]
        if start_from is not None:
            args += ["--from", _options.start_from_flag(start_from)]
        if mode:
            args += ["--mode", mode]
        if batch_size is not None:
            args += ["--batch-size", str(int(batch_size))]
        for flag, d in (
            ("--poll-interval", poll_interval),
            ("--lease-acquire-interval", lease_acquire_interval),
            ("--lease-renew-interval", lease_renew_interval),
            ("--lease-expiration", lease_expiration),
        ):
            if d is not None:
                args += [flag, _options.duration_flag(d)]
        if create_lease_container:
            args.append("--create-lease-container")
        if not any(a.split("=")[0] in ("--events", "--events-file") for a in extra_args):
            # The events reach on_event over the channel whatever --events says; without this,
            # cfp would also print them as text on stderr, which the library forwards.
            args += ["--events", "none"]
        args += list(extra_args)
        _options.check_no_secret_in(args, child_env)
        self._cfp_path = cfp_path
        self._args = args
        self._env = child_env
        self._manual = manual_checkpoint
        self._stderr_sink = stderr
        self._instance = instance or ""
        self._processor = processor or ""

        self._on_changes: Optional[ChangesHandler] = None
        self._on_acquired: Optional[LeaseHandler] = None
        self._on_released: Optional[LeaseHandler] = None
        self._on_lost: Optional[LeaseHandler] = None
        self._on_error: Optional[ErrorHandler] = None
        self._on_event: Optional[EventHandler] = None

        self._proc: Optional[asyncio.subprocess.Process] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._reader: Optional["asyncio.Task[None]"] = None
        self._stderr_reader: Optional["asyncio.Task[None]"] = None
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._write_lock: Optional[asyncio.Lock] = None
        self._hello: Optional[Dict[str, Any]] = None
        self._hello_seen: Optional[asyncio.Event] = None
        self._exited: Optional[asyncio.Event] = None
        self._entered = False  # in an async with block
        self._stop_requested = False
        self._input_ended = False
        self._failure: Optional[ChangeFeedError] = None
        self._stderr_tail: Deque[str] = collections.deque(maxlen=_STDERR_TAIL)
        self._reason = ""  # cfp's last error line
        self._leases: Dict[str, Range] = {}
        self._batch_locks: Dict[str, asyncio.Lock] = {}
        self.summary: Optional[Dict[str, Any]] = None
        """The ``stopped`` message's summary (batches, processed, errors, ...) once cfp ended."""
        self.returncode: Optional[int] = None

    # --- registration ----------------------------------------------------------------------

    def on_changes(self, fn: F) -> F:
        """Register the handler of a batch: ``fn(changes, ctx)``; decorator or plain call."""
        self._on_changes = fn
        return fn

    def on_lease_acquired(self, fn: F) -> F:
        """``fn(ctx)`` when this host takes a lease, before its first batch. If it raises, the
        lease is refused for now (reported to ``on_error``): cfp offers it again later."""
        self._on_acquired = fn
        return fn

    def on_lease_released(self, fn: F) -> F:
        """``fn(ctx)`` when this host gives a lease up (``ctx.reason``). With automatic
        checkpoints the batches it processed are checkpointed when the handler returns, so flush
        what they buffered here; if it raises, nothing more is checkpointed: those batches come
        again. With ``manual_checkpoint=True`` the release writes no checkpoint (as .NET's
        ``WithManualCheckpoint``): the batches no handler checkpointed come again to the next
        owner, whatever this handler does."""
        self._on_released = fn
        return fn

    def on_lease_lost(self, fn: F) -> F:
        """``fn(ctx)`` when another host took the lease, or it expired: nothing more of it can be
        checkpointed (its batches since the last checkpoint come again, to that host)."""
        self._on_lost = fn
        return fn

    def on_error(self, fn: F) -> F:
        """``fn(error)`` for a :class:`HandlerError` (a handler raised), an :class:`EngineError`
        (the service or the lease store failed) and a :class:`ChildExitedError` (cfp died)."""
        self._on_error = fn
        return fn

    def on_event(self, fn: F) -> F:
        """``fn(event)`` for each engine event (started, split, merge, error, ...) as a dict."""
        self._on_event = fn
        return fn

    # --- properties ------------------------------------------------------------------------

    @property
    def instance(self) -> str:
        """This host's instance name (cfp's, once started, when none was given)."""
        return self._instance

    @property
    def leases(self) -> Dict[str, Range]:
        """The leases this host holds now."""
        return dict(self._leases)

    @property
    def pid(self) -> Optional[int]:
        """The process id of the cfp child, once started."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._exited is not None and not self._exited.is_set()

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start cfp and return once its lease store is initialised (its ``hello``).

        Raises :class:`CfpNotFoundError` without a binary and :class:`ChildExitedError` when cfp
        exits before it (bad flags, credentials refused: its error line is the message).
        """
        if self._proc is not None:
            raise RuntimeError("this Processor was started already; make a new one")
        if self._on_changes is None:
            raise TypeError("register a handler with @processor.on_changes before start()")
        cfp = find_cfp(self._cfp_path)
        self._loop = asyncio.get_running_loop()
        self._write_lock = asyncio.Lock()
        self._hello_seen = asyncio.Event()
        self._exited = asyncio.Event()
        log.debug("starting %s %s", cfp, " ".join(self._args))
        self._proc = await asyncio.create_subprocess_exec(
            cfp,
            *self._args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._env,
            limit=_LINE_LIMIT,
            # Its own session: Ctrl-C in a terminal reaches this process only; stopping cfp is the
            # application's decision (stop(), or its exit, which closes cfp's stdin).
            start_new_session=True,
        )
        self._stderr_reader = asyncio.ensure_future(self._read_stderr())
        self._reader = asyncio.ensure_future(self._read())
        hello = asyncio.ensure_future(self._hello_seen.wait())
        exited = asyncio.ensure_future(self._exited.wait())
        try:
            await asyncio.wait({hello, exited}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hello.cancel()
            exited.cancel()
        if self._hello is None:
            assert self._failure is not None
            raise self._failure

    async def stop(self, timeout: Optional[float] = 60.0) -> None:
        """Stop gracefully: no new batches, the batches in flight finish, the leases are
        checkpointed (with ``manual_checkpoint=True``: only what the handlers checkpointed) and
        released (so other hosts take them at their next acquire), cfp exits.

        Raises :class:`ChildExitedError` if cfp had died, or does not stop within ``timeout``
        seconds (then it is killed). Calling it again does nothing more.
        """
        if self._proc is None or self._exited is None:
            return
        if not self._exited.is_set():
            self._stop_requested = True
            await self._send({"type": "stop"})
            try:
                await asyncio.wait_for(asyncio.shield(self._exited.wait()), timeout)
            except asyncio.TimeoutError:
                self._kill()
                await self._exited.wait()
                self._failure = ChildExitedError(
                    f"cfp did not stop within {timeout:g}s and was killed", self.returncode, list(self._stderr_tail)
                )
        if self._failure is not None:
            raise self._failure

    def request_stop(self) -> None:
        """Ask for a graceful stop from any thread (a sync handler, a signal handler of the
        application), without waiting; ``wait()`` and ``run()`` return once cfp stopped."""
        loop = self._loop
        if loop is None:
            return

        def go() -> None:
            if self._exited is not None and not self._exited.is_set() and not self._stop_requested:
                self._stop_requested = True
                self._spawn(self._send({"type": "stop"}))

        loop.call_soon_threadsafe(go)

    async def wait(self) -> None:
        """Wait until cfp ends; raises :class:`ChildExitedError` unless it was asked to stop and
        stopped cleanly. In an ``async with`` block entered before ``on_changes`` had a handler,
        it starts the processor first."""
        if self._exited is None and self._entered and self._on_changes is not None:
            await self.start()  # handlers registered in the async with block
        if self._exited is None:
            raise RuntimeError("the Processor is not started")
        await self._exited.wait()
        if self._failure is not None:
            raise self._failure

    def run(self) -> None:
        """Start, then block until the processor stops (``request_stop()`` from a handler or
        another thread, or Ctrl-C, after which it stops gracefully and KeyboardInterrupt goes
        on). For applications without asyncio: plain-function handlers run in threads."""

        async def main() -> None:
            await self.start()
            try:
                await self.wait()
            finally:
                if self._exited is not None and not self._exited.is_set():
                    await self.stop()

        asyncio.run(main())

    async def __aenter__(self) -> "Processor":
        self._entered = True
        if self._on_changes is not None:
            await self.start()
        return self

    async def __aexit__(self, et: Any, ev: Any, tb: Any) -> None:
        if self._proc is None:
            return
        try:
            await self.stop()
        except ChangeFeedError:
            if ev is None:
                raise
            log.exception("cfp failed while the block's own exception was raised")

    # --- the channel -----------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> None:
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    def _kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            try:
                os.killpg(self._proc.pid, 9)
            except (ProcessLookupError, PermissionError, AttributeError):
                self._proc.kill()

    async def _send(self, msg: Mapping[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or self._write_lock is None:
            return
        data = (json.dumps(msg, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        async with self._write_lock:
            if proc.stdin.is_closing():
                return
            try:
                proc.stdin.write(data)
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                # cfp is gone; the reader reports its exit.
                pass

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        stream = self._proc.stderr
        sink = self._stderr_sink
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line over the limit: skip it
                continue
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._stderr_tail.append(line)
            if is_reason(line.strip()):
                # Kept apart from the tail: a usage error's line comes before the usage.
                self._reason = line.strip()
            if sink is not None:
                try:
                    sink(line)
                except Exception:  # a broken sink must not stop the reader
                    log.exception("the stderr callback raised")
            else:
                sys.stderr.write(line + "\n")

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        try:
            while True:
                raw = await stdout.readline()
                if not raw:
                    break
                try:
                    msg = json.loads(raw)
                    if not isinstance(msg, dict):
                        raise ValueError("not an object")
                except ValueError as e:
                    await self._protocol_error(f"cfp wrote a line that is not a JSON object ({e}): {raw[:200]!r}")
                    continue
                self._dispatch(msg)
        except asyncio.CancelledError:
            # The loop ends without stop() (asyncio.run's main returned, or Ctrl-C cancelled
            # it): end cfp's input, as this process's exit would, so that cfp releases the
            # leases and exits instead of waiting for us while we wait for it. The application
            # ended the loop: that is its stop, not a failure of cfp.
            self._stop_requested = True
            self._end_input()
            raise
        finally:
            rc = await self._proc.wait()
            if self._stderr_reader is not None:
                try:
                    await self._stderr_reader
                except asyncio.CancelledError:
                    pass
            self.returncode = rc
            self._finish(rc)

    def _end_input(self) -> None:
        proc = self._proc
        if proc is not None and proc.stdin is not None and not proc.stdin.is_closing():
            self._input_ended = True
            proc.stdin.close()

    def _finish(self, rc: int) -> None:
        assert self._exited is not None
        if self._failure is None:
            # After the end of its input cfp writes nothing more that we read: no summary.
            clean = self._stop_requested and rc == 0 and (self.summary is not None or self._input_ended)
            if not clean:
                self._failure = self._exit_error(rc)
        self._leases.clear()
        self._exited.set()
        if self._failure is not None and isinstance(self._failure, ChildExitedError):
            if self._hello is not None:
                log.error("%s", self._failure)
            self._report(self._failure)

    def _exit_error(self, rc: int) -> ChildExitedError:
        if self.summary and self.summary.get("error"):
            why = str(self.summary["error"])
        else:
            why = self._reason
        if rc < 0:
            what = f"cfp was killed by signal {-rc}"
        elif self._hello is None:
            what = f"cfp exited with status {rc} before it started"
        elif self._stop_requested:
            what = f"cfp exited with status {rc} while stopping"
        else:
            what = f"cfp exited with status {rc} without being asked to stop"
        return ChildExitedError(f"{what}: {why}" if why else what, rc, list(self._stderr_tail))

    async def _protocol_error(self, message: str) -> None:
        err = ProtocolError(message)
        log.error("%s", message)
        if self._failure is None:
            self._failure = err
        self._report(err)

    def _report(self, err: ChangeFeedError) -> None:
        if self._on_error is not None:
            self._spawn(self._call_quietly(self._on_error, err))

    async def _call_quietly(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            await self._call(fn, *args)
        except Exception:
            log.exception("the %s handler raised", getattr(fn, "__name__", "error"))

    async def _call(self, fn: Callable[..., Any], *args: Any) -> None:
        if inspect.iscoroutinefunction(fn):
            await fn(*args)
            return
        assert self._loop is not None
        res = await self._loop.run_in_executor(None, fn, *args)
        if inspect.isawaitable(res):
            await res

    def _dispatch(self, msg: Dict[str, Any]) -> None:
        t = msg.get("type")
        if t in ("batch", "acquired", "released", "lost"):
            if not isinstance(msg.get("id"), int):
                self._spawn(self._protocol_error(f"cfp sent a {t} message without an id"))
                return
            if t == "batch" and self._on_changes is not None and inspect.iscoroutinefunction(self._on_changes):
                self._spawn(self._batch(msg))
            else:
                self._spawn(self._handle(msg))
        elif t == "event":
            ev = msg.get("event")
            if isinstance(ev, dict):
                self._event(ev)
        elif t == "hello":
            if msg.get("protocol") != PROTOCOL_VERSION:
                self._spawn(self._protocol_error(f"cfp speaks protocol {msg.get('protocol')!r}, this library {PROTOCOL_VERSION}"))
                self._kill()
                return
            self._hello = msg
            self._instance = str(msg.get("owner") or self._instance)
            self._processor = str(msg.get("processor") or self._processor)
            assert self._hello_seen is not None
            self._hello_seen.set()
        elif t == "stopped":
            s = msg.get("summary")
            self.summary = s if isinstance(s, dict) else {}
        else:
            log.debug("ignoring a message of type %r", t)

    def _event(self, ev: Dict[str, Any]) -> None:
        if self._on_event is not None:
            self._spawn(self._call_quietly(self._on_event, ev))
        # A handler's failure is reported as a HandlerError already.
        if ev.get("type") == "error" and ev.get("cause") != "user":
            self._report(EngineError(ev))

    def _range_of(self, msg: Mapping[str, Any]) -> Range:
        lease = str(msg.get("lease", ""))
        if "range" in msg:
            return Range.from_json(msg.get("range"))
        return self._leases.get(lease, Range("", ""))

    def _lease_lock(self, lease: str) -> asyncio.Lock:
        # cfp sends a lease's next batch once the one before was answered, or once its answer
        # timed out (--exec-timeout): then the retry comes while the first call may still run,
        # and waits for it here, so that a lease has one batch in its handler at a time.
        lock = self._batch_locks.get(lease)
        if lock is None:
            lock = self._batch_locks[lease] = asyncio.Lock()
        return lock

    async def _batch(self, msg: Dict[str, Any]) -> None:
        # The hot path (an async handler): no thread, no extra dispatch.
        ctx = ChangeContext(
            lease=str(msg.get("lease", "")),
            range=self._range_of(msg),
            continuation=str(msg.get("continuation", "")),
            attempt=int(msg.get("attempt", 1)),
            instance=self._instance,
            processor=self._processor,
        )
        try:
            async with self._lease_lock(ctx.lease):
                await self._on_changes(msg.get("items") or [], ctx)  # type: ignore[misc]
        except Exception as e:
            await self._send({"id": msg["id"], "type": "error", "message": self._failed("on_changes", ctx.lease, e)})
            return
        kind = "checkpoint" if (ctx._checkpoint or not self._manual) else "done"
        await self._send({"id": msg["id"], "type": kind})

    async def _handle(self, msg: Dict[str, Any]) -> None:
        t = msg["type"]
        lease = str(msg.get("lease", ""))
        answer: Dict[str, Any] = {"id": msg["id"], "type": "done"}
        try:
            if t == "batch":
                # Until the handler returned, the batch is not processed (a cancelled handler).
                answer = {"id": msg["id"], "type": "error", "message": "the handler did not finish"}
                bctx = ChangeContext(
                    lease=lease,
                    range=self._range_of(msg),
                    continuation=str(msg.get("continuation", "")),
                    attempt=int(msg.get("attempt", 1)),
                    instance=self._instance,
                    processor=self._processor,
                )
                assert self._on_changes is not None
                try:
                    async with self._lease_lock(lease):
                        await self._call(self._on_changes, msg.get("items") or [], bctx)
                except Exception as e:
                    answer = {"id": msg["id"], "type": "error", "message": self._failed("on_changes", lease, e)}
                else:
                    answer = {"id": msg["id"], "type": "checkpoint" if (bctx._checkpoint or not self._manual) else "done"}
                return
            ctx = LeaseContext(
                lease=lease,
                range=self._range_of(msg),
                instance=self._instance,
                processor=self._processor,
                continuation=str(msg.get("continuation", "")),
                reason=str(msg.get("reason", "")),
            )
            if t == "acquired":
                fn = self._on_acquired
            elif t == "released":
                self._leases.pop(lease, None)
                # Automatic checkpoints: what was processed is checkpointed as the lease is
                # given up. Manual: nothing the handlers did not checkpoint, as .NET's
                # WithManualCheckpoint, whose supervisor only calls the observer's CloseAsync
                # (azure-cosmos-dotnet-v3 FeedManagement/PartitionSupervisorCore.cs:81-84;
                # the checkpoint after every batch is Observers/AutoCheckpointer.cs:31-39, left
                # out in manual mode by Observers/CheckpointerObserverFactory.cs:37-42). The Node.js library does the same.
                answer["type"] = "done" if self._manual else "checkpoint"
                fn = self._on_released
            else:
                self._leases.pop(lease, None)
                fn = self._on_lost
            if fn is not None:
                try:
                    await self._call(fn, ctx)
                except Exception as e:
                    message = self._failed(getattr(fn, "__name__", t), lease, e)
                    if t == "acquired":
                        # Not ready for the lease: cfp offers it again after a backoff.
                        answer = {"id": msg["id"], "type": "error", "message": message}
                    elif t == "released":
                        # Not flushed: no checkpoint covers the batches answered done since
                        # the last one; they come again, to whichever host takes the lease.
                        answer["type"] = "done"
            if t == "acquired" and answer["type"] == "done":
                self._leases[lease] = ctx.range
        finally:
            await self._send(answer)

    def _failed(self, handler: str, lease: str, e: BaseException) -> str:
        message = f"{type(e).__name__}: {e}".replace("\n", " ")[:_MAX_ERROR_MESSAGE]
        log.error("handler %s failed for lease %s: %s", handler, lease, message, exc_info=e)
        err = HandlerError(f"handler {handler} failed for lease {lease}: {message}", lease, handler)
        err.__cause__ = e
        self._report(err)
        return message
