# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Time to first token of long prompts on vLLM's CPU platform with upstream
vLLM's offloading (the 0.32 line): recomputed, a KV-cache prefix hit, a CPU
tier hit and an fs tier hit.

One engine with TieringOffloadingSpec (a CPU tier and an fs tier under
ROOT_DIR) runs, for each prompt length and repeat, a new prompt of random
token ids with max_tokens=1:
  recompute  nothing cached: the whole prompt is computed (and offloaded);
  kv hit     again once its stores finished: a hit of the KV cache's own
             prefix cache;
  cpu hit    after the stores finished and the KV cache's prefix cache was
             reset: the prompt's blocks load from the CPU tier;
the two hits alternately, --hit-repeats times.
Then (--phase fs) a second engine process on the same ROOT_DIR, whose CPU
tier is empty, runs the same prompts once: they load from the fs tier's
files (after the page cache was dropped, if this machine lets us: said in
the output). The time of a 1-token generate is the time to first token;
each figure is the best of its runs.

Run with the line's vLLM tree on PYTHONPATH (it uses its tests' engine
helpers); prints one JSON line per prompt length and phase:

    PYTHONPATH=vllm-src-0.32.0 python measure_tier_ttft.py MODEL_DIR ROOT_DIR \
        --phase tiers|fs
"""

import argparse
import json
import os
import random
import time

BLOCK_SIZE = 128
LENGTHS = (1024, 2048, 4096)


def drop_page_cache() -> bool:
    """Whether the kernel's page cache could be dropped (root, and a
    writable /proc/sys: not in every container)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return True
    except OSError:
        return False


def prompt(length: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(10, 1000) for _ in range(length)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("root_dir")
    parser.add_argument("--phase", choices=("tiers", "fs"), required=True)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--hit-repeats", type=int, default=5)
    parser.add_argument("--lengths", type=int, nargs="+", default=LENGTHS)
    args = parser.parse_args()

    # The engine core in this process, for the helpers to step it.
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm import LLM, SamplingParams, TokensPrompt

    from tests.v1.kv_offload.engine_utils import (cpu_tier_bytes,
                                                  reset_gpu_prefix_cache,
                                                  wait_for_transfers)

    tokens = sum(args.lengths) * args.repeats
    llm = LLM(
        model=args.model,
        dtype="float32",
        enforce_eager=True,
        seed=0,
        block_size=BLOCK_SIZE,
        max_model_len=max(args.lengths) + BLOCK_SIZE,
        max_num_batched_tokens=max(args.lengths) + BLOCK_SIZE,
        kv_transfer_config={
            "kv_connector": "OffloadingConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {
                "spec_name": "TieringOffloadingSpec",
                "cpu_bytes_to_use": cpu_tier_bytes(args.model, 2 * tokens, 1),
                "secondary_tiers": [{
                    "type": "fs",
                    "root_dir": args.root_dir
                }],
            },
        },
    )
    one_token = SamplingParams(max_tokens=1, temperature=0)

    def ttft(token_ids: list[int]) -> tuple[float, int]:
        start = time.perf_counter()
        (output, ) = llm.generate(TokensPrompt(prompt_token_ids=token_ids),
                                  one_token,
                                  use_tqdm=False)
        return time.perf_counter() - start, output.num_cached_tokens or 0

    # Warm up: the first requests pay for one-time setup.
    for seed in range(2):
        ttft(prompt(BLOCK_SIZE * 2, 10_000 + seed))
    wait_for_transfers(llm)
    dropped = drop_page_cache() if args.phase == "fs" else None
    best: dict[str, float] = {}
    cached: dict[str, int] = {}

    def record(name: str, seconds: float, num_cached: int) -> None:
        if seconds < best.get(name, float("inf")):
            best[name], cached[name] = seconds, num_cached

    for length in args.lengths:
        best.clear()
        cached.clear()
        for repeat in range(args.repeats):
            token_ids = prompt(length, length * 100 + repeat)
            if args.phase == "fs":
                record("fs_hit", *ttft(token_ids))
                continue
            record("recompute", *ttft(token_ids))
            # Each hit is timed with no transfer in flight: the prompt's
            # stores would otherwise compete with it for memory bandwidth.
            # A hit costs tens of milliseconds, so the two alternate
            # --hit-repeats times (a CPU tier hit leaves the prompt in the
            # KV cache for the next KV-cache hit): noise of a few ms would
            # otherwise decide their ratio.
            wait_for_transfers(llm)
            for _ in range(args.hit_repeats):
                record("kv_hit", *ttft(token_ids))
                wait_for_transfers(llm)
                reset_gpu_prefix_cache(llm)
                record("cpu_hit", *ttft(token_ids))
                wait_for_transfers(llm)
        row = {"prompt_tokens": length, "phase": args.phase}
        row.update({f"{name}_s": seconds for name, seconds in best.items()})
        row.update({f"{name}_cached_tokens": n for name, n in cached.items()})
        if dropped is not None:
            row["page_cache_dropped"] = dropped
        print(json.dumps(row), flush=True)
    llm.llm_engine.engine_core.shutdown()


if __name__ == "__main__":
    main()
