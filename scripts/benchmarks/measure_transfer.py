# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Bandwidth of the CPU-platform offloading handler vs a plain tensor copy.

For each block size, stores MOVED_BYTES worth of blocks from a "GPU" KV cache
(host memory on the CPU platform) to the CPU tier with the real
CpuGpuOffloadingHandlers, in shuffled block order so that no two blocks are
adjacent on either side (the worst case: one copy per block), then loads them
back. The reference is one `tensor.copy_` of MOVED_BYTES between two
contiguous buffers, with all intra-op threads (the targets: the handler at
>= 80% of it for blocks of 256 KiB and more, >= 60% for 16-64 KiB) and with
one thread. The handler splits large jobs over as many copy threads as torch
has intra-op threads (see ThreadedBlockCopyHandler). Memory is touched
before timing so page faults are not measured.

Prints one JSON line per block size. Run with vLLM on PYTHONPATH:

    PYTHONPATH=/path/to/vllm python measure_transfer.py [--repeat N]
"""
import argparse
import json

import numpy as np
import torch
from timing import against_plain_copy
from vllm.v1.attention.backends.cpu_attn import TorchSDPABackend
from vllm.v1.kv_offload.mediums import CPULoadStoreSpec, GPULoadStoreSpec
from vllm.v1.kv_offload.worker.cpu_gpu import CpuGpuOffloadingHandlers

MOVED_BYTES = 256 * 2**20
BLOCK_BYTES = [16 * 2**10, 64 * 2**10, 256 * 2**10, 2**20, 4 * 2**20]


class FlatBlocksBackend(TorchSDPABackend):
    """One chunk of bytes per block (as a cross-layer cache would be)."""

    @staticmethod
    def get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size):
        return (num_blocks, block_size * num_kv_heads * head_size)


def bench(block_bytes: int, repeat: int) -> dict:
    num_blocks = MOVED_BYTES // block_bytes
    # The KV cache has twice the blocks moved, so that the moved blocks are
    # scattered.
    gpu_cache = torch.ones((2 * num_blocks, block_bytes), dtype=torch.uint8)
    handlers = CpuGpuOffloadingHandlers(
        gpu_block_size=16,
        cpu_block_size=16,
        num_cpu_blocks=2 * num_blocks,
        gpu_caches={"layer": gpu_cache},
        attn_backends={"layer": FlatBlocksBackend})
    for rows in handlers.cpu_rows:
        rows.fill_(1)
    rng = np.random.default_rng(0)
    gpu_ids = rng.permutation(2 * num_blocks)[:num_blocks]
    cpu_ids = rng.permutation(2 * num_blocks)[:num_blocks]
    job_ids = iter(range(1 << 30))

    def transfer(handler, src, dst) -> None:
        job_id = next(job_ids)
        assert handler.transfer_async(job_id, (src, dst))
        handler.wait({job_id})
        assert handler.get_finished() == [(job_id, True)]

    store_job = lambda: transfer(
        handlers.gpu_to_cpu_handler,  # noqa: E731
        GPULoadStoreSpec(gpu_ids),
        CPULoadStoreSpec(cpu_ids))
    load_job = lambda: transfer(
        handlers.cpu_to_gpu_handler,  # noqa: E731
        CPULoadStoreSpec(cpu_ids),
        GPULoadStoreSpec(gpu_ids))
    figures = against_plain_copy(store_job, load_job, MOVED_BYTES, repeat)
    return {
        "block_kib": block_bytes // 1024,
        "blocks": num_blocks,
        "copy_threads": handlers.gpu_to_cpu_handler.num_copy_threads,
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
