"""`make setup`: the real CPU runtime in .venv with vllm-src installed editable.

Each step is skipped when a stamp says its inputs did not change, so a re-run
is quick and changes nothing:
  1. Debian packages (libnuma-dev for numa.h, ccache, a C++ compiler)
  2. .venv with ci/requirements-cpu.txt + the base's requirements/common.txt
  3. vLLM's CPU extension built from vllm-src and vllm-src installed editable.
     The compile goes through ccache (vLLM's setup.py uses it when present),
     whose cache lives outside the checkout, so a fresh clone relinks in
     seconds and only changed csrc/ or CMake inputs recompile.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .common import REPO, BasePin, Paths, UserError, main_wrapper, progress, run

APT_PACKAGES = {"libnuma-dev": "/usr/include/numa.h", "ccache": None, "g++": None,
                "git": None}
REQUIREMENTS = REPO / "ci" / "requirements-cpu.txt"
# Exact versions (a freeze of a working venv): reproducible, and pip need not search.
CONSTRAINTS = REPO / "ci" / "constraints-cpu.txt"
TORCH_CMAKE_DIR = REPO / "ci" / "cmake"
VENV = Path(os.environ.get("PSTACK_VENV", REPO / ".venv"))
# Inputs of the compiled extension; Python-only patches never change these.
EXT_INPUTS = ("csrc", "cmake", "CMakeLists.txt", "setup.py")


def venv_python() -> Path:
    return VENV / "bin" / "python"


# ---------------------------------------------------------------- 1. apt

def _dpkg_installed(pkg: str) -> bool:
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return proc.returncode == 0 and "install ok installed" in proc.stdout


def ensure_apt_packages() -> None:
    if shutil.which("dpkg-query") is None:
        missing = [p for p, probe in APT_PACKAGES.items() if probe and not Path(probe).exists()]
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
    run(["apt-get", "update", "-q"], env=env)
    run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], env=env)


# ---------------------------------------------------------------- 2. venv

def _stamp(name: str) -> Path:
    return VENV / f".pstack-{name}"


def _stamp_matches(name: str, key: str) -> bool:
    p = _stamp(name)
    return p.exists() and p.read_text().strip() == key


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def ensure_venv() -> None:
    if sys.version_info[:2] not in ((3, 10), (3, 11), (3, 12)):
        raise UserError(f"python {sys.version.split()[0]} is not supported by vLLM 0.9.2 + IPEX 2.6",
                        "run make with PYTHON=python3.11")
    py = venv_python()
    if py.exists() and subprocess.run([py, "-c", "import sys"]).returncode != 0:
        progress(f"{VENV} is broken; recreating it")
        shutil.rmtree(VENV)
    if not py.exists():
        progress(f"creating {VENV}")
        run([sys.executable, "-m", "venv", VENV])


def ensure_requirements(src: Path) -> None:
    common = src / "requirements" / "common.txt"
    key = _digest(REQUIREMENTS.read_bytes(), CONSTRAINTS.read_bytes(), common.read_bytes())
    if _stamp_matches("deps", key):
        return
    progress("installing the CPU runtime into .venv (torch, IPEX, vLLM requirements; "
             "several GB on the first run)")
    run([venv_python(), "-m", "pip", "install", "--progress-bar", "off",
         "-r", REQUIREMENTS, "-r", common, "-c", CONSTRAINTS])
    _stamp("deps").write_text(key + "\n")


# ---------------------------------------------------------------- 3. vllm

def extension_key(src: Path, pin: BasePin) -> str:
    """Hash of everything the compiled extension depends on."""
    torch_version = run([venv_python(), "-c", "import torch; print(torch.__version__)"],
                        capture=True).stdout.strip()
    h = hashlib.sha256(f"{pin.version}|{torch_version}|{sys.version_info[:2]}".encode())
    h.update((TORCH_CMAKE_DIR / "TorchConfig.cmake").read_bytes())
    for item in EXT_INPUTS:
        root = src / item
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for f in files:
            if f.is_file():
                h.update(str(f.relative_to(src)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:16]


def build_env(pin: BasePin, cache: Path, version: str) -> dict[str, str]:
    """Environment for compiling vLLM's CPU target with this machine's toolchain."""
    return {
        "VLLM_TARGET_DEVICE": "cpu",
        # The AVX512 path makes CMake download oneDNN, which is not reachable here.
        "VLLM_CPU_DISABLE_AVX512": "true",
        "MAX_JOBS": os.environ.get("MAX_JOBS", str(os.cpu_count() or 2)),
        "Torch_DIR": str(TORCH_CMAKE_DIR),
        "Torch_ROOT": str(TORCH_CMAKE_DIR),
        "CCACHE_DIR": str(cache / "ccache"),
        # Paths relative to the checkout and no cwd in the hash: a fresh clone
        # anywhere on the machine hits the same cache entries.
        "CCACHE_BASEDIR": str(REPO),
        "CCACHE_NOHASHDIR": "1",
        # A tree with patch commits would otherwise be versioned 0.9.3.devN.
        "SETUPTOOLS_SCM_PRETEND_VERSION": version,
        "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def ensure_vllm(src: Path, pin: BasePin, cache: Path) -> None:
    """Compile the CPU extension in place and install vllm-src editable.

    `setup.py develop` is vLLM's documented CPU development install. Unlike
    `pip install -e`, it builds in vllm-src/build (ignored by git, kept across
    `make apply`), so CMake/ninja rebuild only what changed, and the CPU wheel
    build reuses the same objects.
    """
    key = f"{extension_key(src, pin)}|{src.resolve()}"
    so = src / "vllm" / "_C.abi3.so"
    if _stamp_matches("vllm", key) and so.exists():
        return
    progress("building vLLM's CPU extension and installing vllm-src editable "
             "(3-4 minutes on 2 cores when the compiler cache is cold)")
    # A previous install (editable or not) would shadow or confuse this one.
    run([venv_python(), "-m", "pip", "uninstall", "-y", "-q", "vllm"], check=False,
        capture=True)
    proc = run([venv_python(), "setup.py", "develop", "--no-deps"], cwd=src,
               env=build_env(pin, cache, pin.version), check=False)
    if proc.returncode != 0 or not so.exists():
        raise UserError("building vLLM's CPU extension failed (output above)",
                        "fix the cause and re-run `make setup`; finished objects are reused")
    _stamp("vllm").write_text(key + "\n")


def check_runtime() -> None:
    code = ("import vllm, vllm._C\n"
            "from vllm.platforms import current_platform as p\n"
            "assert p.is_cpu(), p\n"
            "import intel_extension_for_pytorch\n"
            "print('vllm', vllm.__version__, 'on', type(p).__name__)\n")
    proc = run([venv_python(), "-c", code], capture=True, check=False)
    if proc.returncode != 0:
        raise UserError("the CPU runtime does not import: " + proc.stderr.strip().splitlines()[-1],
                        "re-run `make setup`")
    progress(proc.stdout.strip().splitlines()[-1])


def setup(paths: Paths) -> None:
    pin = BasePin.load(paths.base_file)
    if not (paths.src / "setup.py").exists():
        raise UserError(f"{paths.src} is not materialized", "run `make apply` first")
    ensure_apt_packages()
    ensure_venv()
    ensure_requirements(paths.src)
    ensure_vllm(paths.src, pin, paths.cache)
    check_runtime()


def main(argv: list[str]) -> int:
    argparse.ArgumentParser(prog="setup", description=__doc__).parse_args(argv)
    setup(Paths.default())
    return 0


if __name__ == "__main__":
    main_wrapper(main)
