from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

HERE = Path(__file__).resolve().parent


class Fake:
    """A fakecfp run: the executable to pass as cfp_path and what it observed."""

    def __init__(self, tmp: Path) -> None:
        self.dir = tmp
        self.log = tmp / "fake.log"
        self.scenario = tmp / "scenario.json"
        self.path = tmp / "cfp"
        self.path.write_text(f"#!/bin/sh\nexec {sys.executable} {HERE / 'fakecfp.py'} \"$@\"\n")
        self.path.chmod(self.path.stat().st_mode | stat.S_IXUSR)
        self.env = {"FAKECFP_LOG": str(self.log), "FAKECFP_SCENARIO": str(self.scenario)}

    def script(self, **scenario: Any) -> None:
        self.scenario.write_text(json.dumps(scenario))

    def records(self) -> List[Dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def answers(self) -> List[Dict[str, Any]]:
        return [r for r in self.records() if "answer" in r and "to" in r]

    def violations(self) -> List[Any]:
        return [r["violation"] for r in self.records() if "violation" in r]

    def checkpoints(self) -> Dict[str, str]:
        final = [r["checkpoints"] for r in self.records() if "checkpoints" in r]
        assert final, "the fake did not end"
        return final[-1]


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    return Fake(tmp_path)


def pytest_collection_modifyitems(config: Any, items: List[Any]) -> None:
    del config, items
    os.environ.pop("COSMOS_KEY", None)
    os.environ.pop("COSMOS_CONNECTION_STRING", None)
