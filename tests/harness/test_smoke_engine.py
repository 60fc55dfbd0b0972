"""The patched vLLM runs for real on this CPU: greedy, prefix caching,
repeatable."""

from __future__ import annotations

import pytest
from engine import prompts, run_llm

pytestmark = pytest.mark.engine


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-llama-gqa"])
def test_generate_with_prefix_cache_hits_and_repeatable_tokens(model):
    batch = prompts(6)
    passes = [{
        "prompts": batch,
        "max_tokens": 24
    }, {
        "prompts": batch,
        "max_tokens": 24
    }]
    first = run_llm(model, passes, enable_prefix_caching=True, block_size=16)
    cold, warm = first
    assert all(len(t) == 24 for t in cold["tokens"])
    # Pass 2 finds the prompts' full blocks in the GPU-side prefix cache ...
    assert all(c >= 16 for c in warm["cached"]), warm["cached"]
    assert sum(warm["cached"]) > sum(cold["cached"])
    # ... and computes exactly the same greedy continuation.
    assert warm["tokens"] == cold["tokens"]
    # A second engine run gives identical tokens.
    second = run_llm(model,
                     passes[:1],
                     enable_prefix_caching=True,
                     block_size=16)
    assert second[0]["tokens"] == cold["tokens"]
