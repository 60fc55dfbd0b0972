"""`make pr`: PR material per patch, with its prerequisites and DCO."""

from __future__ import annotations

import pytest
from conftest import commit_change, git
from pstack.core.errors import UserError
from pstack.core.patch import Patch
from pstack.queue.apply import apply
from pstack.queue.export import export

PERSON = "Grace Hopper <grace@example.com>"
ALIAS = "vLLM KV offload team <kv-offload@vllm-patch-stack.invalid>"


def _git_identity(tmp_path, monkeypatch, name: str | None,
                  email: str | None) -> None:
    """The git config of the person running `make pr`: a global one of
    these only, whatever the machine's."""
    config = tmp_path / "person.gitconfig"
    config.write_text("[user]\n" + (f"\tname = {name}\n" if name else "") +
                      (f"\temail = {email}\n" if email else ""))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture(autouse=True)
def person(tmp_path, monkeypatch) -> None:
    _git_identity(tmp_path, monkeypatch, "Grace Hopper", "grace@example.com")


def _series_for_pr(stack) -> None:
    apply(stack)
    commit_change(stack.src,
                  "vllm/core.py",
                  "line 3\n",
                  "line three\n",
                  "[Core] A",
                  body="A is needed because of X.\n\nIt does Y.")
    commit_change(stack.src, "vllm/version.py", "0.0.1", "0.0.1+b", "[Misc] B")
    commit_change(stack.src,
                  "tests/test_core.py",
                  "assert True",
                  "assert 1 + 1 == 2",
                  "[Core] C",
                  status="Submitted [https://example.invalid/pull/1]")
    commit_change(stack.src, "vllm/core.py", "line 15\n", "line fifteen\n",
                  "[Core] D")
    export(stack)


def test_pr_writes_title_body_patch_and_branch_with_prerequisites(
        stack, tmp_path):
    from pstack.queue.pr import pr
    _series_for_pr(stack)
    out = tmp_path / "out"
    # The fixture's vllm/core.py is lines of words, not Python: the base's
    # linters, run on the branch of D, say so (B changes no Python).
    with pytest.raises(UserError,
                       match=r"linters failed: 4 ruff: issues in "
                       r"vllm/core.py") as err:
        pr(stack, ["4", "b"], out, results_file=tmp_path / "none.json")
    assert "<linter>.log" in err.value.hint
    assert sorted(f.name for f in out.iterdir()) == ["02-misc-b", "04-core-d"]
    d = out / "04-core-d"
    assert "SyntaxError" in (d / "ruff.log").read_text()
    assert "- ruff: issues in vllm/core.py" in (d / "body.md").read_text()
    assert "- ruff: ok" in (out / "02-misc-b" / "body.md").read_text()
    assert (d / "title.txt").read_text() == "[Core] D\n"
    body = (d / "body.md").read_text()
    assert ("## Purpose\n\nWhy: the test needs a change.\n\n"
            "Part of RFC #19854.\n" in body)
    assert "Upstream-Status" not in body
    assert "Signed-off-by" not in body.split("---")[0]
    # D changes core.py, as A does: A is its prerequisite; B and C are not.
    assert ("- [Core] A (not submitted yet: `make pr N=1`, branch "
            "`pr/01-core-a`) (also changes `vllm/core.py`)" in body)
    assert "[Misc] B" not in body
    assert "vllm/core.py | 2 +-" in body
    assert "## Test Plan" in body
    assert "pre-commit run --files vllm/core.py" in body
    assert "No results recorded" in body
    # Ada wrote and signed off the patch; Grace sends it and signs off too.
    assert ("DCO: ok, signed off by the author Ada Lovelace "
            f"<ada@example.com> and by {PERSON}\n" in body)
    log = git(stack.src, "log", "--format=%s",
              "v0.0.1..pr/04-core-d").split("\n")
    assert log[:2] == ["[Core] D", "[Core] A"] and len(log) == 3  # trailing ""
    patch = (d / "patch").read_text()
    assert "Subject: [Core] D" in patch and "+line fifteen" in patch
    git(stack.src, "checkout", "-q", "--detach", "v0.0.1")
    git(stack.src, "am", "-q",
        str(out / "02-misc-b" / "patch"))  # applies on the base
    b = (out / "02-misc-b" / "body.md").read_text()
    assert "Nothing: applies directly on vLLM 0.0.1." in b


