#!/usr/bin/env python3
"""Build a platform wheel of cfp-changefeed that carries a cfp binary, the way ruff's wheels do.

    python3 clients/python/build_wheel.py --cfp dist/cfp_linux_amd64_v1/cfp --goos linux --goarch amd64 --out dist/python

It builds the pure wheel of clients/python (``pip wheel --no-deps``, the pinned hatchling), adds
the binary as ``cfp_changefeed/bin/cfp`` (``cfp.exe`` on Windows, mode 0755), marks the wheel
platform-specific (``Root-Is-Purelib: false``, tag ``py3-none-PLATFORM``), rewrites RECORD and
writes ``cfp_changefeed-VERSION-py3-none-PLATFORM.whl`` into --out. The binary is static
(CGO_ENABLED=0), so one Linux wheel serves glibc and musl systems alike. .goreleaser.yaml runs
it after each build; only the standard library is needed (and pip, to build the pure wheel).
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent

# GOOS/GOARCH of .goreleaser.yaml's builds -> wheel platform tag (tools/releasecheck checks that
# every build target is here).
PLATFORMS: Dict[str, str] = {
    "linux/amd64": "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64",
    "linux/arm64": "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64",
    "darwin/amd64": "macosx_10_12_x86_64",
    "darwin/arm64": "macosx_11_0_arm64",
    "windows/amd64": "win_amd64",
    "windows/arm64": "win_arm64",
}


def build_pure(workdir: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q", "-w", str(workdir), str(HERE)],
        check=True,
    )
    wheels = list(workdir.glob("cfp_changefeed-*-py3-none-any.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"build_wheel: expected one pure wheel in {workdir}, found {wheels}")
    return wheels[0]


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def platform_wheel(pure: Path, binary: Path, goos: str, platform: str, out: Path) -> Path:
    m = re.match(r"^(cfp_changefeed)-([^-]+)-py3-none-any\.whl$", pure.name)
    if not m:
        raise SystemExit(f"build_wheel: unexpected wheel name {pure.name}")
    name, version = m.group(1), m.group(2)
    dist_info = f"{name}-{version}.dist-info"
    exe = "cfp.exe" if goos == "windows" else "cfp"
    entries: List[Tuple[zipfile.ZipInfo, bytes]] = []
    with zipfile.ZipFile(pure) as z:
        for info in z.infolist():
            if info.filename in (f"{dist_info}/RECORD",):
                continue
            data = z.read(info)
            if info.filename == f"{dist_info}/WHEEL":
                lines = [ln for ln in data.decode().splitlines() if not ln.startswith(("Root-Is-Purelib:", "Tag:"))]
                lines.insert(2, "Root-Is-Purelib: false")
                lines += [f"Tag: py3-none-{p}" for p in platform.split(".")]
                data = ("\n".join(lines) + "\n").encode()
            entries.append((info, data))
    bin_info = zipfile.ZipInfo(f"{name}/bin/{exe}", date_time=entries[0][0].date_time)
    bin_info.external_attr = (0o100755 & 0xFFFF) << 16
    bin_info.compress_type = zipfile.ZIP_DEFLATED
    # The binary goes before the dist-info files, as wheel tools write them.
    first_meta = next(i for i, (info, _) in enumerate(entries) if info.filename.startswith(dist_info + "/"))
    entries.insert(first_meta, (bin_info, binary.read_bytes()))

    rec = io.StringIO()
    w = csv.writer(rec, lineterminator="\n")
    for info, data in entries:
        w.writerow([info.filename, record_hash(data), len(data)])
    w.writerow([f"{dist_info}/RECORD", "", ""])
    rec_info = zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=entries[0][0].date_time)
    rec_info.external_attr = (0o100644 & 0xFFFF) << 16
    entries.append((rec_info, rec.getvalue().encode()))

    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{name}-{version}-py3-none-{platform}.whl"
    tmp = target.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for info, data in entries:
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, target)
    return target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cfp", required=True, type=Path, help="the built cfp binary to carry")
    ap.add_argument("--goos", required=True, help="its GOOS (linux, darwin, windows)")
    ap.add_argument("--goarch", required=True, help="its GOARCH (amd64, arm64)")
    ap.add_argument("--out", required=True, type=Path, help="directory to write the wheel into")
    ap.add_argument("--pure", type=Path, help="use this pure wheel instead of building one")
    a = ap.parse_args()
    key = f"{a.goos}/{a.goarch}"
    if key not in PLATFORMS:
        print(f"build_wheel: no wheel platform for {key} (known: {', '.join(PLATFORMS)})", file=sys.stderr)
        return 2
    if not a.cfp.is_file():
        print(f"build_wheel: {a.cfp} is not a file", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as td:
        pure = a.pure or build_pure(Path(td))
        target = platform_wheel(pure, a.cfp, a.goos, PLATFORMS[key], a.out)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
