"""Time to first token of 1k, 2k and 4k-token prompts: recomputed, loaded
from the CPU tier, and a GPU prefix-cache hit (run by the serving
benchmark, which draws it)."""

from __future__ import annotations

from ...core.errors import progress
from ...core.line import REPO, Line
from ..testenv import ENGINE_ENV
from ..tiny_models import generate
from .runner import run_script


def measure(layout: Line) -> list[dict]:
    model = str(generate("bench-llama"))
    progress("time to first token: 1k, 2k, 4k-token prompts")
    # The script reaches the engine through pstack.harness.offload_probe.
    return run_script(layout,
                      "measure_offload_ttft.py",
                      layout.src,
                      model,
                      env=ENGINE_ENV,
                      pythonpath=(REPO / "scripts", ))


def run(layout: Line) -> list[dict]:
    print(
        "\n## Time to first token of a long prompt: recomputed vs loaded "
        "from the CPU tier (CPU engine, bench-llama fp32, "
        "OffloadingConnector, blocks of 16; best of 2)",
        flush=True)
    rows = measure(layout)
    print(f"{'prompt':>7} {'recompute s':>12} {'CPU tier s':>11} "
          f"{'speedup':>8} {'loaded tok':>11} {'GPU hit s':>10}")
    for r in rows:
        print(f"{r['prompt_tokens']:>7} {r['cold_s']:>12.3f} "
              f"{r['cpu_s']:>11.3f} {r['cold_s'] / r['cpu_s']:>7.1f}x "
              f"{r['cpu_loaded_tokens']:>11} {r['gpu_s']:>10.3f}")
    return rows
