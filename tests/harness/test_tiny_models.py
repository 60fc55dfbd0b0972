"""The locally generated models: deterministic, offline, shapes the CPU
backend runs, the same files whichever line's venv writes them."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading

import pytest
from engine import RUNNER, prompts
from pstack.core.errors import UserError
from pstack.core.line import REPO, Line, has_cpu_runtime
from pstack.harness import tiny_models
from pstack.harness.testenv import OFFLINE_ENV
from pstack.harness.tiny_models import SPECS, generate

SUPPORTED_HEAD_SIZES = {32, 64, 80, 96, 112, 128, 192, 256}

# Written and read by each line's Python: the digests of the files and what
# that Python's transformers reads from them. argv: the cache dir, then the
# models.
PROBE = """
import hashlib, json, os, sys, warnings
warnings.filterwarnings("ignore")
os.environ["PSTACK_CACHE"] = sys.argv[1]
from pstack.harness.tiny_models import generate
import torch
import transformers
transformers.logging.set_verbosity_error()
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
out = {"files": {}, "read": {}}
for name in sys.argv[2:]:
    path = generate(name)
    out["files"][name] = {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.iterdir())}
    config = AutoConfig.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    rope = getattr(config, "rope_parameters", None) or {
        "rope_theta": config.rope_theta}
    model, info = AutoModelForCausalLM.from_pretrained(
        path, output_loading_info=True)
    ids = tok("the cache block layer token", return_tensors="pt").input_ids
    with torch.no_grad():
        greedy = model.float().generate(ids, max_new_tokens=8,
                                        do_sample=False)
    out["read"][name] = {
        "dtype": str(getattr(config, "dtype", None) or config.torch_dtype),
        "sizes": [config.num_hidden_layers, config.hidden_size,
                  config.num_attention_heads, config.num_key_value_heads,
                  config.head_dim, config.vocab_size],
        "rope_theta": rope["rope_theta"],
        "bos_eos": [config.bos_token_id, config.eos_token_id,
                    tok.bos_token_id, tok.eos_token_id],
        "ids": tok("Question: 12 plus 30? Answer: 42")["input_ids"],
        "loading": {k: sorted(map(str, v)) for k, v in info.items()},
        "greedy": greedy[0, ids.shape[1]:].tolist(),
    }
