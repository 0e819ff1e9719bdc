"""The TFCSG model on a tiny random BERT: the seq2seq mask inside the encoder, which parameters each loss
trains, topic-masked batches, and the question stream's order and resume."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from models.tfcsg.model import TfcsgLoss, TfcsgModel  # noqa: E402
from models.tfcsg.question_data import QuestionConfig, QuestionData, QuestionStream  # noqa: E402
from samples.tiny_bert import tiny_bert, titles  # noqa: E402


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from transformers import AutoTokenizer

    base = tmp_path_factory.mktemp("tfcsg-model")
    rows = titles(64)
    folder = tiny_bert(base / "bert", [r["title"] for r in rows])
    table = pa.table(
        {
            "doc_id": [f"so:{r['id']}" for r in rows],
            "sent_id": pa.array([0] * len(rows), pa.int32()),
            "text": [r["title"] for r in rows],
            "topic": pa.array([i % 3 if i % 7 else None for i in range(len(rows))], pa.int32()),
            "keywords": [r["title"].split()[-2:] for r in rows],
        }
    )
    (base / "kw").mkdir()
    pq.write_table(table, base / "kw" / "part-00000.parquet")
    return {"model": str(folder), "source": str(base / "kw"), "tok": AutoTokenizer.from_pretrained(str(folder))}


def data(world, **kw) -> QuestionData:
    cfg = QuestionConfig(source=world["source"], batch_size=8, heldout_fraction=0.0, need_s2s=True, **kw)
    return QuestionData(cfg, world["tok"])


def test_s2s_logits_see_the_question_and_only_earlier_keywords(world):
    torch.manual_seed(0)
    model = TfcsgModel(world["model"], dropout=0.0).eval()
    batch = data(world).collate(np.arange(4))
    logits, labels = model.s2s_logits(batch)
    assert (labels == batch["s2s_labels"][batch["s2s_labels"] != -100]).all()
    # change the last keyword token of row 0: the logits of every earlier labelled position stay the same
    changed = {k: v.clone() for k, v in batch.items()}
    real = int(batch["s2s_attention_mask"][0].sum())
    last_keyword = real - 2  # before the closing [SEP]
    changed["s2s_input_ids"][0, last_keyword] = 5
    logits2, _ = model.s2s_logits(changed)
    row0 = int((batch["s2s_labels"][0] != -100).sum())
    assert torch.allclose(logits[: row0 - 1], logits2[: row0 - 1], atol=1e-5)
    assert not torch.allclose(logits[row0 - 1], logits2[row0 - 1])  # the position that reads it does change
    # changing a question token changes every prediction of the row (the target reads the whole source)
    changed = {k: v.clone() for k, v in batch.items()}
    changed["s2s_input_ids"][0, 1] = 5
    logits3, _ = model.s2s_logits(changed)
    assert not torch.isclose(logits[:row0], logits3[:row0], atol=1e-6).all(dim=-1).any()


def test_s2s_runs_under_bf16_autocast(world):
    """The additive seq2seq mask takes the autocast dtype (SDPA refuses a float mask of another dtype)."""
    torch.manual_seed(0)
    model = TfcsgModel(world["model"], dropout=0.0).eval()
    batch = data(world).collate(np.arange(4))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, _ = model.s2s_logits(batch)
    full, _ = model.s2s_logits(batch)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()
    assert torch.allclose(logits.float(), full, atol=0.1, rtol=0.05)


@pytest.mark.parametrize(
    "losses, trained, untouched",
    [
        ("kw", {"encoder"}, {"ae", "lm_head"}),
        ("cl+kl", {"encoder", "ae"}, {"lm_head"}),
        ("cl+s2s", {"encoder", "lm_head"}, {"ae"}),
        ("kw+kl+s2s", {"encoder", "ae", "lm_head"}, set()),
    ],
)
def test_each_loss_trains_its_own_parameters(world, losses, trained, untouched):
    torch.manual_seed(0)
    model = TfcsgModel(world["model"])
    loss_fn = TfcsgLoss(model, losses, temperature=0.05, negatives="topic-masked")
    loss, parts = loss_fn(data(world).collate(np.arange(8)))
    assert set(parts) == {*losses.split("+"), "acc"} and torch.isfinite(loss)
    loss.backward()
    groups = {
        "encoder": [p for n, p in model.encoder.named_parameters() if "word_embeddings" not in n],
        "ae": list(model.ae.parameters()),
        "lm_head": [p for n, p in model.mlm.named_parameters() if "transform" in n],
    }
    for name in trained:
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in groups[name]), name
    for name in untouched:
        assert all(p.grad is None or p.grad.abs().sum() == 0 for p in groups[name]), name


def test_kl_target_is_detached_unless_asked(world):
    torch.manual_seed(0)
    batch = data(world).collate(np.arange(8))
    # keyword sequences made of one token that no question holds: it reaches the encoder only through h_t
    unused = next(t for t in range(5, 400) if t not in batch["input_ids"].unique().tolist())
    words = batch["kw_attention_mask"].bool() & (batch["kw_input_ids"] > 4)
    batch["kw_input_ids"] = batch["kw_input_ids"].masked_fill(words, unused)
    grads = {}
    for detach in (True, False):
        model = TfcsgModel(world["model"], dropout=0.0)
        _, parts = TfcsgLoss(model, "kl", kl_detach_target=detach)(batch)
        parts["kl"].backward()
        grads[detach] = model.encoder.embeddings.word_embeddings.weight.grad[unused]
    assert grads[True].abs().sum() == 0
    assert grads[False].abs().sum() > 0


def test_stream_covers_each_row_once_per_epoch_and_resumes(world):
    d = data(world)
    stream = QuestionStream(d)
    assert stream.steps_for(1) == 8 and stream.steps_for(2.5) == 20
    seen = np.concatenate([stream.rows(i) for i in range(8)])
    assert sorted(seen.tolist()) == list(range(64))
    second = np.concatenate([stream.rows(i) for i in range(8, 16)])
    assert sorted(second.tolist()) == list(range(64)) and (second != seen).any()  # a new order per epoch
    for _ in range(3):
        stream.next_batch()
    again = QuestionStream(d)
    again.load_state_dict(stream.state_dict())
    assert torch.equal(again.next_batch()[1]["input_ids"], stream.next_batch()[1]["input_ids"])
    # two ranks split each global batch between them
    ranks = [QuestionStream(d, rank=r, world_size=2) for r in (0, 1)]
    single = QuestionStream(d)
    assert (
        np.concatenate([s.rows(0) for s in ranks]).tolist()
        == np.concatenate([single.rows(0), single.rows(1)]).tolist()
    )


def test_labels_and_topics_in_a_batch(world):
    d = data(world)
    batch = d.collate(np.arange(3))
    tok = world["tok"]
    for i in range(3):
        ids = batch["s2s_input_ids"][i][batch["s2s_attention_mask"][i].bool()].tolist()
        first_sep = ids.index(tok.sep_token_id)
        target = [t for t in batch["s2s_labels"][i].tolist() if t != -100]
        assert target == ids[first_sep + 1 :]  # keyword tokens and the closing [SEP], predicted from the left
        assert batch["s2s_segments"][i][first_sep + 1 : len(ids)].eq(1).all()
    assert batch["topics"].tolist() == [-1, 1, 2]  # row 0's topic is null in the table


def test_truncation_is_counted_and_missing_keywords_named(world, tmp_path):
    d = data(world, max_len=6)
    assert d.counts()["truncated_questions"] > 0 and max(len(r) for r in d.q_ids) == 4
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"text": ["one question", "another one"]}), plain)
    with pytest.raises(ValueError, match="no `keywords` column.*gur mine-keywords"):
        QuestionData(QuestionConfig(source=str(plain), heldout_fraction=0.0), world["tok"])
    with pytest.raises(ValueError, match="no column 'title'; columns: text"):
        QuestionData(QuestionConfig(source=str(plain), text_field="title", need_keywords=False), world["tok"])


def test_attention_dropout_is_set_apart_from_the_rest(world):
    """`attention_dropout` sets the attention probabilities' dropout alone: at 0 with no other dropout a training
    pass equals an evaluation pass; with it on two training passes differ; the hidden dropout keeps `dropout`."""
    ids = world["tok"](["how to sort a list", "read a file in python"], padding=True, return_tensors="pt")
    args = (ids["input_ids"], ids["attention_mask"])

    def two_passes(model):
        torch.manual_seed(0)
        return model.sentence(*args), model.sentence(*args)

    with torch.no_grad():
        none = TfcsgModel(world["model"], dropout=0.0, attention_dropout=0.0).train()
        first, second = two_passes(none)
        assert torch.equal(first, second) and torch.allclose(first, none.eval().sentence(*args), atol=1e-6)
        first, second = two_passes(TfcsgModel(world["model"], dropout=0.0, attention_dropout=0.5).train())
        assert not torch.allclose(first, second)
        hidden_only = TfcsgModel(world["model"], dropout=0.1, attention_dropout=0.0)
        assert hidden_only.encoder.config.attention_probs_dropout_prob == 0.0
        assert hidden_only.encoder.config.hidden_dropout_prob == 0.1
        first, second = two_passes(hidden_only.train())
        assert not torch.allclose(first, second)
    with pytest.raises(ValueError, match="attention_dropout must be within"):
        TfcsgModel(world["model"], attention_dropout=1.0)
