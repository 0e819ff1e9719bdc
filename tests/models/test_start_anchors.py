"""Keeping the start model's geometry: the two anchor losses and weight interpolation, by hand and on a tiny
BERT, and their place in the fingerprint (off by default: runs made before them keep their folders)."""

from __future__ import annotations

import pytest
import torch

from models.tfcsg.losses import similarity_anchor_loss, weight_anchor_loss  # noqa: E402
from models.tfcsg.model import TfcsgLoss, TfcsgModel  # noqa: E402
from models.training.interpolate import interpolate_export, interpolate_state  # noqa: E402
from samples.tiny_bert import tiny_bert, titles  # noqa: E402
from tasks.train.task import train_fingerprint  # noqa: E402


def test_similarity_anchor_loss_by_hand():
    vectors = torch.tensor([[1.0, 0.0], [0.0, 2.0]])  # cosines: [[1, 0], [0, 1]]
    start = torch.tensor([[3.0, 0.0], [1.0, 0.0]])  # cosines: [[1, 1], [1, 1]]
    # the two off-diagonal entries differ by 1, the diagonal by 0: (0 + 1 + 1 + 0) / 4
    assert similarity_anchor_loss(vectors, start).item() == pytest.approx(0.5)
    # the scale of either side does not matter, only the cosines
    assert similarity_anchor_loss(vectors * 5, vectors).item() == pytest.approx(0.0)
    turned = torch.tensor([[1.0, 1.0], [0.0, 1.0]])  # cos between the rows: 1 / sqrt(2)
    assert similarity_anchor_loss(turned, vectors).item() == pytest.approx(2 * 0.5 / 4)


def test_weight_anchor_loss_by_hand():
    params = [torch.tensor([1.0, 2.0]), torch.tensor([[0.5]])]
    start = [torch.tensor([0.0, 0.0]), torch.tensor([[1.5]])]
    assert weight_anchor_loss(params, start).item() == pytest.approx(1 + 4 + 1)


def test_interpolate_state_by_hand():
    trained = {"w": torch.tensor([2.0, 4.0]), "ids": torch.tensor([5]), "new": torch.tensor([7.0])}
    start = {"w": torch.tensor([0.0, 8.0]), "ids": torch.tensor([1])}
    mixed = interpolate_state(trained, start, 0.25)
    assert mixed["w"].tolist() == [0.5, 7.0]  # 0.25 * 2 + 0.75 * 0, 0.25 * 4 + 0.75 * 8
    assert mixed["ids"].tolist() == [5] and mixed["new"].tolist() == [7.0]  # integers and new tensors: trained
    assert torch.equal(interpolate_state(trained, start, 1.0)["w"], trained["w"])
    assert torch.equal(interpolate_state(trained, start, 0.0)["w"], start["w"])
    with pytest.raises(ValueError, match="within"):
        interpolate_state(trained, start, 1.5)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return tiny_bert(tmp_path_factory.mktemp("anchors") / "bert", [r["title"] for r in titles(64)])


def test_anchors_are_zero_at_the_start_and_measure_the_distance_from_it(bert):
    from transformers import AutoTokenizer

    model = TfcsgModel(str(bert), pooling="mean").eval()  # eval: no dropout, so the start's own geometry
    loss = TfcsgLoss(model, "kw", sim_anchor_weight=1.0, l2sp_weight=1.0)
    tok = AutoTokenizer.from_pretrained(str(bert))
    enc = tok([r["title"] for r in titles(6)], padding=True, return_tensors="pt")
    batch = {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "kw_input_ids": enc["input_ids"][:, :4],
        "kw_attention_mask": enc["attention_mask"][:, :4],
        "topics": torch.arange(6),
        "text_ids": torch.arange(6),
    }
    _, parts = loss(batch)
    assert parts["anchor"].item() == pytest.approx(0.0, abs=1e-10) and parts["l2sp"].item() == 0.0
    with torch.no_grad():
        model.encoder.encoder.layer[0].attention.self.query.weight[0, 0] += 0.1
    _, parts = loss(batch)
    assert parts["l2sp"].item() == pytest.approx(0.01, rel=1e-4)
    assert parts["anchor"].item() > 0
    # the frozen start is not part of the model: not trained, not in its checkpoints
    assert not any(k.startswith("start") for k in model.state_dict())
    assert all(not p.requires_grad for p in loss.start.encoder.parameters())
    assert TfcsgLoss(model, "kw").start is None  # off: no second copy loaded


def test_interpolate_export_mixes_only_the_weights(bert, tmp_path):
    from safetensors.torch import load_file
    from transformers import BertModel

    trained = tmp_path / "trained"
    model = BertModel.from_pretrained(str(bert), add_pooling_layer=False)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    model.save_pretrained(str(trained))
    (trained / "modules.json").write_text("[]")  # stands for the export's other files: copied unchanged
    out = interpolate_export(trained, bert, 0.5, tmp_path / "mixed")
    mixed, before = load_file(str(out / "model.safetensors")), load_file(str(trained / "model.safetensors"))
    for name, value in mixed.items():
        if value.is_floating_point():  # halfway back: (start + 1 + start) / 2
            assert torch.allclose(value, before[name] - 0.5, atol=1e-6), name
    assert (out / "modules.json").read_text() == "[]"
    with pytest.raises(ValueError, match="not the encoder"):
        other = tiny_bert(tmp_path / "other", ["a different vocabulary entirely"])
        interpolate_export(trained, other, 0.5, tmp_path / "bad")


@pytest.mark.parametrize("name, value", [("sim_anchor_weight", 0.1), ("l2sp_weight", 0.01), ("interpolate", 0.5)])
def test_off_by_default_keeps_the_fingerprint(name, value):
    source = {"fingerprint": "abc"}
    default = {"losses": "kw+s2s", "s2s_weight": 2.0}
    before = train_fingerprint(source, default)
    off = {"sim_anchor_weight": 0.0, "l2sp_weight": 0.0, "interpolate": 1.0}[name]
    assert train_fingerprint(source, {**default, name: off}) == before
    assert train_fingerprint(source, {**default, name: value}) != before
