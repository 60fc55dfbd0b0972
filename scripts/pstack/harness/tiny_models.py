"""`make models`: deterministic tiny Llama-style models with locally trained
tokenizers.

No model can be downloaded on the project's machines, so tests and benchmarks
use models generated here: random weights from a fixed seed, a byte-level BPE
tokenizer trained on a fixed synthetic corpus. The same spec gives the same
files on every machine; models are cached by a digest of their spec.

One cache serves every line of the checkout, and each line generates into it
from its own venv (`test_env()` runs in the line's Python), with a
transformers and torch of its own: 4.53 and 2.6 for vLLM 0.9.2, 5.x and 2.13
for 0.32. So the files depend on neither. They are written as a hub repo of
a `LlamaForCausalLM` publishes them, never through transformers'
`save_pretrained`, whose output follows its version (5.x writes a tokenizer
class 4.53 cannot load): config.json from this module's dict, with the
fields every transformers reads alike; the weights drawn from numpy's PCG64
bit stream and rounded to bfloat16 here (`weights`), then written by
safetensors; the tokenizer's settings as plain JSON. tokenizer.json is the
one file a library makes: the `tokenizers` library, whose training and
serialization are the same in every line's venv (a test compares the files
each venv writes).

A model appears whole: it is written in a scratch dir and renamed into
place, so that processes generating it at once (the lines' parts of
`make test`) leave one copy and none reads half of one.

Head sizes are ones vLLM's CPU paged attention supports (32..256).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import UserError, progress
from ..core.line import Line, cache_dir

if TYPE_CHECKING:
    import numpy as np

GENERATOR_VERSION = 2  # bump when the generated files change for the same spec

# The tokenizer's special tokens, in id order (bos 0, eos 1), as
# tokenizer_config.json and special_tokens_map.json name them.
SPECIAL_TOKENS = {
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>"
}
BOS_TOKEN_ID, EOS_TOKEN_ID = 0, 1
# What tokenizer_config.json records of each added token.
ADDED_TOKEN_FIELDS = ("content", "lstrip", "normalized", "rstrip",
                      "single_word", "special")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names",
                        nargs="*",
                        default=["tiny-llama", "tiny-llama-gqa"],
                        help="models to generate (default: the test models)")


def runs_in(args: argparse.Namespace, layout: Line) -> Line:
    """The models are the same for every line: a line without a CPU runtime
    has them made in the venv of the newest line that has one."""
    return layout.runtime_line


def run(args: argparse.Namespace, layout: Line) -> int:
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


def model_config(spec: ModelSpec) -> dict:
    """config.json of a model of `spec`: a `LlamaForCausalLM` in bfloat16,
    its fields as Llama repos publish them for transformers 4.x, which 5.x
    reads the same (`torch_dtype` as its `dtype`, `rope_theta` into its
    `rope_parameters`). bos and eos are the tokenizer's <s> and </s>."""
    return dict(architectures=["LlamaForCausalLM"],
                model_type="llama",
                vocab_size=spec.vocab_size,
                hidden_size=spec.hidden_size,
                intermediate_size=spec.intermediate_size,
                num_hidden_layers=spec.num_hidden_layers,
                num_attention_heads=spec.num_attention_heads,
                num_key_value_heads=spec.num_key_value_heads,
                head_dim=spec.head_size,
                hidden_act="silu",
                max_position_embeddings=spec.max_position_embeddings,
                initializer_range=spec.initializer_range,
                rms_norm_eps=1e-6,
                rope_theta=10000.0,
                rope_scaling=None,
                attention_bias=False,
                attention_dropout=0.0,
                mlp_bias=False,
                pretraining_tp=1,
                tie_word_embeddings=False,
                use_cache=True,
                bos_token_id=BOS_TOKEN_ID,
                eos_token_id=EOS_TOKEN_ID,
                torch_dtype="bfloat16")


def weight_shapes(spec: ModelSpec) -> dict[str, tuple[int, ...]]:
    """The weights of a `LlamaForCausalLM` of `spec`, name -> shape, in the
    order `weights` draws them."""
    hidden, mlp = spec.hidden_size, spec.intermediate_size
    q = spec.num_attention_heads * spec.head_size
    kv = spec.num_key_value_heads * spec.head_size
    shapes = {"model.embed_tokens.weight": (spec.vocab_size, hidden)}
    for i in range(spec.num_hidden_layers):
        layer = f"model.layers.{i}."
        shapes.update({
            layer + "input_layernorm.weight": (hidden, ),
            layer + "self_attn.q_proj.weight": (q, hidden),
            layer + "self_attn.k_proj.weight": (kv, hidden),
            layer + "self_attn.v_proj.weight": (kv, hidden),
            layer + "self_attn.o_proj.weight": (hidden, q),
            layer + "post_attention_layernorm.weight": (hidden, ),
            layer + "mlp.gate_proj.weight": (mlp, hidden),
            layer + "mlp.up_proj.weight": (mlp, hidden),
            layer + "mlp.down_proj.weight": (hidden, mlp),
        })
    shapes["model.norm.weight"] = (hidden, )
    shapes["lm_head.weight"] = (spec.vocab_size, hidden)
    return shapes


