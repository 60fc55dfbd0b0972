"""Charts of `make bench`, as PNG files for docs/benchmarks.md."""

from __future__ import annotations

from pathlib import Path

TTFT_SERIES = (("cold_s", "recomputed",
                "#c44e52"), ("cpu_s", "CPU-tier hit (loaded)", "#4c72b0"),
               ("gpu_s", "GPU prefix-cache hit", "#55a868"))
# The 0.32 line's (measure_tier_ttft.py's rows).
TIER_TTFT_SERIES = (("recompute_s", "recomputed",
                     "#c44e52"), ("fs_hit_s", "fs tier hit", "#8172b2"),
                    ("cpu_hit_s", "CPU tier hit", "#4c72b0"),
                    ("kv_hit_s", "KV-cache prefix hit", "#55a868"))


def write_ttft_chart(
        rows: list[dict],
        title: str,
        path: Path,
        series: tuple[tuple[str, str, str], ...] = TTFT_SERIES) -> None:
    """Grouped bars: time to first token by prompt length, one bar per
    series (key of the rows, label, colour): by default a prompt recomputed,
    loaded from the CPU tier, and found in the GPU prefix cache (rows:
    measure_offload_ttft.py's output)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    positions = range(len(rows))
    for i, (key, label, color) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * width
        bars = ax.bar([p + offset for p in positions], [r[key] for r in rows],
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


def write_fleet_chart(rows: list[dict], title: str, path: Path) -> None:
    """Two panels, one bar per fleet: output throughput, and the median time
    to first token (rows: fleet.py's, with "fleet", "output_throughput" and
    "ttft_p50_s")."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = ("#c44e52", "#8172b2")
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.5), dpi=100)
    panels = (("output_throughput", "output tokens/s", "%.1f"),
              ("ttft_p50_s", "time to first token, p50 (s)", "%.2f"))
    for ax, (key, label, fmt) in zip(axes, panels):
        bars = ax.bar([r["fleet"] for r in rows], [r[key] for r in rows],
                      color=colors[:len(rows)])
        ax.bar_label(bars, fmt=fmt, fontsize=8, padding=1)
        ax.set_ylabel(label)
        ax.spines[["top", "right"]].set_visible(False)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    # No timestamp in the file: the same figures give the same bytes.
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
