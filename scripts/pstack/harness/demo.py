"""`make demo`: KV-cache offloading on a local model.

Starts one engine with the OffloadingConnector (GPU KV blocks are copied to a
CPU tier as they are computed), then:
  1. cold: three long prompts, each computed from scratch;
  2. waits until every store has committed, and resets the GPU prefix cache;
  3. the same prompts again: their KV now comes from the CPU tier.
For each request it prints the prompt length, the tokens it did not compute
(RequestOutput.num_cached_tokens), how many of them the connector loaded from
the CPU tier, and the time; then the connector's counters (offloading_stats).
Runs on the CPU engine (the "GPU" KV cache is then CPU memory too).
"""

from __future__ import annotations

import argparse
import os
import random
import time
from typing import Any

from ..core.errors import UserError, progress
from ..core.line import Line
from .testenv import ENGINE_ENV
from .tiny_models import SPECS, WORDS, generate

PROMPT_WORDS = (600, 900, 1200)
CPU_BLOCKS = 512  # the CPU tier, in offloaded blocks


def prompts(seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i, n in enumerate(PROMPT_WORDS):
        text = " ".join(rng.choice(WORDS) for _ in range(n))
        out.append(
            f"Document {i}: {text}.\nQuestion: what is the answer?\nAnswer:")
    return out


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model",
                        default="bench-llama",
                        choices=sorted(SPECS),
                        help="generated local model (default: bench-llama, "
                        "8 layers, big enough that computing a prompt takes "
                        "visible time)")
    parser.add_argument("--block-size",
                        type=int,
                        default=16,
                        help="offloaded block size in tokens (multiple of 16)")


def run(args: argparse.Namespace, layout: Line) -> int:
    check_block_size(args.block_size)
    # Before torch and vLLM are imported.
    os.environ.update(ENGINE_ENV)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    model = generate(args.model)
    progress(f"starting vLLM on {args.model} with the OffloadingConnector "
             f"(CPU tier: {CPU_BLOCKS} blocks of {args.block_size} tokens)")
    llm, cpu_hits = start_engine(str(model), args.block_size)
    return demonstrate(llm, cpu_hits)


def check_block_size(block_size: int) -> None:
    """The offloaded block size is a positive multiple of the GPU's (16)."""
    if block_size <= 0 or block_size % 16:
        raise UserError(
            f"--block-size {block_size} is not a multiple of the GPU "
            "block size 16", "use 16, 32, 64, ...")


def start_engine(model: str, block_size: int) -> tuple[Any, dict[str, int]]:
    """An in-process engine on `model` with the OffloadingConnector, and
    the tokens the connector loads from the CPU tier per request id (filled
    as requests run)."""
    from vllm import LLM

    from .offload_probe import ProbeError, record_cpu_hits
    try:
        llm = LLM(model=model,
                  dtype="float32",
                  enforce_eager=True,
                  seed=0,
                  max_model_len=2048,
                  block_size=16,
                  enable_prefix_caching=True,
                  kv_transfer_config={
                      "kv_connector": "OffloadingConnector",
                      "kv_role": "kv_both",
                      "kv_connector_extra_config": {
                          "num_cpu_blocks": CPU_BLOCKS,
                          "block_size": block_size
                      }
                  })
        return llm, record_cpu_hits(llm)
    except (ValueError, ProbeError) as e:
        raise UserError(
            f"cannot start vLLM with the OffloadingConnector: {e}",
            "the series needs [KV offload][4/N] and [5/N]; `make apply` and "
            "`make setup` install the current one") from e


def timed_pass(llm, cpu_hits: dict[str, int], batch: list[str],
               title: str) -> tuple[list[list[int]], float]:
    """Each prompt in turn, a row per request: the generated tokens and the
    total time."""
    from vllm import SamplingParams
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    print(f"\n{title}")
    print(f"  {'prompt':>6} {'tokens':>7} {'cached':>7} {'from CPU':>9} "
          f"{'time s':>7}")
    outputs, total = [], 0.0
    for i, prompt in enumerate(batch):
        start = time.perf_counter()
        out = llm.generate(prompt, params, use_tqdm=False)[0]
        seconds = time.perf_counter() - start
        total += seconds
        outputs.append(list(out.outputs[0].token_ids))
        print(f"  {i:>6} {len(out.prompt_token_ids):>7} "
              f"{out.num_cached_tokens or 0:>7} "
              f"{cpu_hits.get(out.request_id, 0):>9} {seconds:>7.2f}")
    print(f"  total {total:.2f} s")
    return outputs, total


def demonstrate(llm, cpu_hits: dict[str, int]) -> int:
    """The three steps of the module's docstring, then the counters and
    times; 0 if the output from the CPU tier is the cold one."""
    from vllm import SamplingParams

    from .offload_probe import (offload_stats, reset_gpu_prefix_cache,
                                wait_for_stores)
    batch = prompts()
    llm.generate("warm up", SamplingParams(max_tokens=1), use_tqdm=False)
    before = offload_stats(llm)
    cold, cold_s = timed_pass(
        llm, cpu_hits, batch, "1. cold: every prompt computed (its KV "
        "blocks are offloaded meanwhile)")
    steps = wait_for_stores(llm)
    steps += reset_gpu_prefix_cache(llm)
    stored = offload_stats(llm).minus(before).stored_blocks
    print(f"\n2. {stored} blocks committed to the CPU tier ({steps} forced "
          "engine steps); GPU prefix cache reset")
    middle = offload_stats(llm)
    warm, warm_s = timed_pass(
        llm, cpu_hits, batch, "3. same prompts: KV loaded from the CPU "
        "tier, only the tail computed")
    delta = offload_stats(llm).minus(middle)
    print(f"\noffloading_stats during step 3: "
          f"loaded_tokens={delta.loaded_tokens} "
          f"load_requests={delta.load_requests}; totals: "
          f"{offload_stats(llm).as_dict()}")
    print(f"time: {cold_s:.2f} s cold, {warm_s:.2f} s from the CPU tier "
          f"({cold_s / warm_s:.1f}x); generated tokens identical: "
          f"{'yes' if warm == cold else 'NO'}")
    if delta.loaded_tokens == 0:
        raise UserError("nothing was loaded from the CPU tier",
                        "see the table above")
    return 0 if warm == cold else 1
