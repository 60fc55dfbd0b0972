"""The real series on the real pinned base, in a scratch vllm-src."""

from __future__ import annotations

import shutil

import pytest

from pstack.check_series import lint_series
from pstack.common import Paths
from pstack.srctree import apply, export, read_series

# `make apply` imports the pinned tarball with a fixed identity and date, so the
# base commit (and with it every patch's base-commit trailer) is the same everywhere.
V092_IMPORT_COMMIT = "3477105208"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Paths:
    real = Paths.default()
    tmp = tmp_path_factory.mktemp("real-series")
    shutil.copytree(real.patches, tmp / "patches")
    paths = Paths(patches=tmp / "patches", src=tmp / "vllm-src", cache=real.cache)
    apply(paths)
    return paths


def test_base_import_commit_is_reproducible(scratch):
    from pstack.common import git
    sha = git(scratch.src, "rev-parse", "v0.9.2^{commit}").strip()
    assert sha.startswith(V092_IMPORT_COMMIT)
    tracked = set(git(scratch.src, "ls-files").split())
    assert "vllm/_version.py" not in tracked and "setup.py" in tracked


def test_apply_then_export_reproduces_patches_byte_for_byte(scratch):
    before = {p.name: p.read_bytes() for p in scratch.patches.iterdir()}
    names = export(scratch)
    assert names == read_series(scratch)
    after = {p.name: p.read_bytes() for p in scratch.patches.iterdir()}
    assert after == before


def test_every_patch_is_upstream_shaped(scratch):
    lint_series(scratch)
