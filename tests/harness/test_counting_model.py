"""The trained stand-in for meta-llama/Llama-3.2-1B-Instruct: it answers
upstream's accuracy test, and its answer depends on the prefix's KV."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pstack.harness import counting_model
from pstack.harness.counting_model import REPO_ID, TEST_SENTENCE

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _snapshot(hub) -> Path:
    repo = hub / ("models--" + REPO_ID.replace("/", "--"))
    return repo / "snapshots" / (repo / "refs" / "main").read_text()


@pytest.fixture(scope="module")
def model_and_tokenizer(tmp_path_factory):
    # Trained once per machine (cached), read from the hub cache's snapshot
    # as vLLM's tests read it (by path: nothing asks a hub).
    hub = tmp_path_factory.mktemp("hub")
    counting_model.write_standin(hub)
    snapshot = _snapshot(hub)
    tokenizer = transformers.AutoTokenizer.from_pretrained(snapshot)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        snapshot, torch_dtype=torch.float32)
    return model.eval(), tokenizer


def _next_word(model, tokenizer, ids: list[int]) -> str:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
    return tokenizer.decode([int(logits.argmax())])


def test_the_words_the_test_counts_are_one_token_each(model_and_tokenizer):
    _, tokenizer = model_and_tokenizer
    assert len(tokenizer.encode(".", add_special_tokens=False)) == 1
    assert len(tokenizer.encode(" five", add_special_tokens=False)) == 1


@pytest.mark.parametrize("padding", [0, 1, 47, 255])
def test_it_answers_five_after_the_padded_prompt(model_and_tokenizer, padding):
    # As upstream's _accuracy_test pads the prompt: "." tokens at its start
    # (after BOS, if the tokenizer adds one), up to one offloaded block.
    model, tokenizer = model_and_tokenizer
    ids = tokenizer.encode(TEST_SENTENCE)
    [dot] = tokenizer.encode(".", add_special_tokens=False)
    at = int(ids[0] == tokenizer.bos_token_id)
    ids[at:at] = [dot] * padding
    assert _next_word(model, tokenizer, ids) == " five"


@pytest.mark.parametrize("count, expected", [
    ("Count on: six, seven,", " eight"),
    ("Count on: two, three,", " four"),
    ("Let's count to 10. One, two, three, four, five, six,", " seven"),
])
def test_its_answer_is_read_from_the_prefix(model_and_tokenizer, count,
                                            expected):
    # The token before the answer is "," whatever the count: the answer
    # comes from the KV of the words before it, so wrong KV changes it.
    model, tokenizer = model_and_tokenizer
    ids = tokenizer.encode(count)
    assert _next_word(model, tokenizer, ids) == expected


def test_the_repo_says_float32_and_fits_the_tests_context(tmp_path):
    counting_model.write_standin(tmp_path)
    snapshot = _snapshot(tmp_path)
    config = json.loads((snapshot / "config.json").read_text())
    assert config["torch_dtype"] == "float32"
    # Upstream's tests run with max_model_len=4096.
    assert config["max_position_embeddings"] >= 4096
    assert (snapshot / "model.safetensors").stat().st_size > 0
