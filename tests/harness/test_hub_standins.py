"""The hub stand-ins: one cache for every line, whatever transformers writes
or reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from pstack.core.line import REPO, Line, has_cpu_runtime
from pstack.harness.hub_standins import IMAGE_TOKEN, STANDINS, write_standins
from pstack.harness.testenv import OFFLINE_ENV

# Written and read by each line's Python: the digests of the files and what
# that Python's transformers reads from them.
PROBE = """
import hashlib, json, sys, warnings
from pathlib import Path
warnings.filterwarnings("ignore")
from pstack.harness.hub_standins import STANDINS, write_standins
root = write_standins(Path(sys.argv[1]))
import transformers
transformers.logging.set_verbosity_error()
from transformers import AutoConfig, AutoProcessor, AutoTokenizer
out = {"files": {}, "read": {}}
for f in sorted(root.rglob("*")):
    if f.is_file():
        out["files"][str(f.relative_to(root))] = hashlib.sha256(
            f.read_bytes()).hexdigest()
for repo in STANDINS:
    config = AutoConfig.from_pretrained(repo, cache_dir=root)
    text = getattr(config, "text_config", config)
    tok = AutoTokenizer.from_pretrained(repo, cache_dir=root)
    read = {
        "dtype": str(getattr(config, "dtype", None) or config.torch_dtype),
        "layers": text.num_hidden_layers,
        "hidden_size": text.hidden_size,
        "vocab_size": text.vocab_size,
        "bos_eos": [tok.bos_token_id, tok.eos_token_id],
        "ids": tok("Question: 12 plus 30?")["input_ids"],
    }
    if "llava" in repo:
        processor = AutoProcessor.from_pretrained(repo, cache_dir=root)
        read["image_token"] = [
            config.image_token_index,
            tok.convert_tokens_to_ids(processor.image_token)]
    out["read"][repo] = read
print(json.dumps(out))
"""


def _line_pythons() -> dict[str, str]:
    """The Python of each line of this checkout that has a CPU runtime and
    whose venv exists."""
    return {
        line.version: str(line.venv_python)
        for line in Line.default().lines()
        if has_cpu_runtime(line) and line.venv_python.exists()
    }


def _files(root) -> dict[str, bytes]:
    return {
        str(f.relative_to(root)): f.read_bytes()
        for f in sorted(root.rglob("*")) if f.is_file()
    }


def test_standins_are_written_without_transformers(tmp_path, monkeypatch):
    # transformers' own output follows its version; the stand-ins must not.
    monkeypatch.setitem(sys.modules, "transformers", None)
    root = write_standins(tmp_path)
    for repo_id, config in STANDINS.items():
        repo = root / ("models--" + repo_id.replace("/", "--"))
        snapshot = repo / "snapshots" / (repo / "refs" / "main").read_text()
        written = json.loads((snapshot / "config.json").read_text())
        assert written.items() >= config.items(), repo_id
        assert "transformers_version" not in written
        tokenizer_config = json.loads(
            (snapshot / "tokenizer_config.json").read_text())
        assert tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_every_line_writes_and_reads_the_same_standins(tmp_path):
    pythons = _line_pythons()
    if len(set(pythons.values())) < 2:
        pytest.skip(f"one line's venv only: {', '.join(pythons) or 'none'}")
    results = {}
    for version, python in pythons.items():
        proc = subprocess.run(
            [python, "-c", PROBE, str(tmp_path / version)],
            env={
                **os.environ,
                **OFFLINE_ENV, "PYTHONPATH": str(REPO / "scripts")
            },
            capture_output=True,
            text=True,
            timeout=300)
        assert proc.returncode == 0, f"{version}: {proc.stderr[-3000:]}"
        results[version] = json.loads(proc.stdout.splitlines()[-1])
    first, *others = results
    for version in others:
        assert results[version]["files"] == results[first]["files"], (
            f"the stand-ins of vLLM {version}'s venv differ from {first}'s")
    for version, result in results.items():
        read = result["read"]
        assert read["facebook/opt-125m"]["dtype"] == "torch.float16", version
        assert read["facebook/opt-125m"]["layers"] == 12, version
        assert read["Qwen/Qwen1.5-7B"]["dtype"] == "torch.bfloat16", version
        assert read["Qwen/Qwen1.5-7B"]["vocab_size"] == 151936, version
        llava = read["llava-hf/llava-1.5-7b-hf"]
        assert llava["hidden_size"] == 4096, version
        image_token_index, image_token_id = llava["image_token"]
        assert image_token_index == image_token_id, version
        assert read["facebook/opt-125m"]["bos_eos"] == [0, 1], version


def test_configs_read_as_the_published_architectures(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from transformers import AutoConfig, OPTConfig
    root = write_standins(tmp_path)
    opt = AutoConfig.from_pretrained("facebook/opt-125m", cache_dir=root)
    # OPTConfig's defaults are opt-125m's architecture.
    defaults = OPTConfig().to_dict()
    for key in ("vocab_size", "hidden_size", "ffn_dim", "num_hidden_layers",
                "num_attention_heads", "max_position_embeddings",
                "word_embed_proj_dim", "do_layer_norm_before"):
        assert getattr(opt, key) == defaults[key], key
    llava = AutoConfig.from_pretrained("llava-hf/llava-1.5-7b-hf",
                                       cache_dir=root)
    assert llava.text_config.num_key_value_heads == 32
    assert llava.vision_config.image_size == 336


def test_llava_image_token_is_the_tokenizers(tmp_path):
    root = write_standins(tmp_path)
    repo = root / "models--llava-hf--llava-1.5-7b-hf"
    snapshot = repo / "snapshots" / (repo / "refs" / "main").read_text()
    config = json.loads((snapshot / "config.json").read_text())
    tokenizer = json.loads((snapshot / "tokenizer.json").read_text())
    image = {t["content"]: t for t in tokenizer["added_tokens"]}[IMAGE_TOKEN]
    assert image["special"] and config["image_token_index"] == image["id"]


def test_rewriting_keeps_one_snapshot_and_replaces_a_stale_ref(tmp_path):
    first = _files(write_standins(tmp_path))
    ref = tmp_path / "models--facebook--opt-125m" / "refs" / "main"
    current = ref.read_text()
    ref.write_text("0" * 40)  # as left by an older version of this module
    assert _files(write_standins(tmp_path)) == {
        **first, "models--facebook--opt-125m/refs/main": current.encode()
    }
    assert ref.read_text() == current
    assert not list(tmp_path.glob("*/.tmp-*"))
    assert not list(tmp_path.glob("*/refs/.main-*"))


def test_writers_at_once_leave_the_same_cache(tmp_path, monkeypatch):
    # The lines' parts of `make test` write the cache side by side; a writer
    # that finds its snapshot renamed into place by another keeps that one.
    errors = []
    rename = type(tmp_path).rename
    barrier = threading.Barrier(2)

    def slow_rename(self, target):
        if self.name.startswith(".tmp-"):
            barrier.wait(timeout=30)  # both wrote their scratch dir
        return rename(self, target)

    monkeypatch.setattr(type(tmp_path), "rename", slow_rename)

    def write():
        try:
            write_standins(tmp_path / "shared")
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=write) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    monkeypatch.undo()
    assert _files(tmp_path / "shared") == _files(
        write_standins(tmp_path / "alone"))
    assert not list((tmp_path / "shared").glob("*/.tmp-*"))
