"""`make bench` runs the benchmarks of the line's design."""

from __future__ import annotations

import argparse

import pytest
from conftest import write_base_pin
from pstack.core.errors import UserError
from pstack.core.line import Line
from pstack.harness import bench


def _line(tmp_path, version: str) -> Line:
    line = Line.at(tmp_path, version, tmp_path / "cache")
    line.patches.mkdir(parents=True)
    write_base_pin(line.base_file, version)
    return line


def test_a_line_with_upstreams_offloading_benchmarks_the_cpu_platform(
        tmp_path):
    assert bench.benchmarks_for(_line(tmp_path, "0.32.0")) == {
        "transfer": bench.host_transfer,
        "fs-tier": bench.fs_tier,
        "ttft": bench.tier_ttft,
        "serving": bench.serving_upstream,
        "fleet": bench.fleet,
    }
    assert bench.benchmarks_for(_line(tmp_path, "0.10.2")) is bench.BENCHMARKS


def test_a_benchmark_the_line_lacks_is_named(tmp_path):
    args = argparse.Namespace(names=["engine-throughput"])
    with pytest.raises(UserError,
                       match="unknown benchmark 'engine-throughput' for "
                       "line 0.32.0") as err:
        bench.run(args, _line(tmp_path, "0.32.0"))
    assert ("B=<one of transfer, fs-tier, ttft, serving, fleet>"
            in err.value.hint)
