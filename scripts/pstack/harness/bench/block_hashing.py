"""µs per generated token spent hashing blocks on the decode path, v0.9.2
vs the series."""

from __future__ import annotations

from ...core.line import Line
from .runner import base_tree, run_script


def run(layout: Line) -> None:
    print("\n## Block hashing on the decode path (append + allocate_slots), "
          "µs per generated token, prompt 512, block 16")
    base = run_script(layout, "measure_block_hashing.py", base_tree(layout))
    patched = run_script(layout, "measure_block_hashing.py", layout.src)
    print(f"{'generated':>10} {'v0.9.2':>10} {'series':>10}")
    for b, p in zip(base, patched):
        print(f"{b['generated_tokens']:>10} {b['us_per_token']:>10.2f} "
              f"{p['us_per_token']:>10.2f}")
    growth = patched[-1]["us_per_token"] / patched[0]["us_per_token"]
    print(f"series: cost per token at {patched[-1]['generated_tokens']} vs "
          f"{patched[0]['generated_tokens']} generated tokens: {growth:.2f}x "
          "(flat = amortized O(new blocks))")
