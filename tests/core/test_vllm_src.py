"""vllm-src's scratch worktrees share its compiled extensions."""

from __future__ import annotations

from conftest import git
from pstack.core.vllm_src import SERIES, VllmSrc
from pstack.queue.apply import apply

# As vllm-src holds them on a published CPU wheel: binaries git ignores
# (*.so), one in a subpackage, one a link to a file elsewhere.
BINARIES = ("vllm/_C.abi3.so", "vllm/_C_AVX2.abi3.so", "vllm/spinloop.abi3.so",
            "vllm/sub/fs_io_C.abi3.so")


def test_a_scratch_worktree_links_every_untracked_binary_of_vllm_src(
        stack, tmp_path):
    apply(stack)
    src = stack.src
    for rel in BINARIES[:-1]:
        (src / rel).write_bytes(rel.encode())
    elsewhere = tmp_path / "wheel" / "fs_io_C.abi3.so"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"fs_io")
    (src / "vllm" / "sub").mkdir()
    (src / BINARIES[-1]).symlink_to(elsewhere)
    # A binary the tree tracks is checked out, not linked.
    (src / "vllm" / "tracked.so").write_bytes(b"tracked")
    git(src, "add", "-f", "vllm/tracked.so")
    git(src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m",
        "track a binary")
    assert git(src, "status", "--porcelain") == ""

    tree = VllmSrc(src).scratch_worktree(tmp_path / "scratch", SERIES).path
    for rel in BINARIES:
        assert (tree / rel).is_symlink(), rel
        assert (tree / rel).read_bytes() == (src / rel).read_bytes()
    assert not (tree / "vllm" / "tracked.so").is_symlink()
    assert git(tree, "status", "--porcelain") == ""

    # Again, at another ref: the links stay as they are.
    VllmSrc(src).scratch_worktree(tree, "v0.0.1")
    assert all((tree / rel).is_symlink() for rel in BINARIES)
