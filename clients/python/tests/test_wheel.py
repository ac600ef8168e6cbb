"""build_wheel.py makes a platform wheel that installs with pip and whose library finds its cfp."""

from __future__ import annotations

import platform
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@pytest.mark.skipif(sys.platform != "linux", reason="builds a Linux wheel and installs it here")
def test_platform_wheel_carries_cfp(tmp_path: Path) -> None:
    goarch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine())
    if goarch is None:
        pytest.skip(f"no wheel platform for {platform.machine()}")
    fake = tmp_path / "cfp"
    fake.write_text("#!/bin/sh\necho 'cfp from the wheel' \"$@\"\n")
    out = tmp_path / "dist"
    r = subprocess.run(
        [sys.executable, str(ROOT / "build_wheel.py"), "--cfp", str(fake), "--goos", "linux", "--goarch", goarch, "--out", str(out)],
        check=True, capture_output=True, text=True,
    )
    wheel = Path(r.stdout.strip())
    assert wheel.parent == out and "-py3-none-manylinux_2_17_" in wheel.name
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))).decode()
        info = z.getinfo("cfp_changefeed/bin/cfp")
        assert "py.typed" in " ".join(z.namelist())
    assert "Root-Is-Purelib: false" in meta and "Tag: py3-none-manylinux2014_" in meta
    assert (info.external_attr >> 16) & 0o777 == 0o755

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # pip checks the tags against this machine and RECORD against the files.
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--disable-pip-version-check", str(wheel)], check=True)
    found = subprocess.run(
        [str(py), "-c", "import cfp_changefeed, subprocess; p = cfp_changefeed.find_cfp(); print(p, flush=True); subprocess.run([p, 'version'])"],
        check=True, capture_output=True, text=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
    ).stdout.splitlines()
    assert found[0].startswith(str(venv)) and found[0].endswith("cfp_changefeed/bin/cfp")
    assert found[1] == "cfp from the wheel version"
