"""What the offline engine benchmarks share: the engine they build and the
prompts they time it on. Imports vLLM only when called, from whichever tree
is first on PYTHONPATH."""

from __future__ import annotations

import random
from typing import Any, Optional

DTYPE = "float32"


def make_llm(model: str, kv_transfer_config: Optional[dict] = None) -> Any:
    """The in-process engine of the benchmarks: bench-llama in fp32 (this
    CPU has no native bf16 matrix multiply), eager, blocks of 16."""
    from vllm import LLM
    from vllm.config import KVTransferConfig
    return LLM(model=model,
               dtype=DTYPE,
               enforce_eager=True,
               max_model_len=2048,
               block_size=16,
               seed=0,
               kv_transfer_config=KVTransferConfig(
                   **kv_transfer_config) if kv_transfer_config else None)


def random_prompts(seed: int, vocab: int, num_prompts: int,
                   prompt_len: int) -> list[Any]:
    """num_prompts prompts of prompt_len random token ids: a different seed
    gives prompts that share no block with the others."""
    from vllm import TokensPrompt
    rng = random.Random(seed)
    # Ids 0..2 are the tokenizer's special tokens.
    return [
        TokensPrompt(prompt_token_ids=[
            rng.randrange(3, vocab) for _ in range(prompt_len)
        ]) for _ in range(num_prompts)
    ]
