"""Helpers for tests that start the real patched vLLM engine on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pstack.harness.tiny_models import generate

RUNNER = Path(__file__).with_name("llm_runner.py")
# Fixed prompt vocabulary the tiny tokenizers know well.
SHARED_PREFIX = (
    "the cache block layer token prefix offload memory copy store load tier "
    "engine request model batch step worker query key value head page hit "
) * 3


def prompts(n: int, prefix: str = SHARED_PREFIX) -> list[str]:
    tails = [
        "red river", "green stone", "blue cloud", "north light", "south paper",
        "seven apple", "eleven orange", "zero number"
    ]
    return [f"{prefix}{tails[i % len(tails)]} {i}" for i in range(n)]


def run_llm(model: str,
            passes: list[dict],
            timeout: float = 600,
            env: dict | None = None,
            **llm_kwargs) -> list[dict]:
    spec = {
        "model": str(generate(model)),
        "passes": passes,
        "llm": {
            "dtype": "bfloat16",
            "max_model_len": 1024,
            "seed": 0,
            "enforce_eager": True,
            **llm_kwargs
        }
    }
    proc = subprocess.run([sys.executable, str(RUNNER)],
                          input=json.dumps(spec),
                          text=True,
                          timeout=timeout,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT,
                          env={
                              **os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING":
                              "0",
                              **(env or {})
                          })
    for line in proc.stdout.splitlines():
        if line.startswith("LLM_RUNNER_RESULT "):
            return json.loads(line.split(" ", 1)[1])["passes"]
    raise AssertionError(
        f"engine run failed (exit {proc.returncode}):\n{proc.stdout[-6000:]}")
