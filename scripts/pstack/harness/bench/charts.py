"""Charts of `make bench`, as PNG files for docs/benchmarks.md."""

from __future__ import annotations

from pathlib import Path

TTFT_SERIES = (("cold_s", "recomputed",
                "#c44e52"), ("cpu_s", "CPU-tier hit (loaded)", "#4c72b0"),
               ("gpu_s", "GPU prefix-cache hit", "#55a868"))


def write_ttft_chart(rows: list[dict], title: str, path: Path) -> None:
    """Grouped bars: time to first token by prompt length, for a prompt
    recomputed, loaded from the CPU tier, and found in the GPU prefix cache.
    rows: offload_ttft.py's output."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.27
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    positions = range(len(rows))
    for i, (key, label, color) in enumerate(TTFT_SERIES):
        bars = ax.bar([p + (i - 1) * width for p in positions],
                      [r[key] for r in rows],
                      width,
                      label=label,
                      color=color)
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    ax.set_xticks(list(positions), [f"{r['prompt_tokens']:,}" for r in rows])
    ax.set_xlabel("prompt tokens")
    ax.set_ylabel("time to first token (s)")
    ax.set_title(title, fontsize=9)
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    # No timestamp in the file: the same figures give the same bytes.
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
