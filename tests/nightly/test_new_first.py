"""A capped candidate on a grown corpus trains on what is new first: the rows new since the champion's data,
then a seeded sample of the rest within what its steps show (models/training/replay.py), for the documents
recipe by document content (a changed section is new) and for TFCSG by question."""

from __future__ import annotations

import numpy as np
import pytest

from models.documents.gur_pairs import is_gur_batch, structure_steps, total_steps
from models.documents.pairs import DocumentPairConfig, DocumentPairs
from models.training.replay import new_first
from samples.wiki_docs import wiki_documents
from tests.helpers.document_pairs import WordTokenizer, sentences_file


def test_new_rows_first_then_a_seeded_sample_of_the_rest_within_the_capacity():
    rows = np.arange(20)
    is_new = rows >= 15  # 5 new rows, 15 older ones
    chosen, counts = new_first(rows, is_new, ratio=0, capacity=8, seed=1)
    assert set(chosen) >= {15, 16, 17, 18, 19} and len(chosen) == 8 and list(chosen) == sorted(chosen)
    assert counts == {"new_rows": 5, "old_rows": 15, "replayed_rows": 3, "new_left_out": 0}
    assert list(new_first(rows, is_new, 0, 8, seed=1)[0]) == list(chosen)  # seeded
    assert any(list(new_first(rows, is_new, 0, 8, seed)[0]) != list(chosen) for seed in range(2, 10))
    # more new rows than fit: a seeded sample of the new ones, nothing older
    few, counts = new_first(rows, is_new, 0, 3, seed=1)
    assert len(few) == 3 and set(few) <= {15, 16, 17, 18, 19} and counts["new_left_out"] == 2
    # the ratio bounds the older rows, the capacity both
    assert len(new_first(rows, is_new, 1.0, 0, seed=1)[0]) == 10
    assert len(new_first(rows, is_new, 1.0, 7, seed=1)[0]) == 7
    # no cap and no ratio: every row; nothing new (the settings changed): older rows within the capacity
    assert list(new_first(rows, is_new, 0, 0, seed=1)[0]) == list(rows)
    assert len(new_first(rows, np.zeros(20, bool), 1.0, 6, seed=1)[0]) == 6
    with pytest.raises(ValueError, match="4 new-row flags for 20 rows"):
        new_first(rows, is_new[:4], 0, 0, 1)


@pytest.mark.parametrize("share", [0.0, 0.2, 0.5])
def test_structure_steps_inverts_total_steps(share):
    for steps in (1, 10, 33, 94):
        assert structure_steps(steps, share) == sum(not is_gur_batch(i, share) for i in range(steps))
        assert structure_steps(total_steps(steps, share), share) == steps


def test_a_capped_documents_run_trains_the_new_and_changed_documents_and_fills_up_with_a_seeded_sample(tmp_path):
    docs = wiki_documents(60, sentences=5)
    before = sentences_file(tmp_path / "before.parquet", docs[:45])
    changed = dict(docs[3], text=docs[3]["text"] + " A sentence added to this section tonight.")
    now_docs = [*docs[:3], changed, *docs[4:]]  # 15 new sections and one changed
    now = sentences_file(tmp_path / "now.parquet", now_docs)
    config = DocumentPairConfig(str(now), heldout_fraction=0.0, seed=2, replay_source=str(before), replay_ratio=0)
    capped = DocumentPairs(DocumentPairConfig(**{**config.__dict__, "limit_rows": 24}), WordTokenizer())
    ids = capped.questions.ids
    trained = {ids[capped.document(int(r))] for r in capped.train_rows}
    new = {d["id"] for d in docs[45:]} | {docs[3]["id"]}
    assert len(trained) == 24 and trained >= new  # all 16 new or changed, then 8 of the 44 unchanged
    counts = capped.counts()
    assert (counts["new_documents"], counts["new_trained_documents"], counts["replayed_rows"]) == (16, 16, 8)
    assert counts["train_documents"] == 24
    again = DocumentPairs(DocumentPairConfig(**{**config.__dict__, "limit_rows": 24}), WordTokenizer())
    assert list(again.train_rows) == list(capped.train_rows)  # seeded
    # uncapped with no ratio: every document, as without a replay source
    plain = DocumentPairs(DocumentPairConfig(str(now), heldout_fraction=0.0, seed=2), WordTokenizer())
    whole = DocumentPairs(config, WordTokenizer())
    assert list(whole.train_rows) == list(plain.train_rows)
    # the first night (no champion, nothing earlier): a seeded sample of what the steps show, before anything
    # (the clustering by the start model) reads the documents
    first = DocumentPairs(DocumentPairConfig(str(now), heldout_fraction=0.0, seed=2, limit_rows=24), WordTokenizer())
    assert len(first.train_rows) == 24 and set(first.train_rows) <= set(plain.train_rows)
    assert first.counts()["new_documents"] == 0 and first.counts()["old_rows"] == len(plain.train_rows)
    # `each` draw: a row per (document, kind); the cap counts rows, the new documents' rows go first
    each = DocumentPairs(DocumentPairConfig(**{**config.__dict__, "draw": "each", "limit_rows": 32}), WordTokenizer())
    by_document = {ids[each.document(int(r))] for r in each.train_rows}
    assert len(each.train_rows) == 32 and by_document >= new


