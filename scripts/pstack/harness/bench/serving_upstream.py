"""`make bench B=serving` on a line that carries upstream's offloading
(0.32): the time to first token by tier (measure_tier_ttft.py), drawn as
docs/img/ttft-by-tier-<version>.png, then serving.py's workloads behind
`vllm serve` without and with upstream's OffloadingConnector on vLLM's CPU
platform."""

from __future__ import annotations

from pathlib import Path

from ...core.line import Line
from . import serving, tier_ttft
from .charts import TIER_TTFT_SERIES, write_ttft_chart


def chart_file(layout: Line) -> Path:
    version = layout.pin.version
    return layout.docs / "img" / f"ttft-by-tier-{version}.png"


def run(layout: Line) -> None:
    ttft_rows = tier_ttft.run(layout)
    serving.run_workloads(layout, serving.UPSTREAM_OFFLOADING)
    chart = chart_file(layout)
    write_ttft_chart(
        ttft_rows, "Time to first token, vLLM's CPU platform, bench-llama "
        "fp32 (make bench LINE=0.32.0 B=serving)", chart, TIER_TTFT_SERIES)
    print(f"chart: {chart.relative_to(layout.root)} (TTFT by prompt length: "
          "recomputed, fs tier hit, CPU tier hit, KV-cache hit)")
