# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Throughput of the CPU offloading managers on a large, full pool.

Fills a CPUBackend of POOL_BLOCKS blocks, then runs a steady state in which
every iteration offloads a batch of BATCH new blocks the way the connector
does: lookup (a miss), prepare_store (which evicts BATCH blocks, since the
pool is full), complete_store, and touch. One "op" is one of those four
manager calls; blocks_per_s counts the blocks stored.

Prints one JSON line per eviction policy. Run with vLLM on PYTHONPATH:

    PYTHONPATH=/path/to/vllm python offload_manager.py [--seconds S]
"""
import argparse
import gc
import json
import time

from vllm.v1.core.kv_cache_utils import BlockHash
from vllm.v1.kv_offload.backends.cpu import CPUBackend
from vllm.v1.kv_offload.policies import EVICTION_POLICIES

POOL_BLOCKS = 1_000_000
BATCH = 16
OFFLOADED_BLOCK_SIZE = 16
# All hashes share one token tuple: dict operations hash it (tuples do not
# cache their hash), as with real blocks, without 1M tuples in memory.
TOKEN_IDS = tuple(range(1000, 1000 + OFFLOADED_BLOCK_SIZE))
OPS_PER_ITERATION = 4


def make_hashes(start: int, count: int) -> list[BlockHash]:
    return [BlockHash(i, TOKEN_IDS) for i in range(start, start + count)]


def fill(manager, num_blocks: int) -> None:
    # Setup only: the cyclic GC would rescan the growing pool many times.
    gc.disable()
    try:
        chunk = 65536
        for start in range(0, num_blocks, chunk):
            hashes = make_hashes(start, min(chunk, num_blocks - start))
            output = manager.prepare_store(hashes)
            assert output is not None and not output.block_hashes_evicted
            manager.complete_store(output.block_hashes_to_store)
    finally:
        gc.enable()


def run(policy: str, seconds: float, max_iterations: int) -> dict:
    backend = CPUBackend(block_size=OFFLOADED_BLOCK_SIZE,
                         num_blocks=POOL_BLOCKS)
    manager = EVICTION_POLICIES[policy](backend, False)
    fill_start = time.perf_counter()
    fill(manager, POOL_BLOCKS)
    fill_seconds = time.perf_counter() - fill_start
    assert backend.get_num_free_blocks() == 0

    iterations = 0
    batch: list[BlockHash] = []
    gc.collect()
    # The GC stays enabled: its cost with a large pool is part of the
    # steady state.
    start = time.perf_counter()
    deadline = start + seconds
    while iterations < max_iterations:
        # Making the hashes is the caller's cost, but it is small (16 tuple
        # allocations per iteration) and keeps memory flat.
        batch = make_hashes(POOL_BLOCKS + iterations * BATCH, BATCH)
        assert manager.lookup(batch) == 0
        output = manager.prepare_store(batch)
        assert output is not None
        assert len(output.block_hashes_evicted) == BATCH
        manager.complete_store(output.block_hashes_to_store)
        manager.touch(batch)
        iterations += 1
        # Checking the clock every 64 iterations keeps it out of the loop.
        if iterations % 64 == 0 and time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - start
    assert manager.lookup(batch) == BATCH
    return {
        "policy": policy,
        "pool_blocks": POOL_BLOCKS,
        "ops_per_s": round(iterations * OPS_PER_ITERATION / elapsed),
        "blocks_per_s": round(iterations * BATCH / elapsed),
        "batch_blocks": BATCH,
        "iterations": iterations,
        "seconds": round(elapsed, 3),
        "fill_seconds": round(fill_seconds, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds",
                        type=float,
                        default=3.0,
                        help="steady-state time per policy")
    parser.add_argument("--max-iterations", type=int, default=1_000_000)
    parser.add_argument("--policy",
                        choices=sorted(EVICTION_POLICIES),
                        action="append",
                        help="policies to run (default: all)")
    args = parser.parse_args()
    for policy in args.policy or sorted(EVICTION_POLICIES, reverse=True):
        print(json.dumps(run(policy, args.seconds, args.max_iterations)),
              flush=True)
        gc.collect()


if __name__ == "__main__":
    main()
