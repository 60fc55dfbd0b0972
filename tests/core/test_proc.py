"""Running other programs: why one failed, in one line."""

import subprocess
import sys

from pstack.core.proc import failure_of


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code],
                          text=True,
                          capture_output=True)


def test_failure_is_the_last_line_on_stderr():
    proc = _run("import sys; print('one', file=sys.stderr); sys.exit('two')")
    assert failure_of(proc) == "two"


def test_a_process_killed_by_a_signal_says_which():
    # What a kernel library built for instructions the CPU lacks does on
    # import: it dies of SIGILL and writes nothing.
    proc = _run("import os, signal; os.kill(os.getpid(), signal.SIGILL)")
    assert failure_of(proc) == "killed by SIGILL"


def test_a_silent_exit_says_its_status():
    proc = _run("import sys; sys.exit(3)")
    assert failure_of(proc) == "exit status 3, nothing on stderr"
