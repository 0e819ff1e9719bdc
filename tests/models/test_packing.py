"""Sequence packing: a packed batch gives the padded batch's per-sentence vectors, losses and gradients."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from models.gur.losses import GurLoss  # noqa: E402
from models.gur.model import GurModel, pool, preset_config  # noqa: E402
from models.gur.packing import (  # noqa: E402
    first_fit_decreasing,
    pack_encoder,
    pad_label_width,
    pool_segments,
    shift_right_in_segments,
)
from models.gur.pair_data import collate  # noqa: E402
from models.gur.tokenizer import train_wordpiece  # noqa: E402
from models.training.measures import count_tokens  # noqa: E402
from samples.train_shards import TINY_PAIRS as PAIRS  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny matrices: one intra-op thread (conftest)


@pytest.fixture(scope="module")
def tok():
    return train_wordpiece([t for p in PAIRS for t in p[1:]] * 5, vocab_size=300, min_frequency=1)


def tiny(tok, **kw) -> GurModel:
    torch.manual_seed(0)
    cfg = preset_config(
        "tiny", vocab_size=tok.vocab_size, pad_id=tok.pad_id, eos_id=tok.eos_id, cls_id=tok.cls_id, dropout=0.0, **kw
    )
    return GurModel(cfg)


def test_first_fit_decreasing_fills_rows_within_the_width():
    rng = np.random.default_rng(0)
    for _ in range(50):
        lengths = rng.integers(1, 33, size=int(rng.integers(1, 40))).tolist()
        rows = first_fit_decreasing(lengths, 32)
        assert sorted(i for row in rows for i in row) == list(range(len(lengths)))  # each once
        assert all(sum(lengths[i] for i in row) <= 32 for row in rows)
        assert len(rows) <= 2 * -(-sum(lengths) // 32)  # any first-fit uses fewer than twice the minimum
        assert rows == first_fit_decreasing(lengths, 32)  # deterministic
    assert first_fit_decreasing([5, 20, 10, 12], 32) == [[1, 3], [0, 2]]  # 20+12, then 10+5
    with pytest.raises(ValueError, match="33 tokens does not fit a packed row of 32"):
        first_fit_decreasing([33], 32)


def test_shift_right_in_one_segment_is_t5s_shift_right():
    model = tiny(train_wordpiece(["a b c"] * 3, vocab_size=50))
    labels = torch.randint(3, 50, (5, 9))
    labels[:, 6:] = -100
    ours = shift_right_in_segments(labels, torch.ones_like(labels), 0, 0)
    assert torch.equal(ours, model.seq2seq._shift_right(labels))
    packed = torch.tensor([[7, 8, 9, 4, 5, -100]])
    segments = torch.tensor([[1, 1, 1, 2, 2, 0]])
    assert shift_right_in_segments(packed, segments, 0, 0).tolist() == [[0, 7, 8, 0, 4, 0]]


def test_pool_segments_equals_pool_on_the_padded_rows():
    g = torch.Generator().manual_seed(0)
    seqs = [list(range(n)) for n in (5, 9, 3, 12, 7)]
    packed, _ = pack_encoder(seqs, 16, 0, fixed_width=False)
    hidden = torch.randn(*packed["input_ids"].shape, 4, generator=g)
    flat = hidden.reshape(-1, 4)
    padded = torch.zeros(len(seqs), 12, 4)
    mask = torch.zeros(len(seqs), 12, dtype=torch.long)
    for i, s in enumerate(seqs):
        start = int(packed["sentence_starts"][i])
        padded[i, : len(s)] = flat[start : start + len(s)]
        mask[i, : len(s)] = 1
    for mode in ("cls", "mean", "eos"):
        got = pool_segments(hidden, packed["segment_ids"], packed["sentence_starts"], packed["sentence_ends"], mode)
        torch.testing.assert_close(got, pool(padded, mask, mode))


def losses_and_grads(model: GurModel, batch: dict, objective: str = "lm+cl"):
    loss, parts = GurLoss(model, objective)(batch)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return loss.detach(), {k: v.detach() for k, v in parts.items()}, grads


@pytest.mark.parametrize(
    "attention,pooling,fused",
    [("eager", "cls", False), ("sdpa", "mean", False), ("sdpa", "eos", True), ("eager", "mean", True)],
)
def test_packed_batch_gives_the_padded_batchs_vectors_losses_and_grads(tok, attention, pooling, fused):
    padded = collate(PAIRS, tok, 32, np.random.default_rng(7))
    packed = collate(PAIRS, tok, 32, np.random.default_rng(7), pack_len=32)
    assert packed["input_ids"].shape[0] < padded["input_ids"].shape[0]  # several sentences share a row
    assert count_tokens(packed) == count_tokens(padded)  # the same real tokens and targets
    reference = tiny(tok, pooling=pooling)  # transformers' own padded forward
    model = tiny(tok, pooling=pooling, attention=attention, fused_lm_head=fused)
    with torch.no_grad():
        want = reference(padded["input_ids"], padded["attention_mask"])["embeddings"]
        views = {k: packed[k] for k in ("segment_ids", "sentence_starts", "sentence_ends")}
        got = model(packed["input_ids"], packed["attention_mask"], packed=views)["embeddings"]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)  # one vector per sentence, in sentence order
    loss0, parts0, grads0 = losses_and_grads(reference, padded)
    loss1, parts1, grads1 = losses_and_grads(model, packed)
    torch.testing.assert_close(loss1, loss0, rtol=1e-5, atol=1e-5)
    for k in ("lm", "cl", "acc"):
        torch.testing.assert_close(parts1[k], parts0[k], rtol=1e-5, atol=1e-5)
    assert grads1.keys() == grads0.keys()
    for name, grad in grads1.items():
        torch.testing.assert_close(grad, grads0[name], rtol=1e-4, atol=1e-5, msg=name)


def test_packed_clean_views_and_wide_rows(tok):
    """Clean views are packed too; a row wider than the bucket holds more sentences and still matches."""
    padded = collate(PAIRS, tok, 32, np.random.default_rng(3), clean_views=True)
    packed = collate(PAIRS, tok, 32, np.random.default_rng(3), clean_views=True, pack_len=64)
    assert packed["cl_input_ids"].shape[0] < padded["cl_input_ids"].shape[0]
    assert torch.equal(  # the same clean tokens, in the same order
        packed["cl_input_ids"].flatten()[packed["cl_attention_mask"].flatten() > 0].sort().values,
        padded["cl_input_ids"].flatten()[padded["cl_attention_mask"].flatten() > 0].sort().values,
    )
    loss = GurLoss(tiny(tok), "cl")
    with torch.no_grad():
        want = loss(padded)[1]["cl"]
        got = GurLoss(tiny(tok, attention="sdpa"), "cl")(packed)[1]["cl"]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_packed_rows_hold_each_sentence_whole_and_targets_in_their_segment(tok):
    batch = collate(PAIRS, tok, 32, np.random.default_rng(1), pack_len=32, fixed_shape=True)
    assert batch["input_ids"].shape[1] == 32
    seg, dseg = batch["segment_ids"], batch["decoder_segment_ids"]
    n = 2 * len(PAIRS)
    for s in range(1, n + 1):
        rows = (seg == s).any(1).nonzero().flatten().tolist()
        assert len(rows) == 1  # a sentence never spans two rows
        where = (seg[rows[0]] == s).nonzero().flatten()
        assert where.tolist() == list(range(int(where[0]), int(where[-1]) + 1))  # contiguous
        assert int(batch["input_ids"][rows[0], where[0]]) == tok.cls_id
        assert set((dseg == s).any(1).nonzero().flatten().tolist()) <= set(rows)  # targets beside their sentence
    assert all((batch["labels"][dseg == 0] == -100).tolist())


def test_compiled_model_compiles_once_over_packed_batches_of_varying_sizes(tok):
    """Packed batches differ in row count and label width; GurLoss marks those sizes dynamic before the compiled
    model sees the first batch, so dynamo compiles each frame once instead of again at each new size (a GPU
    window's setup was three compiles of about 75 s each)."""
    torch._dynamo.reset()
    graphs: list[int] = []

    def counting(gm, example_inputs):  # dynamo's graph capture and guards are the backend's input: eager is enough
        graphs.append(len(gm.graph.nodes))
        return gm.forward

    rng = np.random.default_rng(5)
    batches = [
        collate(
            [PAIRS[i] for i in rng.choice(len(PAIRS), size=n, replace=False)],
            tok,
            32,
            rng,
            pack_len=32,
            fixed_shape=True,
        )
        for n in (len(PAIRS), len(PAIRS) - 2, len(PAIRS) - 4)
    ]
    assert len({tuple(b["input_ids"].shape) for b in batches}) > 1  # the row counts differ
    assert min(b["input_ids"].shape[0] for b in batches) > 1  # (a size of 1 is always specialised)
    assert len({tuple(b["labels"].shape) for b in batches}) > 1  # and so do the label widths
    model = tiny(tok, attention="sdpa")
    loss_fn = GurLoss(torch.compile(model, backend=counting), "lm+cl")
    eager = GurLoss(model, "lm+cl")
    for i, batch in enumerate(batches):
        got = loss_fn(batch)[0]
        if i == 0:
            first = len(graphs)
        with torch.no_grad():
            torch.testing.assert_close(got.detach(), eager(batch)[0], rtol=1e-5, atol=1e-5)
    assert first > 0
    assert len(graphs) == first, f"recompiled: {len(graphs) - first} more graphs after the first batch"
    torch._dynamo.reset()


@pytest.mark.parametrize("fused", [False, True])
def test_label_width_padded_to_16_gives_the_same_loss(tok, fused):
    """A compiled model gets label widths rounded to 16 (CUDA's efficient-attention backward guards on the width
    modulo 16: widths of 40 and 48 compiled the LM loss twice on one H200); the extra targets are ignored
    ones at the end of each row, so the LM and contrastive losses and the gradients are the eager ones."""
    rng = np.random.default_rng(3)
    batch = collate(PAIRS, tok, 32, rng, pack_len=64, fixed_shape=True)
    assert batch["labels"].shape[1] % 16, "this test needs a width that is not a multiple of 16"
    padded = pad_label_width(batch)
    assert padded["labels"].shape[1] % 16 == 0 and padded["labels"].shape[1] > batch["labels"].shape[1]
    assert padded["decoder_segment_ids"].shape == padded["labels"].shape
    assert pad_label_width(padded) is padded  # already a multiple: unchanged
    width = batch["labels"].shape[1]
    assert torch.equal(padded["labels"][:, :width], batch["labels"]) and (padded["labels"][:, width:] == -100).all()
    model = tiny(tok, attention="sdpa", fused_lm_head=fused)
    loss_fn = GurLoss(model, "lm+cl")
    results = []
    for b in (batch, padded):
        model.zero_grad()
        loss, parts = loss_fn(b)
        loss.backward()
        results.append((parts["lm"].detach(), parts["cl"].detach(), [p.grad.clone() for p in model.parameters()]))
    (lm0, cl0, g0), (lm1, cl1, g1) = results
    torch.testing.assert_close(lm1, lm0, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cl1, cl0, rtol=1e-5, atol=1e-6)
    for a, b in zip(g0, g1, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