print(json.dumps(out))
"""


def _line_pythons() -> dict[str, str]:
    """vLLM version -> the Python of that line's venv, for each line of the
    checkout that has a CPU runtime and whose venv exists, the oldest
    first."""
    return {
        line.version: str(line.venv_python)
        for line in Line.default().lines()
        if has_cpu_runtime(line) and line.venv_python.exists()
    }


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


def test_models_are_written_without_transformers(tmp_path, monkeypatch):
    # transformers' own output follows its version; the models must not.
    monkeypatch.setitem(sys.modules, "transformers", None)
    monkeypatch.setenv("PSTACK_CACHE", str(tmp_path))
    path = generate("tiny-llama")
    config = json.loads((path / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["torch_dtype"] == "bfloat16"
    assert "transformers_version" not in config
    tokenizer_config = json.loads((path / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_weights_are_the_llama_checkpoints_in_bfloat16(tmp_path, monkeypatch):
    from safetensors import safe_open
    from safetensors.torch import load_file
    monkeypatch.setenv("PSTACK_CACHE", str(tmp_path))
    spec = SPECS["tiny-llama-gqa"]
    kv = spec.num_key_value_heads * spec.head_size
    path = generate("tiny-llama-gqa") / "model.safetensors"
    with safe_open(path, "pt") as f:
        assert f.metadata() == {"format": "pt"}
    weights = load_file(path)
    layers = {
        int(name.split(".")[2])
        for name in weights if name.startswith("model.layers.")
    }
    assert layers == set(range(spec.num_hidden_layers))
    layer = "model.layers.2."
    assert weights[layer + "self_attn.k_proj.weight"].shape == (kv, 128)
    assert weights[layer + "self_attn.o_proj.weight"].shape == (128, 128)
    assert weights[layer + "mlp.down_proj.weight"].shape == (128, 256)
    assert weights["lm_head.weight"].shape == (spec.vocab_size, 128)
    assert {str(w.dtype) for w in weights.values()} == {"torch.bfloat16"}
    assert (weights["model.norm.weight"] == 1).all()
    # Peaked logits: weights of standard deviation initializer_range.
    std = weights["lm_head.weight"].float().std().item()
    assert abs(std - spec.initializer_range) < 0.01 * spec.initializer_range
    assert not (weights["lm_head.weight"]
                == weights["model.embed_tokens.weight"]).all()


def test_bfloat16_rounds_to_nearest_even_as_torch_does():
    import numpy as np
    import torch
    rng = np.random.default_rng(0)
    values = np.concatenate([
        rng.standard_normal(100_000, dtype=np.float32),
        # Exact ties between two bfloat16 values, both ways to even.
        np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 2**-130],
                 dtype=np.float32)
    ])
    ours = tiny_models.bfloat16_bits(values)
    theirs = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16)
    assert (ours.view(np.int16) == theirs.numpy()).all()


def test_tokenizer_round_trips_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("PSTACK_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(generate("tiny-llama"))
    text = "Question: 12 plus 30? Answer: 42"
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text
    assert len(ids) < len(text) / 2, "BPE merges learned from the corpus"
    assert (tok.bos_token_id, tok.eos_token_id) == (0, 1)


def test_every_line_writes_and_reads_the_same_models(tmp_path):
    pythons = _line_pythons()
    if len(set(pythons.values())) < 2:
        pytest.skip(f"one line's venv only: {', '.join(pythons) or 'none'}")
    models = ["tiny-llama", "tiny-llama-gqa"]
    results = {}
    for version, python in pythons.items():
        proc = subprocess.run(
            [python, "-c", PROBE,
             str(tmp_path / version), *models],
            env={
                **os.environ,
                **OFFLINE_ENV, "PYTHONPATH": str(REPO / "scripts")
            },
            capture_output=True,
            text=True,
            timeout=600)
        assert proc.returncode == 0, f"{version}: {proc.stderr[-3000:]}"
        results[version] = json.loads(proc.stdout.splitlines()[-1])
    first, *others = results
    for version in others:
        assert results[version]["files"] == results[first]["files"], (
            f"the models of vLLM {version}'s venv differ from {first}'s")
    for name in models:
        spec = SPECS[name]
        for version, result in results.items():
            read = result["read"][name]
            assert read["dtype"] == "torch.bfloat16", (version, name)
            assert read["sizes"] == [
                spec.num_hidden_layers, spec.hidden_size,
                spec.num_attention_heads, spec.num_key_value_heads,
                spec.head_size, spec.vocab_size
            ], (version, name)
            assert read["rope_theta"] == 10000.0, (version, name)
            assert read["bos_eos"] == [0, 1, 0, 1], (version, name)
            assert not any(read["loading"].values()), (version, name, read)
        # Every transformers tokenizes alike and computes the same greedy
        # continuation.
        for key in ("ids", "greedy"):
            assert len(
                {json.dumps(r["read"][name][key])
                 for r in results.values()}) == 1, (name, key, {
                     v: r["read"][name][key]
                     for v, r in results.items()
                 })


def test_writers_at_once_leave_one_whole_model(tmp_path, monkeypatch):
    # The lines' parts of `make test` generate the models side by side; a
    # writer that finds the model renamed into place by another keeps that.
    monkeypatch.setenv("PSTACK_CACHE", str(tmp_path / "shared"))
    errors, paths = [], []
    rename = type(tmp_path).rename
    barrier = threading.Barrier(2)

    def slow_rename(self, target):
        if self.name.startswith(".tmp-"):
            barrier.wait(timeout=60)  # both wrote their scratch dir
        return rename(self, target)

    monkeypatch.setattr(type(tmp_path), "rename", slow_rename)

    def write():
        try:
            paths.append(generate("tiny-llama"))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=write) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    monkeypatch.undo()
    assert paths[0] == paths[1]
    monkeypatch.setenv("PSTACK_CACHE", str(tmp_path / "alone"))
    assert _digest(paths[0]) == _digest(generate("tiny-llama"))
    assert [p.name for p in paths[0].parent.iterdir()] == [paths[0].name]


@pytest.mark.engine
def test_every_lines_engine_generates_with_the_models():
    batch = prompts(4)
    spec = {
        "model": str(generate("tiny-llama-gqa")),
        "passes": [{
            "prompts": batch,
            "max_tokens": 16
        }] * 2,
        "llm": {
            "dtype": "bfloat16",
            "max_model_len": 1024,
            "seed": 0,
            "enforce_eager": True,
            # vLLM 0.32's CPU attention takes blocks of a multiple of 32.
            "block_size": 32,
        }
    }
    for version, python in _line_pythons().items():
        proc = subprocess.run(
            ["nice", "-n", "10", python,
             str(RUNNER)],
            input=json.dumps(spec),
            text=True,
            timeout=900,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                **OFFLINE_ENV,
                "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                "VLLM_CPU_KVCACHE_SPACE": "1",
            })
        results = [
            json.loads(line.split(" ", 1)[1])["passes"]
            for line in proc.stdout.splitlines()
            if line.startswith("LLM_RUNNER_RESULT ")
        ]
        assert results, (f"vLLM {version}'s engine failed "
                         f"(exit {proc.returncode}):\n{proc.stdout[-6000:]}")
        first, second = results[0]
        assert all(len(t) == 16 for t in first["tokens"]), version
        assert first["tokens"] == second["tokens"], version
        # Random weights, yet not a constant: the continuations differ.
        assert len({tuple(t) for t in first["tokens"]}) > 1, version


def test_unknown_model_name_is_a_clear_error():
    with pytest.raises(UserError, match="unknown model 'nope'"):
        tiny_models.generate("nope")
