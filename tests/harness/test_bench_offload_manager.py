"""The offloading-manager benchmark: how upstream's managers are brought in,
and the measuring script on a small stream (figures are not checked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

from conftest import REPO
from pstack.core.line import Line
from pstack.core.pin import BasePin
from pstack.harness.bench import offload_manager
from pstack.harness.bench.offload_manager import (UPSTREAM_FILES,
                                                  UPSTREAM_PACKAGE,
                                                  upstream_managers)

UPSTREAM_MODULE = ("from vllm.v1.kv_offload.abstract import LoadStoreSpec\n"
                   "import vllm.v1.kv_offload.backend\n")


def fake_wheel(path):
    with zipfile.ZipFile(path, "w") as wheel:
        for name in UPSTREAM_FILES:
            wheel.writestr(f"vllm/v1/kv_offload/{name}", UPSTREAM_MODULE)
        wheel.writestr("vllm/v1/kv_offload/worker/worker.py", "")
    return path


def test_upstream_managers_are_extracted_once_into_build(
        stack, tmp_path, monkeypatch):
    wheel = fake_wheel(tmp_path / "vllm-0.13.0-cp38-abi3-linux_x86_64.whl")
    calls = []

    def find_release(version, like):
        calls.append(version)
        return BasePin(version=version,
                       sdist=f"vllm-{version}.tar.gz",
                       sdist_sha256="0" * 64,
                       wheel=wheel.name,
                       wheel_sha256="1" * 64)

    monkeypatch.setattr(offload_manager, "find_release", find_release)
    monkeypatch.setattr(offload_manager, "fetch",
                        lambda name, sha256, cache: wheel)
    dest = upstream_managers(stack)
    assert dest.is_relative_to(stack.build)
    package = dest / UPSTREAM_PACKAGE
    assert sorted(
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")) == sorted(UPSTREAM_FILES)
    # Imported as their own package, not as the vLLM tree's kv_offload.
    assert (package /
            "lru_manager.py").read_text() == (UPSTREAM_MODULE.replace(
                "vllm.v1.kv_offload", UPSTREAM_PACKAGE))
    assert upstream_managers(stack) == dest
    assert calls == [offload_manager.UPSTREAM_VERSION]


def test_measuring_script_runs_on_the_series_managers(tmp_path):
    # The oldest line's tree: the series' own managers.
    series = Line.default().oldest
    env = {
        **os.environ, "PYTHONPATH": str(series.src),
        "VLLM_LOGGING_LEVEL": "ERROR"
    }
    proc = subprocess.run([
        sys.executable,
        str(REPO / "scripts" / "benchmarks" / "measure_offload_manager.py"),
        "--requests", "300", "--rounds", "1", "--workload", "reuse"
    ],
                          env=env,
                          cwd=tmp_path,
                          capture_output=True,
                          text=True,
                          check=True)
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [row["manager"] for row in rows] == ["series LRU", "series ARC"]
    # The stream has shared prefixes: both policies find some of them.
    assert all(0 < row["hit_rate"] < 1 for row in rows)
