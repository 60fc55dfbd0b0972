"""pytest runs forked from a server: each as `python -m pytest` would run,
with the tree's own vLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pstack.harness.pytest_forks import PytestForks

# What a run's test records of the process it runs in.
PROBE_TEST = '''
import json, os, sys
import multiprocessing
import vllm


def _child(queue):
    import vllm as child_vllm
    queue.put(child_vllm.WHICH)


def test_probe():
    # A process spawned from the run, as vLLM's CPU workers are.
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    spawned = queue.get(timeout=120)
    child.join()
    record = {
        "cwd": os.getcwd(),
        "path": sys.path[:2],
        "env": os.environ.get("PROBE_VALUE"),
        "omp": os.environ.get("OMP_NUM_THREADS"),
        "vllm": vllm.WHICH,
        "spawned_vllm": spawned,
        "conftest_saw": sys.modules["tests.conftest"].SEEN,
        "conftest_here": sys.modules["tests.conftest"].PID == os.getpid(),
        "main": getattr(sys.modules["__main__"].__spec__, "name", None),
    }
    with open(os.environ["PROBE_OUT"], "w") as f:
        json.dump(record, f)
'''


def _tree(root: Path, which: str) -> Path:
    """A tree under test: its own vllm package, a conftest that imports it
    and a module of the standard library, and the probe test."""
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text(f"WHICH = {which!r}\n")
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "conftest.py").write_text(
        "import os, sys\n"
        "PID = os.getpid()\n"
        "SEEN = 'xml.dom.minidom' in sys.modules\n"
        "import xml.dom.minidom\n"
        "import vllm\n")
    (root / "tests" / "test_probe.py").write_text(PROBE_TEST)
    (root / "tests" /
     "test_fails.py").write_text("def test_fails():\n    assert False\n")
    return root


def _env(tmp_path: Path, name: str, tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env.update(PROBE_VALUE=name,
               PROBE_OUT=str(tmp_path / f"{name}.json"),
               PYTHONPATH=str(tree))
    return env


def _fresh(tmp_path: Path, tree: Path) -> dict:
    env = _env(tmp_path, "fresh", tree)
    subprocess.run([
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "tests/test_probe.py"
    ],
                   cwd=tree,
                   env=env,
                   check=True,
                   stdout=subprocess.DEVNULL)
    return json.loads(Path(env["PROBE_OUT"]).read_text())


def _forked(tmp_path: Path, forks: PytestForks, tree: Path) -> dict:
    env = _env(tmp_path, "forked", tree)
    log = tmp_path / "forked.log"
    run = forks.submit(tree,
                       ["-q", "-p", "no:cacheprovider", "tests/test_probe.py"],
                       log, env)
    assert run.wait() == 0, log.read_text()
    assert run.cpu > 0
    assert "1 passed" in log.read_text()
    return json.loads(Path(env["PROBE_OUT"]).read_text())


def test_a_run_at_the_tip_is_what_python_m_pytest_is(tmp_path):
    tip = _tree(tmp_path / "tip", "tip")
    with PytestForks("tree", tip, _env(tmp_path, "server", tip),
                     tmp_path / "modules.txt") as forks:
        forked = _forked(tmp_path, forks, tip)
        failing = forks.submit(tip, ["-q", "tests/test_fails.py"],
                               tmp_path / "fails.log")
        assert failing.wait() == 1
    fresh = _fresh(tmp_path, tip)
    # The same but for what the server imported ahead: the conftest, in the
    # server.
    assert fresh.pop("env") == "fresh" and forked.pop("env") == "forked"
    assert fresh.pop("conftest_here") is True
    assert forked.pop("conftest_here") is False
    assert forked == fresh
    assert fresh["vllm"] == fresh["spawned_vllm"] == "tip"
    assert fresh["main"] == "pytest.__main__"
    # What a server for the prefixes imports: from outside the tree only.
    modules = (tmp_path / "modules.txt").read_text().split()
    assert "xml.dom.minidom" in modules
    assert not [m for m in modules if m.split(".")[0] in ("vllm", "tests")]


def test_a_prefix_run_imports_its_own_trees_vllm(tmp_path):
    tip = _tree(tmp_path / "tip", "tip")
    prefix = _tree(tmp_path / "prefix", "prefix")
    modules = tmp_path / "modules.txt"
    # The tip's names, and a module that imports vLLM: not imported ahead.
    modules.write_text("xml.dom.minidom\nvllm\ntests.conftest\n")
    with PytestForks("outside", tip, _env(tmp_path, "server", tip),
                     modules) as forks:
        forked = _forked(tmp_path, forks, prefix)
    assert forked["vllm"] == forked["spawned_vllm"] == "prefix"
    # The conftest imported in the run, xml.dom.minidom ahead of it.
    assert forked["conftest_here"] is True
    assert forked["conftest_saw"] is True
    assert forked["path"] == [str(prefix), str(prefix)]
    assert forked["cwd"] == str(prefix)


@pytest.mark.parametrize("omp_threads", [None, "3"])
def test_a_run_gets_the_thread_count_of_a_fresh_process(tmp_path, omp_threads):
    # The server imports torch with one OpenMP thread; a run gets what
    # torch would start with in a process of its own, whether its
    # environment sets OMP_NUM_THREADS or not.
    tree = _tree(tmp_path / "tip", "tip")
    (tree / "tests" / "conftest.py").write_text("import torch\n")
    (tree / "tests" / "test_threads.py").write_text(
        "import os, torch\n"
        "def test_threads():\n"
        "    with open(os.environ['PROBE_OUT'], 'w') as f:\n"
        "        f.write(str(torch.get_num_threads()))\n")
    env = _env(tmp_path, "threads", tree)
    if omp_threads is not None:
        env["OMP_NUM_THREADS"] = omp_threads
    fresh = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env=env,
        check=True,
        capture_output=True,
        text=True).stdout.strip()
    server_env = {k: v for k, v in env.items() if k != "OMP_NUM_THREADS"}
    with PytestForks("tree", tree, server_env,
                     tmp_path / "modules.txt") as forks:
        run = forks.submit(tree, ["-q", "tests/test_threads.py"],
                           tmp_path / "threads.log", env)
        assert run.wait() == 0, (tmp_path / "threads.log").read_text()
    assert Path(env["PROBE_OUT"]).read_text() == fresh


def test_runs_submitted_together_run_together(tmp_path):
    # Two requests may reach the server in one read (two batches, or two
    # prefixes, started at once).
    tree = _tree(tmp_path / "tip", "tip")
    (tree / "tests" / "test_quick.py").write_text("def test_quick():\n"
                                                  "    pass\n")
    with PytestForks("tree", tree, _env(tmp_path, "server", tree),
                     tmp_path / "modules.txt") as forks:
        runs = [
            forks.submit(tree, ["-q", "tests/test_quick.py"],
                         tmp_path / f"quick-{i}.log") for i in range(3)
        ]
        assert [run.wait(timeout=120) for run in runs] == [0, 0, 0]


def test_a_run_counts_the_cpu_time_of_what_it_waited_for(tmp_path):
    # A second of CPU in a process the test starts and waits for, as an
    # engine test's engines: counted with the run.
    tree = _tree(tmp_path / "tip", "tip")
    spin = ("import time; t = time.process_time()\n"
            "while time.process_time() - t < 1:\n"
            "    pass\n")
    (tree / "tests" / "test_spin.py").write_text(
        "import subprocess, sys\n"
        "def test_spin():\n"
        f"    subprocess.run([sys.executable, '-c', {spin!r}], check=True)\n")
    with PytestForks("tree", tree, _env(tmp_path, "server", tree),
                     tmp_path / "modules.txt") as forks:
        run = forks.submit(tree, ["-q", "tests/test_spin.py"],
                           tmp_path / "spin.log")
        assert run.wait(timeout=120) == 0, (tmp_path / "spin.log").read_text()
    assert 1 <= run.cpu < 60


def test_runs_of_a_server_that_ended_fail(tmp_path):
    tree = _tree(tmp_path / "tip", "tip")
    forks = PytestForks("tree", tree, _env(tmp_path, "server", tree),
                        tmp_path / "modules.txt")
    forks.close()  # never started: nothing to wait for
    run = forks.submit(tree, ["-q", "tests/test_probe.py"],
                       tmp_path / "late.log")
    assert run.wait() == -1
