"""Offline stand-ins for the Hugging Face repos that vLLM's own unit tests name.

Tests such as tests/v1/core/test_scheduler.py build a `ModelConfig` for
"facebook/opt-125m" only to read its config; nothing loads weights. No model
can be downloaded here, so we write config-only repos into a local hub cache
(the layout huggingface_hub reads with HF_HUB_OFFLINE=1) and point
HF_HUB_CACHE at it when running those tests. Each config has the
architecture sizes the real repo publishes, so size-dependent assertions (KV
cache memory, max model length) check the same numbers as upstream CI. Code
that only needs *a* tokenizer (the scheduler's structured-output manager)
gets a small locally trained one. The one repo whose weights tests need,
meta-llama/Llama-3.2-1B-Instruct for upstream's offloading engine tests, is
a model trained here to count (`counting_model.py`), written into the same
cache by `write_repo`.

One cache serves every line of the checkout, and each line writes it from
its own venv (`test_env()` runs in the line's Python, the lines' parts of
`make test` side by side), with a transformers of its own: 4.53 for vLLM
0.9.2 and 0.10.2, 5.x for 0.32. So the files do not depend on transformers:
they are written from this module's data as the real repos publish them,
never through transformers' `save_pretrained`, whose output follows its
version (5.x writes the tokenizer class `TokenizersBackend`, which 4.53
cannot load, and `dtype` where 4.53 reads `torch_dtype`). Every
transformers reads them as it reads the real repos, filling in its own
defaults. The tokenizer's `tokenizer.json` is the one file a library writes:
the `tokenizers` library, whose training and serialization are the same in
every line's venv (a test compares them).

A repo's snapshot is named by a digest of its files and never changes once
written; it appears whole (renamed into place) and refs/main is replaced
atomically, so that processes writing and reading the cache at the same time
see either the old snapshot or the new one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from ..core.line import cache_dir
from .tiny_models import bpe_tokenizer

TOKENIZER_VOCAB = 1024
# The stand-in tokenizer's special tokens, in id order, and its length limit.
SPECIAL_TOKENS = {
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>"
}
MODEL_MAX_LENGTH = 8192

LLAMA2_7B = dict(hidden_size=4096,
                 intermediate_size=11008,
                 num_hidden_layers=32,
                 num_attention_heads=32,
                 num_key_value_heads=32,
                 max_position_embeddings=4096,
                 rms_norm_eps=1e-5)

# Repos whose multimodal processor vLLM builds: (image size, patch size).
# Their config's `image_token_index` is the stand-in tokenizer's IMAGE_TOKEN.
LLAVA_PROCESSORS = {"llava-hf/llava-1.5-7b-hf": (336, 14)}
IMAGE_TOKEN = "<image>"
# CLIP's image normalization, as the llava repos publish it.
CLIP_IMAGE_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_IMAGE_STD = [0.26862954, 0.26130258, 0.27577711]

# repo id -> its config.json: the model type, the architecture sizes and
# dtype the real repo publishes; transformers' defaults for the rest.
STANDINS: dict[str, dict] = {
    "facebook/opt-125m":
    dict(architectures=["OPTForCausalLM"],
         model_type="opt",
         vocab_size=50272,
         hidden_size=768,
         word_embed_proj_dim=768,
         ffn_dim=3072,
         num_hidden_layers=12,
         num_attention_heads=12,
         max_position_embeddings=2048,
         activation_function="relu",
         do_layer_norm_before=True,
         bos_token_id=2,
         eos_token_id=2,
         pad_token_id=1,
         torch_dtype="float16"),
    "Qwen/Qwen1.5-7B":
    dict(architectures=["Qwen2ForCausalLM"],
         model_type="qwen2",
         hidden_size=4096,
         intermediate_size=11008,
         num_hidden_layers=32,
         num_attention_heads=32,
         num_key_value_heads=32,
         vocab_size=151936,
         max_position_embeddings=32768,
         rope_theta=1000000.0,
         rms_norm_eps=1e-6,
         hidden_act="silu",
         tie_word_embeddings=False,
         use_sliding_window=False,
         max_window_layers=28,
         torch_dtype="bfloat16"),
    "llava-hf/llava-1.5-7b-hf":
    dict(architectures=["LlavaForConditionalGeneration"],
         model_type="llava",
         text_config=dict(model_type="llama", vocab_size=32064, **LLAMA2_7B),
         vision_config=dict(model_type="clip_vision_model",
                            hidden_size=1024,
                            intermediate_size=4096,
                            num_hidden_layers=24,
                            num_attention_heads=16,
                            image_size=336,
                            patch_size=14,
                            projection_dim=768),
         vision_feature_layer=-2,
         vision_feature_select_strategy="default",
         torch_dtype="float16"),
}


def hub_cache() -> Path:
    return cache_dir() / "hf-hub-standins"


def write_standins(root: Path | None = None) -> Path:
    """Write every stand-in repo (idempotent, safe to run in several
    processes at once) and return the hub cache dir."""
    root = root or hub_cache()
    tokenizer_json = bpe_tokenizer(TOKENIZER_VOCAB).to_str(pretty=True)
    for repo_id in STANDINS:
        write_repo(root / ("models--" + repo_id.replace("/", "--")), repo_id,
                   repo_files(repo_id, tokenizer_json))
    return root


def repo_files(repo_id: str, tokenizer_json: str) -> dict[str, str]:
    """The files of one stand-in repo, name -> text: config.json, the
    tokenizer trained as `tokenizer_json`, and a llava repo's processor."""
    from tokenizers import AddedToken, Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    config = dict(STANDINS[repo_id])
    files = {}
    tokenizer_config: dict = {}
    if repo_id in LLAVA_PROCESSORS:
        tokenizer.add_special_tokens(
            [AddedToken(IMAGE_TOKEN, special=True, normalized=False)])
        config["image_token_index"] = tokenizer.token_to_id(IMAGE_TOKEN)
        tokenizer_config["processor_class"] = "LlavaProcessor"
        files.update(_llava_processor_files(*LLAVA_PROCESSORS[repo_id]))
    tokenizer_json = tokenizer.to_str(pretty=True)
    keys = ("content", "lstrip", "normalized", "rstrip", "single_word",
            "special")
    added = {
        str(t["id"]): {
            k: t[k]
            for k in keys
        }
        for t in json.loads(tokenizer_json)["added_tokens"]
    }
    tokenizer_config.update(tokenizer_class="PreTrainedTokenizerFast",
                            added_tokens_decoder=added,
                            clean_up_tokenization_spaces=False,
                            model_max_length=MODEL_MAX_LENGTH,
                            **SPECIAL_TOKENS)
    files.update({
        "config.json": _json(config),
        "tokenizer.json": tokenizer_json,
        "tokenizer_config.json": _json(tokenizer_config),
        "special_tokens_map.json": _json(SPECIAL_TOKENS),
    })
    return files


