"""The gate's verdict: every pass of every configuration compared with the
reference run of its model, and the report printed from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .protocol import PassResult, RunResult, Sample

MAX_MISMATCH_LINES = 20
# Largest difference of a loglikelihood between a run and the reference in
# the exact (cpu) profile: the same requests, in bfloat16, in batches that
# may differ between the runs.
LOGPROB_TOLERANCE = 1e-3


@dataclass
class Row:
    """One pass of one configuration, as the report shows it."""

    run: str
    pass_number: int
    samples: int
    identical: int | None  # None: the reference itself
    connector: bool
    cpu_hit_samples: int  # generated samples whose requests loaded KV
    cpu_hit_tokens: int
    scored_samples: int  # loglikelihood and multiple-choice samples
    scored_cpu_hit_tokens: int
    loaded_tokens: int | None
    stored_blocks: int | None
    seconds: float | None
    metrics: dict[str, float]


@dataclass
class Mismatch:
    run: str
    pass_number: int
    task: str
    doc_id: int
    filter: str
    expected: Any
    got: Any


@dataclass
class Verdict:
    rows: list[Row] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    exact: bool = True

    @property
    def passed(self) -> bool:
        return not self.problems and (not self.exact or not self.mismatches)


def _metric_items(metrics: dict) -> dict[str, float]:
    return {
        f"{task}:{name}": float(v)
        for task, m in metrics.items()
        for name, v in m.items() if isinstance(v, (int, float))
    }


def _close(a, b, tolerance: float) -> bool:
    """Equal, except that numbers (loglikelihoods) may differ by
    tolerance."""
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and not isinstance(a, bool) and not isinstance(b, bool)
                and abs(a - b) <= tolerance)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(
            _close(x, y, tolerance) for x, y in zip(a, b))
    return a == b


def _choice(sample: Sample) -> int | None:
    """The answer a multiple-choice sample picks: its most likely choice."""
    scores = sample.filtered_resps
    if len(scores) < 2 or not all(isinstance(x, list) and x for x in scores):
        return None
    return max(range(len(scores)), key=lambda i: scores[i][0])


def same_answer(ref: Sample, sample: Sample) -> bool:
    """The same generated text; or the same choice, the same is_greedy flags
    and loglikelihoods within LOGPROB_TOLERANCE."""
    return (_close(ref.resps, sample.resps, LOGPROB_TOLERANCE) and _close(
        ref.filtered_resps, sample.filtered_resps, LOGPROB_TOLERANCE)
            and _choice(ref) == _choice(sample))


def _references(runs: list[RunResult]) -> dict[str, RunResult]:
    """Model -> its baseline run (the first of its runs without one)."""
    refs: dict[str, RunResult] = {}
    for run in sorted((r for r in runs if r.error is None),
                      key=lambda r: r.connector):
        refs.setdefault(run.model, run)
    return refs


def _judge_pass(v: Verdict, run: RunResult, p: PassResult, ref_run: RunResult,
                tolerance: float) -> None:
    where = f"{run.label} pass {p.number}"
    reference = ref_run.passes[0]
    ref = {s.key: s for s in reference.samples}
    samples = {s.key: s for s in p.samples}
    identical = 0
    for key, s in samples.items():
        r = ref.get(key)
        if r is None:
            v.problems.append(f"{where}: {key[0]} doc {key[1]} is not in the "
                              "reference")
        elif r.prompt_hash != s.prompt_hash:
            v.problems.append(f"{where}: {key[0]} doc {key[1]}: the prompt "
                              "differs from the reference (task drift)")
        elif not same_answer(r, s):
            v.mismatches.append(
                Mismatch(run.label, p.number, *key, r.resps, s.resps))
        else:
            identical += 1
    missing = len(set(ref) - set(samples))
    if missing:
        v.problems.append(f"{where}: {missing} reference samples missing")
    metrics = _metric_items(p.metrics)
    if not v.exact:
        for name, ref_value in _metric_items(reference.metrics).items():
            value = metrics.get(name)
            if value is None or abs(value - ref_value) > tolerance:
                v.problems.append(
                    f"{where}: {name} = {value} vs baseline {ref_value:.4f} "
                    f"(tolerance {tolerance})")
    off = p.offload or {}
    generated = [s for s in samples.values() if not s.scored]
    scored = [s for s in samples.values() if s.scored]
    cpu_hit_samples = sum(1 for s in generated if s.cpu_hit_tokens)
    scored_hit_tokens = sum(s.cpu_hit_tokens or 0 for s in scored)
    if run.connector and p.number > 1 and generated and (
            not off.get("loaded_tokens") or not cpu_hit_samples):
        v.problems.append(
            f"{where}: no evidence of loads from the CPU tier (loaded_tokens "
            f"{off.get('loaded_tokens', 0)}, {cpu_hit_samples} samples with "
            "CPU hits)")
    if scored_hit_tokens:
        v.problems.append(
            f"{where}: {scored_hit_tokens} tokens of prompt-logprob requests "
            "were loaded from the CPU tier (their prompt logprobs cannot be "
            "computed)")
    is_ref = run is ref_run and p.number == 1
    v.rows.append(
        Row(run=run.label,
            pass_number=p.number,
            samples=len(samples),
            identical=None if is_ref else identical,
            connector=run.connector,
            cpu_hit_samples=cpu_hit_samples,
            cpu_hit_tokens=sum(s.cpu_hit_tokens or 0 for s in generated),
            scored_samples=len(scored),
            scored_cpu_hit_tokens=scored_hit_tokens,
            loaded_tokens=off.get("loaded_tokens"),
            stored_blocks=off.get("stored_blocks"),
            seconds=p.seconds,
            metrics=metrics))


def judge(runs: list[RunResult],
          exact: bool = True,
          tolerance: float = 0.0) -> Verdict:
    """Compare every pass of every run with the reference of its model.

    The reference is pass 1 of the model's baseline run (the first run of
    the model if it has no baseline). `exact`: responses must be identical;
    otherwise metrics must be within `tolerance` of the reference and
    differing responses are only listed.
    """
    v = Verdict(exact=exact)
    refs = _references(runs)
    for run in runs:
        if run.error is not None:
            v.problems.append(f"{run.label}: {run.error}")
            continue
        ref_run = refs[run.model]
        if not ref_run.passes[0].samples:
            v.problems.append(f"{run.label}: no samples were evaluated")
        for p in run.passes:
            _judge_pass(v, run, p, ref_run, tolerance)
    return v


def _short(value, width: int = 48) -> str:
    """A response for one line: the generated string's repr (control
    characters escaped)."""
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def _cell(x) -> str:
    return "-" if x is None else str(x)


def format_report(v: Verdict) -> str:
    w = max([len(r.run) for r in v.rows] + [3])
    lines = [
        f"{'run':<{w}} {'pass':>4} {'samples':>7} {'identical':>9} "
        f"{'cpu-hit':>7} {'hit tok':>8} {'loaded':>8} {'stored':>7} "
        f"{'s':>6}  metrics"
    ]
    for r in v.rows:
        metrics = " ".join(f"{k.split(':', 1)[1]}={val:.3f}"
                           for k, val in r.metrics.items())
        identical = "ref" if r.identical is None else r.identical
        hit_samples = r.cpu_hit_samples if r.connector else None
        hit_tokens = r.cpu_hit_tokens if r.connector else None
        lines.append(f"{r.run:<{w}} {r.pass_number:>4} {r.samples:>7} "
                     f"{identical:>9} {_cell(hit_samples):>7} "
                     f"{_cell(hit_tokens):>8} {_cell(r.loaded_tokens):>8} "
                     f"{_cell(r.stored_blocks):>7} {_cell(r.seconds):>6}  "
                     f"{metrics}")
    lines.append("(cpu-hit: generated samples whose request loaded KV from "
                 "the CPU tier; hit tok: their tokens; loaded/stored: the "
                 "connector's counters during the pass)")
    scored = max((r.scored_samples for r in v.rows), default=0)
    if scored:
        hit = sum(r.scored_cpu_hit_tokens for r in v.rows if r.connector)
        lines.append(
            "loglikelihood and multiple-choice samples (prompt_logprobs "
            f"requests): {scored} per pass, compared by choice, is_greedy and "
            f"loglikelihood (within {LOGPROB_TOLERANCE:g}); {hit} tokens of "
            "theirs came from the CPU tier" +
            (": none, by design: vLLM computes the whole prompt of a request "
             "with prompt_logprobs, so these samples check that the "
             "connector stays out of their way, not loads" if not hit else ""))
    if v.mismatches:
        lines.append(
            f"{len(v.mismatches)} responses differ from the reference" +
            ("" if v.exact else " (allowed in this profile)") + ":")
        for m in v.mismatches[:MAX_MISMATCH_LINES]:
            lines.append(f"  {m.run} pass {m.pass_number}: {m.task} doc_id "
                         f"{m.doc_id} [{m.filter}]: expected "
                         f"{_short(m.expected)} got {_short(m.got)}")
        if len(v.mismatches) > MAX_MISMATCH_LINES:
            more = len(v.mismatches) - MAX_MISMATCH_LINES
            lines.append(f"  ... {more} more in the report file")
    for p in v.problems:
        lines.append(f"problem: {p}")
    runs = len({r.run for r in v.rows})
    offload_rows = [r for r in v.rows if r.connector and r.pass_number > 1]
    samples = max((r.samples for r in v.rows), default=0)
    if v.passed:
        if offload_rows:
            loads = "; pass 2 loaded from the CPU tier in " + ", ".join(
                f"{r.run} ({r.cpu_hit_samples}/{r.samples} samples, "
                f"{r.loaded_tokens} tokens)" for r in offload_rows)
        else:
            loads = "; no offloading configuration ran"
        lines.append(f"PASS: {runs} configurations x 2 passes, {samples} "
                     "samples each: " +
                     ("identical responses" if v.
                      exact else "accuracy within tolerance") + loads)
    else:
        lines.append(f"FAIL: {len(v.mismatches) if v.exact else 0} "
                     f"mismatches, {len(v.problems)} problems")
    return "\n".join(lines)
