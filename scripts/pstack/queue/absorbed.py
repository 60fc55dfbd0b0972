"""Patches that a newer vLLM release carries in its own form.

patches/upstream.toml records, for each such patch, the upstream change that
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

A patch whose diff is already in the release, line for line, needs no entry:
git finds it empty and the rebase drops it as "already upstream".

    [[absorbed]]
    patch = "Core-Move-block-hashes-....patch"   # its file in patches/
    upstream = "vllm-project/vllm#19728"          # where upstream has it
    evidence = [
        ["vllm/v1/request.py", "self.block_hashes: list[BlockHash] = []"],
    ]
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UserError
from ..core.gitrepo import GitRepo

UPSTREAM_TOML = "upstream.toml"


@dataclass(frozen=True)
class Evidence:
    path: str
    text: str


@dataclass(frozen=True)
class UpstreamEntry:
    patch: str  # file name in patches/
    upstream: str
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class Finding:
    """What a release has of one entry's evidence."""

    entry: UpstreamEntry
    found: tuple[str, ...]  # "path:line" of each text found
    missing: tuple[Evidence, ...]

    @property
    def absorbed(self) -> bool:
        return not self.missing

    def describe(self) -> str:
        """One line for people: what upstream has, where."""
        found = ", ".join(f"`{where}`" for where in self.found)
        if self.absorbed:
            return f"absorbed by {self.entry.upstream}: {found}"
        missing = ", ".join(f"`{e.path}` lacks `{e.text}`"
                            for e in self.missing)
        return (f"partly absorbed by {self.entry.upstream}: {found}; "
                f"{missing}")


def read_upstream_entries(patches: Path) -> list[UpstreamEntry]:
    """The entries of patches/upstream.toml (none if there is no file)."""
    path = patches / UPSTREAM_TOML
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
            entry = UpstreamEntry(item["patch"], item["upstream"], evidence)
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
    """patch file name -> Finding, for the entries of which `tree` (a
    commit or tag) has some evidence."""
    findings = {}
    files: dict[str, str | None] = {}
    for entry in entries:
        found, missing = [], []
        for evidence in entry.evidence:
            if evidence.path not in files:
                proc = repo.run("show", f"{tree}:{evidence.path}")
                files[evidence.path] = (proc.stdout
                                        if proc.returncode == 0 else None)
            content = files[evidence.path]
            line = _line_of(content, evidence.text) if content else None
            if line is None:
                missing.append(evidence)
            else:
                found.append(f"{evidence.path}:{line}")
        if found:
            findings[entry.patch] = Finding(entry, tuple(found),
                                            tuple(missing))
    return findings
