"""The fate of each patch of a rebase step, decided once (fate_of) and only
rendered by the reports."""

from __future__ import annotations

import pytest
from pstack.core.pin import BasePin
from pstack.queue.rebase_in_place import OldPatch, RebaseState, Result
from pstack.queue.rebase_render import outcome, status
from pstack.queue.rebase_walk import Conflict, Fate, fate_of

PIN = BasePin(version="0.0.1",
              sdist="vllm-0.0.1.tar.gz",
              sdist_sha256="0" * 64,
              wheel="vllm-0.0.1-py3-none-any.whl",
              wheel_sha256="1" * 64)

PATCHES = [
    OldPatch(n, f"{n}" * 40, f"P{n}.patch", f"[Core] P{n}")
    for n in range(1, 8)
]
ABSORBED, UPSTREAM, CONFLICT, RESOLVED, AFTER, EMPTY, PARTLY = PATCHES


def _fates() -> dict[str, object]:
    state = RebaseState(old_pin=PIN,
                        new_pin=PIN,
                        old_tip="",
                        old_upstream="",
                        patches=PATCHES,
                        partly_absorbed={PARTLY.commit: "partly by #2"})
    result = Result(version="0.0.2",
                    dropped=[UPSTREAM.subject],
                    absorbed={ABSORBED.subject: "absorbed by #1"},
                    skipped=[EMPTY.subject])
    conflicts = [
        Conflict(p.number, p.subject, {"vllm/core.py": "UU"}, {}, "")
        for p in (CONFLICT, RESOLVED)
    ]
    recorded = {RESOLVED.name: "lines/0.0.2/P4.patch"}
    return {
        p.name: fate_of(p, state, result, conflicts, recorded)
        for p in PATCHES
    }


@pytest.mark.parametrize("patch, fate, short, row", [
    (ABSORBED, Fate.ABSORBED, "absorbed", "dropped: absorbed by #1"),
    (UPSTREAM, Fate.UPSTREAM, "already upstream",
     "dropped: already upstream (its diff is in the release)"),
    (CONFLICT, Fate.CONFLICT, "**conflict**", "**conflict**: `vllm/core.py`"),
    (RESOLVED, Fate.RESOLVED, "**conflict resolved (recorded)**",
     "**conflict**: `vllm/core.py`; resolved in `lines/0.0.2/P4.patch` "
     "(recorded: `make rebase` replays it)"),
    (AFTER, Fate.APPLIED, "applied",
     "applies cleanly (after the conflicts above it, resolved to the "
     "patch's side)"),
    (EMPTY, Fate.EMPTY, "empty, dropped",
     "dropped: empty once the conflicts before it were resolved"),
    (PARTLY, Fate.APPLIED, "partly absorbed, applied",
     "partly by #2; applies cleanly (after the conflicts above it, "
     "resolved to the patch's side)"),
])
def test_each_fate_is_decided_once_and_rendered_both_ways(
        patch, fate, short, row):
    decided = _fates()[patch.name]
    assert decided.fate is fate
    assert outcome(decided) == short
    assert status(decided) == row


def test_a_patch_that_conflicted_and_ended_empty_is_a_conflict():
    state = RebaseState(old_pin=PIN,
                        new_pin=PIN,
                        old_tip="",
                        old_upstream="",
                        patches=[CONFLICT])
    result = Result(version="0.0.2", skipped=[CONFLICT.subject])
    conflict = Conflict(CONFLICT.number, CONFLICT.subject, {"a.py": "UU"}, {},
                        "")
    decided = fate_of(CONFLICT, state, result, [conflict], {})
    assert decided.fate is Fate.CONFLICT and decided.conflict is conflict


def test_a_patch_before_any_conflict_applies_cleanly():
    state = RebaseState(old_pin=PIN,
                        new_pin=PIN,
                        old_tip="",
                        old_upstream="",
                        patches=PATCHES[:2])
    later = Conflict(2, PATCHES[1].subject, {"a.py": "UU"}, {}, "")
    decided = fate_of(PATCHES[0], state, Result(version="0.0.2"), [later], {})
    assert status(decided) == "applies cleanly"