def weights(spec: ModelSpec) -> dict[str, np.ndarray]:
    """The weights of a model of `spec` as bfloat16 bit patterns (uint16
    arrays of `weight_shapes`).

    Norm weights are ones, as transformers initializes them. Every other
    weight is drawn in turn from one PCG64 stream seeded with `spec.seed`:
    uniform on [-a, a], a = sqrt(3) * initializer_range, so that its
    standard deviation is initializer_range as in transformers' normal
    init, and the logits are as peaked. Only the bit generator's raw 64-bit
    output is used, which NumPy's compatibility policy keeps the same across
    its versions (`Generator`'s distributions may change), and only exact or
    correctly rounded arithmetic on it: every numpy on every CPU gives the
    same bits, whatever transformers' and torch's init code do.
    """
    import numpy as np

    stream = np.random.PCG64(spec.seed)
    half_width = math.sqrt(3.0) * spec.initializer_range
    drawn = {}
    for name, shape in weight_shapes(spec).items():
        if name.endswith("norm.weight"):
            values = np.ones(shape, dtype=np.float32)
        else:
            raw = stream.random_raw(math.prod(shape))
            # The top 53 bits: a double in [0, 1), exactly.
            unit = (raw >> np.uint64(11)).astype(np.float64) * 2.0**-53
            values = ((2.0 * unit - 1.0) * half_width).astype(np.float32)
        drawn[name] = bfloat16_bits(values).reshape(shape)
    return drawn


def bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """The bit patterns (uint16) of the bfloat16 numbers nearest to the
    float32 `values`, ties to even: what torch's conversion gives for finite
    numbers, computed here in integer arithmetic so that no torch version
    decides it."""
    import numpy as np

    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    lowest_kept = (bits >> np.uint32(16)) & np.uint32(1)
    return ((bits + np.uint32(0x7FFF) + lowest_kept) >> np.uint32(16)).astype(
        np.uint16)


def write_weights(spec: ModelSpec, path: Path) -> None:
    """`weights(spec)` as a safetensors file of bfloat16 tensors, with the
    metadata transformers expects of a PyTorch checkpoint. torch only
    relabels the bits; safetensors lays out the file."""
    import numpy as np
    import torch
    from safetensors.torch import save_file

    tensors = {
        name: torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
        for name, bits in weights(spec).items()
    }
    save_file(tensors, path, metadata={"format": "pt"})


def bpe_tokenizer(vocab_size: int):
    """A byte-level BPE `tokenizers.Tokenizer` trained on `corpus()`, with
    the special tokens <s>, </s> and <unk> (ids 0, 1, 2). Made by the
    `tokenizers` library alone."""
    from tokenizers import (Tokenizer, decoders, models, pre_tokenizers,
                            trainers)

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def tokenizer_files(vocab_size: int,
                    model_max_length: int = 8192) -> dict[str, str]:
    """`files_of_tokenizer` of `bpe_tokenizer(vocab_size)`."""
    return files_of_tokenizer(bpe_tokenizer(vocab_size), model_max_length)


def files_of_tokenizer(tokenizer, model_max_length: int) -> dict[str, str]:
    """A `tokenizers.Tokenizer`'s files, name -> text: tokenizer.json, and
    what transformers' `PreTrainedTokenizerFast` reads beside it
    (tokenizer_config.json, special_tokens_map.json), written here as
    transformers 4.x writes them; 5.x reads them alike."""
    tokenizer_json = tokenizer.to_str(pretty=True)
    added = {
        str(token["id"]): {
            field: token[field]
            for field in ADDED_TOKEN_FIELDS
        }
        for token in json.loads(tokenizer_json)["added_tokens"]
    }
    tokenizer_config = dict(tokenizer_class="PreTrainedTokenizerFast",
                            added_tokens_decoder=added,
                            clean_up_tokenization_spaces=False,
                            model_max_length=model_max_length,
                            **SPECIAL_TOKENS)
    return {
        "tokenizer.json": tokenizer_json,
        "tokenizer_config.json": _json(tokenizer_config),
        "special_tokens_map.json": _json(SPECIAL_TOKENS),
    }


def train_tokenizer(vocab_size: int,
                    out: Path,
                    model_max_length: int = 8192) -> None:
    """Write `tokenizer_files(vocab_size, model_max_length)` into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    for name, text in tokenizer_files(vocab_size, model_max_length).items():
        (out / name).write_text(text, encoding="utf-8")


def generate(name: str) -> Path:
    """Return the model directory, generating it first if it is not cached.

    Several processes may generate the same model at once: each writes a
    scratch dir of its own and renames it into place, and one that finds
    the model there first drops its own (the files are the same)."""
    if name not in SPECS:
        raise UserError(f"unknown model {name!r}",
                        f"choose from {', '.join(SPECS)}")
    dest = model_dir(name)
    if dest.is_dir():
        return dest
    spec = SPECS[name]
    progress(f"generating {name} in {dest}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # A killed run leaves a .tmp- dir behind, never a model's name.
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=dest.parent))
    try:
        _write_model(spec, tmp)
        tmp.chmod(0o755)
        try:
            tmp.rename(dest)
        except OSError:
            # Another process renamed the same files into place first.
            if not dest.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _write_model(spec: ModelSpec, out: Path) -> None:
    """Write the files of a model of `spec` into the empty dir `out`."""
    train_tokenizer(spec.vocab_size, out, spec.max_position_embeddings)
    generation_config = dict(bos_token_id=BOS_TOKEN_ID,
                             eos_token_id=EOS_TOKEN_ID)
    for name, obj in (("config.json", model_config(spec)),
                      ("generation_config.json", generation_config)):
        (out / name).write_text(_json(obj), encoding="utf-8")
    write_weights(spec, out / "model.safetensors")
    for f in out.iterdir():
        f.chmod(0o644)


def _json(obj: dict) -> str:
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"
