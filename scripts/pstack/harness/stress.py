"""`make stress N=<requests> SEED=<seed>`: the series' differential stress test.

Runs tests/v1/kv_offload/test_cpu_offloading_stress.py in vllm-src (the
engine without a connector against the OffloadingConnector, CPU block size
factors 1 and 3, TP 1 and 2) on a workload of any size, and prints what each
run compared. `make test` runs it at its default size (48 requests, seed 0).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from ..core.errors import UserError, progress
from ..core.line import Line
from .testenv import test_env

STRESS_TEST = "tests/v1/kv_offload/test_cpu_offloading_stress.py"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests",
                        type=int,
                        default=200,
                        help="requests in the workload (N=)")
    parser.add_argument("--seed",
                        type=int,
                        default=0,
                        help="workload seed (SEED=)")
    parser.add_argument(
        "-k",
        dest="select",
        default=None,
        help="pytest -k expression, e.g. '1-1' for factor 1, TP 1")


def run(args: argparse.Namespace, layout: Line) -> int:
    if args.requests < 1:
        raise UserError(
            f"N must be a positive number of requests, got {args.requests}",
            "make stress N=200 SEED=0")
    if not (layout.src / STRESS_TEST).exists():
        raise UserError(f"{STRESS_TEST} is not in vllm-src", "make apply")
    env = {
        **os.environ,
        **test_env(),
        "VLLM_OFFLOAD_STRESS_REQUESTS": str(args.requests),
        "VLLM_OFFLOAD_STRESS_SEED": str(args.seed),
    }
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
        "-o", "log_cli=false", STRESS_TEST
    ]
    if args.select:
        cmd += ["-k", args.select]
    progress(f"stress: {args.requests} requests, seed {args.seed}, "
             "without and with the OffloadingConnector")
    return subprocess.run(cmd, cwd=layout.src, env=env).returncode
