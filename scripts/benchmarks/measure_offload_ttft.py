"""Time to first token of a long prompt: recomputed vs loaded from the CPU
tier.

Run with PYTHONPATH holding the patched vLLM tree and the project's scripts/
(for pstack.harness.offload_probe), the engine in process; prints one JSON
line per prompt length:

    PYTHONPATH=vllm-src-0.9.2:scripts python measure_offload_ttft.py MODEL_DIR \
        [--lengths 1024 2048]

One engine with the OffloadingConnector. For each length and repeat, a new
prompt of random token ids is generated with max_tokens=1 three times:
  cold  nothing cached: the whole prompt is computed (and offloaded);
  cpu   after the stores committed and the GPU prefix cache was reset: the
        prompt's blocks load from the CPU tier, the rest is computed;
  gpu   again right away: a GPU prefix-cache hit, for reference.
The time of a 1-token generate is the time to first token. Each column is the
best of the repeats.
"""

from __future__ import annotations

import argparse
import json
import random
import time

# This CPU has no native bf16 matmul: bf16 prefill is ~4x slower.
DTYPE = "float32"
GPU_BLOCK = 16
OFFLOADED_BLOCK = 16


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--lengths",
                        type=int,
                        nargs="+",
                        default=[1024, 2048, 4096])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    from pstack.harness.offload_probe import (offload_stats,
                                              reset_gpu_prefix_cache,
                                              wait_for_stores)
    from vllm import LLM, SamplingParams, TokensPrompt

    max_len = max(args.lengths)
    per_pass_blocks = sum(args.lengths) * args.repeats // OFFLOADED_BLOCK
    llm = LLM(model=args.model,
              dtype=DTYPE,
              enforce_eager=True,
              block_size=GPU_BLOCK,
              seed=0,
              max_model_len=max_len + 16,
              max_num_batched_tokens=max_len + 16,
              kv_transfer_config={
                  "kv_connector": "OffloadingConnector",
                  "kv_role": "kv_both",
                  "kv_connector_extra_config": {
                      "num_cpu_blocks": per_pass_blocks + 64,
                      "block_size": OFFLOADED_BLOCK
                  }
              })
    vocab = len(llm.get_tokenizer())
    params = SamplingParams(temperature=0.0, max_tokens=1)
    rng = random.Random(0)

    def ttft(prompt: list[int]) -> tuple[float, int]:
        start = time.perf_counter()
        out = llm.generate(TokensPrompt(prompt_token_ids=prompt),
                           params,
                           use_tqdm=False)[0]
        return time.perf_counter() - start, out.num_cached_tokens or 0

    ttft([rng.randrange(3, vocab) for _ in range(64)])  # warm-up
    for length in args.lengths:
        best: dict[str, float] = {}
        row = {"prompt_tokens": length}
        for _ in range(args.repeats):
            prompt = [rng.randrange(3, vocab) for _ in range(length)]
            cold, _ = ttft(prompt)
            wait_for_stores(llm)
            reset_gpu_prefix_cache(llm)
            before = offload_stats(llm)
            cpu, cpu_cached = ttft(prompt)
            loaded = offload_stats(llm).minus(before).loaded_tokens
            gpu, gpu_cached = ttft(prompt)
            for name, value in (("cold_s", cold), ("cpu_s", cpu), ("gpu_s",
                                                                   gpu)):
                best[name] = min(best.get(name, value), value)
            row.update(cpu_loaded_tokens=loaded,
                       cpu_cached_tokens=cpu_cached,
                       gpu_cached_tokens=gpu_cached)
        row.update({k: round(v, 4) for k, v in best.items()})
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
