"""What `make bench LINE=0.32.0 B=fs-tier` prints from the rows its script
(scripts/benchmarks/measure_fs_tier.py, which needs the line's vLLM)
returns: the target is judged on the read of the same files into the same
places, with the read into one block's memory printed beside it."""

from __future__ import annotations

import pytest
from pstack.core.line import Line
from pstack.harness.bench import fs_tier


def _row(block_kib: int, vs_plain: float, vs_plain_one_block: float) -> dict:
    return {
        "block_kib": block_kib,
        "store_gbps": 2.0,
        "load_gbps": 1.4,
        "plain_read_gbps": 1.4 / vs_plain,
        "vs_plain": vs_plain,
        "plain_one_block_gbps": 1.4 / vs_plain_one_block,
        "vs_plain_one_block": vs_plain_one_block,
        "o_direct": True,
        "page_cache_dropped": True,
    }


def _printed(tmp_path, monkeypatch, capsys, rows: list[dict]) -> str:
    monkeypatch.setattr(fs_tier, "run_script", lambda *args: rows)
    fs_tier.run(Line.at(tmp_path, "0.32.0", tmp_path / "cache"))
    return capsys.readouterr().out


def test_the_target_is_judged_on_the_read_into_the_same_places(
        tmp_path, monkeypatch, capsys):
    out = _printed(tmp_path, monkeypatch, capsys,
                   [_row(1024, 1.05, 0.61),
                    _row(4096, 0.79, 0.95)])
    lines = out.splitlines()
    one_mib = next(line for line in lines
                   if line.lstrip().startswith("1024Ki"))
    assert one_mib.split()[4:] == ["105%", ">=", "80%", "2.30", "61%"]
    assert "target: missed at 4096 KiB" in out
    assert ("plain*: the same read with every file into one block's memory"
            in out)


@pytest.mark.parametrize("dropped, said", [
    (True, "page cache dropped before each pass"),
    (False, "page cache NOT dropped"),
])
def test_whether_the_page_cache_was_dropped_is_said(tmp_path, monkeypatch,
                                                    capsys, dropped, said):
    row = {**_row(256, 1.2, 1.1), "page_cache_dropped": dropped}
    out = _printed(tmp_path, monkeypatch, capsys, [row])
    assert said in out
    assert "target: met" in out
