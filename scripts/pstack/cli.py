"""The command line, `python -m pstack <command> [options]`: one table of
commands, each a module with `configure(parser)` (its arguments) and
`run(args, layout)` (its exit status). The Makefile's targets call it.

Only the chosen command's module is imported: the patch queue runs with the
system Python and its standard library, before .venv exists.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass

from .core.errors import UserError
from .core.layout import Layout


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # under pstack
    summary: str


COMMANDS = (
    # The patch queue.
    Command("apply", "queue.apply",
            "(re)create vllm-src = base + patches/series"),
    Command("export", "queue.export",
            "vllm-src's series -> patches/ (and README's series table)"),
    Command("sync", "queue.sync",
            "apply, unless vllm-src holds work of its own"),
    Command("check-series", "queue.check_series",
            "apply + export is a no-op, patches are upstream-shaped"),
    Command(
        "rebase", "queue.rebase",
        "carry the line onto another vLLM release as a line of its own "
        "(--abort: undo)"),
    Command("rebase-report", "queue.rebase_report",
            "try the rebase on a copy: docs/rebase-<version>.md"),
    Command("pr", "queue.pr",
            "out/pr/<nn>-<slug>/: branch, title, body, patch per patch"),
    # The build.
    Command("fetch", "build.fetch",
            "download + verify the pinned sdist and wheel"),
    Command("setup", "build.setup_env",
            ".venv with the CPU runtime, vllm-src installed editable"),
    Command("wheel", "build.wheels",
            "dist/: CUDA wheel (official + overlay) and CPU wheel, verified"),
    # The test and evaluation harness (in .venv).
    Command("models", "harness.tiny_models",
            "generate the tiny local test models"),
    Command("test", "harness.run_tests",
            "lint, the project's tests, the series' vLLM tests, check-bisect"),
    Command("check-bisect", "harness.check_bisect",
            "every prefix of the series compiles, lints, passes its tests"),
    Command("stress", "harness.stress",
            "differential stress test, without vs with the connector"),
    Command("lm-eval", "harness.lm_eval.gate",
            "correctness gate: same answers with offloading"),
    Command("lm-eval-task", "harness.lm_eval.task",
            "regenerate (or --check) the gate's local task data"),
    Command("demo", "harness.demo",
            "offloading on a local model: cold, then from the CPU tier"),
    Command("bench", "harness.bench", "print the benchmark tables"),
)


def usage() -> str:
    width = max(len(c.name) for c in COMMANDS)
    lines = [f"  {c.name:<{width}}  {c.summary}" for c in COMMANDS]
    return ("usage: python -m pstack <command> [options]   (`<command> -h` "
            "for its options)\n\ncommands:\n" + "\n".join(lines))


def find(name: str) -> Command:
    for command in COMMANDS:
        if command.name == name:
            return command
    raise UserError(f"unknown command {name!r}",
                    "`python -m pstack --help` lists them")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    command = find(argv[0])
    module = importlib.import_module(f"{__package__}.{command.module}")
    parser = argparse.ArgumentParser(
        prog=f"pstack {command.name}",
        description=module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    module.configure(parser)
    args = parser.parse_args(argv[1:])
    return module.run(args, Layout.default())
