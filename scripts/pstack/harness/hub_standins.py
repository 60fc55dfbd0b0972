"""Offline stand-ins for the Hugging Face repos that vLLM's own unit tests name.

Tests such as tests/v1/core/test_scheduler.py build a `ModelConfig` for
"facebook/opt-125m" only to read its config; nothing loads weights. No model
can be downloaded here, so we write config-only repos into a local hub cache
(the layout huggingface_hub reads with HF_HUB_OFFLINE=1) and point
HF_HUB_CACHE at it when running those tests. Configs are built from
transformers' config classes with the architecture sizes the real repos
publish, so size-dependent assertions (KV cache memory, max model length)
check the same numbers as upstream CI. Code that only needs *a* tokenizer
(the scheduler's structured-output manager) gets a small locally trained one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from ..core.layout import cache_dir
from .tiny_models import train_tokenizer

LLAMA2_7B = dict(hidden_size=4096,
                 intermediate_size=11008,
                 num_hidden_layers=32,
                 num_attention_heads=32,
                 num_key_value_heads=32,
                 max_position_embeddings=4096,
                 rms_norm_eps=1e-5)

# Repos whose multimodal processor vLLM builds: (image size, patch size).
LLAVA_PROCESSORS = {"llava-hf/llava-1.5-7b-hf": (336, 14)}

# repo id -> (transformers config class, keyword arguments)
STANDINS: dict[str, tuple[str, dict]] = {
    # OPTConfig's defaults are opt-125m's architecture.
    "facebook/opt-125m": ("OPTConfig",
                          dict(architectures=["OPTForCausalLM"],
                               torch_dtype="float16")),
    "Qwen/Qwen1.5-7B": ("Qwen2Config",
                        dict(architectures=["Qwen2ForCausalLM"],
                             hidden_size=4096,
                             intermediate_size=11008,
                             num_hidden_layers=32,
                             num_attention_heads=32,
                             num_key_value_heads=32,
                             vocab_size=151936,
                             max_position_embeddings=32768,
                             rope_theta=1000000.0,
                             torch_dtype="bfloat16")),
    "llava-hf/llava-1.5-7b-hf":
    ("LlavaConfig",
     dict(architectures=["LlavaForConditionalGeneration"],
          text_config=dict(model_type="llama", vocab_size=32064, **LLAMA2_7B),
          vision_config=dict(model_type="clip_vision_model",
                             hidden_size=1024,
                             intermediate_size=4096,
                             num_hidden_layers=24,
                             num_attention_heads=16,
                             image_size=336,
                             patch_size=14,
                             projection_dim=768),
          image_token_index=32000,
          vision_feature_layer=-2,
          vision_feature_select_strategy="default",
          torch_dtype="float16")),
}


def hub_cache() -> Path:
    return cache_dir() / "hf-hub-standins"


def write_standins(root: Path | None = None) -> Path:
    """Write every stand-in repo (idempotent) and return the hub cache dir."""
    import transformers

    root = root or hub_cache()
    for repo_id, (class_name, kwargs) in STANDINS.items():
        repo = root / ("models--" + repo_id.replace("/", "--"))
        with tempfile.TemporaryDirectory() as tmp:
            files = Path(tmp)
            train_tokenizer(1024, files)
            if repo_id in LLAVA_PROCESSORS:
                image_token_id = _write_llava_processor(
                    files, *LLAVA_PROCESSORS[repo_id])
                # The placeholder id must be the stand-in tokenizer's.
                kwargs = {**kwargs, "image_token_index": image_token_id}
            config = getattr(transformers, class_name)(**kwargs)
            (files / "config.json").write_text(
                json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
            # A fixed "commit" per content, so refs/main always names a
            # snapshot.
            digest = hashlib.sha1(repo_id.encode())
            for f in sorted(files.iterdir()):
                digest.update(f.name.encode() + f.read_bytes())
            snapshot = repo / "snapshots" / digest.hexdigest()
            if not snapshot.exists():
                snapshot.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(files, snapshot)
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(snapshot.name)
    return root


def _write_llava_processor(snapshot: Path, image_size: int,
                           patch_size: int) -> int:
    from transformers import (CLIPImageProcessor, LlavaProcessor,
                              PreTrainedTokenizerFast)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(snapshot)
    tokenizer.add_tokens(["<image>"], special_tokens=True)
    image_processor = CLIPImageProcessor(size={"shortest_edge": image_size},
                                         crop_size={
                                             "height": image_size,
                                             "width": image_size
                                         })
    LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch_size,
        image_token="<image>",
        vision_feature_select_strategy="default").save_pretrained(snapshot)
    return tokenizer.convert_tokens_to_ids("<image>")
