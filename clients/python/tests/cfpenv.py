"""Real cfp for the end-to-end tests: the binary, a `cfp emulator` child, documents, splits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parents[3]


def cfp_binary(tmp: Path) -> str:
    """$CFP_BIN, or cfp built from this repository with go build."""
    given = os.environ.get("CFP_BIN")
    if given:
        return given
    out = tmp / "cfp"
    if not out.exists():
        if shutil.which("go") is None:
            raise RuntimeError("set CFP_BIN, or put go on PATH to build cfp")
        subprocess.run(["go", "build", "-o", str(out), "."], cwd=REPO, check=True)
    return str(out)


def has_app_protocol(cfp: str) -> bool:
    r = subprocess.run([cfp, "process", "--help"], capture_output=True, text=True)
    return "--app-protocol" in r.stdout + r.stderr


class Emulator:
    """`cfp emulator --addr 127.0.0.1:0` on a data directory, as a child process."""

    def __init__(self, cfp: str, data: Path, partitions: int = 4) -> None:
        self.cfp = cfp
        self.data = data
        self.proc = subprocess.Popen(
            [cfp, "emulator", "--addr", "127.0.0.1:0", "--data", str(data), "--partitions", str(partitions), "-o", "json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=open(data.parent / "emulator.log", "ab"),
            text=True,
        )
        assert self.proc.stdout is not None
        text = ""
        info: Optional[Dict[str, Any]] = None
        for line in self.proc.stdout:
            text += line
            try:
                info = json.loads(text)
                break
            except ValueError:
                continue
        if info is None:
            raise RuntimeError(f"cfp emulator did not start: {(data.parent / 'emulator.log').read_text()[-2000:]}")
        self.endpoint: str = info["endpoint"]
        self.key: str = info["key"]

    def env(self) -> Dict[str, str]:
        e = dict(os.environ)
        e["COSMOS_KEY"] = self.key
        e.pop("COSMOS_CONNECTION_STRING", None)
        return e

    def run(self, *args: str, input: Optional[str] = None) -> str:
        r = subprocess.run(
            [self.cfp, "--endpoint", self.endpoint, *args], input=input, capture_output=True, text=True, env=self.env()
        )
        if r.returncode != 0:
            raise RuntimeError(f"cfp {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-1000:]}")
        return r.stdout

    def write(self, database: str, container: str, docs: List[Dict[str, Any]], pk: str = "/pk") -> None:
        self.run(
            "import", "-d", database, "-c", container, "--create", "--partition-key-path", pk,
            input="".join(json.dumps(d) + "\n" for d in docs),
        )

    def split(self, database: str, container: str, range_id: str) -> Dict[str, Any]:
        return json.loads(self.run("emulator", "split", "-d", database, "-c", container, "--range", range_id, "-o", "json"))

    def leases(self, database: str, container: str, processor: str) -> List[Dict[str, Any]]:
        out = json.loads(self.run("leases", "list", "-d", database, "-c", container, "-p", processor, "-o", "json"))
        return out if isinstance(out, list) else out.get("leases", [])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def python() -> str:
    return sys.executable
