"""The STS CSV reader's errors and rejects, the metrics against SciPy, the loop's schedule and batches."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from models.sts.train import StsTrainConfig, train_order
from models.training.schedule import get_lr
from tasks.sts.data import StsPairs, average_ranks, read_sts_csv, split_holdout, sts_metrics


def _write(tmp_path, text: str):
    path = tmp_path / "pairs.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_reader_reads_quoted_fields_and_counts_blank_lines(tmp_path):
    path = _write(tmp_path, 'A man plays.,"A man, playing.",4.2\n\n,,\nx,y,0\n')
    pairs = read_sts_csv(path)
    assert pairs.a == ["A man plays.", "x"] and pairs.b == ["A man, playing.", "y"]
    assert pairs.score.tolist() == [4.2, 0.0] and pairs.rejects == 2


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("a,b,1\na,b\n", 2, "expected 3 columns"),
        ("a,b,1\na,b,1,extra\n", 2, "expected 3 columns"),
        ("a,b,1\n\na,b,high\n", 3, "is not a number"),
        ('"multi\nline",b,1\na,b,5.5\n', 3, "outside [0, 5]"),
        ("a,b,-0.1\n", 1, "outside [0, 5]"),
        ("a,b,nan\n", 1, "outside [0, 5]"),
    ],
)
def test_reader_errors_name_file_and_line(tmp_path, text, line, reason):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError) as err:
        read_sts_csv(path)
    assert str(err.value).startswith(f"{path}:{line}: ") and reason in str(err.value)
    assert "\n" not in str(err.value)


def test_reader_missing_and_empty_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such.csv: no such STS file"):
        read_sts_csv(tmp_path / "no-such.csv")
    with pytest.raises(ValueError, match="no sentence pairs"):
        read_sts_csv(_write(tmp_path, "\n\n"))


def test_metrics_equal_scipy_on_random_predictions():
    rng = np.random.default_rng(0)
    for n in (2, 7, 100, 1000):
        gold = rng.integers(0, 11, n) / 2.0  # many ties, as in STS-B
        pred = np.round(rng.random(n), 1)  # ties on the prediction side too
        got = sts_metrics(pred, gold)
        assert got["mse"] == pytest.approx(np.mean((pred - gold / 5) ** 2), rel=1e-12)
        assert got["pearson"] == pytest.approx(stats.pearsonr(pred, gold).statistic, abs=1e-12)
        assert got["spearman"] == pytest.approx(stats.spearmanr(pred, gold).statistic, abs=1e-12)
        assert np.array_equal(average_ranks(pred), stats.rankdata(pred))


def test_metrics_hand_example():
    # predictions 0.2, 0.4, 1.0 against gold 1, 2, 5 (scaled 0.2, 0.4, 1.0): perfect, MSE 0
    assert sts_metrics(np.array([0.2, 0.4, 1.0]), np.array([1.0, 2.0, 5.0])) == pytest.approx(
        {"mse": 0.0, "pearson": 1.0, "spearman": 1.0}
    )
    with pytest.raises(ValueError, match="equal-length"):
        sts_metrics(np.zeros(3), np.zeros(4))


def test_schedule_and_batches():
    config = StsTrainConfig(lr=1.0, warmup=0.1, schedule="linear", batch_size=4, epochs=2)
    lrs = [get_lr(s, 100, int(config.warmup * 100), config.schedule, config.lr) for s in range(100)]  # as the loop
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)  # 10 warmup steps
    assert lrs[10] == pytest.approx(1.0) and lrs[99] == pytest.approx(1 / 90)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False))
    batches = train_order(10, config)
    assert len(batches) == 6 and sorted(np.concatenate(batches[:3]).tolist()) == list(range(10))
    assert [b.tolist() for b in batches] == [b.tolist() for b in train_order(10, config)]  # seeded
    half = train_order(10, StsTrainConfig(batch_size=4, epochs=0.5))
    assert len(half) == 2
    sub = train_order(100, StsTrainConfig(batch_size=8, subsample=20, epochs=2))
    assert len(sub) == 6 and len(set(np.concatenate(sub).tolist())) == 20
    assert len(train_order(100, StsTrainConfig(batch_size=8, max_steps=3))) == 3


def test_cosent_against_a_loop():
    import math

    import torch

    from models.sts.train import cosent_loss

    rng = np.random.default_rng(1)
    for n in (1, 2, 5, 12):
        pred = rng.uniform(-1, 1, n)
        target = rng.integers(0, 4, n) / 3.0  # ties give no pair
        total = 1.0 + sum(
            math.exp(20 * (pred[j] - pred[i])) for i in range(n) for j in range(n) if target[i] > target[j]
        )
        got = cosent_loss(torch.tensor(pred), torch.tensor(target))
        assert float(got) == pytest.approx(math.log(total), rel=1e-9)
    # a correctly ordered, well separated batch costs almost nothing; the reversed order a lot
    good = cosent_loss(torch.tensor([0.9, 0.5, 0.1]), torch.tensor([1.0, 0.5, 0.0]))
    bad = cosent_loss(torch.tensor([0.1, 0.5, 0.9]), torch.tensor([1.0, 0.5, 0.0]))
    assert float(good) < 1e-3 and float(bad) > 15


def test_holdout_is_a_seeded_disjoint_share_in_file_order():
    n = 101
    pairs = StsPairs("t.csv", [f"a{i}" for i in range(n)], [f"b{i}" for i in range(n)], np.arange(n) % 6.0, rejects=3)
    fit, held = split_holdout(pairs, 0.2)
    again_fit, again_held = split_holdout(pairs, 0.2)
    assert len(held) == 20 and len(fit) == 81 and held.a == again_held.a and fit.a == again_fit.a
    assert sorted(fit.a + held.a) == sorted(pairs.a)  # every pair on exactly one side
    idx = [int(a[1:]) for a in held.a]
    assert idx == sorted(idx) and idx != list(range(20))  # file order, not the first rows
    assert held.b == [f"b{i}" for i in idx] and held.score.tolist() == [i % 6.0 for i in idx]
    assert fit.rejects == 3 and held.rejects == 0  # the file's blank lines are counted once
    assert set(split_holdout(pairs, 0.3)[1].a) > set(held.a)  # a larger share holds the smaller one's pairs
    for bad in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="between 0 and 1"):
            split_holdout(pairs, bad)
    with pytest.raises(ValueError, match="t.csv: a holdout of 0.001 of 101 pairs leaves one side empty"):
        split_holdout(pairs, 0.001)
