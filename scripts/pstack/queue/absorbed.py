"""Patches that a newer vLLM release carries in its own form.

lines/upstream.toml records, for each such patch, the upstream change that
absorbed it and the evidence: texts that upstream's form of the change has,
each in a file. When `make rebase` or `make rebase-report` moves the series
onto a release, every entry is checked against that release's own tree (the
imported sdist, before any patch applies):

- all of its evidence found: the patch is *absorbed*; it is left out of the
  rebased series, and the report names the file and line of each text;
- some found: *partly absorbed*; the patch is still applied (its conflicts
  are where upstream's form and the patch's meet), and the report says which
  parts upstream has;
- none found: the release predates the upstream change; nothing is said.

A patch that releases absorbed in different forms (0.10.2's and 0.32's, say)
has an entry per form: the entry whose evidence the release has wholly
decides; short of that, the one with the most evidence found (the first
listed, on a tie) says what is partly there.

A patch whose diff is already in the release, line for line, needs no entry:
git finds it empty and the rebase drops it as "already upstream".

    [[absorbed]]
    patch = "Core-Move-block-hashes-....patch"   # its file in patches/
    upstream = "vllm-project/vllm#19728"          # where upstream has it
    evidence = [
        ["vllm/v1/request.py", "self.block_hashes: list[BlockHash] = []"],
    ]
    lacks = "..."   # optional: the part upstream's form does not have

An entry with `lacks` says upstream has only part of the patch: its patch is
partly absorbed, and still applied, however much of its evidence is found.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UserError
from ..core.gitrepo import GitRepo


@dataclass(frozen=True)
class Evidence:
    path: str
    text: str


@dataclass(frozen=True)
class UpstreamEntry:
    patch: str  # file name in patches/
    upstream: str
    evidence: tuple[Evidence, ...]
    # What upstream's form lacks of the patch, if it has only part of it:
    # the patch is then partly absorbed however much evidence is found.
    lacks: str | None = None


@dataclass(frozen=True)
class Finding:
    """What a release has of one entry's evidence."""

    entry: UpstreamEntry
    found: tuple[str, ...]  # "path:line" of each text found
    missing: tuple[Evidence, ...]

    @property
    def absorbed(self) -> bool:
        return not self.missing and self.entry.lacks is None

    def describe(self) -> str:
        """One line for people: what upstream has, where."""
        found = ", ".join(f"`{where}`" for where in self.found)
        if self.absorbed:
            return f"absorbed by {self.entry.upstream}: {found}"
        missing = [f"`{e.path}` lacks `{e.text}`" for e in self.missing]
        if self.entry.lacks:
            missing.append(f"upstream lacks {self.entry.lacks}")
        return (f"partly absorbed by {self.entry.upstream}: {found}; "
                f"{', '.join(missing)}")


def read_upstream_entries(path: Path) -> list[UpstreamEntry]:
    """The entries of the upstream record at `path`, lines/upstream.toml
    (none if there is no file)."""
    if not path.exists():
        return []
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path} is not valid TOML: {e}") from None
    entries = []
    for i, item in enumerate(data.get("absorbed", []), 1):
        where = f"{path} entry {i}"
        try:
            evidence = tuple(
                Evidence(path, text) for path, text in item["evidence"])
            entry = UpstreamEntry(item["patch"], item["upstream"], evidence,
                                  item.get("lacks"))
        except (KeyError, TypeError, ValueError):
            raise UserError(
                f"{where} needs patch, upstream and evidence (a list of "
                "[file, text] pairs)") from None
        if not evidence:
            raise UserError(f"{where} ({entry.patch}) has no evidence")
        entries.append(entry)
    return entries


def _line_of(content: str, text: str) -> int | None:
    index = content.find(text)
    if index < 0:
        return None
    return content.count("\n", 0, index) + 1


def find(repo: GitRepo, tree: str,
         entries: list[UpstreamEntry]) -> dict[str, Finding]:
    """patch file name -> Finding, for the patches of which `tree` (a
    commit or tag) has some evidence: of a patch's entries, the one found
    wholly, else the one with the most evidence found."""
    files: dict[str, str | None] = {}

    def content(path: str) -> str | None:
        if path not in files:
            proc = repo.run("show", f"{tree}:{path}")
            files[path] = proc.stdout if proc.returncode == 0 else None
        return files[path]

    findings: dict[str, Finding] = {}
    for entry in entries:
        finding = _finding(entry, content)
        best = findings.get(entry.patch)
        if finding.found and (best is None or _rank(finding) > _rank(best)):
            findings[entry.patch] = finding
    return findings


def _finding(entry: UpstreamEntry, content: Callable[[str],
                                                     str | None]) -> Finding:
    found, missing = [], []
    for evidence in entry.evidence:
        text = content(evidence.path)
        line = _line_of(text, evidence.text) if text else None
        if line is None:
            missing.append(evidence)
        else:
            found.append(f"{evidence.path}:{line}")
    return Finding(entry, tuple(found), tuple(missing))


def _rank(finding: Finding) -> tuple[bool, int]:
    return finding.absorbed, len(finding.found)
