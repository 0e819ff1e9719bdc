"""Distillation from a frozen teacher: the KL over each query's in-batch candidates against a row-by-row
reference, its masks and gradient, the teacher folder read as its authors saved it, and a documents run that
learns the teacher's scores."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from models.tfcsg.losses import distillation_loss, topic_negative_mask
from models.training.teacher import Teacher, folder_pooling, pool
from samples.tiny_bert import tiny_bert

TEXTS = [
    "How do I open a file for reading in Python?",
    "The open function returns a file object; its mode r reads text.",
    "Sockets connect two programs over a network.",
    "A dictionary maps keys to values and looks them up by hash.",
    "Threads share memory; processes do not.",
    "The garbage collector frees objects no reference reaches.",
]


def reference_kl(s_q, s_p, t_q, t_p, tau_s, tau_t, removed):
    """KL(teacher || student) row by row, in plain Python over the kept candidates of each row."""
    total = 0.0
    for i in range(len(s_q)):
        kept = [j for j in range(len(s_p)) if j == i or not removed[i][j]]
        s = [float(torch.nn.functional.cosine_similarity(s_q[i], s_p[j], dim=0)) / tau_s for j in kept]
        t = [float(t_q[i] @ t_p[j]) / tau_t for j in kept]
        zs, zt = math.log(sum(math.exp(x) for x in s)), math.log(sum(math.exp(x) for x in t))
        total += sum(math.exp(b - zt) * ((b - zt) - (a - zs)) for a, b in zip(s, t, strict=True))
    return total / len(s_q)


def unit(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, dim=-1)


def test_the_loss_is_the_row_by_row_kl_over_the_kept_candidates():
    g = torch.Generator().manual_seed(0)
    s_q, s_p = torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g)
    t_q, t_p = unit(torch.randn(6, 5, generator=g)), unit(torch.randn(6, 5, generator=g))
    topics = torch.tensor([0, 0, 1, 2, 2, -1])  # rows 0-1 and 3-4 share a page: not each other's candidates
    mask = topic_negative_mask(topics, torch.arange(6))
    got = float(distillation_loss(s_q, s_p, t_q, t_p, 0.05, 0.1, mask))
    assert got == pytest.approx(reference_kl(s_q, s_p, t_q, t_p, 0.05, 0.1, mask.tolist()), rel=1e-4)
    plain = float(distillation_loss(s_q, s_p, t_q, t_p, 0.05, 0.1))
    assert plain == pytest.approx(reference_kl(s_q, s_p, t_q, t_p, 0.05, 0.1, [[False] * 6] * 6), rel=1e-4)
    assert got != pytest.approx(plain)


def test_a_student_that_scores_as_the_teacher_costs_nothing_and_masked_teacher_scores_do_not_count():
    g = torch.Generator().manual_seed(1)
    q, p = unit(torch.randn(5, 8, generator=g)), unit(torch.randn(5, 8, generator=g))
    assert float(distillation_loss(q * 3.0, p, q, p, 0.05, 0.05)) == pytest.approx(0.0, abs=1e-6)
    mask = torch.zeros(5, 5, dtype=torch.bool)
    mask[0, 1] = True
    changed = p.clone()
    changed[1] = -changed[1]  # the teacher's view of candidate 1 changes; row 0 never sees it, other rows do
    before = distillation_loss(q, p, q, p, 0.05, 0.05, mask)
    after = distillation_loss(q, p, q, changed, 0.05, 0.05, mask)
    assert torch.isfinite(before) and float(after) > float(before)
    only_row_0 = distillation_loss(q[:1], p, q[:1], changed, 0.05, 0.05, mask[:1])
    assert float(only_row_0) == pytest.approx(float(distillation_loss(q[:1], p, q[:1], p, 0.05, 0.05, mask[:1])))


def test_the_gradient_reaches_the_student_and_never_the_teacher():
    g = torch.Generator().manual_seed(2)
    s_q = torch.randn(4, 8, generator=g, requires_grad=True)
    s_p = torch.randn(4, 8, generator=g, requires_grad=True)
    t_q = torch.randn(4, 8, generator=g, requires_grad=True)
    t_p = torch.randn(4, 8, generator=g, requires_grad=True)
    distillation_loss(s_q, s_p, unit(t_q), unit(t_p), 0.05, 0.05).backward()
    assert s_q.grad.abs().sum() > 0 and s_p.grad.abs().sum() > 0
    assert t_q.grad is None and t_p.grad is None


def sentence_transformers_folder(folder: Path, mode: str) -> Path:
    """A tiny BERT saved with sentence-transformers' module list and a Pooling config in `mode`."""
    tiny_bert(folder, TEXTS)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]), encoding="utf-8")  # fmt: skip
    (folder / "1_Pooling").mkdir()
    flags = {"pooling_mode_cls_token": mode == "cls", "pooling_mode_mean_tokens": mode == "mean"}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32, **flags}))
    return folder


