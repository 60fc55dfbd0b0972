"""The real series on the real pinned base, in a scratch vllm-src."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import git
from pstack.core.gitrepo import GitRepo
from pstack.core.line import REPO, Line
from pstack.core.series import read_series
from pstack.queue.apply import apply
from pstack.queue.check_series import lint_series
from pstack.queue.export import export

# `make apply` imports the pinned tarball with a fixed identity and date, so
# the base commit (and with it every patch's base-commit trailer) is the same
# everywhere.
V092_IMPORT_COMMIT = "3477105208"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Line:
    real = Line.default().oldest  # the whole series
    tmp = tmp_path_factory.mktemp("real-series")
    paths = Line.at(tmp, real.version, real.cache)
    shutil.copytree(real.patches, paths.patches)
    shutil.copyfile(real.upstream_record, paths.upstream_record)
    apply(paths)
    return paths


def test_base_import_commit_is_reproducible(scratch):
    src = GitRepo(scratch.src)
    sha = src.git("rev-parse", "v0.9.2^{commit}").strip()
    assert sha.startswith(V092_IMPORT_COMMIT)
    tracked = set(src.git("ls-files").split())
    assert "vllm/_version.py" not in tracked and "setup.py" in tracked


def test_apply_then_export_reproduces_patches_byte_for_byte(scratch):
    before = {p.name: p.read_bytes() for p in scratch.patches.iterdir()}
    names = export(scratch)
    assert names == read_series(scratch)
    after = {p.name: p.read_bytes() for p in scratch.patches.iterdir()}
    assert after == before


def test_every_patch_is_upstream_shaped(scratch):
    lint_series(scratch)


def _carried_lines() -> list[str]:
    """The lines `make rebase` made: all but the oldest."""
    return [line.version for line in Line.default().lines()[1:]]


@pytest.mark.network
@pytest.mark.parametrize("version", _carried_lines())
def test_make_rebase_rewrites_each_line_byte_for_byte(tmp_path, version):
    """A fresh clone's `make rebase TO=<version>` makes the committed line:
    every resolution replayed from its record, nothing asked."""
    real = Line.default()
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(REPO), str(clone))
    proc = subprocess.run(
        [sys.executable, "-m", "pstack", "rebase", version],
        cwd=clone,
        env={
            **os.environ, "PYTHONPATH": str(clone / "scripts"),
            "PSTACK_CACHE": str(real.cache),
            "PSTACK_LINE": ""
        },
        capture_output=True,
        text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert git(clone, "status", "--porcelain", "--untracked-files=no") == ""
