# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Bandwidth of the offloading transfers of vLLM 0.32's CPU tier on vLLM's
CPU platform (the 0.32 line's HostOffloadingHandler, run by upstream's
CPUOffloadingWorker) against a plain tensor copy timed beside them.

For each block size, stores MOVED_BYTES worth of KV blocks into the CPU tier
in shuffled order, so that no two blocks are adjacent on either side (the
worst case: one copy per block), then loads them back. The reference is one
`tensor.copy_` of MOVED_BYTES between two contiguous buffers, timed in the
same repetition as the store and the load, with torch's intra-op threads
(the handler splits a large transfer over as many); also given, for
reference, that copy with one thread.
Memory is touched before timing, so page faults are not measured.

Prints one JSON line per block size. Run with the line's vLLM on PYTHONPATH:

    PYTHONPATH=/path/to/vllm-src-0.32.0 python measure_host_transfer.py \
        [--repeat N]
"""

import argparse
import json
import time

import numpy as np
import torch
from timing import against_plain_copy
from vllm.v1.kv_offload.base import (CanonicalKVCacheRef, CanonicalKVCaches,
                                     CanonicalKVCacheTensor, GPULoadStoreSpec)
from vllm.v1.kv_offload.cpu.common import CPULoadStoreSpec
from vllm.v1.kv_offload.cpu.gpu_worker import CPUOffloadingWorker

MOVED_BYTES = 256 * 2**20
BLOCK_BYTES = [16 * 2**10, 64 * 2**10, 256 * 2**10, 2**20, 4 * 2**20]


def _worker(kv_cache: torch.Tensor,
            num_cpu_blocks: int) -> CPUOffloadingWorker:
    block_bytes = kv_cache.shape[1]
    kv_caches = CanonicalKVCaches(
        tensors=[
            CanonicalKVCacheTensor(tensor=kv_cache,
                                   page_size_bytes=block_bytes)
        ],
        group_data_refs=[[
            CanonicalKVCacheRef(tensor_idx=0, page_size_bytes=block_bytes)
        ]],
    )
    return CPUOffloadingWorker(kv_caches=kv_caches,
                               blocks_per_chunk=1,
                               num_cpu_chunks=num_cpu_blocks)


def bench(block_bytes: int, repeat: int) -> dict:
    num_blocks = MOVED_BYTES // block_bytes
    # Twice the blocks moved on each side, so that the moved ones scatter.
    kv_cache = torch.ones((2 * num_blocks, block_bytes), dtype=torch.uint8)
    worker = _worker(kv_cache, 2 * num_blocks)
    rng = np.random.default_rng(0)
    kv_ids = rng.permutation(2 * num_blocks)[:num_blocks]
    tier_ids = rng.permutation(2 * num_blocks)[:num_blocks]
    job_ids = iter(range(1 << 30))

    def kv_spec() -> GPULoadStoreSpec:
        return GPULoadStoreSpec(kv_ids,
                                group_sizes=(num_blocks, ),
                                block_indices=(0, ))

    def transfer(submit, src, dst) -> None:
        job_id = next(job_ids)
        assert submit(job_id, src, dst)
        while not (finished := worker.get_finished()):
            time.sleep(0.0002)
        assert [(r.job_id, r.success) for r in finished] == [(job_id, True)]

    def store() -> None:
        transfer(worker.submit_store, kv_spec(), CPULoadStoreSpec(tier_ids))

    def load() -> None:
        transfer(worker.submit_load, CPULoadStoreSpec(tier_ids), kv_spec())

    # Touch the CPU tier's pages.
    store()
    figures = against_plain_copy(store, load, MOVED_BYTES, repeat)
    # One per direction before the handler split large transfers.
    copy_threads = getattr(worker._store_handler, "num_copy_threads", 1)
    worker.shutdown()
    return {
        "block_kib": block_bytes // 1024,
        "blocks": num_blocks,
        "copy_threads": copy_threads,
        **figures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for block_bytes in BLOCK_BYTES:
        print(json.dumps(bench(block_bytes, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
