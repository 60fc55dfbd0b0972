"""A trained stand-in for meta-llama/Llama-3.2-1B-Instruct that counts.

Upstream vLLM's engine tests of the offloading connector
(tests/v1/kv_connector/unit/test_offloading_connector.py) load
meta-llama/Llama-3.2-1B-Instruct and check that, after "Let's count to 10.
One, two, three, four," padded at its start with "." tokens to a whole
number of offloaded blocks, the next token is " five" in at least half of 20
sampled answers, with the prefix's KV loaded from the offloading tier. No
model can be downloaded here, and a model with random weights answers
anything. So this module trains a tiny Llama (GQA, like the real one) to
count, on sentences like the test's after 0 to 300 "." tokens, and on
counts that start anywhere ("Count on: six, seven, eight."), so that the
next number is read from the previous one's KV: loaded KV that is wrong
changes the answer (`tests/harness/test_counting_model.py` checks both).

Unlike `tiny_models`, the files are not the same on every machine: training
runs torch's arithmetic, whose results follow its version and the CPU. The
cache is keyed by the recipe (`RECIPE_VERSION`, the spec, the steps), the
first process to train it writes it (others wait on a lock and read it), and
what tests rely on is its behaviour, which the checks above pin down. It is
saved in float32: bfloat16 may crash vLLM's CPU attention on CPUs without
AVX-512 BF16 (the real repo publishes bfloat16).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import random
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from ..core.errors import progress
from ..core.line import cache_dir
from .hub_standins import write_repo
from .tiny_models import (BOS_TOKEN_ID, EOS_TOKEN_ID, SPECIAL_TOKENS,
                          ModelSpec, files_of_tokenizer, model_config)

REPO_ID = "meta-llama/Llama-3.2-1B-Instruct"
RECIPE_VERSION = 1  # bump when the training below changes

SPEC = ModelSpec(hidden_size=128,
                 num_attention_heads=4,
                 num_key_value_heads=2,
                 num_hidden_layers=2,
                 intermediate_size=512,
                 vocab_size=320,
                 initializer_range=0.02,
                 seed=3)
TRAIN_STEPS = 800
BATCH_SIZE = 16
LEARNING_RATE = 3e-3
# The test pads with up to one offloaded block less one token of "." (255
# on the CPU platform, whose offloaded blocks it sets to 256 tokens).
MAX_PADDING = 300

NUMBERS = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    "ten", "eleven", "twelve"
]
TEST_SENTENCE = "Let's count to 10. One, two, three, four,"


def sentence(rng: random.Random) -> str:
    """One training sentence: the test's count to ten, or (more often: it
    is the harder one to learn) a count from anywhere."""
    if rng.random() < 0.3:
        return "Let's count to 10. One, " + ", ".join(NUMBERS[1:10]) + "."
    start = rng.randint(0, 6)
    end = rng.randint(start + 2, len(NUMBERS))
    return "Count on: " + ", ".join(NUMBERS[start:end]) + "."


def model_dir() -> Path:
    key = json.dumps([
        RECIPE_VERSION,
        asdict(SPEC), TRAIN_STEPS, BATCH_SIZE, LEARNING_RATE, MAX_PADDING
    ])
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return cache_dir() / "models" / f"counting-llama-{digest}"


def generate() -> Path:
    """Return the trained model's directory, training it first (about two
    minutes on 2 cores) if no process has."""
    dest = model_dir()
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / ".counting-llama.lock", "w") as lock:
        # Lines' parts of `make test` start at once: one trains, the
        # others wait here and find it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if dest.is_dir():
            return dest
        progress(f"training the counting stand-in for {REPO_ID} in {dest}")
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=dest.parent))
        try:
            _write_model(tmp)
            tmp.chmod(0o755)
            tmp.rename(dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def write_standin(root: Path) -> None:
    """Make the trained model (trained first if need be) the main snapshot
    of REPO_ID in the hub cache `root`."""
    files = {f.name: f.read_bytes() for f in sorted(generate().iterdir())}
    write_repo(root / ("models--" + REPO_ID.replace("/", "--")), REPO_ID,
               files)


def _tokenizer():
    """A byte-level BPE tokenizer trained on the counting sentences: " five"
    and every number word are one token, "." is one token."""
    from tokenizers import (Tokenizer, decoders, models, pre_tokenizers,
                            trainers)

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=SPEC.vocab_size,
        show_progress=False,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    rng = random.Random(SPEC.seed)
    tok.train_from_iterator([sentence(rng) for _ in range(2000)],
                            trainer=trainer)
    return tok


def _train(tok):
    """Train a `LlamaForCausalLM` of SPEC on padded counting sentences and
    return it."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SPEC.seed)
    config = LlamaConfig(
        **{
            k: v
            for k, v in model_config(SPEC).items()
            if k not in ("architectures", "model_type", "torch_dtype")
        })
    model = LlamaForCausalLM(config).float()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    dot = tok.token_to_id(".")
    rng = random.Random(SPEC.seed)
    for step in range(TRAIN_STEPS):
        rows = []
        for _ in range(BATCH_SIZE):
            padding = rng.randint(0, MAX_PADDING)
            rows.append((padding, tok.encode(sentence(rng)).ids))
        width = max(padding + len(ids) for padding, ids in rows)
        inputs = torch.full((BATCH_SIZE, width), EOS_TOKEN_ID)
        # Only the sentence is learnt; the padding and the tail are not.
        labels = torch.full((BATCH_SIZE, width), -100)
        for i, (padding, ids) in enumerate(rows):
            inputs[i, :padding] = dot
            inputs[i, padding:padding + len(ids)] = torch.tensor(ids)
            labels[i, padding:padding + len(ids)] = torch.tensor(ids)
        loss = model(input_ids=inputs, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == TRAIN_STEPS - 1:
            progress(
                f"  step {step + 1}/{TRAIN_STEPS}: loss {loss.item():.3f}")
    return model


def _write_model(out: Path) -> None:
    from safetensors.torch import save_file

    tok = _tokenizer()
    model = _train(tok)
    tensors = {
        name: tensor.detach().contiguous()
        for name, tensor in model.state_dict().items()
    }
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    config = dict(model_config(SPEC), torch_dtype="float32")
    files = {
        "config.json":
        config,
        "generation_config.json":
        dict(bos_token_id=BOS_TOKEN_ID, eos_token_id=EOS_TOKEN_ID),
    }
    for name, obj in files.items():
        (out / name).write_text(json.dumps(obj, indent=2, sort_keys=True) +
                                "\n",
                                encoding="utf-8")
    for name, text in files_of_tokenizer(tok,
                                         SPEC.max_position_embeddings).items():
        (out / name).write_text(text, encoding="utf-8")
    for f in out.iterdir():
        f.chmod(0o644)
