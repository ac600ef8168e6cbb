"""Finding the cfp binary: the argument, then the one inside a platform wheel, then PATH."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Optional, Union

from .errors import CfpNotFoundError

_EXE = "cfp.exe" if sys.platform == "win32" else "cfp"


def bundled_cfp() -> Optional[str]:
    """The cfp binary shipped inside this package (platform wheels only), or None."""
    p = Path(__file__).resolve().parent / "bin" / _EXE
    if p.is_file() and os.access(p, os.X_OK):
        return str(p)
    return None


def find_cfp(cfp_path: Union[str, "os.PathLike[str]", None] = None) -> str:
    """The cfp binary to run: ``cfp_path`` if given, else the wheel's, else ``cfp`` on PATH."""
    if cfp_path is not None:
        p = os.fspath(cfp_path)
        if os.sep in p or (os.altsep and os.altsep in p):
            if not (os.path.isfile(p) and os.access(p, os.X_OK)):
                raise CfpNotFoundError(f"cfp_path {p!r} is not an executable file")
            return p
        found = shutil.which(p)
        if found is None:
            raise CfpNotFoundError(f"cfp_path {p!r} is not on PATH")
        return found
    bundled = bundled_cfp()
    if bundled is not None:
        return bundled
    found = shutil.which(_EXE)
    if found is not None:
        return found
    raise CfpNotFoundError(
        "cfp not found: pass cfp_path=..., install a platform wheel of cfp-changefeed "
        "(it carries the binary), or put cfp on PATH"
    )
