"""The error every command raises for the user, and progress lines."""

from __future__ import annotations

import subprocess
import sys
from typing import Callable


class UserError(Exception):
    """A failure the user can act on: printed as one line plus a hint,
    without a traceback."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def progress(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def exit_with_status(main: Callable[[], int | None]) -> None:
    """Run `main` and exit with its status.

    A UserError becomes `error: <message>` and `  next: <hint>` on stderr
    and exit status 2, as does a failed git or other command (with the end
    of its stderr). Ctrl-C says that re-running continues.
    """
    try:
        status = main()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        if e.hint:
            print(f"  next: {e.hint}", file=sys.stderr)
        sys.exit(2)
    except subprocess.CalledProcessError as e:
        cmd = " ".join(map(str, e.cmd))
        print(f"error: command failed ({e.returncode}): {cmd}",
              file=sys.stderr)
        if e.stderr:
            print(e.stderr.rstrip()[-2000:], file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted; re-run the same command to continue",
              file=sys.stderr)
        sys.exit(130)
    sys.exit(status or 0)
