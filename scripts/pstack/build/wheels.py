"""`make wheel`: the patched wheels, each verified in a throwaway venv.

CUDA wheel: the official vllm wheel (sha256-pinned) with the series' changed
`vllm/**` files overlaid, versioned `<base>+<label>`. The series changes
Python only, so the official compiled kernels stay valid; a series touching
anything compiled or packaging-related is refused.

CPU wheel: built from the patched vllm-src for vLLM's CPU backend, versioned
`<base>+<label>.cpu` (vLLM selects its CPU platform from "cpu" in the
version).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..core.download import fetch_wheel
from ..core.errors import UserError, progress
from ..core.layout import Layout
from ..core.pin import BasePin
from ..core.proc import run_process
from ..core.series import series_label
from ..core.vllm_src import SERIES, VllmSrc
from .setup_env import build_env, shared_runtime

# Paths a Python-only overlay cannot carry: they need a real build or change
# metadata.
FORBIDDEN = re.compile(
    r"^(csrc/|cmake/|CMakeLists\.txt$|setup\.py$|setup\.cfg$|pyproject\.toml$|"
    r"MANIFEST\.in$|requirements/|vllm/vllm_flash_attn/|vllm/_version\.py$|"
    r".*\.so$)")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("which",
                        choices=["cuda", "cpu", "all"],
                        nargs="?",
                        default="all")
    parser.add_argument("--outdir", type=Path, help="default: dist/")


def run(args: argparse.Namespace, layout: Layout) -> int:
    outdir = args.outdir or layout.dist
    for wheel in build_all(layout, outdir, args.which):
        print(wheel)
    return 0


@dataclass(frozen=True)
class Change:
    status: str  # A, M or D
    path: str


def series_changes(src: Path, tag: str) -> list[Change]:
    out = VllmSrc(src).git("diff", "--name-status", "--no-renames", tag,
                           SERIES)
    return [Change(*line.split("\t", 1)) for line in out.splitlines()]


def check_overlay_safe(changes: list[Change]) -> list[Change]:
    """The `vllm/**` changes to overlay; refuses changes that need a
    compiled build."""
    bad = [c.path for c in changes if FORBIDDEN.match(c.path)]
    if bad:
        raise UserError(
            "the series changes files a Python overlay cannot carry: " +
            ", ".join(bad[:5]), "keep csrc/, CMake, setup.py and "
            "requirements changes out of the series")
    return [c for c in changes if c.path.startswith("vllm/")]


# ---------------------------------------------------------------- CUDA wheel


def build_cuda_wheel(layout: Layout, pin: BasePin, label: str,
                     outdir: Path) -> Path:
    overlay = check_overlay_safe(series_changes(layout.src, pin.tag))
    official = fetch_wheel(pin, layout.cache)
    version = f"{pin.version}+{label}"
    progress(f"CUDA wheel {version}: official wheel + {len(overlay)} changed "
             "vllm/ files")
    with tempfile.TemporaryDirectory(dir=outdir) as tmp:
        tree = Path(tmp) / "tree"
        with zipfile.ZipFile(official) as zf:
            zf.extractall(tree)
        for change in overlay:
            dest = tree / change.path
            if change.status == "D":
                if not dest.exists():
                    raise UserError(f"{change.path} is deleted by the series "
                                    "but is not in the official wheel")
                dest.unlink()
            else:
                if change.status == "M" and not dest.exists():
                    raise UserError(
                        f"{change.path} is modified by the series but is not "
                        "in the official wheel (package-data mismatch?)")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(layout.src / change.path, dest)
        (tree / "vllm" / "_version.py").write_text(
            "# Written by the patch stack's `make wheel`.\n"
            f"__version__ = version = {version!r}\n"
            f"__version_tuple__ = version_tuple = {_version_tuple(version)!r}\n"
        )
        progress("packing (re-compresses the kernels; about a minute)")
        run_process([
            layout.venv_python, "-m", "wheel", "pack", "--local-version",
            label, "-d", tmp, tree
        ])
        built = next(Path(tmp).glob("*.whl"))
        final = outdir / built.name
        built.replace(final)
    return final


def _version_tuple(version: str) -> tuple:
    public, _, local = version.partition("+")
    return tuple(int(p) for p in public.split(".")) + ((local, ) if local else
                                                       ())


# ---------------------------------------------------------------- CPU wheel


def build_cpu_wheel(layout: Layout, pin: BasePin, label: str,
                    outdir: Path) -> Path:
    version = f"{pin.version}+{label}"
    progress(
        f"CPU wheel {version}.cpu from vllm-src (compiles through ccache)")
    with tempfile.TemporaryDirectory(dir=outdir) as tmp:
        proc = run_process([
            layout.venv_python, "-m", "pip", "wheel", "--no-build-isolation",
            "--no-deps", "--progress-bar", "off", "-w", tmp, layout.src
        ],
                           env=build_env(layout, version,
                                         shared_runtime(layout)),
                           check=False)
        wheels = list(Path(tmp).glob("vllm-*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            raise UserError(
                "building the CPU wheel failed (output above)",
                "re-run `make wheel`; compiled objects are cached")
        final = outdir / wheels[0].name
        wheels[0].replace(final)
    return final


# ---------------------------------------------------------------- checks


def _record_hashes(zf: zipfile.ZipFile) -> dict[str, str]:
    record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
    hashes = {}
    for line in zf.read(record).decode().splitlines():
        name, digest, _ = line.rsplit(",", 2)
        if digest:
            hashes[name] = digest
    return hashes


def _urlsafe_sha256(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def verify_wheel(wheel: Path,
                 src: Path,
                 overlay: list[Change],
                 expected_version: str,
                 reference_wheel: Path | None,
                 import_ext: bool,
                 python: Path,
                 dist_version: str | None = None) -> list[str]:
    """Install `wheel` with --no-deps into a throwaway venv made by `python`
    (whose packages it then uses) and check it.

    Returns the list of problems (empty when the wheel is good): every
    changed vllm/ file carries the patched bytes (deleted ones are gone),
    shared objects are intact (byte-equal to the reference wheel's when
    given, otherwise loadable), and vllm.__version__ is the expected
    version. The distribution version is the same, except for builds whose
    setup.py appends a device suffix after writing vllm/_version.py
    (`+<label>.cpu`).
    """
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        site = install_in_throwaway_venv(wheel, venv, python)
        problems = overlay_problems(site, src, overlay)
        problems += shared_object_problems(site, reference_wheel)
        problems += import_problems(venv, site, Path(tmp), import_ext,
                                    expected_version, dist_version
                                    or expected_version)
    return problems


def install_in_throwaway_venv(wheel: Path, venv: Path, python: Path) -> Path:
    """A venv at `venv` with `wheel` installed (--no-deps), seeing the
    packages of `python`'s environment after its own; its site-packages."""
    run_process([python, "-m", "venv", "--without-pip", venv])
    site = next((venv / "lib").glob("python3*/site-packages"))
    # Every site-packages of the project venv: its own, and the runtime
    # it shares with the default line, if it does.
    deps_sites = run_process([
        python, "-c", "import sys; print('\\n'.join(p for p in sys.path "
        "if p.endswith('site-packages')))"
    ],
                             capture=True).stdout
    # torch & co. come from the project venv, after the wheel's own files.
    (site / "zz_project_deps.pth").write_text(deps_sites)
    run_process([
        python, "-m", "pip", "--python", venv / "bin" / "python", "install",
        "--no-deps", "--quiet", "--no-index", wheel
    ])
    return site


