# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Timing helper shared by the benchmark scripts in this directory."""
import time


def best_seconds(fn, repeat: int) -> float:
    """Best wall time of fn over repeat runs, after one warm-up run."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
