"""Turning the keyword arguments of Processor and estimate into cfp flags and environment."""

from __future__ import annotations

import datetime as _dt
import os
from typing import Dict, List, Optional, Sequence, Tuple, Union

from .errors import OptionsError

Duration = Union[float, int, _dt.timedelta]
StartFrom = Union[str, _dt.datetime]

# Variables that carry secrets; the library sets them for its child from its arguments and
# never puts a secret on the command line (ps would show it).
_SECRET_VARS = ("COSMOS_KEY", "COSMOS_CONNECTION_STRING")


def duration_flag(d: Duration) -> str:
    """A Go duration string for seconds (or a timedelta): 1.5 -> "1500ms"."""
    seconds = d.total_seconds() if isinstance(d, _dt.timedelta) else float(d)
    if seconds < 0:
        raise OptionsError(f"a duration cannot be negative: {d!r}")
    ms = round(seconds * 1000)
    return f"{ms}ms"


def start_from_flag(v: StartFrom) -> str:
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            raise OptionsError("start_from: give a timezone-aware datetime (e.g. tzinfo=timezone.utc)")
        return v.astimezone(_dt.timezone.utc).isoformat().replace("+00:00", "Z")
    return str(v)


def connection(
    *,
    endpoint: Optional[str],
    key: Optional[str],
    connection_string: Optional[str],
    local: Union[bool, str, "os.PathLike[str]", None],
    ca_file: Union[str, "os.PathLike[str]", None],
    env: Optional[Dict[str, str]],
) -> Tuple[List[str], Dict[str, str]]:
    """The account flags and the child's environment.

    The environment is the application's own (so COSMOS_ENDPOINT, COSMOS_KEY, CFP_CONTEXT ...
    set there work as they do for cfp), updated with ``env`` and the secrets given as arguments.
    """
    given = [n for n, v in (("endpoint", endpoint), ("connection_string", connection_string), ("local", local)) if v]
    if len(given) > 1:
        raise OptionsError(f"give one of endpoint, connection_string and local, not {' and '.join(given)}")
    if key is not None and connection_string is not None:
        raise OptionsError("give key with endpoint, or connection_string, not both")
    args: List[str] = []
    child_env = dict(os.environ)
    if env:
        child_env.update(env)
    if endpoint:
        args += ["--endpoint", endpoint]
    if key is not None:
        child_env["COSMOS_KEY"] = key
        child_env.pop("COSMOS_CONNECTION_STRING", None)
    if connection_string is not None:
        child_env["COSMOS_CONNECTION_STRING"] = connection_string
        child_env.pop("COSMOS_KEY", None)
    if local:
        if local is True:
            args.append("--local")
        else:
            args.append("--local=" + os.fspath(local))
    if ca_file is not None:
        args += ["--ca-file", os.fspath(ca_file)]
    return args, child_env


def container_flags(
    *,
    database: Optional[str],
    container: Optional[str],
    processor: Optional[str],
    lease_container: Optional[str],
    lease_database: Optional[str],
) -> List[str]:
    args: List[str] = []
    for flag, v in (
        ("-d", database),
        ("-c", container),
        ("-p", processor),
        ("--lease-container", lease_container),
        ("--lease-database", lease_database),
    ):
        if v:
            args += [flag, v]
    return args


def check_no_secret_in(args: Sequence[str], env: Dict[str, str]) -> None:
    """A last guard: no secret of the environment is on the command line."""
    for name in _SECRET_VARS:
        secret = env.get(name)
        if secret and any(secret in a for a in args):
            raise OptionsError(f"refusing to pass {name} on the command line")
