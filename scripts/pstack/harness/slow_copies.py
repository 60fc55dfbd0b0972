"""`make slow-copies [LINE=<version>] DELAY=<seconds>`: the line's offloading
engine tests with every CPU-tier copy slowed down.

A transfer of the CPU tier takes microseconds here, so a test that reads
the tier, or resets the KV cache's prefix cache, right after a call returns
usually finds the transfer done; on a loaded CI machine, once in a while,
it does not. This runs the series' test files that build engines in the
pytest process with the OffloadingConnector, with slow_copies_plugin.py
delaying each copy (0.3 s by default): such a test fails every time. Not
part of `make test` (it takes minutes per line); run it after changing an
engine test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from ..core.errors import UserError, progress
from ..core.line import REPO, Line
from .run_tests import IN_PROCESS_ENGINES, touched_vllm_tests
from .slow_copies_plugin import DELAY_ENV
from .testenv import deselected, test_env

PLUGIN = "pstack.harness.slow_copies_plugin"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--delay",
                        type=float,
                        default=0.3,
                        help="seconds added to each copy (DELAY=)")
    parser.add_argument("-k",
                        dest="select",
                        default=None,
                        help="pytest -k expression (K=)")


def offloading_engine_tests(layout: Line) -> list[str]:
    """The series' test files that run the OffloadingConnector in an
    engine of the pytest process (where the plugin's delay applies)."""
    files = []
    for path in touched_vllm_tests(layout):
        text = (layout.src / path).read_text()
        if IN_PROCESS_ENGINES.search(text) and "OffloadingConnector" in text:
            files.append(path)
    return files


def run(args: argparse.Namespace, layout: Line) -> int:
    if not args.delay > 0:
        raise UserError(
            f"DELAY must be a positive number of seconds, got "
            f"{args.delay}", "make slow-copies DELAY=0.3")
    files = offloading_engine_tests(layout)
    if not files:
        raise UserError(f"{layout.src.name} has no offloading engine tests",
                        "make apply")
    env = {
        **os.environ,
        **test_env(),
        DELAY_ENV:
        str(args.delay),
        "PYTHONPATH":
        os.pathsep.join(
            filter(None, [str(REPO / "scripts"),
                          os.environ.get("PYTHONPATH")])),
    }
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
        PLUGIN, *[f"--deselect={node}" for node in deselected()], *files
    ]
    if args.select:
        cmd += ["-k", args.select]
    progress(f"slow copies: {len(files)} test files of {layout.src.name}, "
             f"each copy {args.delay} s late")
    return subprocess.run(cmd, cwd=layout.src, env=env).returncode