def test_a_bad_replay_is_one_line_naming_the_file_and_auto_is_the_default(tmp_path):
    from tasks.nightly.config import load_nightly_config

    (tmp_path / "bad.toml").write_text(f'[corpus]\npath = "{tmp_path}"\n[train]\nreplay = -1\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r'bad.toml: \[train\] replay must be "auto" or a number >= 0'):
        load_nightly_config(tmp_path / "bad.toml")
    (tmp_path / "bad.toml").write_text(f'[corpus]\npath = "{tmp_path}"\n[train]\nreplay = "half"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"replay must be .* not 'half'"):
        load_nightly_config(tmp_path / "bad.toml")
    (tmp_path / "ok.toml").write_text(f'[corpus]\npath = "{tmp_path}"\n', encoding="utf-8")
    assert load_nightly_config(tmp_path / "ok.toml").train.replay == "auto"


def test_a_later_night_that_cannot_retrain_everything_plans_what_is_new_plus_as_much_again(tmp_path):
    """The plan sizes a replay run by the rows new since the champion's split (counted as the recipe marks them),
    so a later night costs what is new; a first night, or an epoch that fits, trains everything."""
    import json
    import time
    from types import SimpleNamespace

    from tasks.nightly.budget import full_steps, measured_rates
    from tasks.nightly.config import load_nightly_config
    from tasks.nightly.plan import night_plan
    from tasks.nightly.what_is_new import count_new
    from tests.helpers.nightly_config import night_of

    docs = wiki_documents(60, sentences=5)
    changed = dict(docs[3], text=docs[3]["text"] + " A sentence added to this section tonight.")
    base = tmp_path / "root"
    for fp, part in (("a" * 16, docs[:45]), ("b" * 16, [*docs[:3], changed, *docs[4:]])):
        (base / "split" / fp).mkdir(parents=True)
        sentences_file(base / "split" / fp / "part-0.parquet", part)
    assert count_new("documents", str(base / "split" / ("b" * 16)), str(base / "split" / ("a" * 16))) == (16, 60)
    (base / "train" / "t1").mkdir(parents=True)  # the champion's run read the earlier split
    upstream = [{"stage": "split", "fingerprint": "a" * 16, "path": f"split/{'a' * 16}"}]
    (base / "train" / "t1" / "_manifest.json").write_text(json.dumps({"upstream": upstream}), encoding="utf-8")
    champion = {
        "method": "documents",
        "train": {"stage": "train", "fingerprint": "t1", "path": "train/t1"},
        "export": str(base / "train" / "t1" / "export"),
    }
    inputs = {"split": {"stage": "split", "fingerprint": "b" * 16, "path": f"split/{'b' * 16}"}}
    suite = SimpleNamespace(train_records=60, scored=0, records=75, stackoverflow="", beir=())

    def plan(replay: str, minutes: float, champ=champion, options: str = "batch_size = 4"):
        path = tmp_path / "nightly.toml"
        path.write_text(
            f'[corpus]\npath = "{tmp_path}"\n[train]\nmethod = "documents"\nreplay = {replay}\n'
            f"options = {{{options}}}\n[evaluate]\nstsb = []\n[gate]\nguards = {{}}\n"
            f"[budget]\nminutes = {minutes}\n",
            encoding="utf-8",
        )  # no guard, no suite: the gate costs nothing, the default rates (4.7 s a step, 60 s start) are the root's
        night = night_of(load_nightly_config(path), base, suite, time.time(), champ)
        return night_plan(night, inputs, (0.0, 0.0), measured_rates(base, "documents"))

    epoch, replayed = full_steps(60, 4, 1.0, 0.2), full_steps(32, 4, 1.0, 0.2)  # 16 new + 16 older
    roomy, ratio = plan('"auto"', 180)  # the epoch fits: everything, as on a small corpus
    assert (roomy.full_steps, roomy.steps, ratio, roomy.replay) == (epoch, epoch, 0.0, {})
    tight, ratio = plan('"auto"', 2.45)  # 132 s for training, 60 of them its start: 15 of the epoch's 19 steps fit
    assert ratio == 1.0 and (tight.full_steps, tight.steps, tight.capped, tight.fits) == (
        replayed,
        replayed,
        False,
        True,
    )
    assert tight.replay == {"ratio": 1.0, "new_rows": 16, "rows": 60, "epoch_steps": epoch}
    assert "16 of 60 training rows new or changed" in "\n".join(tight.lines())
    first, ratio = plan('"auto"', 2.45, champ=None)  # a first night: nothing is earlier, the steps that fit
    assert ratio == 0.0 and first.capped and first.steps == 15 and first.replay == {}
    halved, _ = plan("1", 180, options="batch_size = 4, heldout_fraction = 0.5")  # the trainer holds half out
    assert halved.full_steps == full_steps(16, 4, 1.0, 0.2)
    explicit, ratio = plan("0.5", 180)  # a number: always, budget or not
    assert ratio == 0.5 and explicit.full_steps == full_steps(24, 4, 1.0, 0.2) and explicit.replay["ratio"] == 0.5


def test_a_night_run_again_after_a_stop_keeps_its_plan_so_its_training_resumes(tmp_path, capsys):
    """The plan's steps depend on the time its data stages took; run again after a stop, the same night (its
    inputs, start model, settings, budget) keeps the kept plan's steps instead of the more that now fit: a new
    count would be a new training run, its checkpoints never read."""
    import time
    from types import SimpleNamespace

    from tasks.nightly.budget import measured_rates
    from tasks.nightly.config import load_nightly_config
    from tasks.nightly.kept_plan import plan_path
    from tasks.nightly.plan import night_plan
    from tests.helpers.nightly_config import night_of

    base = tmp_path / "root"
    (base / "split" / ("a" * 16)).mkdir(parents=True)
    sentences_file(base / "split" / ("a" * 16) / "part-0.parquet", wiki_documents(60, sentences=5))
    inputs = {"split": {"stage": "split", "fingerprint": "a" * 16, "path": f"split/{'a' * 16}"}}
    suite = SimpleNamespace(train_records=60, scored=0, records=75, stackoverflow="", beir=())

    def plan(minutes: float, spent: float):
        path = tmp_path / "nightly.toml"
        path.write_text(
            f'[corpus]\npath = "{tmp_path}"\n[train]\nmethod = "documents"\noptions = {{batch_size = 4}}\n'
            f"[evaluate]\nstsb = []\n[gate]\nguards = {{}}\n[budget]\nminutes = {minutes}\n",
            encoding="utf-8",
        )  # no guard, no suite: 180 s leave 102 for steps after the reserve and the start, less what was spent
        night = night_of(load_nightly_config(path), base, suite, time.time() - spent)
        return night_plan(night, inputs, (0.0, 0.0), measured_rates(base, "documents"))

    stopped, _ = plan(3, spent=30)  # the data stages took 30 s: 15 of the epoch's 19 steps fit
    assert (stopped.steps, stopped.full_steps, stopped.kept) == (15, 19, {})
    assert plan_path(base).exists()
    capsys.readouterr()
    again, _ = plan(3, spent=1)  # run again, the data stages cached: the whole epoch would fit now
    assert again.steps == 15 and again.capped and again.kept["steps_done"] == 0
    assert "on these inputs, run again: its 15 steps kept" in capsys.readouterr().out
    other, _ = plan(3.5, spent=1)  # another budget is another night: planned afresh
    assert other.steps == 19 and not other.kept
    plan_path(base).unlink()
    assert plan(3, spent=1)[0].steps == 19  # without the kept plan, what fits now
