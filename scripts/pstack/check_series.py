"""`make check-series`: the series applies, re-exports byte for byte, and every patch
is upstream-shaped (tagged subject, a body saying why, DCO sign-off by its author,
and an Upstream-Status trailer)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from .common import Paths, UserError
from .srctree import apply, export, read_series

SUBJECT = re.compile(r"^(\[[^\]]+\])+ \S")
# Yocto's vocabulary; the bracketed part is required where it says why/where.
UPSTREAM_STATUS = re.compile(
    r"^(Pending|Backport|Inactive-Upstream( \[.+\])?|"
    r"(Submitted|Accepted|Denied|Inappropriate) \[.+\])$")


def _mailinfo(patch: Path) -> tuple[dict[str, str], str]:
    with tempfile.TemporaryDirectory() as tmp:
        msg, diff = Path(tmp) / "msg", Path(tmp) / "patch"
        with open(patch, "rb") as f:
            out = subprocess.run(["git", "mailinfo", "-k", str(msg), str(diff)], stdin=f,
                                 stdout=subprocess.PIPE, check=True).stdout.decode()
        headers = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
        return headers, msg.read_text()


def _trailers(message: str) -> list[tuple[str, str]]:
    out = subprocess.run(["git", "interpret-trailers", "--parse"], input=message,
                         text=True, stdout=subprocess.PIPE, check=True).stdout
    return [tuple(s.strip() for s in line.split(":", 1)) for line in out.splitlines()
            if ":" in line]


def dco_problem(author: str, trailers: list[tuple[str, str]]) -> str | None:
    """vLLM's DCO check: a Signed-off-by: trailer naming the author exactly."""
    signoffs = [v for k, v in trailers if k == "Signed-off-by"]
    if not signoffs:
        return "no Signed-off-by: trailer (DCO)"
    if author not in signoffs:
        return (f"no Signed-off-by: from the author {author} "
                f"(signed off by {', '.join(signoffs)})")
    return None


def lint_patch(patch: Path) -> list[str]:
    """Problems with one patch file, empty when it is upstream-shaped."""
    headers, message = _mailinfo(patch)
    problems = []
    subject = headers.get("Subject", "").strip()
    if not subject:
        problems.append("no subject")
    elif not SUBJECT.match(subject):
        problems.append(f"subject {subject!r} lacks a [Tag] prefix like [Core] or "
                        "[KV offload][1/N]")
    # interpret-trailers treats the first paragraph as the title: give it the subject.
    trailers = _trailers(f"{subject or 'x'}\n\n{message}")
    trailer_keys = {k for k, _ in trailers}
    body = [line for line in message.splitlines()
            if line.strip() and line.split(":", 1)[0] not in trailer_keys]
    if not body:
        problems.append("no body saying why the change is needed")
    author = f"{headers.get('Author', '')} <{headers.get('Email', '')}>"
    dco = dco_problem(author, trailers)
    if dco:
        problems.append(dco)
    statuses = [v for k, v in trailers if k == "Upstream-Status"]
    if len(statuses) != 1:
        problems.append("needs exactly one Upstream-Status: trailer "
                        "(Pending, Submitted [url], Accepted [commit], Backport, "
                        "Denied [why], Inappropriate [why])")
    elif not UPSTREAM_STATUS.match(statuses[0]):
        problems.append(f"Upstream-Status {statuses[0]!r} is not in the vocabulary")
    return problems


def lint_series(paths: Paths) -> None:
    failures = []
    for name in read_series(paths):
        for problem in lint_patch(paths.patches / name):
            failures.append(f"{name}: {problem}")
    if failures:
        raise UserError("; ".join(failures), "reword the commit in vllm-src "
                        "(`git -C vllm-src rebase -i v<base>`, `reword`), then `make export`")


def check_series(paths: Paths) -> None:
    lint_series(paths)
    before = {p.name: p.read_bytes() for p in paths.patches.iterdir() if p.is_file()}
    apply(paths)
    export(paths)
    after = {p.name: p.read_bytes() for p in paths.patches.iterdir() if p.is_file()}
    changed = sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))
    if changed:
        raise UserError("apply + export changed " + ", ".join(changed),
                        "the patch files are not what `make export` writes: review "
                        "`git diff patches/` and commit the result")
    status = subprocess.run(["git", "-C", str(paths.patches), "status", "--porcelain", "."],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if status.returncode == 0 and status.stdout.strip():
        files = ", ".join(line[3:] for line in status.stdout.splitlines())
        raise UserError(f"patches/ has uncommitted changes: {files}",
                        "commit patches/ (the series is the product)")
    print(f"check-series: {len(read_series(paths))} patches apply, re-export "
          "identically and are upstream-shaped")
