"""Fetching the pinned base through pip's configured index."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO
from pstack.core.download import fetch
from pstack.core.errors import UserError


def test_cached_file_with_right_hash_is_reused_without_network(
        tmp_path, monkeypatch):
    import hashlib

    import pstack.core.download as f
    (tmp_path / "dist").mkdir()
    path = tmp_path / "dist" / "vllm-9.9.9.tar.gz"
    path.write_bytes(b"release")
    monkeypatch.setattr(
        f, "_find_and_download",
        lambda *a: pytest.fail("must not download a cached file"))
    got = fetch(path.name, hashlib.sha256(b"release").hexdigest(), tmp_path)
    assert got == path


def test_hash_mismatch_sets_file_aside(tmp_path):
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "vllm-9.9.9.tar.gz").write_bytes(b"tampered")
    with pytest.raises(UserError, match="does not match the pin"):
        fetch("vllm-9.9.9.tar.gz", "0" * 64, tmp_path)
    assert (tmp_path / "dist" /
            "vllm-9.9.9.tar.gz.bad").read_bytes() == b"tampered"
    assert not (tmp_path / "dist" / "vllm-9.9.9.tar.gz").exists()


@pytest.mark.network
def test_unknown_release_is_a_clear_error(tmp_path):
    # Asks the configured index for real: the project exists, the file does not.
    # In a child process: pip's internals must not be imported into pytest's
    # (they replace setuptools' distutils shim, which later imports rely on).
    code = (
        "import sys; from pstack.core.errors import exit_with_status; "
        "from pstack.core.download import fetch; from pathlib import Path; "
        "exit_with_status(lambda: fetch('vllm-0.0.0.tar.gz', '0' * 64, "
        "Path(sys.argv[1])) and 0)")
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        text=True,
        env={
            **os.environ, "PYTHONPATH": str(REPO / "scripts")
        },
        capture_output=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        "error: vllm-0.0.0.tar.gz is not on the configured package index")
    assert not list(
        (tmp_path / "dist").iterdir()), "nothing half-written is left"
