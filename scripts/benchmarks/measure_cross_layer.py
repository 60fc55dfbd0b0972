# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Per-layer vs cross-layer KV blocks: copies per block and transfer time.

For a few model shapes, builds the CPU backend's KV caches both ways (one
(2, num_blocks, page) tensor per layer, or one cross-layer tensor
(num_blocks, num_layers, 2, page)) and offloads one request's blocks with the
real CpuGpuOffloadingHandlers, in shuffled block order, then loads them back.

Prints one JSON line per (shape, layout). Run with vLLM on PYTHONPATH:

    PYTHONPATH=/path/to/vllm python measure_cross_layer.py [--repeat N]
"""
import argparse
import json

import numpy as np
import torch
from timing import best_seconds
from vllm.v1.attention.backends.cpu_attn import TorchSDPABackend
from vllm.v1.kv_offload.mediums import CPULoadStoreSpec, GPULoadStoreSpec
from vllm.v1.kv_offload.worker.cpu_gpu import CpuGpuOffloadingHandlers

BLOCK_SIZE = 16
REQUEST_TOKENS = 2048
# name -> (num_layers, num_kv_heads, head_size), bf16
SHAPES = {
    "tiny-llama": (2, 2, 64),
    "bench-llama": (8, 8, 64),
    "llama-3-8b": (32, 8, 128),
}


def make_caches(num_layers: int, num_kv_heads: int, head_size: int,
                num_blocks: int, cross_layer: bool):
    page = BLOCK_SIZE * num_kv_heads * head_size
    if cross_layer:
        kv_cache = torch.ones((num_blocks, num_layers, 2, page),
                              dtype=torch.bfloat16)
        return {"ALL_LAYERS": kv_cache}, {"ALL_LAYERS": TorchSDPABackend}
    caches = {
        f"layer.{i}": torch.ones((2, num_blocks, page), dtype=torch.bfloat16)
        for i in range(num_layers)
    }
    return caches, {name: TorchSDPABackend for name in caches}


def bench(shape: str, cross_layer: bool, repeat: int) -> dict:
    num_layers, num_kv_heads, head_size = SHAPES[shape]
    num_request_blocks = REQUEST_TOKENS // BLOCK_SIZE
    num_blocks = 2 * num_request_blocks
    caches, backends = make_caches(num_layers, num_kv_heads, head_size,
                                   num_blocks, cross_layer)
    handlers = CpuGpuOffloadingHandlers(BLOCK_SIZE, BLOCK_SIZE, num_blocks,
                                        caches, backends)
    for rows in handlers.cpu_rows:
        rows.fill_(1)
    rng = np.random.default_rng(0)
    gpu_ids = rng.permutation(num_blocks)[:num_request_blocks]
    cpu_ids = rng.permutation(num_blocks)[:num_request_blocks]
    job_ids = iter(range(1 << 30))

    def transfer(handler, spec) -> None:
        job_id = next(job_ids)
        assert handler.transfer_async(job_id, spec)
        handler.wait({job_id})
        assert handler.get_finished() == [(job_id, True)]

    store = best_seconds(
        lambda: transfer(handlers.gpu_to_cpu_handler, (GPULoadStoreSpec(
            gpu_ids), CPULoadStoreSpec(cpu_ids))), repeat)
    load = best_seconds(
        lambda: transfer(handlers.cpu_to_gpu_handler, (CPULoadStoreSpec(
            cpu_ids), GPULoadStoreSpec(gpu_ids))), repeat)
    copies_per_block = len(handlers.cpu_rows)
    bytes_per_copy = handlers.cpu_rows[0].shape[1]
    request_bytes = copies_per_block * bytes_per_copy * num_request_blocks
    return {
        "shape": shape,
        "layout": "cross-layer" if cross_layer else "per-layer",
        "copies_per_block": copies_per_block,
        "bytes_per_copy": bytes_per_copy,
        "request_mib": request_bytes / 2**20,
        "store_ms": store * 1e3,
        "load_ms": load * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for shape in SHAPES:
        for cross_layer in (False, True):
            print(json.dumps(bench(shape, cross_layer, args.repeat)),
                  flush=True)


if __name__ == "__main__":
    main()