def test_pr_quotes_recorded_results_and_submitted_dependencies(
        stack, tmp_path):
    import json

    from pstack.queue.pr import pr
    _series_for_pr(stack)
    commit_change(stack.src, "tests/test_core.py", "1 + 1 == 2", "2 + 2 == 4",
                  "[Core] E")
    export(stack)
    tree = git(stack.src, "rev-parse", "series^{tree}").strip()
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps([{
            "subject": "[Core] E",
            "tree": tree,
            "date": "2025-01-02 03:04:05",
            "checks": {
                "compile": "ok",
                "tests": "ok"
            },
            "ran": "1 file(s) here: 1 passed"
        }]))
    pr(stack, ["5"], tmp_path / "out", results_file=results)
    body = (tmp_path / "out" / "05-core-e" / "body.md").read_text()
    assert "`make check-bisect` on 2025-01-02 03:04:05" in body
    assert "- compile: ok, tests: ok" in body
    assert "1 file(s) here: 1 passed" in body
    assert "- [Core] C (https://example.invalid/pull/1)" in body
    assert "pytest -q tests/test_core.py" in body


def test_pr_detects_missing_or_foreign_sign_off(stack, tmp_path):
    from pstack.queue.pr import pr
    apply(stack)
    commit_change(stack.src,
                  "vllm/core.py",
                  "line 3\n",
                  "x\n",
                  "[Core] Unsigned",
                  signoff=False)
    f = stack.src / "vllm/core.py"
    f.write_text(f.read_text().replace("line 9\n", "y\n"))
    git(
        stack.src, "-c", "user.name=Ada Lovelace", "-c",
        "user.email=ada@example.com", "commit", "-q", "-a", "-m",
        "[Core] Foreign\n\nWhy.\n\nUpstream-Status: Pending\n"
        "Signed-off-by: Eve <eve@example.com>\n")
    export(stack)
    with pytest.raises(UserError,
                       match=r"DCO check failed: 1 Core-Unsigned.patch: no "
                       r"Signed-off-by.*; 2 Core-Foreign.patch: no "
                       r"Signed-off-by: from the author Ada Lovelace "
                       r"<ada@example.com> \(signed off by Eve") as err:
        pr(stack, [], tmp_path / "out", results_file=tmp_path / "none.json")
    assert "make pr" in err.value.hint
    body = (tmp_path / "out" / "02-core-foreign" / "body.md").read_text()
    assert "DCO: FAILED: no Signed-off-by: from the author" in body


def test_pr_names_an_unknown_patch(stack, tmp_path):
    from pstack.queue.pr import pr
    _series_for_pr(stack)
    with pytest.raises(UserError, match="no patch 9: the series has 4"):
        pr(stack, ["9"], tmp_path / "out")
    with pytest.raises(UserError, match="'core' matches 3 patches"):
        pr(stack, ["core"], tmp_path / "out")


def test_pr_prerequisites_follow_imports():
    from pstack.queue.pr import SeriesPatch, imported_files, prerequisites
    diff = ("+from vllm.v1.kv_offload.mediums import GPULoadStoreSpec\n"
            "+from vllm.v1.kv_offload import worker\n"
            "+import vllm.v1.core.sched.output\n"
            " from vllm.config import VllmConfig\n")
    files = imported_files(diff)
    assert "vllm/v1/kv_offload/mediums.py" in files
    assert "vllm/v1/kv_offload/worker.py" in files  # maybe a submodule
    assert "vllm/v1/core/sched/output.py" in files
    # Context lines are not added imports.
    assert "vllm/config.py" not in files

    def patch(n, files, imports=()):
        return SeriesPatch(n,
                           f"{n}.patch",
                           "c",
                           Patch("s", "a", "m", ()),
                           list(files),
                           imports=set(imports))

    patches = [
        patch(1, ["vllm/v1/core/sched/output.py"]),
        patch(2, ["vllm/v1/kv_offload/mediums.py"]),
        patch(3, ["vllm/other.py"]),
        patch(4, ["vllm/v1/kv_offload/cpu.py"], files)
    ]
    # 4 shares no file with 1 or 2 but imports what they add.
    assert prerequisites(patches, 4) == [1, 2]


