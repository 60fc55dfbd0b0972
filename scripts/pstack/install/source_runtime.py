"""The runtime of a line built from its tree (Line.runtime SOURCE_BUILT):
the oldest line's venv with torch, IPEX and vLLM's requirements, a newer
line on the same torch sharing it, and vLLM's CPU extension compiled from
the line's tree (through ccache) and installed editable."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.line import REPO, Line
from ..core.pin import BasePin
from ..core.proc import failure_of, run_process
from .disk_space import SOURCE_RUNTIME, check_free_space
from .line_venv import digest, ensure_venv, site_packages, stamp, stamp_matches

REQUIREMENTS = REPO / "ci" / "requirements-cpu.txt"

# Exact versions (a freeze of a working venv): reproducible, and pip need
# not search.
CONSTRAINTS = REPO / "ci" / "constraints-cpu.txt"

# The packages it adds, for a line that shares the runtime: a freeze of
# what that line's venv holds itself.
LINE_CONSTRAINTS = REPO / "ci" / "constraints-cpu-{version}.txt"

# The .pth that puts the shared runtime on a line venv's sys.path (after
# the venv's own site-packages, so the line's own versions win).
SHARED_PTH = "_pstack_shared_runtime.pth"

# Native programs of the shared runtime that their Python package looks for
# in the running venv's bin/.
SHARED_BINARIES = ("ruff", )

TORCH_CMAKE_DIR = REPO / "ci" / "cmake"

# Inputs of the compiled extension; Python-only patches never change these.
EXT_INPUTS = ("csrc", "cmake", "CMakeLists.txt", "setup.py")


def ensure_requirements(layout: Line) -> None:
    common = layout.src / "requirements" / "common.txt"
    key = digest(REQUIREMENTS.read_bytes(), CONSTRAINTS.read_bytes(),
                 common.read_bytes())
    if stamp_matches(layout.venv, "deps", key):
        return
    check_free_space(SOURCE_RUNTIME, layout.venv)
    progress(f"installing the CPU runtime into {layout.venv.name} (torch, "
             "IPEX, vLLM requirements; several GB on the first run)")
    run_process([
        layout.venv_python, "-m", "pip", "install", "--progress-bar", "off",
        "-r", REQUIREMENTS, "-r", common, "-c", CONSTRAINTS
    ])
    stamp(layout.venv, "deps").write_text(key + "\n")


def setup_shared_runtime(shared: Line) -> None:
    """The oldest line's venv and packages (not its vLLM build)."""
    ensure_venv(shared)
    ensure_requirements(shared)


def link_runtime(layout: Line, shared: Line) -> None:
    pth = site_packages(layout.venv) / SHARED_PTH
    target = f"{site_packages(shared.venv).resolve()}\n"
    if not pth.exists() or pth.read_text() != target:
        pth.write_text(target)
    # `python -m ruff` runs the binary in its own venv's bin/ only.
    for name in SHARED_BINARIES:
        link = layout.venv / "bin" / name
        if not link.exists() and (shared.venv / "bin" / name).exists():
            link.symlink_to((shared.venv / "bin" / name).resolve())


def ensure_line_requirements(layout: Line, pin: BasePin) -> None:
    """What the line's release needs on top of the shared runtime."""
    common = layout.src / "requirements" / "common.txt"
    constraints = Path(str(LINE_CONSTRAINTS).format(version=pin.version))
    if not constraints.exists():
        raise UserError(
            f"{constraints.relative_to(REPO)} is missing",
            f"the packages the {pin.version} line adds to the shared "
            "runtime, pinned: `pip freeze --path <its site-packages>`")
    key = digest(constraints.read_bytes(), common.read_bytes(),
                 str(site_packages(layout.venv) / SHARED_PTH).encode())
    if stamp_matches(layout.venv, "deps", key):
        return
    progress(f"installing what vLLM {pin.version} needs on top of the "
             f"shared runtime into {layout.venv.name}")
    # pip sees the shared packages as installed: it adds only what is
    # missing or pinned differently, into this venv, and leaves the shared
    # ones alone ("outside environment").
    run_process([
        layout.venv_python, "-m", "pip", "install", "--progress-bar", "off",
        "-r", common, "-c", constraints
    ])
    stamp(layout.venv, "deps").write_text(key + "\n")


