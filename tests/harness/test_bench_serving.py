"""The serving benchmark's workloads and the TTFT chart (no server here:
`make bench B=serving` runs them against `vllm serve`)."""

from __future__ import annotations

import json

from pstack.harness.bench.charts import write_ttft_chart
from pstack.harness.bench.serving import (NUM_DOCUMENTS,
                                          QUESTIONS_PER_DOCUMENT,
                                          write_workloads)


def prompts(path) -> list[str]:
    return [
        json.loads(line)["prompt"] for line in path.read_text().splitlines()
    ]


def test_workloads_reuse_documents_or_nothing(tmp_path):
    workloads = write_workloads(tmp_path)
    reuse, unique = prompts(workloads["reuse"]), prompts(workloads["no reuse"])
    assert len(reuse) == len(unique) == NUM_DOCUMENTS * QUESTIONS_PER_DOCUMENT

    def documents(batch: list[str]) -> list[str]:
        return [p.rsplit("\nQuestion", 1)[0] for p in batch]

    assert len(set(documents(reuse))) == NUM_DOCUMENTS
    assert len(set(documents(unique))) == len(unique)
    # Same prompt lengths, so that the two workloads cost the same to compute.
    average = [sum(map(len, batch)) / len(batch) for batch in (reuse, unique)]
    assert abs(average[0] - average[1]) < 0.05 * average[0]
    # The same files every run.
    (tmp_path / "again").mkdir()
    again = write_workloads(tmp_path / "again")
    assert again["reuse"].read_bytes() == workloads["reuse"].read_bytes()


def test_ttft_chart_is_a_reproducible_png(tmp_path):
    rows = [{
        "prompt_tokens": n,
        "cold_s": n / 500,
        "cpu_s": 0.1,
        "gpu_s": 0.05
    } for n in (1024, 2048)]
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    write_ttft_chart(rows, "title", first)
    write_ttft_chart(rows, "title", second)
    assert first.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert first.read_bytes() == second.read_bytes()
