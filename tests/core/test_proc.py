"""Running other programs: why one failed, in one line; what one cost."""

import subprocess
import sys
import time

from pstack.core.proc import failure_of, reap_if_ended


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


def test_an_ended_process_is_reaped_with_its_cpu_time():
    # A second of CPU in a grandchild, waited for by the child: counted.
    spin = "import time; t = time.process_time(); "\
        "exec('while time.process_time() - t < 1: pass')"
    proc = subprocess.Popen([
        sys.executable, "-c",
        f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
        f"{spin!r}]); sys.exit(4)"
    ])
    while (cpu := reap_if_ended(proc)) is None:
        time.sleep(0.05)
    assert proc.returncode == 4 and proc.wait() == 4
    assert 1 <= cpu < 30
