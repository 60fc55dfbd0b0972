"""The environment every test, benchmark and evaluation runs vLLM in:
offline, on local models, on a small CPU KV cache."""

from __future__ import annotations

import os

from ..core.line import REPO

DESELECT_FILE = REPO / "ci" / "vllm-tests-deselect.txt"

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    # The CPU KV cache is sized in GiB; tests need little.
    "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
}

# An engine in this process (so that the offload probe reaches its
# scheduler) with one OpenMP thread unless OMP_NUM_THREADS is set: with
# OpenMP's default, a thread per core, the threads spin in barriers while
# other processes share the cores, and every decode step slows. To compare:
# `make bench B=step-overhead` with and without OMP_NUM_THREADS=$(nproc).
ENGINE_ENV = {
    **OFFLINE_ENV,
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
}


def test_env() -> dict[str, str]:
    """Offline switches, local models, and the hub stand-ins for vLLM's
    tests."""
    from . import counting_model
    from .hub_standins import write_standins
    from .tiny_models import generate

    # vLLM's own unit tests name hub repos only to read their configs,
    # except upstream's offloading engine tests, which need a model that
    # counts.
    hub_cache = write_standins()
    counting_model.write_standin(hub_cache)
    return {
        **OFFLINE_ENV,
        "HF_HUB_CACHE": str(hub_cache),
        # Engine tests in the series default to an upstream model and take
        # a local one from here.
        "VLLM_TEST_TINY_LLAMA": str(generate("tiny-llama")),
        "VLLM_TEST_TINY_LLAMA_GQA": str(generate("tiny-llama-gqa")),
    }


def deselected() -> list[str]:
    """Node ids of vLLM tests that cannot run on this kind of machine (with
    why, in the file)."""
    ids = []
    for line in DESELECT_FILE.read_text().splitlines():
        node = line.split("#", 1)[0].strip()
        if node:
            ids.append(node)
    return ids
