"""A line's venv: made, and each setup step stamped in it with the digest
of its inputs, so that a re-run with the same inputs does nothing."""

from __future__ import annotations

import hashlib
import json
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


# lm-eval requires scikit-learn, for the metrics of some of its own tasks
# (none that `make lm-eval` runs), and scikit-learn requires scipy.
# transformers imports both wherever they are installed, in every process
# that imports vLLM (its generation utilities, its loss functions): some
# 2.5 CPU-s a process on vLLM 0.32, whose CPU wheel requires neither, and a
# CI run starts hundreds of such processes (engines, their workers, pytest).
LM_EVAL_ONLY = ("scikit-learn", "scipy")

# Prints, for each installed package of those named in argv[1] (a JSON
# list of normalized names), the packages that require it (no extras).
_REQUIRERS = """
import json, re, sys
from importlib.metadata import distributions

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

wanted = json.loads(sys.argv[1])
dists = list(distributions())
found = {norm(d.metadata["Name"]) for d in dists} & set(wanted)
requirers = {name: [] for name in found}
for dist in dists:
    for req in dist.requires or []:
        if re.search(r"\\bextra\\s*==", req):
            continue
        name = norm(re.split(r"[\\s;<>=!~\\[(]", req, maxsplit=1)[0])
        if name in requirers:
            requirers[name].append(norm(dist.metadata["Name"]))
print(json.dumps(requirers))
"""


def drop_lm_eval_only(layout: Line, holder: Line | None = None) -> None:
    """Uninstall those of LM_EVAL_ONLY that no package but lm-eval and
    they require (vLLM 0.9.2 and 0.10.2 require scipy: it stays), as
    `layout`'s Python sees them; `holder`: the line whose venv holds them
    (the shared runtime's, for a line that shares it)."""
    proc = run_process(
        [layout.venv_python, "-c", _REQUIRERS,
         json.dumps(LM_EVAL_ONLY)],
        capture=True)
    requirers = json.loads(proc.stdout.strip().splitlines()[-1])
    drop: list[str] = []
    for name in LM_EVAL_ONLY:  # each after the packages that require it
        if name in requirers and set(requirers[name]) <= {"lm-eval", *drop}:
            drop.append(name)
    if drop:
        progress(f"uninstalling {' '.join(drop)} (lm-eval's, imported by "
                 "every vLLM process, used by none of its tests)")
        pip(holder or layout, "uninstall", "-y", "-q", *drop)
