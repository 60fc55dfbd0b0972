"""pytest runs forked from a server that has done their imports once.

A pytest process of vLLM's tests spends some 13-16 CPU-s before its first
test, importing what vLLM's tests/conftest.py pulls in: vLLM, torch,
transformers and some thousands of other modules. A line's part of `make
test` starts a few dozen such processes: its pytest batches at the tip, and
one per prefix that check-bisect tests. A server imports once, then forks
each run from itself; every run still has a process of its own (what its
engines leave ends with it), as under `python -m pytest`.

Two kinds of server:
- at the tip (`tree` mode): the server imports tests/conftest.py from the
  line's tree, vLLM with it, and serves runs in that tree only;
- for prefixes (`outside` mode): the server imports only the modules the
  tip's server loaded from outside the tree (the venv's packages and the
  standard library); each run imports vLLM and its tests from its own
  prefix's tree.

The server imports with one OpenMP thread, so that it starts no thread
pool that a fork would inherit without its threads; each run gets its
environment back and torch's thread count of a fresh process with it.

Protocol, JSON lines: a request on the server's stdin ({"id", "cwd",
"args", "env", "log"}), an answer on its stdout when the run ends ({"id",
"exit", "cpu"}: the exit status, and the CPU seconds of the run and of the
children it waited for). The client is `PytestForks`.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

# Packages of the trees under test: an `outside` server never imports them.
UNDER_TEST = ("vllm", "tests")
# Where the pstack package is.
PACKAGES = str(Path(__file__).resolve().parents[2])

# ------------------------------------------------------------------ server


class _NotUnderTest:
    """An import hook that refuses the packages under test: a module that
    imports one of them is left to the runs."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in UNDER_TEST:
            raise ImportError(f"{name} is under test")
        return None


def _from_outside(name: str, module, tree: str) -> bool:
    if name.split(".")[0] in UNDER_TEST or name in ("__main__", "__mp_main__"):
        return False
    path = getattr(module, "__file__", None)
    return path is None or not os.path.abspath(path).startswith(tree + os.sep)


def _import_tree(tree: str, modules_file: str) -> None:
    """Import tests/conftest.py as pytest would in `tree`; write the names of
    the modules then loaded from outside the tree to `modules_file`."""
    if not (Path(tree) / "tests" / "conftest.py").exists():
        # Not another `tests` package that sys.path finds.
        print(
            f"pytest_forks: {tree} has no tests/conftest.py; the runs "
            "import what they need themselves",
            file=sys.stderr)
        Path(modules_file).write_text("")
        return
    sys.path.insert(0, tree)
    try:
        importlib.import_module("tests.conftest")
    except Exception as e:  # the runs will say why, each in its log
        print(
            f"pytest_forks: `import tests.conftest` in {tree} failed "
            f"({e!r}); the runs import it themselves",
            file=sys.stderr)
    sys.path.remove(tree)
    outside = [
        name for name, module in list(sys.modules.items())
        if _from_outside(name, module, tree)
    ]
    Path(modules_file).write_text("\n".join(outside) + "\n")


def _import_outside(modules_file: str) -> None:
    """Import the modules named in `modules_file`, in order (one that does
    not import here is left to the runs)."""
    path = Path(modules_file)
    if not path.exists():
        print(
            f"pytest_forks: no {path}; the runs import everything "
            "themselves",
            file=sys.stderr)
        return
    sys.meta_path.insert(0, _NotUnderTest)
    try:
        for name in path.read_text().split():
            # One that fails (under test, say, or optional) is left out.
            with contextlib.suppress(Exception):
                importlib.import_module(name)
    finally:
        sys.meta_path.remove(_NotUnderTest)


@contextlib.contextmanager
def _one_omp_thread() -> Iterator[None]:
    """OMP_NUM_THREADS=1 while the server imports (see the docstring)."""
    threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        if threads is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = threads


def _fresh_thread_count(env: dict[str, str]) -> int | None:
    """torch's thread count in a fresh process with `env` (which depends on
    OMP_NUM_THREADS and the CPUs the process may run on), asked of one;
    None if it cannot say."""
    proc = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True)
    lines = proc.stdout.split()
    return int(lines[-1]) if proc.returncode == 0 and lines else None


def _run(request: dict, base_path: list[str],
         torch_threads: int | None) -> None:
    """In the forked child: what `python -m pytest <args>` does in
    request["cwd"] with request["env"] (and `torch_threads`, torch's thread
    count there), its output to request["log"]. Ends the process."""
    try:
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                      0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        cwd, env = request["cwd"], request["env"]
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [cwd, *extra, *base_path]
        if torch_threads is not None:
            sys.modules["torch"].set_num_threads(torch_threads)
        # As under `python -m pytest`: what multiprocessing spawns from the
        # run does not import this server as its __main__.
        import pytest
        import pytest.__main__
        sys.modules["__main__"] = pytest.__main__
        sys.argv = [pytest.__main__.__file__, *request["args"]]
        code = int(pytest.main(request["args"]))
    except BaseException:  # the run's own failure, in its log
        traceback.print_exc()
        code = 70
    # A normal exit from here on: atexit handlers (a test's own fork server
    # waited for), buffers flushed; SystemExit is not caught on its way out
    # of the server's loop.
    raise SystemExit(code)


