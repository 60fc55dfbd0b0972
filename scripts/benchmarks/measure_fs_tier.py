# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Load bandwidth of vLLM 0.32's `fs` tier (FileSystemTierManager, as the
line carries it) against the filesystem's own sequential read of the same
files, timed side by side.

For each block size, stores MOVED_BYTES worth of KV blocks to a fresh root
under --dir (in jobs of JOB_BLOCKS blocks, as cascades from the CPU tier
arrive), then, in each repetition:
  tier   loads every block back into the CPU tier's buffer through the
         tier's thread pool (jobs of JOB_BLOCKS blocks, in shuffled order);
  plain  reads the same files one after the other, whole, in one thread,
         with the tier's I/O mode (O_DIRECT where the filesystem takes it),
         each into its block's place in the same buffer: the same bytes to
         the same memory, so that only the way they are read differs;
  plain, one block's memory
         the same read with every file into the buffer's first block, the
         reference the benchmark first used. On the virtual disk of
         docs/benchmarks.md a destination that stays in the CPU's cache is
         faster to fill (1 MiB reused: about a fifth faster than 16 MiB or
         more), so this one also measures the cache; printed beside.
The page cache is dropped before each side's pass where the machine lets
this process write /proc/sys/vm/drop_caches (said in the output either
way: without it, a buffered tier and the plain read both read memory).

Prints one JSON line per block size. Run with the line's vLLM on PYTHONPATH:

    PYTHONPATH=/path/to/vllm-src-0.32.0 python measure_fs_tier.py --dir DIR
