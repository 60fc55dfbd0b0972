"""The Patch model: file names from subjects, trailers, the summary."""

from __future__ import annotations

import subprocess

from conftest import commit_change, git
from pstack.core.gitrepo import GitRepo
from pstack.core.patch import Patch, file_name
from pstack.queue.apply import apply
from pstack.queue.export import export


def test_file_name_spells_the_whole_subject_as_git_does():
    assert (file_name("[KV offload][3/N] CPU<->GPU transfer handlers") ==
            "KV-offload-3-N-CPU-GPU-transfer-handlers.patch")
    # git cuts this one after 52 characters ("...-to-Reques.patch").
    assert (file_name("[Core] Move block hashes from KVCacheManager to "
                      "Request.block_hashes") ==
            "Core-Move-block-hashes-from-KVCacheManager-to-"
            "Request.block_hashes.patch")
    assert (file_name("[KV offload] Test `vllm serve` end to end...") ==
            "KV-offload-Test-vllm-serve-end-to-end.patch")
    assert file_name("a..b__c -- d.") == "a.b__c-d.patch"


def test_short_subjects_get_the_names_git_gives_them(stack, tmp_path):
    apply(stack)
    subjects = ["[Core] Spell out 3", "[Bugfix][CPU] Don't crash (x86)"]
    for i, subject in enumerate(subjects):
        commit_change(stack.src, "vllm/core.py", f"line {i + 3}\n", "x\n",
                      subject)
    out = subprocess.run([
        "git", "-C",
        str(stack.src), "format-patch", "-k", "-o",
        str(tmp_path), "v0.0.1..series"
    ],
                         text=True,
                         capture_output=True,
                         check=True).stdout
    git_names = [
        line.rsplit("/", 1)[1][len("0001-"):] for line in out.splitlines()
    ]
    assert git_names == [file_name(s) for s in subjects]


def test_trailers_status_body_and_summary_of_a_commit(stack):
    apply(stack)
    commit_change(stack.src,
                  "vllm/core.py",
                  "line 3\n",
                  "x\n",
                  "[Core] Summarize",
                  body="The engine crashed (e.g. on a CPU) when it ran. "
                  "Now it does not:\n\n- one\n- two")
    patch = Patch.from_commit(GitRepo(stack.src), "series")
    assert patch.subject == "[Core] Summarize"
    assert patch.upstream_status == "Pending"
    assert patch.trailer("Signed-off-by") == [patch.author]
    assert patch.dco_problem() is None and patch.problems() == []
    assert patch.body.endswith("- two")
    assert patch.summary == "The engine crashed (e.g. on a CPU) when it ran."
    intro = Patch("s", "a", "Two fixes, found by a test:\n\n- one", ())
    assert intro.summary == "Two fixes, found by a test."
    names = Patch("s", "a", "Other connectors (e.g. NIXL, i.e. P/D) load "
                  "too. More.", ())
    assert names.summary == "Other connectors (e.g. NIXL, i.e. P/D) load too."


def test_a_patch_reads_the_same_from_its_file_and_its_commit(stack):
    apply(stack)
    commit_change(stack.src, "vllm/core.py", "line 3\n", "x\n", "[Core] Same")
    (name, ) = export(stack)
    from_file = Patch.from_file(stack.patches / name)
    assert from_file == Patch.from_commit(GitRepo(stack.src), "series")
    author = git(stack.src, "log", "-1", "--format=%an <%ae>").strip()
    assert from_file.author == author
