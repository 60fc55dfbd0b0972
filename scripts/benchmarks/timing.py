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


def against_plain_copy(store, load, num_bytes: int, repeat: int) -> dict:
    """GB/s of store() and load(), each moving num_bytes, against one plain
    torch copy of num_bytes timed beside them: each repetition times a
    store, a load and a plain copy in turn, so that noise from other work on
    the machine hits them alike; the ratio to the plain copy ("vs_plain") is
    the median over repetitions of the slower direction's. Also the plain
    copy on one thread, for reference."""
    import statistics

    import torch

    src = torch.ones(num_bytes, dtype=torch.uint8)
    dst = torch.ones(num_bytes, dtype=torch.uint8)
    stores, loads, plains = [], [], []
    for _ in range(repeat):
        stores.append(best_seconds(store, 1))
        loads.append(best_seconds(load, 1))
        plains.append(best_seconds(lambda: dst.copy_(src), 1))
    num_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        plain_one_thread = best_seconds(lambda: dst.copy_(src), repeat)
    finally:
        torch.set_num_threads(num_threads)
    gb = num_bytes / 1e9
    return {
        "store_gbps":
        gb / min(stores),
        "load_gbps":
        gb / min(loads),
        "plain_copy_gbps":
        gb / min(plains),
        "plain_copy_threads":
        num_threads,
        "plain_copy_one_thread_gbps":
        gb / plain_one_thread,
        "vs_plain":
        statistics.median(
            plain_s / max(store_s, load_s)
            for store_s, load_s, plain_s in zip(stores, loads, plains)),
    }