"""

import argparse
import json
import mmap
import os
import random
import statistics
import tempfile
import time
from types import SimpleNamespace

import numpy as np
from measure_tier_ttft import drop_page_cache
from vllm.v1.kv_offload.base import OffloadingKVEventsConfig, make_offload_key
from vllm.v1.kv_offload.config import (OffloadingCacheConfig, OffloadingConfig,
                                       OffloadingModelConfig,
                                       OffloadingParallelConfig)
from vllm.v1.kv_offload.tiering.base import TransferJob
from vllm.v1.kv_offload.tiering.fs.io import O_DIRECT
from vllm.v1.kv_offload.tiering.fs.manager import FileSystemTierManager

MOVED_BYTES = 256 * 2**20
BLOCK_BYTES = [256 * 2**10, 2**20, 4 * 2**20]
JOB_BLOCKS = 16
SIDES = ["tier", "plain", "plain_one_block"]


def _spec() -> SimpleNamespace:
    parallel = OffloadingParallelConfig(rank=0,
                                        world_size=1,
                                        tp_size=1,
                                        pp_size=1,
                                        pcp_size=1,
                                        dcp_size=1,
                                        data_parallel_index=0,
                                        data_parallel_size=1,
                                        data_parallel_rank_local=None,
                                        is_parallelism_agnostic=False)
    config = OffloadingConfig(groups=(),
                              worker_kv_bytes_per_block=0,
                              enable_kv_cache_events=False,
                              extra_config={},
                              engine_id="bench",
                              model=OffloadingModelConfig(name="bench",
                                                          dtype="float32"),
                              cache=OffloadingCacheConfig(tokens_per_hash=16,
                                                          blocks_per_chunk=1),
                              parallel=parallel)
    return SimpleNamespace(config=config,
                           blocks_per_chunk=1,
                           kv_events_config=OffloadingKVEventsConfig(
                               enable_kv_cache_events=False,
                               self_describing_kv_events=False))


def _aligned_buffer(num_bytes: int) -> np.ndarray:
    """Page-aligned host memory (O_DIRECT needs it), touched once."""
    buffer = mmap.mmap(-1, num_bytes)
    array = np.frombuffer(buffer, dtype=np.uint8)
    array[:] = 1
    return array


def _run_jobs(tier: FileSystemTierManager, keys: list, is_promotion: bool,
              first_job_id: int) -> float:
    """Seconds to run `keys` as jobs of JOB_BLOCKS through the tier."""
    start = time.perf_counter()
    for i in range(0, len(keys), JOB_BLOCKS):
        chunk = keys[i:i + JOB_BLOCKS]
        job = TransferJob(job_id=first_job_id + i,
                          keys=[key for key, _ in chunk],
                          chunk_ids=np.array(
                              [chunk_id for _, chunk_id in chunk]),
                          is_promotion=is_promotion,
                          req_context=SimpleNamespace(req_id="bench"))
        (tier.submit_load if is_promotion else tier.submit_store)(job)
    tier.drain_jobs()
    elapsed = time.perf_counter() - start
    results = list(tier.get_finished_jobs())
    assert all(result.success for result in results), "a transfer failed"
    return elapsed


def _plain_read(paths: list[str], destinations: list[memoryview],
                o_direct: bool) -> float:
    """Seconds to read the files one after the other, whole, one thread,
    file i into destinations[i]."""
    flags = os.O_RDONLY | (O_DIRECT if o_direct else 0)
    start = time.perf_counter()
    for path, destination in zip(paths, destinations):
        fd = os.open(path, flags)
        try:
            assert os.readv(fd, [destination]) == len(destination)
        finally:
            os.close(fd)
    return time.perf_counter() - start


def bench(block_bytes: int, repeat: int, directory: str) -> dict:
    num_blocks = MOVED_BYTES // block_bytes
    buffer = _aligned_buffer(num_blocks * block_bytes)
    view = memoryview(buffer).cast("B", (num_blocks, block_bytes))
    with tempfile.TemporaryDirectory(dir=directory) as root:
        tier = FileSystemTierManager(offloading_spec=_spec(),
                                     primary_kv_view=view,
                                     tier_type="fs",
                                     root_dir=root)
        try:
            keys = [(make_offload_key(i.to_bytes(8, "big"), 0), i)
                    for i in range(num_blocks)]
            store_s = _run_jobs(tier, keys, False, 0)
            paths = [tier.file_mapper.get_file_name(key) for key, _ in keys]
            flat = memoryview(buffer)
            # Where the tier puts block i, and the first block's memory.
            places = [
                flat[chunk_id * block_bytes:(chunk_id + 1) * block_bytes]
                for _, chunk_id in keys
            ]
            one_block = [places[0]] * num_blocks
            rng = random.Random(0)
            gbps: dict[str, list[float]] = {side: [] for side in SIDES}
            # Each plain read's time over the tier's.
            ratios: dict[str, list[float]] = {side: [] for side in SIDES[1:]}
            dropped = True
            for rep in range(repeat):
                shuffled = keys[:]
                rng.shuffle(shuffled)
                # Each side first, second and last in turn.
                order = SIDES[rep % len(SIDES):] + SIDES[:rep % len(SIDES)]
                seconds = {}
                for side in order:
                    dropped &= drop_page_cache()
                    if side == "tier":
                        seconds[side] = _run_jobs(tier, shuffled, True,
                                                  (rep + 1) * num_blocks)
                    else:
                        seconds[side] = _plain_read(
                            paths, places if side == "plain" else one_block,
                            tier._use_o_direct)
                for side in SIDES:
                    gbps[side].append(MOVED_BYTES / seconds[side] / 1e9)
                for side in ratios:
                    ratios[side].append(seconds[side] / seconds["tier"])
            o_direct = tier._use_o_direct
        finally:
            tier.shutdown()
    return {
        "block_kib": block_bytes // 1024,
        "store_gbps": MOVED_BYTES / store_s / 1e9,
        "load_gbps": statistics.median(gbps["tier"]),
        "plain_read_gbps": statistics.median(gbps["plain"]),
        "vs_plain": statistics.median(ratios["plain"]),
        "plain_one_block_gbps": statistics.median(gbps["plain_one_block"]),
        "vs_plain_one_block": statistics.median(ratios["plain_one_block"]),
        "o_direct": o_direct,
        "page_cache_dropped": dropped,
        "read_threads": 16,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir",
                        default=tempfile.gettempdir(),
                        help="the filesystem to measure (default: $TMPDIR)")
    args = parser.parse_args()
    for block_bytes in BLOCK_BYTES:
        print(json.dumps(bench(block_bytes, args.repeat, args.dir)),
              flush=True)


if __name__ == "__main__":
    main()
