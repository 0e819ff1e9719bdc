"""Supervised STS data: the STS-B CSV reader with its error policy, and the survey's metrics.

A file is `sentence1,sentence2,score` without a header (quoted where needed), score in [0, 5].
A blank line is counted as a reject and skipped; anything else malformed (a missing column, a
score that is not a number or lies outside [0, 5]) stops the read with `file:line: reason`,
because a silently skipped labelled pair changes the benchmark.

Metrics (the survey's): MSE between the prediction and score / 5, Pearson and Spearman of
prediction vs gold. Spearman is Pearson on average ranks (ties share their mean rank), as SciPy.

`split_holdout` carves a seeded share of the training pairs out as a selection split, so settings
can be chosen without looking at dev (the split a table reports).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAX_SCORE = 5.0


@dataclass(frozen=True)
class StsPairs:
    """Sentence pairs with gold scores in [0, 5]; `rejects` counts skipped blank lines."""

    path: str
    a: list[str]
    b: list[str]
    score: np.ndarray
    rejects: int = 0

    def __len__(self) -> int:
        return len(self.a)

    def head(self, n: int) -> StsPairs:
        return StsPairs(self.path, self.a[:n], self.b[:n], self.score[:n], self.rejects) if n else self


def read_sts_csv(path: str | Path) -> StsPairs:
    """Read an STS-B CSV (see the module docstring for what is rejected and what is an error)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such STS file")
    a, b, scores, rejects = [], [], [], 0
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        while True:
            line = reader.line_num + 1  # the physical line this record starts on
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                raise ValueError(f"{path}:{line}: unreadable CSV ({exc})") from None
            if not row or all(not field.strip() for field in row):
                rejects += 1
                continue
            if len(row) != 3:
                raise ValueError(f"{path}:{line}: expected 3 columns (sentence1,sentence2,score), got {len(row)}")
            try:
                score = float(row[2])
            except ValueError:
                raise ValueError(f"{path}:{line}: score {row[2]!r} is not a number") from None
            if not 0.0 <= score <= MAX_SCORE:  # also rejects nan
                raise ValueError(f"{path}:{line}: score {score} is outside [0, {MAX_SCORE:g}]")
            a.append(row[0])
            b.append(row[1])
            scores.append(score)
    if not a:
        raise ValueError(f"{path}: no sentence pairs")
    return StsPairs(str(path), a, b, np.asarray(scores, dtype=np.float64), rejects)


HOLDOUT_SEED = 20170801  # fixed, not the unit's seed: every unit and seed is selected on the same pairs


def check_holdout(share: float, name: str = "holdout") -> None:
    """A holdout is a share of the training pairs: strictly between 0 and 1."""
    if not 0.0 < share < 1.0:
        raise ValueError(f"{name} {share:g}: expected a share of the training pairs between 0 and 1 (e.g. 0.2)")


def split_holdout(pairs: StsPairs, fraction: float) -> tuple[StsPairs, StsPairs]:
    """(the pairs to train on, the held-out pairs): a seeded `fraction` of `pairs`, in file order each."""
    check_holdout(fraction)
    n_held = round(len(pairs) * fraction)
    if not 0 < n_held < len(pairs):
        raise ValueError(f"{pairs.path}: a holdout of {fraction:g} of {len(pairs)} pairs leaves one side empty")
    held = np.zeros(len(pairs), dtype=bool)
    held[np.random.default_rng(HOLDOUT_SEED).permutation(len(pairs))[:n_held]] = True

    def take(mask: np.ndarray, rejects: int) -> StsPairs:
        idx = np.flatnonzero(mask)
        return StsPairs(pairs.path, [pairs.a[i] for i in idx], [pairs.b[i] for i in idx], pairs.score[idx], rejects)

    return take(~held, pairs.rejects), take(held, 0)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator > 0 else float("nan")


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks; tied values share the mean of the ranks they span."""
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], len(x)]
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def sts_metrics(prediction: np.ndarray, score: np.ndarray) -> dict[str, float]:
    """`prediction` on the [0, 1] scale against gold `score` on [0, 5]: mse, pearson, spearman."""
    pred = np.asarray(prediction, dtype=np.float64)
    gold = np.asarray(score, dtype=np.float64) / MAX_SCORE
    if pred.shape != gold.shape or pred.ndim != 1:
        raise ValueError(f"predictions {pred.shape} and scores {gold.shape} must be equal-length vectors")
    return {
        "mse": float(np.mean((pred - gold) ** 2)),
        "pearson": _pearson(pred, gold),
        "spearman": _pearson(average_ranks(pred), average_ranks(gold)),
    }
