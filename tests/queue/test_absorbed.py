"""patches/upstream.toml: a patch absorbed in different forms by different
releases has an entry per form, and the form a release has decides."""

from __future__ import annotations

import subprocess

from pstack.core.gitrepo import GitRepo
from pstack.queue.absorbed import Evidence, UpstreamEntry, find

OLD_FORM = UpstreamEntry("A.patch", "vllm#1", (
    Evidence("vllm/a.py", "def old_form("),
    Evidence("vllm/a.py", "x: Optional[int]"),
))
NEW_FORM = UpstreamEntry("A.patch", "vllm#2", (
    Evidence("vllm/a.py", "def new_form("),
    Evidence("vllm/b.py", "x: int | None"),
))


def _release(tmp_path, files: dict[str, str]) -> GitRepo:
    repo = tmp_path / "release"
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    _commit(GitRepo(repo))
    return GitRepo(repo)


def _commit(repo: GitRepo) -> None:
    repo.git("add", "-A")
    repo.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm",
             "release")


def test_the_form_a_release_has_wholly_decides_whichever_entry_it_is(tmp_path):
    repo = _release(
        tmp_path, {
            "vllm/a.py": "def old_form():\n    x: Optional[int]\n",
            "vllm/b.py": "x: int | None\n",
        })
    for entries in ([OLD_FORM, NEW_FORM], [NEW_FORM, OLD_FORM]):
        finding = find(repo, "HEAD", entries)["A.patch"]
        assert finding.absorbed and finding.entry is OLD_FORM


def test_partly_absorbed_is_the_entry_with_most_evidence_found(tmp_path):
    repo = _release(
        tmp_path, {
            "vllm/a.py": "def new_form():\n    x: Optional[int]\n",
            "vllm/b.py": "x: int | None\n",
        })
    for entries in ([OLD_FORM, NEW_FORM], [NEW_FORM, OLD_FORM]):
        finding = find(repo, "HEAD", entries)["A.patch"]
        assert finding.absorbed and finding.entry is NEW_FORM
    (repo.path / "vllm/b.py").write_text("x = None\n")
    _commit(repo)
    # One text of each form: a tie goes to the entry listed first.
    for first, second in ([OLD_FORM, NEW_FORM], [NEW_FORM, OLD_FORM]):
        finding = find(repo, "HEAD", [first, second])["A.patch"]
        assert not finding.absorbed and finding.entry is first


def test_an_entry_that_says_what_upstream_lacks_is_partly_absorbed(tmp_path):
    repo = _release(tmp_path, {
        "vllm/a.py": "def new_form():\n",
        "vllm/b.py": "x: int | None\n",
    })
    part = UpstreamEntry(NEW_FORM.patch, NEW_FORM.upstream, NEW_FORM.evidence,
                         "the CPU platform's handler")
    finding = find(repo, "HEAD", [part])["A.patch"]
    assert not finding.absorbed and not finding.missing
    assert finding.describe() == (
        "partly absorbed by vllm#2: `vllm/a.py:1`, `vllm/b.py:1`; "
        "upstream lacks the CPU platform's handler")
