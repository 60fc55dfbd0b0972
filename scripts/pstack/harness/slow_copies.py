"""`make slow-copies [LINE=<version>] DELAY=<seconds>`: the line's offloading
engine tests with every transfer slowed down.

A transfer of the CPU tier takes microseconds here, and one of the fs tier
a millisecond or two, so a test that reads a tier, or resets the KV
cache's prefix cache, right after a call returns usually finds the
transfer done; on a loaded CI machine, once in a while, it does not. This
runs the series' test files that start engines with the
OffloadingConnector, in the pytest process or in processes of their own
(engines sharing an fs tier, `vllm serve`), with each transfer starting
DELAY seconds late (0.3 by default) in every one of those processes
(slow_copies_hook.py): such a test fails every time. Not part of `make
test` (it takes minutes per line); run it after changing an engine test.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.line import REPO, Line
from .run_tests import IN_PROCESS_ENGINES, touched_vllm_tests
from .slow_copies_hook import DELAY_ENV
from .slow_copies_plugin import TIMING_ASSERTIONS
from .testenv import deselected, test_env

PLUGIN = "pstack.harness.slow_copies_plugin"
# Its sitecustomize.py delays the transfers of every process the tests
# start.
SITE = Path(__file__).parent / "slow_copies_site"
# A test file whose engines run in processes of their own: the fs tier's
# engines of the 0.32 line (fs_engines.py), `vllm serve` (its command line
# in a list), an engine script run by a subprocess.
ENGINE_PROCESSES = re.compile(
    r"^from \.fs_engines import|[\"']serve[\"'],|subprocess\.(run|Popen)\(",
    re.MULTILINE)
# A test file that offloads (the helper modules of a line's offloading
# tests name the connector; a test file importing them offloads).
OFFLOADS = re.compile(
    r"OffloadingConnector|^from \.(engine_utils|fs_engines) import",
    re.MULTILINE)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--delay",
                        type=float,
                        default=0.3,
                        help="seconds added to each transfer (DELAY=)")
    parser.add_argument("-k",
                        dest="select",
                        default=None,
                        help="pytest -k expression (K=)")


def offloading_engine_tests(layout: Line) -> list[str]:
    """The series' test files that start engines with the
    OffloadingConnector, in the pytest process or in processes of their
    own."""
    files = []
    for path in touched_vllm_tests(layout):
        text = (layout.src / path).read_text()
        starts_engines = (IN_PROCESS_ENGINES.search(text)
                          or ENGINE_PROCESSES.search(text))
        if starts_engines and OFFLOADS.search(text):
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
            filter(None, [
                str(SITE),
                str(REPO / "scripts"),
                os.environ.get("PYTHONPATH")
            ])),
    }
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
        PLUGIN, *[f"--deselect={node}" for node in deselected()], *files
    ]
    if args.select:
        cmd += ["-k", args.select]
    progress(f"slow copies: {len(files)} test files of {layout.src.name}, "
             f"each transfer {args.delay} s late, in every process")
    waived = [(name, function) for name, function, _ in TIMING_ASSERTIONS
              if any(Path(f).name == name for f in files)]
    for name, function in waived:
        progress(f"waived: the timing assertion of {name}'s {function} (a "
                 "tier hit is never faster than recomputing when its "
                 "transfer is late); the rest of its tests runs")
    return subprocess.run(cmd, cwd=layout.src, env=env).returncode
