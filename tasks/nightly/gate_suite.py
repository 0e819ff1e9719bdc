"""What the gate scores and what the night trains on: the held-out split of the corpus (tasks/nightly/holdout.py),
or a suite the user names beside the whole corpus.

    corpus, suite = gate_suite(cfg, base)   # the training side (a corpus section of its own), the suite
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tasks.evaluate.suite import DatasetSpec
from tasks.nightly.config import CorpusConfig, NightlyConfig
from tasks.nightly.holdout import TRAIN_FIELDS, HoldoutConfig, Split, split_corpus


@dataclass(frozen=True)
class GateSuite:
    """What the gate scores: a question TSV (`stackoverflow`) or BEIR folders, and its primary metric."""

    stackoverflow: str
    beir: tuple[str, ...]
    primary: str
    name: str
    train_records: int = 0  # of the split: what the candidate trains on (0: a named suite, not counted)
    scored: int = 0  # held-out records the suite is made of (after `suite_documents`)
    records: int = 0  # of the whole corpus: what search embeds


def training_side(corpus: CorpusConfig, train: Path) -> CorpusConfig:
    """The corpus section that reads the split's training mirror (JSON Lines with fixed field names)."""
    fields = {"text_field": TRAIN_FIELDS.text_field, "title_field": TRAIN_FIELDS.title_field}
    return replace(corpus, path=str(train), format="auto", id_field=TRAIN_FIELDS.id_field, **fields)


def gate_suite(cfg: NightlyConfig, base: Path) -> tuple[CorpusConfig, GateSuite]:
    """(the corpus the night trains on, the suite the gate scores): with `holdout`, the corpus's training side
    and the suite its held-out records make; else the corpus as configured and the question suite the user
    named."""
    e, c = cfg.evaluate, cfg.corpus
    if e.stackoverflow:
        label = DatasetSpec("stackoverflow", e.stackoverflow).label
        return c, GateSuite(e.stackoverflow, (), f"{label}/question_retrieval/precision@1", f"named: {label}")
    gur = cfg.train.method == "gur"  # as configured: "auto" never chooses GUR
    share = HoldoutConfig(e.holdout, e.holdout_seed, e.label_field, **c.reader_fields(), pairs=gur)
    try:
        split = split_corpus(Path(c.path), share, base, cap=e.suite_documents)
    except ValueError as exc:
        raise ValueError(
            f"{cfg.source}: {exc}. Name a small labelled suite in [evaluate] stackoverflow: a TSV with a header "
            "and the columns id, title (the question) and tag (its label), text the candidate never trains on"
        ) from None
    print(split_line(split))
    n = split.counts
    suite = GateSuite(
        split.stackoverflow, split.beir, split.primary, split.name, n["train"], n["scored"], n["train"] + n["holdout"]
    )
    return training_side(c, split.train), suite


def split_line(split: Split) -> str:
    """The night's line on its split: the suite, what it was cut from, what trains, what was read."""
    n = split.counts
    scored = (
        f" (a seeded sample of {n['scored']} scored: [evaluate] suite_documents)" if n["scored"] < n["holdout"] else ""
    )
    return (
        f"gate suite {split.name}, from {n['holdout']} held-out records{scored}; training on {n['train']}; "
        f"{n['rejects']} rejects; {n['files_read']} file(s) read this night ({split.train.parent})"
    )
