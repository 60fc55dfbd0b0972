"""`make setup`: the real CPU runtime in .venv with vllm-src installed
editable.

Each step is skipped when a stamp says its inputs did not change, so a
re-run is quick and changes nothing:
  1. Debian packages (libnuma-dev for numa.h, ccache, a C++ compiler)
  2. .venv with ci/requirements-cpu.txt + the base's requirements/common.txt
  3. vLLM's CPU extension built from vllm-src and vllm-src installed
     editable. The compile goes through ccache (vLLM's setup.py uses it
     when present), whose cache lives outside the checkout, so a fresh
     clone relinks in seconds and only changed csrc/ or CMake inputs
     recompile.

A line next to the default one (`LINE=<version>`) whose release pins the
same torch and IPEX on x86 shares the default line's runtime instead of
installing its own: .venv-<version> sees .venv's packages through a .pth
file and holds only what its release needs on top (its
requirements/common.txt, pinned by ci/constraints-cpu-<version>.txt), with
its own vllm-src installed editable. The default line's .venv is set up
first when it is not.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.layout import REPO, Layout
from ..core.pin import BasePin
from ..core.proc import run_process

APT_PACKAGES = {
    "libnuma-dev": "/usr/include/numa.h",
    "ccache": None,
    "g++": None,
    "git": None
}
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
# Pins of requirements/cpu.txt that make the runtime: lines that agree on
# them can share one.
RUNTIME_PINS = re.compile(
    r"^(torch|intel[-_]extension[-_]for[-_]pytorch)==.*x86_64", re.MULTILINE)
TORCH_CMAKE_DIR = REPO / "ci" / "cmake"
# Inputs of the compiled extension; Python-only patches never change these.
EXT_INPUTS = ("csrc", "cmake", "CMakeLists.txt", "setup.py")


def configure(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace, layout: Layout) -> int:
    setup(layout)
    return 0


def setup(layout: Layout) -> None:
    pin = BasePin.load(layout.base_file)
    if not (layout.src / "setup.py").exists():
        raise UserError(f"{layout.src} is not materialized",
                        "run `make apply` first")
    ensure_apt_packages()
    shared = shared_runtime(layout)
    if shared is None:
        ensure_venv(layout)
        ensure_requirements(layout)
    else:
        progress(f"{layout.venv.name} shares the CPU runtime of "
                 f"{shared.venv.name} (same torch and IPEX pins)")
        setup_shared_runtime(shared)
        ensure_venv(layout, own_pip=False)
        link_runtime(layout, shared)
        ensure_line_requirements(layout, pin)
    ensure_vllm(layout, pin, shared)
    check_runtime(layout)


# ---------------------------------------------------------------- 1. apt


def _dpkg_installed(pkg: str) -> bool:
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg],
                          stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL,
                          text=True)
    return proc.returncode == 0 and "install ok installed" in proc.stdout


def ensure_apt_packages() -> None:
    if shutil.which("dpkg-query") is None:
        missing = [
            p for p, probe in APT_PACKAGES.items()
            if probe and not Path(probe).exists()
        ]
        if missing:
            raise UserError(f"missing system packages: {', '.join(missing)}",
                            "install them with your package manager")
        return
    missing = [p for p in APT_PACKAGES if not _dpkg_installed(p)]
    if not missing:
        return
    if os.geteuid() != 0:
        raise UserError(f"missing Debian packages: {', '.join(missing)}",
                        f"sudo apt-get install -y {' '.join(missing)}")
    progress(f"installing Debian packages: {', '.join(missing)}")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    run_process(["apt-get", "update", "-q"], env=env)
    run_process([
        "apt-get", "install", "-y", "-q", "--no-install-recommends", *missing
    ],
                env=env)


# ---------------------------------------------------------------- 2. venv


def stamp(venv: Path, name: str) -> Path:
    """The file that says step `name` of the setup is done for its inputs."""
    return venv / f".pstack-{name}"


def _stamp_matches(venv: Path, name: str, key: str) -> bool:
    p = stamp(venv, name)
    return p.exists() and p.read_text().strip() == key


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def ensure_venv(layout: Layout, own_pip: bool = True) -> None:
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


def ensure_requirements(layout: Layout) -> None:
    common = layout.src / "requirements" / "common.txt"
    key = _digest(REQUIREMENTS.read_bytes(), CONSTRAINTS.read_bytes(),
                  common.read_bytes())
    if _stamp_matches(layout.venv, "deps", key):
        return
    progress("installing the CPU runtime into .venv (torch, IPEX, vLLM "
             "requirements; several GB on the first run)")
    run_process([
        layout.venv_python, "-m", "pip", "install", "--progress-bar", "off",
        "-r", REQUIREMENTS, "-r", common, "-c", CONSTRAINTS
    ])
    stamp(layout.venv, "deps").write_text(key + "\n")


def runtime_pins(src: Path) -> list[str]:
    """The torch and IPEX pins for x86 in a vLLM tree's
    requirements/cpu.txt."""
    cpu = src / "requirements" / "cpu.txt"
    text = cpu.read_text() if cpu.exists() else ""
    return [m.group(0) for m in RUNTIME_PINS.finditer(text)]


def shared_runtime(layout: Layout) -> Layout | None:
    """The default line, when `layout` is another line whose release pins
    the same runtime; None otherwise."""
    if layout.is_default_line:
        return None
    default = layout.default_line()
    pins = runtime_pins(layout.src)
    if pins and not default.src.exists():
        raise UserError(
            f"{default.src.name} is not materialized: the runtime of "
            f"{layout.venv.name} may be shared with {default.venv.name}",
            "run `make setup` (the default line) first")
    return default if pins and runtime_pins(default.src) == pins else None


def setup_shared_runtime(shared: Layout) -> None:
    """The default line's venv and packages (not its vLLM build)."""
    ensure_venv(shared)
    ensure_requirements(shared)