def overlay_problems(site: Path, src: Path,
                     overlay: list[Change]) -> list[str]:
    """Each changed vllm/ file installed in `site` with vllm-src's bytes,
    each deleted one absent."""
    problems = []
    for change in overlay:
        installed = site / change.path
        if change.status == "D":
            if installed.exists():
                problems.append(
                    f"{change.path}: deleted by the series but installed")
        elif not installed.exists():
            problems.append(f"{change.path}: missing")
        elif installed.read_bytes() != (src / change.path).read_bytes():
            problems.append(f"{change.path}: content differs from vllm-src")
    return problems


def shared_object_problems(site: Path,
                           reference_wheel: Path | None) -> list[str]:
    """Shared objects installed, and byte-equal to those of
    `reference_wheel` (by its RECORD) when given."""
    problems = []
    if not sorted(site.glob("vllm/**/*.so")):
        problems.append("no shared objects installed")
    if reference_wheel is None:
        return problems
    with zipfile.ZipFile(reference_wheel) as zf:
        ref = {
            n: d
            for n, d in _record_hashes(zf).items() if n.endswith(".so")
        }
    for name, digest in ref.items():
        so = site / name
        if not so.exists():
            problems.append(f"{name}: missing")
        elif "sha256=" + _urlsafe_sha256(so) != digest:
            problems.append(f"{name}: differs from the official wheel")
    return problems


def import_problems(venv: Path, site: Path, cwd: Path, import_ext: bool,
                    expected_version: str, dist_version: str) -> list[str]:
    """vllm imports in `venv` from `site` (and vllm._C with `import_ext`),
    with the expected __version__ and distribution version."""
    code = ("import importlib.metadata as m, vllm\n"
            "print(vllm.__version__, m.version('vllm'), vllm.__file__)\n")
    if import_ext:
        code += "import vllm._C\n"
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"}
    proc = subprocess.run([venv / "bin" / "python", "-c", code],
                          text=True,
                          capture_output=True,
                          cwd=cwd,
                          env=env)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return [f"import failed: {last}"]
    problems = []
    got_version, got_dist, location = proc.stdout.split()
    if got_version != expected_version or got_dist != dist_version:
        problems.append(f"version {got_version} (metadata {got_dist}), "
                        f"expected {expected_version} ({dist_version})")
    if not location.startswith(str(site)):
        problems.append(f"vllm imported from {location}, not from the wheel")
    return problems


# ---------------------------------------------------------------- main


def build_all(layout: Layout, outdir: Path, which: str) -> list[Path]:
    pin = BasePin.load(layout.base_file)
    label = series_label(layout)
    outdir.mkdir(parents=True, exist_ok=True)
    overlay = check_overlay_safe(series_changes(layout.src, pin.tag))
    for old in outdir.glob("vllm-*.whl"):
        old.unlink()
    version = f"{pin.version}+{label}"
    built = []
    if which in ("cuda", "all"):
        wheel = build_cuda_wheel(layout, pin, label, outdir)
        problems = verify_wheel(wheel,
                                layout.src,
                                overlay,
                                version,
                                reference_wheel=fetch_wheel(pin, layout.cache),
                                import_ext=False,
                                python=layout.venv_python)
        _report(wheel, problems)
        built.append(wheel)
    if which in ("cpu", "all"):
        wheel = build_cpu_wheel(layout, pin, label, outdir)
        problems = verify_wheel(wheel,
                                layout.src,
                                overlay,
                                version,
                                reference_wheel=None,
                                import_ext=True,
                                python=layout.venv_python,
                                dist_version=f"{version}.cpu")
        _report(wheel, problems)
        built.append(wheel)
    return built


def _report(wheel: Path, problems: list[str]) -> None:
    if problems:
        raise UserError(f"{wheel.name} failed its checks: " +
                        "; ".join(problems))
    size = wheel.stat().st_size / 2**20
    progress(f"{wheel.name}: verified ({size:.0f} MiB)")
