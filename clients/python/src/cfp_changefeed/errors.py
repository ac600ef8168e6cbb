"""The library's exception types. Every error it raises is a :class:`ChangeFeedError`."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence


def is_reason(line: str) -> bool:
    """Whether a line of cfp's stderr is its error line (``cfp: ...``), not a note or a warning.

    cfp follows its error line with a pointer to ``--help`` and its usage (a usage error) or a
    ``Try: ...`` hint; its ``cfp: note:`` and ``cfp: warning:`` lines say nothing about an exit.
    """
    return line.startswith("cfp: ") and not line.startswith(("cfp: note:", "cfp: warning:"))


def cfp_reason(stderr_lines: Iterable[str]) -> str:
    """What a failed cfp said: its last error line, "" when it wrote none (killed, crashed)."""
    for line in reversed([line.strip() for line in stderr_lines]):
        if is_reason(line):
            return line
    return ""


class ChangeFeedError(Exception):
    """Base class of every error this library raises."""


class OptionsError(ChangeFeedError, ValueError):
    """An argument of :class:`Processor` or :func:`estimate` is wrong (two accounts, a negative
    duration, a naive datetime), found before cfp runs. It is a ``ValueError`` too. What only cfp
    can check (no account at all, a wrong key, a missing container) is a
    :class:`ChildExitedError` from ``start()`` with cfp's one-line reason."""


class CfpNotFoundError(ChangeFeedError):
    """No cfp binary: not given as ``cfp_path``, not in the wheel, not on PATH."""


class ChildExitedError(ChangeFeedError):
    """The ``cfp`` child exited when it was not asked to stop, or failed while stopping.

    ``returncode`` is its exit status (negative: killed by that signal), ``stderr`` the last
    lines it wrote to stderr (keys are never among them: cfp redacts them).
    """

    def __init__(self, message: str, returncode: Optional[int], stderr: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = list(stderr)


class ProtocolError(ChangeFeedError):
    """cfp wrote something the application protocol does not allow (a bug on one side)."""


class EngineError(ChangeFeedError):
    """An ``error`` event of the engine: a delegate (handler) failure or a service failure.

    ``cause`` is ``"user"`` (a handler raised, or answered an error) or ``"infra"`` (Cosmos DB or
    the lease store failed; retried without limit). ``permanent`` is true when retrying does not
    help (bad credentials, a deleted container). ``event`` is the whole event object.
    """

    def __init__(self, event: Mapping[str, Any]) -> None:
        super().__init__(str(event.get("error") or "cfp reported an error"))
        self.event = dict(event)
        self.cause: Optional[str] = event.get("cause")
        self.permanent: bool = bool(event.get("permanent", False))
        self.lease: Optional[str] = event.get("lease")
        self.attempt: Optional[int] = event.get("attempt")


class EstimateError(ChangeFeedError):
    """``cfp estimate`` failed; the message is its error line."""

    def __init__(self, message: str, returncode: Optional[int]) -> None:
        super().__init__(message)
        self.returncode = returncode
