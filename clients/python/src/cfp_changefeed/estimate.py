"""Lag per lease, as ``cfp estimate -o json`` reports it (docs/scripting.md)."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _options
from ._binary import find_cfp
from .errors import EstimateError, cfp_reason
from .processor import Range


@dataclass
class LeaseLag:
    """One lease of an estimate. ``raw`` holds every field cfp reported (see
    docs/scripting.md, "`cfp estimate -o json`")."""

    lease: str
    range: Optional[Range]
    owner: Optional[str]
    state: str
    lag: int
    """Changes pending, in LSNs (the .NET estimator's number); sentinel 1 (see ``sentinel``)."""
    sentinel: Optional[str]
    time_lag_seconds: Optional[float]
    verdict: str
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LeaseLag":
        r = d.get("range")
        return cls(
            lease=str(d.get("lease", "")),
            range=Range.from_json(r) if isinstance(r, Mapping) else None,
            owner=d.get("owner"),
            state=str(d.get("state", "")),
            lag=int(d.get("lag") or 0),
            sentinel=d.get("sentinel"),
            time_lag_seconds=d.get("time_lag_seconds"),
            verdict=str(d.get("verdict", "")),
            raw=dict(d),
        )


@dataclass
class Estimate:
    """An estimate of a processor: its leases and cfp's ``summary`` (``total_lag``, ...)."""

    prefix: str
    leases: List[LeaseLag]
    summary: Dict[str, Any]
    raw: Dict[str, Any] = field(repr=False)

    @property
    def total_lag(self) -> int:
        return int(self.summary.get("total_lag", sum(max(lease.lag, 0) for lease in self.leases)))


async def estimate(
    *,
    endpoint: Optional[str] = None,
    key: Optional[str] = None,
    connection_string: Optional[str] = None,
    local: Union[bool, str, "os.PathLike[str]", None] = None,
    ca_file: Union[str, "os.PathLike[str]", None] = None,
    database: Optional[str] = None,
    container: Optional[str] = None,
    processor: Optional[str] = None,
    lease_container: Optional[str] = None,
    lease_database: Optional[str] = None,
    allow_empty: bool = False,
    extra_args: Sequence[str] = (),
    env: Optional[Mapping[str, str]] = None,
    cfp_path: Union[str, "os.PathLike[str]", None] = None,
    timeout: Optional[float] = 120.0,
) -> Estimate:
    """Run ``cfp estimate -o json`` for a processor and return its lag per lease.

    Takes the account and container arguments of :class:`Processor`. Raises
    :class:`EstimateError` with cfp's error line when it fails, and when the processor has no
    leases (exit 5: a typo must not look healthy) unless ``allow_empty=True``, which returns an
    estimate without leases (``total_lag`` 1, as .NET's estimator).
    """
    conn, child_env = _options.connection(
        endpoint=endpoint,
        key=key,
        connection_string=connection_string,
        local=local,
        ca_file=ca_file,
        env=dict(env) if env else None,
    )
    args = ["estimate", "-o", "json"] + conn + _options.container_flags(
        database=database,
        container=container,
        processor=processor,
        lease_container=lease_container,
        lease_database=lease_database,
    )
    if allow_empty:
        args.append("--allow-empty")
    args += list(extra_args)
    _options.check_no_secret_in(args, child_env)
    proc = await asyncio.create_subprocess_exec(
        find_cfp(cfp_path),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise EstimateError(f"cfp estimate did not answer within {timeout:g}s", None) from None
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    # cfp estimate exits non-zero for some verdicts (stuck, failing ...) and still prints the
    # estimate; only no output at all is a failure.
    text = out.decode("utf-8", "replace").strip()
    if not text:
        why = cfp_reason(err.decode("utf-8", "replace").splitlines())
        why = why or f"cfp estimate exited with status {proc.returncode}"
        raise EstimateError(why, proc.returncode)
    try:
        doc = json.loads(text)
    except ValueError:
        try:  # one object per line (a watch): the last one
            doc = json.loads(text.splitlines()[-1])
        except ValueError as e:
            raise EstimateError(f"cfp estimate printed something that is not JSON: {e}", proc.returncode) from None
    if not isinstance(doc, dict):
        raise EstimateError("cfp estimate printed JSON that is not an object", proc.returncode)
    return Estimate(
        prefix=str(doc.get("prefix", "")),
        leases=[LeaseLag.from_json(x) for x in doc.get("leases") or [] if isinstance(x, Mapping)],
        summary=dict(doc.get("summary") or {}),
        raw=doc,
    )
