"""`make slow-copies`: the plugin delays the copy function of each line's
CPU-platform transfer handler, and the command picks the test files that
run the OffloadingConnector in the pytest process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from pstack.core.line import Line
from pstack.harness import slow_copies

# A vLLM tree with the copy function of the 0.32 line (a module function)
# or of the 0.9.2 and 0.10.2 lines (a method), and nothing else.
FAKE_VLLMS = {
    "0.32": {
        "vllm/v1/kv_offload/cpu/host_handler.py":
        "def copy_runs(runs):\n    return len(runs)\n",
    },
    "0.9.2": {
        "vllm/v1/kv_offload/worker/cpu_platform.py":
        "class ThreadedBlockCopyHandler:\n"
        "    def _copy(self, mapping):\n"
        "        return len(mapping)\n",
    },
}

# Run under the plugin: the copy function is wrapped, still returns what
# it did, and starts at least the delay late.
CHECKS = {
    "0.32":
    """
import time
from vllm.v1.kv_offload.cpu import host_handler

def test_delayed():
    start = time.monotonic()
    assert host_handler.copy_runs([1, 2]) == 2
    assert time.monotonic() - start >= 0.2
    assert host_handler.copy_runs.__wrapped__([1]) == 1
""",
    "0.9.2":
    """
import time
from vllm.v1.kv_offload.worker.cpu_platform import ThreadedBlockCopyHandler

def test_delayed():
    start = time.monotonic()
    assert ThreadedBlockCopyHandler()._copy([1, 2]) == 2
    assert time.monotonic() - start >= 0.2
""",
}


def run_with_plugin(tmp_path: Path,
                    files: dict[str, str]) -> subprocess.CompletedProcess:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        # Packages of their own: the fake vllm, first on the path, hides
        # the one installed.
        while name.startswith("vllm/") and path.parent != tmp_path:
            path = path.parent
            (path / "__init__.py").touch()
    env = {
        **os.environ,
        "PYTHONPATH":
        os.pathsep.join([str(tmp_path), str(REPO / "scripts")]),
        "PSTACK_COPY_DELAY_S":
        "0.2",
    }
    return subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "-p", slow_copies.PLUGIN, "test_check.py"
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize("line", sorted(FAKE_VLLMS))
def test_the_plugin_delays_the_lines_copy_function(tmp_path, line):
    result = run_with_plugin(tmp_path, {
        **FAKE_VLLMS[line], "test_check.py": CHECKS[line]
    })
    assert result.returncode == 0, result.stdout + result.stderr
    assert "delayed by 0.2 s per transfer" in result.stdout


def test_the_plugin_refuses_a_vllm_without_a_known_copy_function(tmp_path):
    result = run_with_plugin(
        tmp_path, {
            "vllm/v1/kv_offload/cpu/other.py": "",
            "test_check.py": "def test_never():\n    pass\n",
        })
    assert result.returncode != 0
    assert "none of the copy functions the plugin knows" in result.stderr


def test_only_offloading_engine_tests_are_run(tmp_path, monkeypatch):
    files = {
        "tests/test_engine.py":
        'LLM(model, kv_connector="OffloadingConnector")\n',
        "tests/test_helpers.py":
        "from .test_engine import make_llm  # OffloadingConnector\n",
        "tests/test_engine_without.py": "LLM(model)\n",
        "tests/test_unit.py": "OffloadingConnector(config, role)\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    layout = Line(patches=tmp_path / "lines" / "0.0.1",
                  src=tmp_path,
                  cache=tmp_path / "cache")
    monkeypatch.setattr(slow_copies, "touched_vllm_tests",
                        lambda _layout: list(files))
    assert slow_copies.offloading_engine_tests(layout) == [
        "tests/test_engine.py", "tests/test_helpers.py"
    ]
