"""`make models`: deterministic tiny Llama-style models with locally trained
tokenizers.

No model can be downloaded on the project's machines, so tests and benchmarks
use models generated here: random weights from a fixed seed, a byte-level BPE
tokenizer trained on a fixed synthetic corpus. The same spec gives the same
files on every machine; models are cached by a digest of their spec.

Head sizes are ones vLLM's CPU paged attention supports (32..256).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.errors import UserError, progress
from ..core.layout import Layout, cache_dir

GENERATOR_VERSION = 1  # bump when the generated files change for the same spec


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names",
                        nargs="*",
                        default=["tiny-llama", "tiny-llama-gqa"],
                        help="models to generate (default: the test models)")


def run(args: argparse.Namespace, layout: Layout) -> int:
    for name in args.names:
        print(generate(name))
    return 0


@dataclass(frozen=True)
class ModelSpec:
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    num_hidden_layers: int
    intermediate_size: int
    vocab_size: int = 1024
    max_position_embeddings: int = 8192
    # Wider than HF's default so random logits are peaked: greedy argmax then
    # has clear winners and is stable across kernels that sum in another order.
    initializer_range: float = 0.2
    seed: int = 0

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads


SPECS: dict[str, ModelSpec] = {
    # Multi-head attention, head size 64.
    "tiny-llama":
    ModelSpec(hidden_size=128,
              num_attention_heads=2,
              num_key_value_heads=2,
              num_hidden_layers=2,
              intermediate_size=256),
    # Grouped-query attention (4 query heads share 2 KV heads), head size 32.
    "tiny-llama-gqa":
    ModelSpec(hidden_size=128,
              num_attention_heads=4,
              num_key_value_heads=2,
              num_hidden_layers=3,
              intermediate_size=256,
              seed=1),
    # Big enough that prefill costs real time on a CPU (benchmarks only).
    "bench-llama":
    ModelSpec(hidden_size=1024,
              num_attention_heads=16,
              num_key_value_heads=8,
              num_hidden_layers=8,
              intermediate_size=2816,
              vocab_size=2048,
              initializer_range=0.02,
              seed=2),
}

WORDS = [
    "the", "a", "of", "to", "and", "in", "is", "it", "that", "for", "on",
    "with", "as", "was", "he", "she", "they", "we", "you", "at", "by", "from",
    "this", "have", "not", "are", "but", "or", "an", "be", "one", "all",
    "which", "were", "when", "there", "can", "more", "cache", "block", "layer",
    "token", "prefix", "offload", "memory", "copy", "store", "load", "tier",
    "engine", "request", "model", "batch", "step", "worker", "query", "key",
    "value", "head", "page", "hit", "miss", "evict", "red", "green", "blue",
    "north", "south", "river", "stone", "cloud", "light", "paper", "number",
    "answer", "question", "apple", "orange", "seven", "eleven", "zero", "plus",
    "minus", "times", "equals"
]


def corpus(seed: int = 1234, lines: int = 4000) -> list[str]:
    """Synthetic training text: word salad plus arithmetic, so digits
    tokenize well."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        if rng.random() < 0.3:
            a, b = rng.randint(0, 99), rng.randint(0, 99)
            out.append(f"Question: {a} plus {b}? Answer: {a + b}")
        else:
            n = rng.randint(5, 25)
            out.append(" ".join(rng.choice(WORDS)
                                for _ in range(n)).capitalize() + ".")
    return out


def model_dir(name: str) -> Path:
    spec = SPECS[name]
    digest = hashlib.sha256(
        json.dumps([GENERATOR_VERSION, asdict(spec)]).encode())
    return cache_dir() / "models" / f"{name}-{digest.hexdigest()[:10]}"


def train_tokenizer(vocab_size: int, out: Path) -> None:
    from tokenizers import (Tokenizer, decoders, models, pre_tokenizers,
                            trainers)
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        special_tokens=["<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok,
                                   bos_token="<s>",
                                   eos_token="</s>",
                                   unk_token="<unk>",
                                   model_max_length=8192)
    fast.save_pretrained(out)


def generate(name: str) -> Path:
    """Return the model directory, generating it first if it is not cached."""
    if name not in SPECS:
        raise UserError(f"unknown model {name!r}",
                        f"choose from {', '.join(SPECS)}")
    dest = model_dir(name)
    if (dest / "config.json").exists():
        return dest
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    spec = SPECS[name]
    progress(f"generating {name} in {dest}")
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    train_tokenizer(spec.vocab_size, tmp)
    config = LlamaConfig(vocab_size=spec.vocab_size,
                         hidden_size=spec.hidden_size,
                         intermediate_size=spec.intermediate_size,
                         num_hidden_layers=spec.num_hidden_layers,
                         num_attention_heads=spec.num_attention_heads,
                         num_key_value_heads=spec.num_key_value_heads,
                         max_position_embeddings=spec.max_position_embeddings,
                         initializer_range=spec.initializer_range,
                         bos_token_id=0,
                         eos_token_id=1,
                         tie_word_embeddings=False,
                         torch_dtype="bfloat16")
    torch.manual_seed(spec.seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(tmp, safe_serialization=True)
    # An interrupted run leaves only the .tmp dir behind; the rename is atomic.
    tmp.rename(dest)
    return dest
