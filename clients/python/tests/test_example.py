"""docs/user-guide.md "From Python", as written: pip install ./clients/python into a fresh venv,
cfp demo, cfp emulator, examples/python/orders.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from cfpenv import REPO

from test_e2e import BOUND, cfp  # noqa: F401  (the session fixture)


def test_user_guide_from_python(cfp: str, tmp_path: Path) -> None:  # noqa: F811
    guide = (REPO / "docs/user-guide.md").read_text()
    section = guide[guide.index("## From Python"):]
    section = section[: section.index("\n## ", 5)]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    # The commands this test runs are the guide's: fail when they drift apart.
    assert "pip install ./clients/python" in blocks[0]
    assert blocks[1].splitlines() == [
        "cfp demo --data demo-data --duration 10s -o json > /dev/null",
        "cfp emulator --data demo-data --addr 127.0.0.1:8082 &",
        "export COSMOS_ENDPOINT=http://127.0.0.1:8082/      # the emulator's well-known key is the default",
        "python examples/python/orders.py --until-idle 3",
        "kill %1",
    ]

    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    str(REPO / "clients/python")], check=True, cwd=tmp_path)

    env = {k: v for k, v in os.environ.items() if k not in ("COSMOS_KEY", "COSMOS_CONNECTION_STRING", "CFP_LOCAL")}
    env["PATH"] = f"{Path(cfp).parent}{os.pathsep}{env['PATH']}"
    data = tmp_path / "demo-data"
    # A shorter demo than the guide's, the same command otherwise.
    demo = subprocess.run([cfp, "demo", "--data", str(data), "--duration", "4s", "--rate", "50", "-o", "json"],
                          capture_output=True, text=True, env=env, timeout=BOUND)
    assert demo.returncode == 0, demo.stderr[-2000:]
    written = json.loads(demo.stdout)["written"]
    # Port 0 instead of the guide's 8082, which may be taken here.
    emu = subprocess.Popen([cfp, "emulator", "--data", str(data), "--addr", "127.0.0.1:0", "-o", "json"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert emu.stdout is not None
        text = ""
        for line in emu.stdout:
            text += line
            if line.startswith("}"):
                break
        env["COSMOS_ENDPOINT"] = json.loads(text)["endpoint"]
        r = subprocess.run([str(venv / "bin/python"), str(REPO / "examples/python/orders.py"), "--until-idle", "3"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=BOUND)
    finally:
        emu.send_signal(signal.SIGTERM)
        emu.wait(BOUND)
    assert r.returncode == 0, r.stderr[-2000:]
    first = r.stdout.splitlines()[0]
    print(f"\nexample: {first}; the demo wrote {written}")
    assert first.startswith(f"{written} orders, ")
    assert "released lease" in r.stderr
