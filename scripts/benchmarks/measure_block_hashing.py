"""Per-token cost of block hashing on the decode path, base vs patched vLLM.

Run with PYTHONPATH pointing at a vLLM tree; prints one JSON line per
generated length. It drives the KV cache manager the way the scheduler does
on every decode step (append the sampled token, allocate its slot, cache
newly full blocks), so it measures the same work on both trees: in 0.9.2 the
hash of a newly full block is computed inside BlockPool.cache_full_blocks,
with the series it is computed when the token is appended to the Request.
"""

from __future__ import annotations

import inspect
import json
import sys
import time

import torch
from vllm.sampling_params import SamplingParams
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig,
                                        KVCacheGroupSpec)
from vllm.v1.request import Request

BLOCK_SIZE = 16
PROMPT_LEN = 512


def make_manager(max_tokens: int) -> KVCacheManager:
    num_blocks = max_tokens // BLOCK_SIZE + 8
    config = KVCacheConfig(num_blocks=num_blocks,
                           kv_cache_tensors=[],
                           kv_cache_groups=[
                               KVCacheGroupSpec(["layer"],
                                                FullAttentionSpec(
                                                    BLOCK_SIZE, 1, 1,
                                                    torch.float32, False))
                           ])
    return KVCacheManager(config,
                          max_model_len=max_tokens + 16,
                          enable_caching=True)


def make_request(prompt: list[int], max_tokens: int) -> Request:
    kwargs = {}
    if "block_hasher" in inspect.signature(Request.__init__).parameters:
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher
        kwargs["block_hasher"] = get_request_block_hasher(BLOCK_SIZE, hash)
    return Request(request_id="r",
                   prompt_token_ids=prompt,
                   multi_modal_inputs=None,
                   multi_modal_hashes=None,
                   multi_modal_placeholders=None,
                   sampling_params=SamplingParams(max_tokens=max_tokens),
                   pooling_params=None,
                   eos_token_id=None,
                   **kwargs)


def decode_cost(gen_len: int) -> float:
    """Seconds per generated token spent in append + allocate_slots."""
    manager = make_manager(PROMPT_LEN + gen_len)
    request = make_request(list(range(PROMPT_LEN)), gen_len)
    computed, num_computed = manager.get_computed_blocks(request)
    manager.allocate_slots(request, PROMPT_LEN - num_computed, num_computed,
                           computed)
    request.num_computed_tokens = PROMPT_LEN
    start = time.perf_counter()
    for i in range(gen_len):
        request.append_output_token_ids(1000 + i)
        manager.allocate_slots(request, 1)
        request.num_computed_tokens += 1
    return (time.perf_counter() - start) / gen_len


def main() -> None:
    lengths = [int(x) for x in sys.argv[1:]] or [256, 1024, 4096, 16384]
    decode_cost(64)  # warm up imports and allocator
    for gen_len in lengths:
        best = min(decode_cost(gen_len) for _ in range(3))
        print(
            json.dumps({
                "generated_tokens": gen_len,
                "us_per_token": best * 1e6
            }))


if __name__ == "__main__":
    main()