def _llava_processor_files(image_size: int, patch_size: int) -> dict[str, str]:
    """A LlavaProcessor's files: its CLIP image processor
    (preprocessor_config.json) and its own settings."""
    image_processor = dict(image_processor_type="CLIPImageProcessor",
                           processor_class="LlavaProcessor",
                           size={"shortest_edge": image_size},
                           crop_size={
                               "height": image_size,
                               "width": image_size
                           },
                           do_resize=True,
                           do_center_crop=True,
                           do_rescale=True,
                           do_normalize=True,
                           do_convert_rgb=True,
                           resample=3,
                           rescale_factor=1 / 255,
                           image_mean=CLIP_IMAGE_MEAN,
                           image_std=CLIP_IMAGE_STD)
    processor = dict(processor_class="LlavaProcessor",
                     image_token=IMAGE_TOKEN,
                     patch_size=patch_size,
                     num_additional_image_tokens=0,
                     vision_feature_select_strategy="default")
    return {
        "preprocessor_config.json": _json(image_processor),
        "processor_config.json": _json(processor),
    }


def _json(obj: dict) -> str:
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def write_repo(repo: Path, repo_id: str, files: dict[str,
                                                     str | bytes]) -> None:
    """Make `files` (text, or bytes such as weights) the repo's main
    snapshot: written in a scratch dir and renamed into place unless a
    snapshot of the same content exists, then refs/main replaced to name
    it."""
    contents = {
        name: data.encode() if isinstance(data, str) else data
        for name, data in files.items()
    }
    digest = hashlib.sha1(repo_id.encode())
    for name in sorted(contents):
        digest.update(name.encode() + contents[name])
    snapshot = repo / "snapshots" / digest.hexdigest()
    if not snapshot.exists():
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=repo))
        for name, data in contents.items():
            (tmp / name).write_bytes(data)
        tmp.chmod(0o755)
        try:
            tmp.rename(snapshot)
        except OSError:
            # Another process renamed the same content into place first.
            shutil.rmtree(tmp)
            if not snapshot.is_dir():
                raise
    ref = repo / "refs" / "main"
    if ref.exists() and ref.read_text() == snapshot.name:
        return
    ref.parent.mkdir(exist_ok=True)
    fd, tmp_ref = tempfile.mkstemp(prefix=".main-", dir=ref.parent)
    with os.fdopen(fd, "w") as f:
        f.write(snapshot.name)
    os.chmod(tmp_ref, 0o644)
    os.replace(tmp_ref, ref)