def serve(mode: str, tree: str, modules_file: str) -> None:
    """Import, then fork one run per request until stdin ends, answering
    each when it ends."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    # What the imports print goes to stderr, not into the answers.
    os.dup2(2, 1)
    # What every run's sys.path ends with: the venv's and the standard
    # library's entries (neither the tree, first under `-m`, nor
    # PYTHONPATH's: each run's own come first).
    given = [
        os.path.abspath(p)
        for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    base_path = [
        p for p in sys.path[1:] if p and os.path.abspath(p) not in given
    ]
    with _one_omp_thread():
        if mode == "tree":
            _import_tree(tree, modules_file)
        else:
            sys.path[:] = base_path
            _import_outside(modules_file)
    sys.stdout.flush()
    sys.stderr.flush()
    running: dict[int, str] = {}
    # torch's thread count in a fresh process, by the runs' OMP_NUM_THREADS.
    thread_counts: dict[str | None, int | None] = {}
    # Read from the file descriptor itself: several requests may come in
    # one read, and a buffered reader would keep the second from select().
    unread = b""
    reading = True
    while reading or running:
        if reading and select.select([0], [], [], 0.5)[0]:
            data = os.read(0, 1 << 16)
            reading = bool(data)
            *lines, unread = (unread + data).split(b"\n")
            for line in filter(None, lines):
                request = json.loads(line)
                if (mode == "tree"
                        and os.path.realpath(request["cwd"]) != tree):
                    raise ValueError(f"a run in {request['cwd']}: this "
                                     f"server imported {tree}'s vLLM")
                omp = request["env"].get("OMP_NUM_THREADS")
                if "torch" in sys.modules and omp not in thread_counts:
                    thread_counts[omp] = _fresh_thread_count(request["env"])
                pid = os.fork()
                if pid == 0:
                    answers.close()
                    _run(request, base_path, thread_counts.get(omp))
                running[pid] = request["id"]
        elif not reading:
            time.sleep(0.5)
        while running:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
            if pid == 0:
                break
            answers.write(
                json.dumps({
                    "id": running.pop(pid),
                    "exit": os.waitstatus_to_exitcode(status),
                    "cpu": usage.ru_utime + usage.ru_stime,
                }) + "\n")


# ------------------------------------------------------------------ client


class ForkedRun:
    """One pytest run under way in a server."""

    def __init__(self) -> None:
        self.returncode: int | None = None
        self.cpu = 0.0
        self._done = threading.Event()

    def ended(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status, once it has ended (TimeoutError if it has not
        within `timeout` seconds)."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"a pytest run still under way after "
                               f"{timeout} s")
        assert self.returncode is not None
        return self.returncode

    def _end(self, returncode: int, cpu: float) -> None:
        self.returncode, self.cpu = returncode, cpu
        self._done.set()


class PytestForks:
    """A server of pytest runs for one line, in its venv (this Python), with
    `env`: `mode` "tree" imports `tree`'s tests/conftest.py (and vLLM) and
    writes `modules_file`; "outside" imports what that file names. Use as a
    context manager; runs may be submitted from several threads."""

    def __init__(self, mode: str, tree: Path, env: dict[str, str],
                 modules_file: Path) -> None:
        assert mode in ("tree", "outside"), mode
        self._command = [
            sys.executable, "-m", "pstack.harness.pytest_forks", mode,
            str(tree.resolve()),
            str(modules_file)
        ]
        self._tree = tree
        self._env = env
        self._proc: subprocess.Popen | None = None
        self._runs: dict[str, ForkedRun] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._gone = False
        self._reader = threading.Thread(target=self._read_answers, daemon=True)

    def _start(self) -> subprocess.Popen:
        """The server, started on the first run (none for no run)."""
        if self._proc is None:
            # This package importable from the tree, whatever PYTHONPATH
            # says.
            path = [
                PACKAGES, *self._env.get("PYTHONPATH", "").split(os.pathsep)
            ]
            env = {
                **self._env, "PYTHONPATH": os.pathsep.join(filter(None, path))
            }
            self._proc = subprocess.Popen(self._command,
                                          cwd=self._tree,
                                          env=env,
                                          stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE,
                                          text=True)
            self._reader.start()
        return self._proc

    def __enter__(self) -> PytestForks:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def submit(self,
               cwd: Path,
               args: list[str],
               log: Path,
               env: dict[str, str] | None = None) -> ForkedRun:
        """`python -m pytest <args>` in `cwd` with `env` (default: the
        server's), its output to `log`."""
        run = ForkedRun()
        with self._lock:
            if self._gone:
                run._end(-1, 0.0)
                return run
            self._next += 1
            key = str(self._next)
            self._runs[key] = run
            stdin = self._start().stdin
            assert stdin is not None
            try:
                stdin.write(
                    json.dumps({
                        "id": key,
                        "cwd": str(cwd),
                        "args": args,
                        "env": self._env if env is None else env,
                        "log": str(log),
                    }) + "\n")
                stdin.flush()
            except BrokenPipeError:
                pass  # the server is gone: the reader ends the run
        return run

    def close(self) -> None:
        """Wait for the runs under way, then the server: their CPU time is
        then counted with this process's children's."""
        with self._lock:
            proc, self._gone = self._proc, True
        if proc is None:
            return
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
        proc.wait()
        self._reader.join()

    def _read_answers(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            answer = json.loads(line)
            with self._lock:
                run = self._runs.pop(answer["id"])
            run._end(answer["exit"], answer["cpu"])
        # The server is gone: what it never answered failed.
        with self._lock:
            self._gone = True
            lost, self._runs = self._runs, {}
        for run in lost.values():
            run._end(-1, 0.0)


if __name__ == "__main__":
    serve(sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3])
