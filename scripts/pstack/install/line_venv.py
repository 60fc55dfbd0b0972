"""A line's venv: made, and each setup step stamped in it with the digest
of its inputs, so that a re-run with the same inputs does nothing."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.line import Line
from ..core.proc import run_process


def stamp(venv: Path, name: str) -> Path:
    """The file that says step `name` of the setup is done for its inputs."""
    return venv / f".pstack-{name}"


def stamp_matches(venv: Path, name: str, key: str) -> bool:
    p = stamp(venv, name)
    return p.exists() and p.read_text().strip() == key


def digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def ensure_venv(layout: Line, own_pip: bool = True) -> None:
    """The venv, made if missing. A venv on a shared runtime gets no pip
    nor setuptools of its own: those of the runtime (what vLLM's build
    needs) must not be shadowed by the older ones `venv` bundles."""
    if sys.version_info[:2] not in ((3, 10), (3, 11), (3, 12)):
        raise UserError(
            f"python {sys.version.split()[0]} is not supported by vLLM "
            "0.9.2 + IPEX 2.6", "run make with PYTHON=python3.11")
    py = layout.venv_python
    if py.exists() and subprocess.run([py, "-c", "import sys"]).returncode:
        progress(f"{layout.venv} is broken; recreating it")
        shutil.rmtree(layout.venv)
    if not py.exists():
        progress(f"creating {layout.venv}")
        run_process([
            sys.executable, "-m", "venv", layout.venv,
            *([] if own_pip else ["--without-pip"])
        ])


def site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise UserError(f"{venv} has no site-packages",
                        f"remove {venv} and re-run `make setup`")
    return found[0]


def pip(layout: Line,
        *args: str | Path,
        check: bool = True,
        capture: bool = False) -> None:
    run_process([layout.venv_python, "-m", "pip", *args],
                check=check,
                capture=capture)
