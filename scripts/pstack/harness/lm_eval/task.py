"""The data of the local lm-eval tasks of the gate (ci/lm-eval/).

The gate's models have random weights, so the task is not about accuracy: it
makes prompts that exercise KV offloading. Every prompt starts with the same
long few-shot prefix (12 solved examples, `first_n` sampler), so requests share
many KV blocks, followed by a passage of 4..120 words of its own and an
addition question, so prompts end in blocks that only that request has and
their lengths cross offloaded-block boundaries (16 and 64 tokens) at many
points. Answers are short.

`pstack_offload_gen` generates the answer (generate_until). The loglikelihood
and multiple-choice tasks `pstack_offload_ll` and `pstack_offload_mc` (what
lm-eval's loglikelihood tasks send: `prompt_logprobs` requests) score the
answer, and for `_mc` two distractors too, after the same prompts, on the
first NUM_CHOICE_DOCS test documents (splits `choice_fewshot`, `choice`).

The files are generated from a fixed seed and committed; `python -m pstack
lm-eval-task` rewrites them, `--check` verifies them (a test does).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from ...core.errors import UserError
from ...core.line import REPO, Line
from ..tiny_models import WORDS

TASK_DIR = REPO / "ci" / "lm-eval"
TASK_NAME = "pstack_offload_gen"
NUM_DOCS = 48
NUM_FEWSHOT_DOCS = 16
# Each is scored 1 (loglikelihood) + 3 (multiple choice) times, with the
# whole prompt computed every time: fewer documents keep the gate short.
NUM_CHOICE_DOCS = 16
SEED = 20250709


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _doc(rng: random.Random, doc_id: int, passage_words: tuple[int,
                                                               int]) -> dict:
    a, b = rng.randint(0, 99), rng.randint(0, 99)
    n = rng.randint(*passage_words)
    # Sentences of 5..12 words until the passage has n words.
    sentences, left = [], n
    while left > 0:
        k = min(left, rng.randint(5, 12))
        sentences.append(_sentence(rng, k))
        left -= k
    return {
        "id": doc_id,
        "passage": " ".join(sentences),
        "a": a,
        "b": b,
        "answer": str(a + b)
    }


def documents() -> dict[str, list[dict]]:
    """Split name -> documents, the same on every machine."""
    rng = random.Random(SEED)
    fewshot = [_doc(rng, i, (4, 8)) for i in range(NUM_FEWSHOT_DOCS)]
    test = [_doc(rng, i, (4, 120)) for i in range(NUM_DOCS)]
    # The loglikelihood tasks' splits: the same few-shot prefix, then the first
    # test documents (a dataset's splits share one schema).
    return {
        "fewshot": fewshot,
        "test": test,
        "choice_fewshot": _with_choices(fewshot),
        "choice": _with_choices(test[:NUM_CHOICE_DOCS])
    }


def _with_choices(docs: list[dict]) -> list[dict]:
    """The documents with the answer and two distractors, in random order."""
    rng = random.Random(SEED + 1)
    out = []
    for doc in docs:
        answer = int(doc["answer"])
        choices = [
            answer, *(answer + d
                      for d in rng.sample([-11, -10, -2, -1, 1, 2, 10, 11], 2))
        ]
        rng.shuffle(choices)
        out.append({
            **doc,
            "choices": [str(c) for c in choices],
            "label": choices.index(answer),
        })
    return out


def render(docs: list[dict]) -> str:
    return "".join(json.dumps(d, sort_keys=True) + "\n" for d in docs)


def data_file(split: str) -> Path:
    return TASK_DIR / "data" / f"{split}.jsonl"


def check() -> list[Path]:
    """Committed data files that differ from what the generator gives."""
    return [
        data_file(split) for split, docs in documents().items()
        if not data_file(split).exists()
        or data_file(split).read_text() != render(docs)
    ]


def write() -> None:
    for split, docs in documents().items():
        path = data_file(split)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(docs))
        print(f"wrote {path.relative_to(REPO)} ({len(docs)} docs)")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check",
                        action="store_true",
                        help="verify the committed data instead of writing it")


def run(args: argparse.Namespace, layout: Line) -> int:
    if args.check:
        stale = check()
        if stale:
            names = ", ".join(str(p.relative_to(REPO)) for p in stale)
            raise UserError(
                f"task data differs from its generator: {names}",
                "run `PYTHONPATH=scripts python -m pstack lm-eval-task` and "
                "commit the result")
        print("task data is up to date")
        return 0
    write()
    return 0