def extension_key(src: Path, pin: BasePin, torch_version: str) -> str:
    """Hash of everything the compiled extension depends on."""
    h = hashlib.sha256(
        f"{pin.version}|{torch_version}|{sys.version_info[:2]}".encode())
    h.update((TORCH_CMAKE_DIR / "TorchConfig.cmake").read_bytes())
    for item in EXT_INPUTS:
        root = src / item
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for f in files:
            if f.is_file():
                h.update(str(f.relative_to(src)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:16]


def build_env(layout: Line,
              version: str,
              shared: Line | None = None) -> dict[str, str]:
    """Environment for compiling vLLM's CPU target with this machine's
    toolchain."""
    # cmake and ninja are scripts in the bin/ of the venv that holds them.
    bins = [layout.venv / "bin"] + ([shared.venv / "bin"] if shared else [])
    return {
        "VLLM_TARGET_DEVICE": "cpu",
        # The AVX512 path makes CMake download oneDNN, which is not
        # reachable here.
        "VLLM_CPU_DISABLE_AVX512": "true",
        "MAX_JOBS": os.environ.get("MAX_JOBS", str(os.cpu_count() or 2)),
        "Torch_DIR": str(TORCH_CMAKE_DIR),
        "Torch_ROOT": str(TORCH_CMAKE_DIR),
        "CCACHE_DIR": str(layout.cache / "ccache"),
        # Paths relative to the checkout and no cwd in the hash: a fresh
        # clone anywhere on the machine hits the same cache entries.
        "CCACHE_BASEDIR": str(layout.root),
        "CCACHE_NOHASHDIR": "1",
        # A tree with patch commits would otherwise be versioned 0.9.3.devN.
        "SETUPTOOLS_SCM_PRETEND_VERSION": version,
        "PATH": os.pathsep.join([*map(str, bins),
                                 os.environ.get("PATH", "")]),
    }


def ensure_vllm(layout: Line,
                pin: BasePin,
                shared: Line | None = None) -> None:
    """Compile the CPU extension in place and install vllm-src editable.

    `setup.py develop` is vLLM's documented CPU development install. Unlike
    `pip install -e`, it builds in vllm-src/build (ignored by git, kept
    across `make apply`), so CMake/ninja rebuild only what changed, and the
    CPU wheel build reuses the same objects.
    """
    src, py = layout.src, layout.venv_python
    torch_version = run_process(
        [py, "-c", "import torch; print(torch.__version__)"],
        capture=True).stdout.strip()
    key = f"{extension_key(src, pin, torch_version)}|{src.resolve()}"
    so = src / "vllm" / "_C.abi3.so"
    if stamp_matches(layout.venv, "vllm", key) and so.exists():
        return
    progress("building vLLM's CPU extension and installing vllm-src editable "
             "(3-4 minutes on 2 cores when the compiler cache is cold)")
    # A previous install (editable or not) would shadow or confuse this one.
    run_process([py, "-m", "pip", "uninstall", "-y", "-q", "vllm"],
                check=False,
                capture=True)
    proc = run_process([py, "setup.py", "develop", "--no-deps"],
                       cwd=src,
                       env=build_env(layout, pin.version, shared),
                       check=False)
    if proc.returncode != 0 or not so.exists():
        raise UserError(
            "building vLLM's CPU extension failed (output above)",
            "fix the cause and re-run `make setup`; finished objects are "
            "reused")
    stamp(layout.venv, "vllm").write_text(key + "\n")


def check_runtime(layout: Line) -> None:
    code = ("import vllm, vllm._C\n"
            "from vllm.platforms import current_platform as p\n"
            "assert p.is_cpu(), p\n"
            "import intel_extension_for_pytorch\n"
            "print('vllm', vllm.__version__, 'on', type(p).__name__)\n")
    proc = run_process([layout.venv_python, "-c", code],
                       capture=True,
                       check=False)
    if proc.returncode != 0:
        raise UserError(f"the CPU runtime does not import: {failure_of(proc)}",
                        "re-run `make setup`")
    progress(proc.stdout.strip().splitlines()[-1])
