"""The locally generated models: deterministic, offline, shapes the CPU
backend runs."""

from __future__ import annotations

import hashlib
import json

import pytest
from pstack.core.errors import UserError
from pstack.harness import tiny_models
from pstack.harness.tiny_models import SPECS, generate

SUPPORTED_HEAD_SIZES = {32, 64, 80, 96, 112, 128, 192, 256}


def _digest(path) -> dict[str, str]:
    return {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.iterdir()) if f.is_file()
    }


def test_specs_cover_mha_and_gqa_with_supported_head_sizes():
    for name, spec in SPECS.items():
        assert spec.head_size in SUPPORTED_HEAD_SIZES, name
        assert spec.hidden_size == spec.head_size * spec.num_attention_heads
    assert SPECS["tiny-llama"].num_key_value_heads == SPECS[
        "tiny-llama"].num_attention_heads
    gqa = SPECS["tiny-llama-gqa"]
    assert gqa.num_attention_heads > gqa.num_key_value_heads


def test_generation_is_deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("PSTACK_CACHE", str(tmp_path / "a"))
    first = generate("tiny-llama-gqa")
    monkeypatch.setenv("PSTACK_CACHE", str(tmp_path / "b"))
    second = generate("tiny-llama-gqa")
    assert first != second
    assert _digest(first) == _digest(second)
    config = json.loads((first / "config.json").read_text())
    assert config["num_key_value_heads"] == 2 and config[
        "num_attention_heads"] == 4


def test_tokenizer_round_trips_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("PSTACK_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(generate("tiny-llama"))
    text = "Question: 12 plus 30? Answer: 42"
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text
    assert len(ids) < len(text) / 2, "BPE merges learned from the corpus"


def test_unknown_model_name_is_a_clear_error():
    with pytest.raises(UserError, match="unknown model 'nope'"):
        tiny_models.generate("nope")
