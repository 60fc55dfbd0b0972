"""The real series on the real pinned base, in a scratch vllm-src."""

from __future__ import annotations

import shutil

import pytest
from pstack.core.gitrepo import GitRepo
from pstack.core.layout import Layout
from pstack.core.series import read_series
from pstack.queue.apply import apply
from pstack.queue.check_series import lint_series
from pstack.queue.export import export

# `make apply` imports the pinned tarball with a fixed identity and date, so
# the base commit (and with it every patch's base-commit trailer) is the same
# everywhere.
V092_IMPORT_COMMIT = "3477105208"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Layout:
    real = Layout.default()
    tmp = tmp_path_factory.mktemp("real-series")
    shutil.copytree(real.patches, tmp / "patches")
    paths = Layout(patches=tmp / "patches",
                   src=tmp / "vllm-src",
                   cache=real.cache)
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
