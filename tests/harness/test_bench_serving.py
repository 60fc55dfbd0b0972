"""The serving benchmark's workloads and the TTFT chart (no server here:
`make bench B=serving` runs them against `vllm serve`)."""

from __future__ import annotations

import json

from pstack.harness.bench.charts import write_ttft_chart
from pstack.harness.bench.serving import (NO_REUSE_ROUNDS, NUM_DOCUMENTS,
                                          QUESTIONS_PER_DOCUMENT,
                                          write_workloads)


def prompts(path) -> list[str]:
    return [
        json.loads(line)["prompt"] for line in path.read_text().splitlines()
    ]


def test_workloads_reuse_documents_or_nothing(tmp_path):
    workloads = write_workloads(tmp_path)
    [reuse_file] = workloads["reuse"]
    reuse = prompts(reuse_file)
    rounds = [prompts(path) for path in workloads["no reuse"]]
    assert len(rounds) == NO_REUSE_ROUNDS
    assert len(reuse) == NUM_DOCUMENTS * QUESTIONS_PER_DOCUMENT
    assert all(len(unique) == len(reuse) for unique in rounds)

    def documents(batch: list[str]) -> list[str]:
        return [p.rsplit("\nQuestion", 1)[0] for p in batch]

    assert len(set(documents(reuse))) == NUM_DOCUMENTS
    # No document twice, in a round or across rounds (nor in reuse).
    unique_documents = [d for unique in rounds for d in documents(unique)]
    assert len(set(unique_documents)) == len(unique_documents)
    assert not set(unique_documents) & set(documents(reuse))
    # Same prompt lengths, so that the workloads cost the same to compute.
    average = [sum(map(len, batch)) / len(batch) for batch in [reuse, *rounds]]
    assert all(abs(a - average[0]) < 0.05 * average[0] for a in average)
    # The same files every run.
    (tmp_path / "again").mkdir()
    again = write_workloads(tmp_path / "again")
    for name, paths in workloads.items():
        assert [p.read_bytes()
                for p in again[name]] == [p.read_bytes() for p in paths]


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