def _commit_as_alias(src, path: str, old: str, new: str, subject: str) -> None:
    """A patch as the series has them: the project alias's, signed off by
    it, with an Upstream-Status."""
    f = src / path
    f.write_text(f.read_text().replace(old, new))
    git(
        src, "-c", "user.name=vLLM KV offload team", "-c",
        "user.email=kv-offload@vllm-patch-stack.invalid", "commit", "-q", "-a",
        "-m", f"{subject}\n\nWhy.\n\nUpstream-Status: Pending\n"
        f"Signed-off-by: {ALIAS}\n")


def test_pr_commits_are_the_persons_signed_off_by_them_only(stack, tmp_path):
    from pstack.queue.pr import pr
    apply(stack)
    _commit_as_alias(stack.src, "vllm/version.py", "0.0.1", "0.0.1+a",
                     "[Misc] A")
    _commit_as_alias(stack.src, "vllm/version.py", "0.0.1+a", "0.0.1+c",
                     "[Misc] C")
    _commit_as_alias(stack.src, "tests/test_core.py", "assert True",
                     "assert 1 + 1 == 2", "[Core] B")
    export(stack)
    out = tmp_path / "out"
    # 1 and 2 are the series up to them (2 changes what 1 does); 3 is
    # picked onto the base alone: every commit of each branch is sent.
    pr(stack, [], out, results_file=tmp_path / "none.json")
    commits = git(stack.src, "rev-list", "v0.0.1..pr/02-misc-c",
                  "v0.0.1..pr/03-core-b").split()
    assert len(commits) == 3
    for commit in commits:
        who = git(stack.src, "log", "-1", "--format=%an <%ae>|%cn <%ce>",
                  commit).strip()
        assert who == f"{PERSON}|{PERSON}"
        message = git(stack.src, "log", "-1", "--format=%B", commit)
        assert message.endswith(f"Why.\n\nSigned-off-by: {PERSON}\n\n")
    for folder in ("01-misc-a", "02-misc-c", "03-core-b"):
        patch = (out / folder / "patch").read_text()
        assert f"From: {PERSON}\n" in patch
        assert patch.count("Signed-off-by:") == 1
        assert f"Signed-off-by: {PERSON}\n" in patch
        assert "Upstream-Status" not in patch and ".invalid" not in patch
        body = (out / folder / "body.md").read_text()
        assert f"DCO: ok, signed off by the author {PERSON}\n" in body
    # The series itself is the project's still.
    assert git(stack.src, "log", "-1", "--format=%ae",
               "series").strip() == "kv-offload@vllm-patch-stack.invalid"


@pytest.mark.parametrize(
    "name, email, says",
    [(None, "grace@example.com", "git has no user.name or user.email"),
     ("Grace Hopper", None, "git has no user.name or user.email"),
     ("vLLM KV offload team", "kv-offload@vllm-patch-stack.invalid",
      "user.email is kv-offload@vllm-patch-stack.invalid, the project's "
      "address, not a person's"),
     ("Grace Hopper", "noreply@vllm.invalid", "not a person's")])
def test_pr_refuses_without_a_persons_identity(stack, tmp_path, monkeypatch,
                                               name, email, says):
    from pstack.queue.pr import pr
    _series_for_pr(stack)
    _git_identity(tmp_path, monkeypatch, name, email)
    with pytest.raises(UserError, match="signs the PRs off as you") as err:
        pr(stack, [], tmp_path / "out", results_file=tmp_path / "none.json")
    assert says in str(err.value) and "\n" not in str(err.value)
    assert "git config user.email" in err.value.hint
    # Nothing written.
    assert not (tmp_path / "out").exists()
    assert git(stack.src, "branch", "--list", "pr/*") == ""
