"""`make lm-eval`: the verdict logic on made-up runs, the task data, and the
gate's self-test on a real engine (the gate itself runs in each line's
part of `make test`)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
from conftest import REPO
from pstack.core.line import Line
from pstack.harness.lm_eval import task as lm_eval_task
from pstack.harness.lm_eval.protocol import RunResult, WorkerJob
from pstack.harness.lm_eval.verdict import (LOGPROB_TOLERANCE, format_report,
                                            judge)


def sample(doc_id: int,
           resp: str,
           cpu_hit_tokens: int = 0,
           prompt_hash: str | None = None):
    return {
        "task": "t",
        "doc_id": doc_id,
        "filter": "number",
        "prompt_hash": prompt_hash or f"h{doc_id}",
        "resps": [[resp]],
        "filtered_resps": [resp.strip()],
        "cached_tokens": 16,
        "cpu_hit_tokens": cpu_hit_tokens
    }


def run(label: str,
        connector: bool,
        resps: list[str],
        hits2: list[int] | None = None,
        loaded2: int = 0,
        acc: tuple[float, float] = (0.5, 0.5)) -> dict:
    hits2 = hits2 or [0] * len(resps)
    passes = []
    for n, hits, loaded in ((1, [0] * len(resps), 0), (2, hits2, loaded2)):
        p = {
            "pass":
            n,
            "seconds":
            1.0,
            "samples":
            [sample(i, r, h) for i, (r, h) in enumerate(zip(resps, hits))],
            "metrics": {
                "t": {
                    "exact_match,number": acc[n - 1]
                }
            }
        }
        if connector:
            p["offload"] = {
                "loaded_tokens": loaded,
                "load_requests": sum(map(bool, hits)),
                "stored_blocks": 0 if n > 1 else 10,
                "pending_store_requests": 0
            }
        passes.append(p)
    model = label.split("/")[0]
    return {
        "label": label,
        "model": model,
        "connector": connector,
        "passes": passes
    }


def judged(runs: list[dict], **kwargs):
    """The verdict on runs as the worker writes them (JSON)."""
    return judge([RunResult.from_json(r) for r in runs], **kwargs)


RESPS = [" 12", " 7 apple", " 99", " 3"]


def good_runs() -> list[dict]:
    return [
        run("m/baseline", False, RESPS),
        run("m/offload", True, RESPS, hits2=[32, 0, 48, 16], loaded2=96)
    ]


def test_identical_runs_with_cpu_hits_pass():
    v = judged(good_runs())
    assert v.passed, v.problems
    assert [r.identical for r in v.rows] == [None, 4, 4, 4]
    row = v.rows[-1]
    assert (row.cpu_hit_samples, row.cpu_hit_tokens,
            row.loaded_tokens) == (3, 96, 96)
    report = format_report(v)
    assert "PASS" in report and "m/offload (3/4 samples, 96 tokens)" in report


def test_a_differing_response_fails_and_names_the_doc():
    runs = good_runs()
    runs[1]["passes"][1]["samples"][2]["resps"] = [[" 98"]]
    v = judged(runs)
    assert not v.passed
    assert [(m.run, m.pass_number, m.doc_id)
            for m in v.mismatches] == [("m/offload", 2, 2)]
    report = format_report(v)
    assert "m/offload pass 2: t doc_id 2 [number]" in report
    assert report.splitlines()[-1].startswith("FAIL: 1 mismatches")


def test_baseline_repeatability_is_checked_too():
    runs = good_runs()
    runs[0]["passes"][1]["samples"][0]["filtered_resps"] = ["13"]
    v = judged(runs)
    assert not v.passed and v.mismatches[0].run == "m/baseline"


def test_offloading_without_cpu_hits_fails():
    runs = [run("m/baseline", False, RESPS), run("m/offload", True, RESPS)]
    v = judged(runs)
    assert not v.passed and not v.mismatches
    assert any("no evidence of loads from the CPU tier" in p
               for p in v.problems)
    # Counters alone are not enough either: the samples must show the hits.
    runs[1]["passes"][1]["offload"]["loaded_tokens"] = 64
    assert not judged(runs).passed


def test_prompt_drift_and_missing_samples_are_problems():
    runs = good_runs()
    runs[1]["passes"][0]["samples"][1]["prompt_hash"] = "other"
    del runs[1]["passes"][1]["samples"][3]
    v = judged(runs)
    assert not v.passed
    assert any("prompt differs" in p and "doc 1" in p for p in v.problems)
    assert any("1 reference samples missing" in p for p in v.problems)


def test_each_model_has_its_own_reference():
    other = [
        run("g/baseline", False, [" 1", " 2", " 3", " 4"]),
        run("g/offload",
            True, [" 1", " 2", " 3", " 4"],
            hits2=[16] * 4,
            loaded2=64)
    ]
    # Listed before the baseline: the reference is still the run without
    # connector.
    v = judged([good_runs()[1], good_runs()[0], *other])
    assert v.passed, v.problems


def test_a_crashed_configuration_fails():
    runs = good_runs() + [{
        "label": "m/offload-b64",
        "model": "m",
        "error": "worker exited"
    }]
    v = judged(runs)
    assert not v.passed and "m/offload-b64: worker exited" in v.problems[0]


def test_gpu_mode_tolerates_differing_responses_but_not_accuracy_loss():
    runs = good_runs()
    runs[1]["passes"][1]["samples"][0]["resps"] = [[" 13"]]
    runs[1]["passes"][1]["metrics"]["t"]["exact_match,number"] = 0.47
    v = judged(copy.deepcopy(runs), exact=False, tolerance=0.05)
    assert v.passed and len(v.mismatches) == 1
    assert "allowed in this profile" in format_report(v)
    runs[1]["passes"][1]["metrics"]["t"]["exact_match,number"] = 0.40
    v = judged(runs, exact=False, tolerance=0.05)
    assert not v.passed
    assert "exact_match,number = 0.4 vs baseline 0.5000" in v.problems[0]


def test_task_data_is_what_the_generator_makes():
    assert lm_eval_task.check() == []
    docs = lm_eval_task.documents()
    assert len(docs["test"]) == lm_eval_task.NUM_DOCS
    assert lm_eval_task.documents() == docs


def scored_sample(doc_id: int,
                  scores: list[float],
                  cpu_hit_tokens: int = 0) -> dict:
    """A multiple-choice (one score: loglikelihood) sample: one prompt_logprobs
    request per choice, each giving (loglikelihood, is_greedy)."""
    pairs = [[score, False] for score in scores]
    return {
        "task": "mc",
        "doc_id": doc_id,
        "filter": "none",
        "kind": "loglikelihood",
        "prompt_hash": f"mc{doc_id}",
        "resps": [[pair] for pair in pairs],
        "filtered_resps": pairs,
        "cached_tokens": 0,
        "cpu_hit_tokens": cpu_hit_tokens
    }


def runs_with_scores(
    offload_scores: list[float],
    offload_hits: int = 0,
    ref_scores: tuple[float, ...] = (-3.0, -1.5, -2.0)
) -> list[dict]:
    runs = good_runs()
    for r, scores, hits in ((runs[0], list(ref_scores), 0),
                            (runs[1], offload_scores, offload_hits)):
        for p in r["passes"]:
            p["samples"].append(
                scored_sample(0, scores, hits if p["pass"] > 1 else 0))
    return runs


def test_loglikelihoods_compare_within_the_tolerance():
    v = judged(runs_with_scores([-3.0, -1.5 + LOGPROB_TOLERANCE / 2, -2.0]))
    assert v.passed, v.problems
    assert [r.identical for r in v.rows] == [None, 5, 5, 5]
    report = format_report(v)
    assert ("multiple-choice samples (prompt_logprobs requests): 1 per pass"
            in report)
    assert ("0 tokens of theirs came from the CPU tier: none, by design"
            in report)

    v = judged(runs_with_scores([-3.0, -1.5 + 2 * LOGPROB_TOLERANCE, -2.0]))
    assert not v.passed
    assert [(m.run, m.task) for m in v.mismatches] == [("m/offload", "mc")] * 2


def test_multiple_choice_must_pick_the_same_answer():
    # Every loglikelihood within the tolerance, but another choice wins.
    quarter = LOGPROB_TOLERANCE / 4
    v = judged(
        runs_with_scores([-3.0, -1.5, -1.5 + quarter],
                         ref_scores=(-3.0, -1.5, -1.5 - quarter)))
    assert not v.passed
    assert [(m.run, m.task) for m in v.mismatches] == [("m/offload", "mc")] * 2


def test_prompt_logprob_requests_must_not_load_from_the_cpu_tier():
    v = judged(runs_with_scores([-3.0, -1.5, -2.0], offload_hits=32))
    assert not v.passed
    assert any(
        "32 tokens of prompt-logprob requests were loaded from the CPU tier" in
        p for p in v.problems)


def _gate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pstack", "lm-eval", *args],
        cwd=REPO,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO / "scripts"),
            # The gate on this Python's vLLM: the oldest
            # line's, which runs the project's tests.
            "PSTACK_LINE": Line.default().oldest.version,
            "PSTACK_VENV": sys.prefix
        },
        text=True,
        capture_output=True,
        timeout=900)


def test_bad_arguments_get_one_line_and_a_hint():
    proc = _gate("--profile", "gpu")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: the gpu profile needs a model")
    assert "next: make lm-eval PROFILE=gpu MODEL=" in proc.stderr
    proc = _gate("--model", "llama-70b")
    assert proc.returncode == 2 and "no model 'llama-70b'" in proc.stderr
    proc = _gate("--config", "nope")
    assert proc.returncode == 2 and "unknown configuration nope" in proc.stderr


def test_list_shows_the_configurations():
    proc = _gate("--list")
    assert proc.returncode == 0, proc.stderr
    assert "tiny-llama/baseline" in proc.stdout
    assert '"block_size": 64' in proc.stdout
    proc = _gate("--profile", "gpu", "--model", "org/m", "--list")
    assert proc.returncode == 0 and "org/m/offload-b64-evicting" in proc.stdout


@pytest.mark.engine
def test_the_gate_fails_when_the_cpu_tier_returns_wrong_kv(tmp_path):
    """The gate is not vacuous: the tiny models' answers depend on the
    loaded KV."""
    proc = _gate("--model", "tiny-llama", "--config", "baseline", "--config",
                 "offload-b16-lru", "--task", "pstack_offload_gen",
                 "--inject-fault", "zero-cpu-tier", "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "fault injected" in proc.stdout
    assert "responses differ from the reference" in proc.stdout
    assert ("tiny-llama/offload-b16-lru pass 2: pstack_offload_gen doc_id"
            in proc.stdout)
    assert proc.stdout.splitlines()[-2].startswith("FAIL:")


def test_the_worker_without_fork_refuses_other_than_one_spec():
    # What it prints goes to the gate's worker log, with its exit status.
    proc = subprocess.run(
        [sys.executable, "-m", "pstack.harness.lm_eval.worker"],
        input=WorkerJob(specs=[], fork=False).to_json(),
        env={
            **os.environ, "PYTHONPATH": str(REPO / "scripts")
        },
        text=True,
        capture_output=True)
    assert proc.returncode == 1
    assert proc.stderr == "without fork the worker runs exactly one spec\n"
