"""Fetching the pinned base through pip's configured index."""

from __future__ import annotations

import pytest

from pstack.common import UserError
from pstack.fetch import fetch


def test_cached_file_with_right_hash_is_reused_without_network(tmp_path, monkeypatch):
    import hashlib

    import pstack.fetch as f
    (tmp_path / "dist").mkdir()
    path = tmp_path / "dist" / "vllm-9.9.9.tar.gz"
    path.write_bytes(b"release")
    monkeypatch.setattr(f, "_find_and_download",
                        lambda *a: pytest.fail("must not download a cached file"))
    got = fetch(path.name, hashlib.sha256(b"release").hexdigest(), tmp_path)
    assert got == path


def test_hash_mismatch_sets_file_aside(tmp_path):
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "vllm-9.9.9.tar.gz").write_bytes(b"tampered")
    with pytest.raises(UserError, match="does not match the pin"):
        fetch("vllm-9.9.9.tar.gz", "0" * 64, tmp_path)
    assert (tmp_path / "dist" / "vllm-9.9.9.tar.gz.bad").read_bytes() == b"tampered"
    assert not (tmp_path / "dist" / "vllm-9.9.9.tar.gz").exists()


@pytest.mark.network
def test_unknown_release_is_a_clear_error(tmp_path):
    # Asks the configured index for real: the project exists, the file does not.
    with pytest.raises(UserError, match="vllm-0.0.0.tar.gz is not on the configured"):
        fetch("vllm-0.0.0.tar.gz", "0" * 64, tmp_path)
    assert not list((tmp_path / "dist").iterdir()), "nothing half-written is left"