def site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise UserError(f"{venv} has no site-packages",
                        f"remove {venv} and re-run `make setup`")
    return found[0]


def link_runtime(layout: Layout, shared: Layout) -> None:
    pth = site_packages(layout.venv) / SHARED_PTH
    target = f"{site_packages(shared.venv).resolve()}\n"
    if not pth.exists() or pth.read_text() != target:
        pth.write_text(target)
    # `python -m ruff` runs the binary in its own venv's bin/ only.
    for name in SHARED_BINARIES:
        link = layout.venv / "bin" / name
        if not link.exists() and (shared.venv / "bin" / name).exists():
            link.symlink_to((shared.venv / "bin" / name).resolve())


def ensure_line_requirements(layout: Layout, pin: BasePin) -> None:
    """What the line's release needs on top of the shared runtime."""
    common = layout.src / "requirements" / "common.txt"
    constraints = Path(str(LINE_CONSTRAINTS).format(version=pin.version))
    if not constraints.exists():
        raise UserError(
            f"{constraints.relative_to(REPO)} is missing",
            f"the packages the {pin.version} line adds to the shared "
            "runtime, pinned: `pip freeze --path <its site-packages>`")
    key = _digest(constraints.read_bytes(), common.read_bytes(),
                  str(site_packages(layout.venv) / SHARED_PTH).encode())
    if _stamp_matches(layout.venv, "deps", key):
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


# ---------------------------------------------------------------- 3. vllm


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


def build_env(layout: Layout,
              version: str,
              shared: Layout | None = None) -> dict[str, str]:
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


def ensure_vllm(layout: Layout,
                pin: BasePin,
                shared: Layout | None = None) -> None:
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
    if _stamp_matches(layout.venv, "vllm", key) and so.exists():
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


def check_runtime(layout: Layout) -> None:
    code = ("import vllm, vllm._C\n"
            "from vllm.platforms import current_platform as p\n"
            "assert p.is_cpu(), p\n"
            "import intel_extension_for_pytorch\n"
            "print('vllm', vllm.__version__, 'on', type(p).__name__)\n")
    proc = run_process([layout.venv_python, "-c", code],
                       capture=True,
                       check=False)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1]
        raise UserError(f"the CPU runtime does not import: {last}",
                        "re-run `make setup`")
    progress(proc.stdout.strip().splitlines()[-1])