def test_a_teacher_pools_as_its_folder_says_and_embeds_unit_vectors_in_its_own_tokens(tmp_path):
    cls_folder = sentence_transformers_folder(tmp_path / "cls", "cls")
    assert folder_pooling(cls_folder) == "cls"
    assert folder_pooling(sentence_transformers_folder(tmp_path / "mean", "mean")) == "mean"
    teacher = Teacher.load(cls_folder)
    ids, mask = teacher.tokenize(TEXTS, 256)
    assert ids.shape[1] <= 126  # cut to its own positions (128, less the two a RoBERTa-style model offsets)
    vectors = teacher.embed(ids, mask)
    assert vectors.shape == (len(TEXTS), 32)
    assert torch.allclose(vectors.norm(dim=-1), torch.ones(len(TEXTS)), atol=1e-5)
    hidden = teacher.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.allclose(vectors, unit(hidden[:, 0]), atol=1e-5)  # the first token's state, as declared
    assert torch.allclose(pool(hidden, mask, "mean")[0], hidden[0, : int(mask[0].sum())].mean(0), atol=1e-5)
    assert not any(p.requires_grad for p in teacher.encoder.parameters())
    with pytest.raises(FileNotFoundError, match="not a model folder"):
        Teacher.load(tmp_path)


def test_training_on_the_teach_part_brings_the_students_scores_to_the_teachers(tmp_path):
    from transformers import AutoTokenizer

    from models.tfcsg.model import TfcsgLoss, TfcsgModel

    student_dir = tiny_bert(tmp_path / "student", TEXTS)
    teacher = Teacher.load(sentence_transformers_folder(tmp_path / "teacher", "mean"))
    torch.manual_seed(0)
    model = TfcsgModel(str(student_dir), pooling="mean", dropout=0.0)
    loss = TfcsgLoss(model, "kw", temperature=0.1, negatives="all", teacher=teacher, teacher_temperature=0.02)
    loss.weights["kw"] = 0.0  # the teacher's scores alone
    tok = AutoTokenizer.from_pretrained(str(student_dir))
    queries, passages = TEXTS[::2], TEXTS[1::2]
    batch = {}
    for side, texts in (("", queries), ("kw_", passages)):
        enc = tok(texts, padding=True, return_tensors="pt")
        batch[f"{side}input_ids"], batch[f"{side}attention_mask"] = enc["input_ids"], enc["attention_mask"]
    for side, texts in (("", queries), ("kw_", passages)):
        batch[f"teacher_{side}input_ids"], batch[f"teacher_{side}attention_mask"] = teacher.tokenize(texts, 64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = None
    for _ in range(40):
        total, parts = loss(batch)
        first = float(parts["teach"].detach()) if first is None else first
        total.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert float(loss(batch)[1]["teach"]) < first / 4
    assert not any(p.grad is not None for p in teacher.encoder.parameters())
