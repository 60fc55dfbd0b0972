"""`make wheel`: the patched wheels, each verified in a throwaway venv.

CUDA wheel: the official vllm wheel (sha256-pinned) with the series' changed
`vllm/**` files overlaid, versioned `<base>+<label>`. The series changes
Python only, so the official compiled kernels stay valid; a series touching
anything compiled or packaging-related is refused.

CPU wheel: built from the patched vllm-src for vLLM's CPU backend, versioned
`<base>+<label>.cpu` (vLLM selects its CPU platform from "cpu" in the version).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .common import REPO, BasePin, Paths, UserError, git, main_wrapper, progress, run
from .fetch import fetch_wheel
from .srctree import SERIES, read_series

# Paths a Python-only overlay cannot carry: they need a real build or change metadata.
FORBIDDEN = re.compile(
    r"^(csrc/|cmake/|CMakeLists\.txt$|setup\.py$|setup\.cfg$|pyproject\.toml$|"
    r"MANIFEST\.in$|requirements/|vllm/vllm_flash_attn/|vllm/_version\.py$|.*\.so$)")


@dataclass(frozen=True)
class Change:
    status: str  # A, M or D
    path: str


def series_changes(src: Path, tag: str) -> list[Change]:
    out = git(src, "diff", "--name-status", "--no-renames", tag, SERIES)
    return [Change(*line.split("\t", 1)) for line in out.splitlines()]


def check_overlay_safe(changes: list[Change]) -> list[Change]:
    """The `vllm/**` changes to overlay; refuses changes that need a compiled build."""
    bad = [c.path for c in changes if FORBIDDEN.match(c.path)]
    if bad:
        raise UserError("the series changes files a Python overlay cannot carry: "
                        + ", ".join(bad[:5]),
                        "keep csrc/, CMake, setup.py and requirements changes out of the series")
    return [c for c in changes if c.path.startswith("vllm/")]


def series_label(paths: Paths) -> str:
    """Local version label derived from the series: patch count + content digest."""
    names = read_series(paths)
    h = hashlib.sha256()
    for name in names:
        h.update((paths.patches / name).read_bytes())
    label = f"kvoffload.{len(names)}.g{h.hexdigest()[:8]}"
    assert "cpu" not in label and "-" not in label, label
    return label


# ---------------------------------------------------------------- CUDA wheel

def build_cuda_wheel(paths: Paths, pin: BasePin, label: str, outdir: Path) -> Path:
    overlay = check_overlay_safe(series_changes(paths.src, pin.tag))
    official = fetch_wheel(pin, paths.cache)
    version = f"{pin.version}+{label}"
    progress(f"CUDA wheel {version}: official wheel + {len(overlay)} changed vllm/ files")
    with tempfile.TemporaryDirectory(dir=outdir) as tmp:
        tree = Path(tmp) / "tree"
        with zipfile.ZipFile(official) as zf:
            zf.extractall(tree)
        for change in overlay:
            dest = tree / change.path
            if change.status == "D":
                if not dest.exists():
                    raise UserError(f"{change.path} is deleted by the series but is not "
                                    "in the official wheel")
                dest.unlink()
            else:
                if change.status == "M" and not dest.exists():
                    raise UserError(f"{change.path} is modified by the series but is not "
                                    "in the official wheel (package-data mismatch?)")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(paths.src / change.path, dest)
        (tree / "vllm" / "_version.py").write_text(
            "# Written by the patch stack's `make wheel`.\n"
            f"__version__ = version = {version!r}\n"
            f"__version_tuple__ = version_tuple = {_version_tuple(version)!r}\n")
        progress("packing (re-compresses the kernels; about a minute)")
        from .setup_env import venv_python
        run([venv_python(), "-m", "wheel", "pack", "--local-version", label, "-d", tmp, tree])
        built = next(Path(tmp).glob("*.whl"))
        final = outdir / built.name
        built.replace(final)
    return final


def _version_tuple(version: str) -> tuple:
    public, _, local = version.partition("+")
    return tuple(int(p) for p in public.split(".")) + ((local,) if local else ())


# ---------------------------------------------------------------- CPU wheel

def build_cpu_wheel(paths: Paths, pin: BasePin, label: str, outdir: Path) -> Path:
    from .setup_env import build_env, venv_python
    version = f"{pin.version}+{label}"
    progress(f"CPU wheel {version}.cpu from vllm-src (compiles through ccache)")
    with tempfile.TemporaryDirectory(dir=outdir) as tmp:
        proc = run([venv_python(), "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                    "--progress-bar", "off", "-w", tmp, paths.src],
                   env=build_env(pin, paths.cache, version), check=False)
        wheels = list(Path(tmp).glob("vllm-*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            raise UserError("building the CPU wheel failed (output above)",
                            "re-run `make wheel`; compiled objects are cached")
        final = outdir / wheels[0].name
        wheels[0].replace(final)
    return final


# ---------------------------------------------------------------- verification

def _record_hashes(zf: zipfile.ZipFile) -> dict[str, str]:
    record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
    hashes = {}
    for line in zf.read(record).decode().splitlines():
        name, digest, _ = line.rsplit(",", 2)
        if digest:
            hashes[name] = digest
    return hashes


def verify_wheel(wheel: Path, src: Path, overlay: list[Change], expected_version: str,
                 reference_wheel: Path | None, import_ext: bool,
                 dist_version: str | None = None) -> list[str]:
    """Install `wheel` with --no-deps into a throwaway venv and check it.

    Returns the list of problems (empty when the wheel is good):
    every changed vllm/ file carries the patched bytes (deleted ones are gone),
    shared objects are intact (byte-equal to the reference wheel's when given,
    otherwise loadable), and vllm.__version__ is the expected version. The
    distribution version is the same, except for builds whose setup.py appends
    a device suffix after writing vllm/_version.py (`+<label>.cpu`).
    """
    dist_version = dist_version or expected_version
    from .setup_env import venv_python
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        run([venv_python(), "-m", "venv", "--without-pip", venv])
        site = next((venv / "lib").glob("python3*/site-packages"))
        deps_site = run([venv_python(), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                        capture=True).stdout.strip()
        # torch & co. come from the project venv, after the wheel's own files.
        (site / "zz_project_deps.pth").write_text(deps_site + "\n")
        run([venv_python(), "-m", "pip", "--python", venv / "bin" / "python", "install",
             "--no-deps", "--quiet", "--no-index", wheel])
        for change in overlay:
            installed = site / change.path
            if change.status == "D":
                if installed.exists():
                    problems.append(f"{change.path}: deleted by the series but installed")
            elif not installed.exists():
                problems.append(f"{change.path}: missing")
            elif installed.read_bytes() != (src / change.path).read_bytes():
                problems.append(f"{change.path}: content differs from vllm-src")
        sos = sorted(site.glob("vllm/**/*.so"))
        if not sos:
            problems.append("no shared objects installed")
        if reference_wheel is not None:
            with zipfile.ZipFile(reference_wheel) as zf:
                ref = {n: d for n, d in _record_hashes(zf).items() if n.endswith(".so")}
            for name, digest in ref.items():
                so = site / name
                if not so.exists():
                    problems.append(f"{name}: missing")
                    continue
                actual = "sha256=" + _urlsafe_sha256(so)
                if actual != digest:
                    problems.append(f"{name}: differs from the official wheel")
        code = ("import importlib.metadata as m, vllm\n"
                "print(vllm.__version__, m.version('vllm'), vllm.__file__)\n")
        if import_ext:
            code += "import vllm._C\n"
        proc = subprocess.run([venv / "bin" / "python", "-c", code], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp,
                              env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"})
        if proc.returncode != 0:
            problems.append("import failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
        else:
            got_version, got_dist, location = proc.stdout.split()
            if got_version != expected_version or got_dist != dist_version:
                problems.append(f"version {got_version} (metadata {got_dist}), "
                                f"expected {expected_version} ({dist_version})")
            if not location.startswith(str(site)):
                problems.append(f"vllm imported from {location}, not from the wheel")
    return problems


def _urlsafe_sha256(path: Path) -> str:
    import base64
    digest = hashlib.sha256(path.read_bytes()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


# ---------------------------------------------------------------- main

def build_all(paths: Paths, outdir: Path, which: str) -> list[Path]:
    pin = BasePin.load(paths.base_file)
    label = series_label(paths)
    outdir.mkdir(parents=True, exist_ok=True)
    overlay = check_overlay_safe(series_changes(paths.src, pin.tag))
    for old in outdir.glob("vllm-*.whl"):
        old.unlink()
    built = []
    if which in ("cuda", "all"):
        wheel = build_cuda_wheel(paths, pin, label, outdir)
        problems = verify_wheel(wheel, paths.src, overlay, f"{pin.version}+{label}",
                                reference_wheel=fetch_wheel(pin, paths.cache),
                                import_ext=False)
        _report(wheel, problems)
        built.append(wheel)
    if which in ("cpu", "all"):
        wheel = build_cpu_wheel(paths, pin, label, outdir)
        problems = verify_wheel(wheel, paths.src, overlay, f"{pin.version}+{label}",
                                reference_wheel=None, import_ext=True,
                                dist_version=f"{pin.version}+{label}.cpu")
        _report(wheel, problems)
        built.append(wheel)
    return built


def _report(wheel: Path, problems: list[str]) -> None:
    if problems:
        raise UserError(f"{wheel.name} failed its checks: " + "; ".join(problems))
    progress(f"{wheel.name}: verified ({wheel.stat().st_size / 2**20:.0f} MiB)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="wheel", description=__doc__)
    parser.add_argument("which", choices=["cuda", "cpu", "all"], nargs="?", default="all")
    parser.add_argument("--outdir", type=Path, default=REPO / "dist")
    args = parser.parse_args(argv)
    for wheel in build_all(Paths.default(), args.outdir, args.which):
        print(wheel)
    return 0


if __name__ == "__main__":
    main_wrapper(main)
