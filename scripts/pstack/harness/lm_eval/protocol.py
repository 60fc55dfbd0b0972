"""What the gate and its worker process exchange.

The gate writes a `WorkerJob` as JSON to the worker's stdin; the worker
writes one `RunResult` per configuration as JSON to the spec's `output`
file (or {"error": ...}), and progress lines starting with "gate: " to its
stdout. Loglikelihood and multiple-choice samples (`kind`
"loglikelihood") come from prompt_logprobs requests.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

PROGRESS_PREFIX = "gate: "


@dataclass
class ConfigSpec:
    """One configuration for the worker: an engine and what to evaluate."""

    name: str
    model_args: dict[str, Any]  # lm-eval's vLLM model arguments
    tasks: list[str]
    include_path: str  # directory of the local tasks
    include_defaults: bool  # lm-eval's own tasks too
    limit: int | None
    output: str  # where the RunResult goes
    log: str  # where the engine's output goes
    passes: int = 2
    fault: str | None = None  # "zero-cpu-tier": the gate's self-test
    apply_chat_template: bool = False


@dataclass
class WorkerJob:
    specs: list[ConfigSpec]
    # Import once and fork a child per configuration (else: one spec, in
    # the worker process itself).
    fork: bool
    timeout: float = 900  # seconds per forked configuration

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerJob:
        data = json.loads(text)
        return cls(specs=[ConfigSpec(**s) for s in data["specs"]],
                   fork=data["fork"],
                   timeout=data.get("timeout", 900))


@dataclass
class Sample:
    """One evaluated document, with what its requests found cached."""

    task: str
    doc_id: int
    filter: str
    prompt_hash: str
    resps: Any
    filtered_resps: Any
    kind: str = "generate"  # or "loglikelihood"
    cached_tokens: int | None = None
    cpu_hit_tokens: int | None = None

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.task, self.doc_id, self.filter)

    @property
    def scored(self) -> bool:
        """A loglikelihood or multiple-choice sample."""
        return self.kind == "loglikelihood"


@dataclass
class PassResult:
    number: int  # "pass" in the JSON
    samples: list[Sample]
    metrics: dict[str, dict[str, Any]]  # task -> metric -> value
    seconds: float | None = None
    # The connector's counters during the pass (None without one).
    offload: dict[str, int] | None = None
    forced_steps: int = 0

    def to_json(self) -> dict:
        data = asdict(self)
        data["pass"] = data.pop("number")
        return data

    @classmethod
    def from_json(cls, data: dict) -> PassResult:
        return cls(number=data["pass"],
                   samples=[Sample(**s) for s in data["samples"]],
                   metrics=data["metrics"],
                   seconds=data.get("seconds"),
                   offload=data.get("offload"),
                   forced_steps=data.get("forced_steps", 0))


@dataclass
class RunResult:
    """One configuration's evaluation, or why there is none (`error`)."""

    label: str
    model: str
    connector: bool = False
    passes: list[PassResult] = field(default_factory=list)
    error: str | None = None
    offload_config: dict | None = None
    final_offload: dict[str, int] | None = None

    def to_json(self) -> dict:
        data = asdict(self)
        data["passes"] = [p.to_json() for p in self.passes]
        return data

    @classmethod
    def from_json(cls, data: dict) -> RunResult:
        return cls(
            label=data.get("label", data.get("name", "")),
            model=data.get("model", ""),
            connector=bool(data.get("connector")),
            passes=[PassResult.from_json(p) for p in data.get("passes", [])],
            error=data.get("error"),
            offload_config=data.get("offload_config"),
            final_offload=data.get("final_offload"))
