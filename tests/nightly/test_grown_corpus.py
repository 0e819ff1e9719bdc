"""Work in proportion to what is new on a grown corpus: GSDMM warm-started from the previous fit, and a TFCSG
candidate on the new questions plus a seeded replay sample of the old ones. Both off by default, with the
fingerprints of existing outputs unchanged."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from models.tfcsg.question_data import replay_rows  # noqa: E402
from samples.tiny_bert import STACKOVERFLOW, tiny_bert  # noqa: E402
from tasks.keywords.filter import KeywordsConfig, mine_keywords_table  # noqa: E402
from tasks.keywords.gsdmm import MovieGroupProcess  # noqa: E402


def titles_by_tag(n: int) -> list[dict]:
    """`n` StackOverflow titles spread over the tags (the file is ordered by tag)."""
    with open(STACKOVERFLOW, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return rows[:: len(rows) // n][:n]


def test_replay_rows_by_hand():
    keys = [f"k{i}" for i in range(10)]
    rows = np.arange(10)
    old = {f"k{i}" for i in range(6)}  # rows 0-5 were in the earlier input; 6-9 are new
    chosen, counts = replay_rows(rows, keys, old, ratio=0.5, seed=3)
    assert counts == {"new_rows": 4, "replayed_rows": 2, "old_rows": 6, "new_left_out": 0}
    assert set(chosen) >= {6, 7, 8, 9} and len(chosen) == 6 and list(chosen) == sorted(chosen)
    again, _ = replay_rows(rows, keys, old, ratio=0.5, seed=3)
    assert list(again) == list(chosen)  # seeded
    assert any(list(replay_rows(rows, keys, old, 0.5, seed)[0]) != list(chosen) for seed in range(4, 12))
    everything, counts = replay_rows(rows, keys, old, ratio=10.0, seed=3)
    assert list(everything) == list(range(10)) and counts["replayed_rows"] == 6  # fewer old rows than asked
    # a step-capped run (the night's budget): the new rows first, then older ones as far as the steps go
    capped, counts = replay_rows(rows, keys, old, ratio=0.0, seed=3, capacity=5)
    assert set(capped) >= {6, 7, 8, 9} and len(capped) == 5 and counts["replayed_rows"] == 1


def test_replay_is_off_by_default_and_out_of_existing_fingerprints():
    from tasks.train.task import train_fingerprint

    source = {"stage": "keywords", "fingerprint": "0123456789abcdef", "path": "keywords/0123456789abcdef"}
    plain = train_fingerprint(source, {"method": "tfcsg", "preset": "cpu"})
    assert train_fingerprint(source, {"method": "tfcsg", "preset": "cpu", "replay_ratio": 1.0}) == plain
    replayed = train_fingerprint(source, {"method": "tfcsg", "preset": "cpu", "replay_since": "fedcba9876543210"})
    assert replayed != plain


def test_gsdmm_starting_labels_are_kept_and_random_where_not_given():
    docs = [["git", "merge"], ["git", "rebase"], ["sql", "join"], ["sql", "index"], ["java", "class"]]
    start = [2, 2, 0, 0, -1]
    model = MovieGroupProcess(K=3, n_iters=0, random_state=5)  # no sweep: the labels are the start
    labels = model.fit(docs, init_labels=start)
    cold = MovieGroupProcess(K=3, n_iters=0, random_state=5).fit(docs)
    assert labels[:4] == [2, 2, 0, 0] and labels[4] == cold[4]  # the unseen row takes the seed's own draw
    assert model.cluster_doc_count == [2 + (labels[4] == 0), int(labels[4] == 1), 2 + (labels[4] == 2)]
    with pytest.raises(ValueError, match="one label in"):
        MovieGroupProcess(K=3).fit(docs, init_labels=[0, 1, 2])
    with pytest.raises(ValueError, match="one label in"):
        MovieGroupProcess(K=3).fit(docs, init_labels=[0, 1, 2, 3, 0])


def test_warm_start_is_off_by_default_and_out_of_existing_fingerprints():
    from tasks.keywords.task import keywords_fingerprint, settings_fields

    assert not {"warm_start", "warm_iters"} & set(settings_fields(KeywordsConfig()))
    source = {"stage": "ingest", "fingerprint": "0123456789abcdef", "path": "ingest/0123456789abcdef"}
    warm = KeywordsConfig(warm_start=True)
    assert keywords_fingerprint(source, warm) != keywords_fingerprint(source, KeywordsConfig())
    assert keywords_fingerprint(source, warm, "fedcba9876543210") != keywords_fingerprint(source, warm)


def test_a_warm_fit_starts_from_the_earlier_topics_and_runs_warm_iters_sweeps():
    rows = titles_by_tag(400)
    table = pa.table(
        {
            "doc_id": [f"q{r['id']}" for r in rows],
            "sent_id": pa.array([0] * len(rows), pa.int32()),
            "text": [r["title"] for r in rows],
        }
    )
    config = KeywordsConfig(k=10, n_iters=15)
    first, _, stats, _ = mine_keywords_table(table.slice(0, 300), config)
    assert stats["sweeps"] == 15 and stats["warm_rows"] == 0 and len(stats["moved_per_sweep"]) == 15
    prior = {
        (d, s): t
        for d, s, t in zip(*(first.column(c).to_pylist() for c in ("doc_id", "sent_id", "topic")), strict=True)
        if t is not None
    }
    warm = dataclasses.replace(config, warm_start=True, warm_iters=4)
    grown, _, stats, _ = mine_keywords_table(table, warm, prior)
    assert stats["sweeps"] == 4 and stats["warm_rows"] == len(prior)
    # With no sweep the earlier rows keep their earlier topic (renumbered by size, as every fit's are).
    kept, _, _, _ = mine_keywords_table(table, dataclasses.replace(warm, warm_iters=0), prior)
    before = [prior.get((d, 0)) for d in table.column("doc_id").to_pylist()[:300]]
    after = kept.column("topic").to_pylist()[:300]
    pairs = {(b, a) for b, a in zip(before, after, strict=True) if b is not None}
    assert len({b for b, _ in pairs}) == len(pairs)  # each earlier topic maps to one topic: the same clustering
    # An earlier fit with more topics than this K cannot seed it: a cold start.
    too_many = {key: 99 for key in prior}
    _, _, stats, _ = mine_keywords_table(table, warm, too_many)
    assert stats["warm_rows"] == 0


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.slow
def test_nights_on_a_folder_warm_start_gsdmm_and_replay_in_training(tmp_path):
    from flows.mine_keywords import mine_keywords
    from flows.train import train_flow
    from storage.manifest import read_manifest

    rows = titles_by_tag(360)
    corpus = tmp_path / "corpus"
    corpus.mkdir()

    def write(name: str, part: list[dict]) -> None:
        with open(corpus / name, "w", encoding="utf-8", newline="") as f:
            csv.writer(f, delimiter="\t").writerows([["id", "title"], *([r["id"], r["title"]] for r in part)])

    write("day1.tsv", rows[:300])
    root = tmp_path / "data"
    options = dict(input_path=str(corpus), text_field="title", title_field="", k=10, warm_start=True, root=str(root))
    first = mine_keywords(**options)
    assert read_manifest(root / first["path"])["convergence"]["warm_start_from"] is None  # nothing earlier
    write("day2.tsv", rows[300:])
    second = mine_keywords(**options)
    convergence = read_manifest(root / second["path"])["convergence"]
    assert convergence["warm_start_from"] == first["fingerprint"] and convergence["warm_rows"] > 250
    assert convergence["sweeps"] == KeywordsConfig.warm_iters
    assert mine_keywords(**options) == second  # the same nights give the same output: a cache hit

    model = tiny_bert(tmp_path / "tiny-bert", [r["title"] for r in rows])
    # 13 steps of 8 show the ~110 rows a replay trains on (fewer steps would take the new rows first: test_new_first)
    train = dict(method="tfcsg", preset="cpu", steps=13, init_from=str(model), root=str(root))
    run = dict(batch_size=8, eval_every=0, threads=1, heldout_fraction=0.05)
    ref = train_flow(keywords=second["fingerprint"], options=dict(run, replay_since=first["fingerprint"]), **train)
    data = read_manifest(root / ref["path"])["rows"]
    # day2's 60 titles (less the few held out) are new; as many of day1's are replayed
    assert 50 <= data["new_rows"] <= 60 and data["replayed_rows"] == data["new_rows"]
    assert data["train_rows"] == data["new_rows"] + data["replayed_rows"] < 300
    full = train_flow(keywords=second["fingerprint"], options=run, **train)
    assert read_manifest(root / full["path"])["rows"]["train_rows"] > 300 and full != ref
