"""The command line, `python -m pstack <command> [options]`: one table of
commands, each a module with `configure(parser)` (its arguments) and
`run(args, layout)` (its exit status). The Makefile's targets call it with
the Python that runs make; a command that needs the line's runtime
(`in_venv`) runs again in the line's venv, which its module's
`runs_in(args, layout)` may choose otherwise (None: here).

This table is the only description of the commands and of the Make targets:
`make help` prints it (`pstack help --make`), the Makefile carries none, and
tests/test_cli.py fails when a description is written down anywhere else.

Only the chosen command's module is imported: the patch queue runs with the
system Python and its standard library, before any venv exists.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .core.errors import UserError
from .core.line import Line

# Its Make target's variables: "" for a target without any, None for a
# command that has no target (`python -m pstack <command>` only).
NO_TARGET = None


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # under pstack
    summary: str
    make_vars: str | None = ""
    # Runs in the line's venv (`make setup` makes it), not in the Python
    # that runs make.
    in_venv: bool = False
    # Runs the line's vLLM: refused, in one line, on a line without a CPU
    # runtime (Line.refuse_without_runtime).
    needs_runtime: bool = False


@dataclass(frozen=True)
class Target:
    """A Make target that is not a command of its own, listed by `make
    help` after the target `after` ("": first)."""
    name: str
    summary: str
    make_vars: str = ""
    after: str = ""


COMMANDS = (
    # The patch queue.
    Command(
        "apply", "queue.apply",
        "(re)create vllm-src-<version> = base + series (FORCE=1: discard "
        "unexported commits, kept on a backup/ branch)", "FORCE=1"),
    Command(
        "export", "queue.export",
        "vllm-src's branch series -> the patch files, series and "
        "README.md's table in lines/<version>/"),
    Command("sync", "queue.sync",
            "apply, unless vllm-src holds work of its own (setup runs it)"),
    Command(
        "check-series", "queue.check_series",
        "apply + export changes nothing; each patch has a tagged subject, "
        "a body, its author's Signed-off-by:, Upstream-Status:"),
    Command(
        "rebase", "queue.rebase",
        "carry the line onto vLLM TO as the line lines/TO/; run again to "
        "continue after a conflict", "TO=<version>"),
    Command(
        "rebase-report", "queue.rebase_report",
        "the rebase tried on a copy in build/, past every conflict: "
        "docs/reports/<version>/report.md", "TO=<version ...>"),
    Command(
        "pr",
        "queue.pr",
        "out/<version>/pr/<nn>-<slug>/: title, body (the release's PR "
        "template) and patch, signed off by you, and a branch in vllm-src, "
        "per patch (default: all); runs the release's offline hooks on each",
        "N=<number|name>",
        in_venv=True),
    # The install: downloads, the runtime, the wheels.
    Command("fetch", "install.fetch",
            "download and verify the pinned sdist and wheels (cached)"),
    Command(
        "setup", "install.setup_env",
        ".venv-<version>: the line's CPU runtime (vLLM's CPU extension "
        "built, or its published CPU wheel), vllm-src-<version> installed"),
    Command("wheel",
            "install.wheels",
            "dist/<version>/: the CUDA wheel (official + the series' Python "
            "files) and the CPU wheel, each verified",
            in_venv=True),
    # The test and evaluation harness (in the line's venv).
    Command("models",
            "harness.tiny_models",
            "generate the tiny local test models (no model is downloaded)",
            in_venv=True),
    Command("test",
            "harness.run_tests",
            "what CI runs (LINE=: one line's part): lint, the project's "
            "tests, each tested line's vLLM tests and check-bisect",
            "ARGS=<pytest args>",
            in_venv=True),
    Command("check-bisect",
            "harness.check_bisect",
            "every prefix of the series compiles, lints and passes its own "
            "tests",
            "ARGS=--no-tests|--again",
            in_venv=True,
            needs_runtime=True),
    Command("stress",
            "harness.stress",
            "differential stress test: the engine without vs with the "
            "connector",
            "N=<requests> SEED= K=<pytest -k>",
            in_venv=True,
            needs_runtime=True),
    Command("slow-copies",
            "harness.slow_copies",
            "the line's offloading engine tests with each transfer (CPU "
            "tier, fs tier) made DELAY seconds late, in every process: tests "
            "that race transfers fail every time",
            "DELAY=<seconds> K=<pytest -k>",
            in_venv=True,
            needs_runtime=True),
    Command("lm-eval",
            "harness.lm_eval.gate",
            "correctness gate: the same lm-eval answers with offloading, "
            "served from the CPU tier",
            "PROFILE=gpu MODEL= ARGS=",
            in_venv=True,
            needs_runtime=True),
    Command("lm-eval-task",
            "harness.lm_eval.task",
            "regenerate (or --check) the gate's local task data",
            NO_TARGET,
            in_venv=True,
            needs_runtime=True),
    Command("demo",
            "harness.demo",
            "offloading on a local model: a cold run, then the prompts served "
            "from the CPU tier",
            "ARGS=",
            in_venv=True,
            needs_runtime=True),
    Command("bench",
            "harness.bench",
            "print the benchmark tables (B=: one of them)",
            "B=<name>",
            in_venv=True,
            needs_runtime=True),
    Command(
        "help", "cli", "list the commands (--make: the Make targets and their "
        "variables)"),
)

MAKE_ONLY = (
    Target(
        "all", "the default goal: make wheel (of the newest line with a "
        "CPU runtime unless LINE=)"),
    Target("rebase-abort",
           "undo the carry under way (TO= if several)",
           "TO=<version>",
           after="rebase"),
    Target("clean",
           "remove dist/ and build/ (keeps vllm-src and the caches)",
           after="bench"),
)

MAKE_HEADER = (
    "make <target> [VARIABLE=value ...]; LINE=<version> points "
    "any target at the line\nlines/<version>/ (default: the newest, "
    "the line users run); `python -m pstack\n<command> -h` has a "
    "command's options.\n")


def usage() -> str:
    width = max(len(c.name) for c in COMMANDS)
    lines = [f"  {c.name:<{width}}  {c.summary}" for c in COMMANDS]
    return ("usage: python -m pstack <command> [options]   (`<command> -h` "
            "for its options)\n\ncommands:\n" + "\n".join(lines))


def make_targets() -> list[Target]:
    """Every Make target, with its variables and description, in the
    order of COMMANDS.

    >>> [t.name for t in make_targets()][:3]
    ['all', 'apply', 'export']
    """
    targets = [t for t in MAKE_ONLY if not t.after]
    for command in COMMANDS:
        if command.make_vars is not None:
            targets.append(
                Target(command.name, command.summary, command.make_vars))
        targets += [t for t in MAKE_ONLY if t.after == command.name]
    return targets


def make_help() -> str:
    """`make help`: one line per target, `make <target>`, its description
    and the variables it takes."""
    targets = make_targets()
    width = max(len(t.name) for t in targets) + len("make ")
    lines = [
        f"  {'make ' + t.name:<{width}}  {t.summary}" +
        (f"  [{t.make_vars}]" if t.make_vars else "") for t in targets
    ]
    return MAKE_HEADER + "\n" + "\n".join(lines)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--make",
                        action="store_true",
                        help="the Make targets, for `make help`")


def run(args: argparse.Namespace, layout: Line) -> int:
    """`pstack help`: the commands, or with --make the Make targets."""
    print(make_help() if args.make else usage())
    return 0


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
    line = Line.default()
    if command.needs_runtime:
        line.refuse_without_runtime(f"make {command.name}")
    if command.in_venv:
        runs_in = getattr(module, "runs_in", lambda args, line: line)
        run_in_venv(runs_in(args, line), argv)
    return module.run(args, line)


def run_in_venv(line: Line | None, argv: list[str]) -> None:
    """Go on as `python -m pstack <argv>` in the venv of `line` (None: here)
    unless this Python is that venv's."""
    if line is None or Path(sys.prefix).resolve() == line.venv.resolve():
        return
    python = line.venv_python
    if not python.exists():
        raise UserError(f"{line.venv.name} does not exist",
                        f"`make setup LINE={line.version}` makes it")
    sys.stdout.flush()
    os.execv(python, [str(python), "-m", "pstack", *argv])
