"""`[train] method = "auto"`: short texts get TFCSG, long documents the documents recipe; its pairs; a night on
long documents that promotes; the model in use before any promotion; search over every document."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from models.documents.pairs import DocumentPairConfig, DocumentPairs, DocumentStream, parse_kinds  # noqa: E402
from samples.tiny_bert import tiny_bert, titles  # noqa: E402
from samples.wiki_docs import wiki_documents, write_jsonl  # noqa: E402
from tasks.nightly.recipe import choose_method, corpus_shape  # noqa: E402
from tests.helpers.document_pairs import WordTokenizer, sentences_file
from tests.helpers.nightly_config import mixed_folder, write_config


@pytest.fixture(scope="module")
def wiki():
    return wiki_documents(200, sentences=8)


def test_auto_gives_short_titles_tfcsg_and_documents_with_bodies_the_documents_recipe(wiki):
    short = corpus_shape([r["title"] for r in titles(300)])
    assert not short.long_documents and short.median_words < 15
    method, why = choose_method(short)
    assert method == "tfcsg" and "short texts" in why and "0 of 300 sampled records" in why
    long = corpus_shape([d["text"] for d in wiki])
    assert long.long_documents and long.with_body >= 0.9 * len(wiki)
    assert choose_method(long)[0] == "documents"
    # the rule's edge: one sentence of 40 words is no body; two sentences of 10 words neither
    assert corpus_shape(["word " * 40]).with_body == 0
    assert corpus_shape(["Short one here. And another short one."]).with_body == 0


def test_auto_on_a_question_corpus_trains_what_an_explicit_tfcsg_night_trained(tmp_path):
    """The same training settings (so the same candidate fingerprint and figures), decided on the training side."""
    from tasks.nightly.config import load_nightly_config
    from tasks.nightly.recipe import resolve_method
    from tasks.nightly.report import training_settings

    corpus = mixed_folder(tmp_path / "corpus", titles(200))
    path = write_config(tmp_path / "n.toml", corpus, tmp_path / "model", lr=1e-3)
    explicit = load_nightly_config(path)
    auto = replace(explicit, train=replace(explicit.train, method="auto"))
    chosen = resolve_method(auto.train, auto.corpus)
    assert chosen.method == "tfcsg" and chosen == explicit.train
    assert training_settings(chosen, auto.keywords) == training_settings(explicit.train, explicit.keywords)
    assert auto.train.method == "auto"  # the configuration as loaded is not rewritten


def test_document_pairs_are_seeded_mask_their_own_document_and_cut_the_ict_sentence_out(tmp_path, wiki):
    source = sentences_file(tmp_path / "part-00000.parquet", wiki[:60] + [{"id": "x", "title": "", "text": "One."}])
    config = DocumentPairConfig(str(source), batch_size=8, heldout_fraction=0.1, seed=3)
    data = DocumentPairs(config, WordTokenizer())
    counts = data.counts()
    assert counts["no_pair"] == 1 and counts["train_rows"] + counts["heldout_rows"] == 60
    assert counts["with_title"] == counts["train_rows"] and counts["with_ict"] >= counts["train_rows"] - 5
    kinds = {e: [] for e in range(4)}
    for epoch in kinds:
        for row in data.train_rows:
            query, passage = data.pair(int(row), epoch)
            doc = wiki[int(row)]
            if query == doc["title"]:
                assert passage == " ".join(data.questions.sentences[row])
                kinds[epoch].append("title")
            else:  # ICT: a sentence of the body, and the body without it
                body = data.questions.sentences[row]
                assert query in body and passage == " ".join(s for s in body if s != query)
                kinds[epoch].append("ict")
    # both kinds in every epoch, and a document's kind changes from epoch to epoch
    assert all(set(k) == {"title", "ict"} for k in kinds.values()) and kinds[0] != kinds[1]
    again = DocumentPairs(config, WordTokenizer())
    assert [again.pair(int(r), 2) for r in again.train_rows] == [data.pair(int(r), 2) for r in data.train_rows]
    # a batch masks only the pairs of one document against each other
    from models.tfcsg.losses import topic_negative_mask

    stream = DocumentStream(data)
    name, batch = stream.next_batch()
    mask = topic_negative_mask(batch["topics"], batch["text_ids"])
    assert name == "documents" and bool(mask.diagonal().all()) and int(mask.sum()) == len(batch["topics"])
    assert batch["kw_input_ids"].shape[1] <= config.passage_len and batch["input_ids"].shape[1] <= config.max_len
    state = stream.state_dict()
    _, next_batch = stream.next_batch()
    resumed = DocumentStream(DocumentPairs(config, WordTokenizer()))
    resumed.load_state_dict(state)
    assert np.array_equal(resumed.next_batch()[1]["topics"], next_batch["topics"])
    with pytest.raises(ValueError, match="pair kinds"):
        parse_kinds("title+summary")


def test_each_draw_gives_every_document_both_pairs_an_epoch_and_masks_them_against_each_other(tmp_path, wiki):
    source = sentences_file(tmp_path / "part-00000.parquet", wiki[:40])
    coin = DocumentPairs(DocumentPairConfig(str(source), heldout_fraction=0.1, seed=3), WordTokenizer())
    each = DocumentPairs(DocumentPairConfig(str(source), heldout_fraction=0.1, seed=3, draw="each"), WordTokenizer())
    documents = [int(r) for r in coin.train_rows]
    assert sorted({each.document(int(r)) for r in each.train_rows}) == documents  # the same split
    counts = each.counts()
    assert counts["train_documents"] == len(documents) and counts["train_rows"] == len(each.train_rows)
    assert counts["train_rows"] == counts["with_title"] + counts["with_ict"] > len(documents)
    for epoch in (0, 1):
        pairs = {}
        for row in each.train_rows:
            doc = each.document(int(row))
            query, passage = each.pair(int(row), epoch)
            body = each.questions.sentences[doc]
            is_title = int(row) % 2 == 0  # KINDS = (title, ict)
            pairs.setdefault(doc, []).append(is_title)
            if is_title:
                assert (query, passage) == (wiki[doc]["title"], " ".join(body))
            else:
                assert query in body and passage == " ".join(s for s in body if s != query)
        # every document with a body of two sentences gives its title pair and an ICT pair
        two = [d for d in pairs if len(each.questions.sentences[d]) > 1]
        assert two and all(sorted(pairs[d]) == [False, True] for d in two)
    from models.tfcsg.losses import topic_negative_mask

    rows = each.train_rows[:2]  # one document's two pairs
    assert each.document(int(rows[0])) == each.document(int(rows[1]))
    batch = each.collate(rows)
    mask = topic_negative_mask(batch["topics"], batch["text_ids"])
    assert bool(mask.all()), "a document's two pairs are not each other's negatives"
    with pytest.raises(ValueError, match="draw must be one of"):
        DocumentPairs(DocumentPairConfig(str(source), draw="both"), WordTokenizer())


def test_title_first_gives_a_titled_document_its_title_pair_every_epoch_and_an_untitled_one_its_ict_pair(
    tmp_path, wiki
):
    untitled = [{**d, "id": f"u{i}", "title": ""} for i, d in enumerate(wiki[40:60])]
    source = sentences_file(tmp_path / "part-00000.parquet", wiki[:40] + untitled)
    config = DocumentPairConfig(str(source), heldout_fraction=0.1, seed=3, draw="title-first")
    data = DocumentPairs(config, WordTokenizer())
    coin = DocumentPairs(replace(config, draw="coin"), WordTokenizer())
    assert np.array_equal(data.train_rows, coin.train_rows)  # one row a document, the same split
    seen = {"title": 0, "ict": 0}
    for epoch in (0, 1, 2):
        for row in data.train_rows:
            query, passage = data.pair(int(row), epoch)
            body = data.questions.sentences[row]
            if data.questions.titles[row]:
                assert (query, passage) == (data.questions.titles[row], " ".join(body))
                seen["title"] += 1
            else:  # no title: the inverse cloze pair
                assert query in body and passage == " ".join(s for s in body if s != query)
                seen["ict"] += 1
    assert seen["title"] and seen["ict"]
    # the default preset trains this draw, at passages of the length search embeds
    from models.training.presets import DOCUMENT_PRESETS

    assert DOCUMENT_PRESETS["cpu"]["pair_draw"] == "title-first" and DOCUMENT_PRESETS["cpu"]["passage_len"] == 256


def test_the_overlap_of_a_gur_run_counts_the_documents_its_pairs_were_mined_from(tmp_path, wiki):
    """GUR learns pairs of one document's sentences: the overlap reads the bodies of the documents of the split
    its shuffle output was mined from (through the pair output), not the pair sentences."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tasks.evaluate.overlap import overlap

    train = wiki[:40] + [{"id": "t", "title": "Examples", "text": wiki[45]["text"].split(". ")[0] + ". Other."}]
    (tmp_path / "split" / "fp2").mkdir(parents=True)
    sentences_file(tmp_path / "split" / "fp2" / "part-00000.parquet", train)
    links = {"pair/fp3": "split/fp2", "shuffle/fp4": "pair/fp3"}
    for path, up in links.items():
        (tmp_path / path / "short").mkdir(parents=True)
        stage = up.split("/")[0]
        manifest = {"upstream": [{"stage": stage, "fingerprint": up.split("/")[1], "path": up}]}
        (tmp_path / path / "_manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    shared = wiki[45]["text"].split(". ")[0] + "."  # a sentence of a held-out section a training section has too
    pq.write_table(
        pa.table({"a": [shared], "b": ["Other."]}), tmp_path / "shuffle" / "fp4" / "short" / "part-0.parquet"
    )
    run = tmp_path / "train" / "fp" / "export"
    run.mkdir(parents=True)
    ref = {"stage": "shuffle", "fingerprint": "fp4", "path": "shuffle/fp4"}
    (run.parent / "_manifest.json").write_text(json.dumps({"upstream": [ref]}), encoding="utf-8")
    held = wiki[45:50]
    found = overlap(str(run), [d["text"] for d in held] + ["Examples", shared])
    assert found["training_input"] == "split/fp2" and found["overlap"] == 0
    assert overlap(str(run), [d["text"] for d in held] + [wiki[3]["text"]])["overlap"] == 1  # a training body


def test_spherical_kmeans_finds_separated_groups_and_is_a_fixed_point_of_its_own_assignment():
    from models.documents.clusters import spherical_kmeans

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(6, 16))
    truth = np.repeat(np.arange(6), 25)
    x = centres[truth] + 0.05 * rng.normal(size=(150, 16))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    labels = spherical_kmeans(x, 6, seed=1)
    pairs = {(int(t), int(c)) for t, c in zip(truth, labels, strict=True)}
    assert len(pairs) == 6 and len({t for t, _ in pairs}) == 6  # the same partition, relabelled
    means = np.stack([x[labels == c].sum(0) for c in range(6)])
    assert np.array_equal(np.argmax(x @ means.T, axis=1), labels)  # every point is nearest its own cluster
    assert np.array_equal(labels, spherical_kmeans(x, 6, seed=1))


def test_clustered_batches_fill_each_batch_from_one_cluster_by_the_start_model_and_a_resume_reads_them(tmp_path, wiki):
    from models.documents.clusters import CLUSTERS_FILE, cluster_documents, document_texts
    from models.tfcsg.question_data import clustered_order

    clusters = np.array([0, 0, 1, 1, 1, 2, -1, 2, 0])
    order = clustered_order(clusters, np.random.default_rng(0))
    assert sorted(order.tolist()) == list(range(len(clusters)))
    runs = np.flatnonzero(np.diff(clusters[order]) != 0)
    assert len(runs) == len(set(clusters.tolist())) - 1  # each cluster's rows in one run
    assert not np.array_equal(order, clustered_order(clusters, np.random.default_rng(1)))

    from transformers import AutoTokenizer

    docs = wiki[:64]
    source = sentences_file(tmp_path / "part-00000.parquet", docs)
    model = tiny_bert(tmp_path / "tiny-bert", [d["title"] + " " + d["text"] for d in docs])
    tok = AutoTokenizer.from_pretrained(str(model))
    config = DocumentPairConfig(str(source), batch_size=8, heldout_fraction=0.1, seed=3, sampling="clustered")
    data = DocumentPairs(config, tok)
    texts = document_texts(data.questions.titles, data.questions.sentences)
    labels = cluster_documents(tmp_path, str(model), tok, texts, data.train_rows, 8, 32, seed=0)
    assert (tmp_path / CLUSTERS_FILE).exists() and labels.max() + 1 == -(-len(data.train_rows) // 8)
    assert (labels[data.heldout_rows] == -1).all() and (labels[data.train_rows] >= 0).all()
    data.set_clusters(labels)
    stream = DocumentStream(data)
    spread = [len(set(labels[stream.next_batch()[1]["topics"].numpy()].tolist())) for _ in range(5)]
    assert np.mean(spread) < 4  # random batches of 8 out of 7 clusters hold about 5
    (tmp_path / "tiny-bert" / "model.safetensors").unlink()  # a resumed run reads its labels, embeds nothing
    assert np.array_equal(cluster_documents(tmp_path, str(model), tok, texts, data.train_rows, 8, 32, 0), labels)
    with pytest.raises(ValueError, match="sampling must be one of"):
        DocumentPairs(replace(config, sampling="topic-spread"), tok)


def test_the_overlap_of_a_documents_run_counts_held_out_documents_not_a_shared_heading_or_sentence(tmp_path, wiki):
    """The documents recipe learns a document's title and sentences against its own body: a held-out section
    whose heading, or one sentence, also stands in a training section is not trained on; its body is."""
    from tasks.evaluate.overlap import overlap

    train = wiki[:40] + [{"id": "t", "title": "Examples", "text": wiki[45]["text"].split(". ")[0] + ". Other."}]
    run = tmp_path / "train" / "fp" / "export"
    run.mkdir(parents=True)
    split = tmp_path / "split" / "fp2"
    split.mkdir(parents=True)
    sentences_file(split / "part-00000.parquet", train)
    (run.parent / "_manifest.json").write_text(json.dumps({"upstream": [{"path": "split/fp2"}]}), encoding="utf-8")
    held = wiki[45:50]
    shared = ["Examples", wiki[45]["text"].split(". ")[0] + "."]  # a heading and a sentence a training section has
    assert overlap(str(run), [d["text"] for d in held] + shared)["overlap"] == 0
    assert overlap(str(run), [d["text"] for d in held] + [wiki[3]["text"]])["overlap"] == 1  # a training body


def write_documents_config(
    path: Path, corpus: Path, model: Path, lr: float, steps: int = 60, gur_share: float = 0.0, minutes: float = 180
) -> Path:
    """Defaults but the start model (a random tiny BERT: a large rate), the length, no STS guard, GUR's pairs
    as `gur_share` of the batches and the budget, planned by the development VM's rates (no probe: the tiny
    model's steps would fit any budget these nights cut)."""
    path.write_text(
        f"""[corpus]
path = "{corpus}"

[train]
init_from = "{model}"
steps = {steps}
options = {{eval_every = 0, threads = 1, lr = {lr}, interpolate = 1.0, gur_share = {gur_share}}}

[evaluate]
holdout = 0.4
stsb = []

[gate]
guards = {{}}

[budget]
minutes = {minutes}
probe = false
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.slow
def test_a_night_on_long_documents_promotes_the_documents_recipe_and_search_covers_every_document(
    tmp_path, wiki, capsys
):
    from flows.nightly_retrain import nightly_retrain
    from gur_cli import main as gur
    from storage.champion import read_champion, read_start
    from tasks.embed.outputs import read_active
    from tasks.nightly.budget import MIN_STEPS

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    docs, later = wiki[:90], wiki[90:]  # `later`: a file of new sections for the last night
    write_jsonl(corpus / "a.jsonl", docs[:60])
    write_jsonl(corpus / "b.jsonl", docs[60:])
    model = tiny_bert(tmp_path / "tiny-bert", [d["title"] + " " + d["text"] for d in wiki])

    # a first night that destroys its candidate is refused: the start model stays the model in use
    # (on a budget of a minute: the plan cuts its 20 steps to the fewest a candidate gets)
    refused_root = tmp_path / "refused"
    bad = write_documents_config(tmp_path / "bad.toml", corpus, model, lr=5.0, steps=20, minutes=1)
    first = nightly_retrain(config_path=str(bad), root=str(refused_root))
    assert first["decision"] == "refused", first["reason"]
    plan, actual = json.loads(first["plan"]), json.loads(first["actual"])
    assert (plan["full_steps"], plan["steps"], plan["fits"]) == (20, MIN_STEPS, False)
    summary = json.loads((Path(first["candidate"]).parent / "summary.json").read_text())
    assert summary["max_steps"] == MIN_STEPS and actual["train_s"] > 0 and actual["decision_s"] > actual["train_s"]
    assert read_champion(refused_root) is None and read_start(refused_root)["export"] == str(model)
    capsys.readouterr()
    assert gur(["--root", str(refused_root), "models"]) == 0
    out = capsys.readouterr().out
    assert "in use is the start model" in out and str(model) in out
    assert gur(["--root", str(refused_root), "embed"]) == 0
    out = capsys.readouterr().out
    assert f"model   {model} (the start model" in out and first["candidate"] not in out and "(3 rows)" in out
    assert f"up to date: {len(docs)} embeddings reused" in out  # the night's: every document, not the training side
    assert read_active(refused_root)["model_path"] == str(model)

    root = tmp_path / "data"
    good = write_documents_config(tmp_path / "good.toml", corpus, model, lr=1e-3, gur_share=0.5)
    night = nightly_retrain(config_path=str(good), root=str(root))
    assert night["decision"] == "promoted", night["reason"]
    manifest = json.loads((Path(night["candidate"]).parent / "_manifest.json").read_text())
    assert manifest["config"]["method"] == "documents" and manifest["inputs"].get("split")
    assert manifest["config"]["attention_dropout"] == 0.0  # the preset's: the fused attention kernel trains
    took = manifest["finished_at"] - manifest["started_at"]
    assert 0 < manifest["summary"]["trained_s"] < took  # the step loop's share: the plan's rate per step
    assert 0 < manifest["summary"]["clusters_s"] < took - manifest["summary"]["trained_s"]  # the pages clustered
    # GUR's pairs: the night's own shuffle output, named in the run's inputs and lineage
    shuffle = manifest["inputs"]["shuffle"]
    ref = {"stage": "shuffle", "fingerprint": manifest["config"]["gur_pairs"], "path": shuffle}
    assert ref in manifest["upstream"]
    assert manifest["config"]["gur_share"] > 0 and manifest["rows"]["gur_pairs"] > 0
    # what the next night is judged new by: the shuffle output when GUR's pairs train, else (the default) the split
    from tasks.nightly.config import load_nightly_config
    from tasks.nightly.recipe import documents_gur_share

    assert read_champion(root)["data"] == ref
    assert documents_gur_share(load_nightly_config(good).train) == 0.5
    assert documents_gur_share(load_nightly_config(bad).train) == 0.0
    assert (
        night["candidate_metrics"]["heldout-title/retrieval/mrr@10"]
        > night["champion_metrics"]["heldout-title/retrieval/mrr@10"]
    )
    # search: the new champion's embeddings hold every document of the folder, held-out ones included
    active = read_active(root)
    assert active["model_path"] == read_champion(root)["export"] == night["candidate"]
    embed_manifest = json.loads((root / "embed" / active["fingerprint"] / "_manifest.json").read_text())
    assert embed_manifest["rows"]["embeddings"] == len(docs)
    trained = json.loads((Path(night["candidate"]).parent / "summary.json").read_text())["data"]["documents"]
    assert trained < len(docs)  # training saw the training side only
    # the decision's row: the label-free suite cut from held-out documents, paired candidate and start
    import pyarrow.parquet as pq

    (row,) = pq.read_table(root / "models" / "promotions").to_pylist()
    assert (row["suite"], row["primary_metric"], row["overlap"]) == (
        "label-free: heldout-title, heldout-ict",
        "heldout-title/retrieval/mrr@10",
        0,
    )
    assert row["queries"] >= 10 and (row["files_new"], row["files_changed"], row["files_removed"]) == (2, 0, 0)
    assert next((root / "holdout").glob("*/train/a.jsonl.jsonl")).is_file()  # the training side's mirror
    # the plan on the default budget: the whole run fits; what each part took, the embedding's added at its end
    plan, actual = json.loads(row["plan"]), json.loads(row["actual"])
    assert plan["steps"] == plan["full_steps"] == 60 and plan["fits"] and plan["budget_s"] == 180 * 60
    assert set(actual) == {"before_training_s", "train_s", "gate_s", "decision_s", "embed_s"}
    # the decision did not wait for the re-embedding: recorded before it began, its note amended when it ended
    assert row["created_at"].timestamp() <= embed_manifest["started_at"]
    assert row["embedded"].startswith(f"re-embedded for the new champion: embedded all {len(docs)} documents")
    assert row["embedded"].endswith("s after the decision)") and row["embedded"] == night["embedded"]

    # the next night, a file of new sections beside the others, on a budget that cuts its steps: the sections new
    # since the champion's split first, then a seeded sample of the rest, as far as the 10 steps go
    write_jsonl(corpus / "c.jsonl", later)
    # (this root's measured rates fit 60 tiny steps in a minute: a budget of under a second cuts them to 10)
    capped = write_documents_config(
        tmp_path / "capped.toml", corpus, model, lr=1e-3, steps=0, gur_share=0.5, minutes=0.01
    )  # the recipe's length: an epoch
    capped.write_text(
        capped.read_text().replace("threads = 1,", "threads = 1, batch_size = 4, heldout_fraction = 0.0,"),
        encoding="utf-8",
    )
    second = nightly_retrain(config_path=str(capped), root=str(root))
    assert second["decision"] in ("promoted", "refused"), second["reason"]
    # the embeddings view after the night: the new file's sections too, what search serves (it was stale)
    capsys.readouterr()
    assert gur(["--root", str(root), "sql", "SELECT count(*) AS n FROM embeddings"]) == 0
    embedded = json.loads((root / read_active(root)["path"] / "_manifest.json").read_text())["rows"]["embeddings"]
    assert embedded > len(docs) and f"\n{embedded}\n" in capsys.readouterr().out  # the new file's too
    assert json.loads(second["plan"])["steps"] == MIN_STEPS
    run = Path(second["candidate"]).parent
    champion_split = next(u for u in manifest["upstream"] if u["stage"] == "split")
    assert json.loads((run / "_manifest.json").read_text())["config"]["replay_since"] == champion_split["fingerprint"]
    data = json.loads((run / "summary.json").read_text())["data"]
    (mirror,) = (root / "holdout").glob("*/train/c.jsonl.jsonl")  # the new file's training side
    new = len(mirror.read_text(encoding="utf-8").splitlines())
    assert data["new_documents"] == new > 0 and data["new_trained_documents"] == data["new_documents"]
    # the epoch does not fit, so `replay = "auto"` is 1: the plan counted the same new sections
    replay = json.loads(second["plan"])["replay"]
    assert (replay["ratio"], replay["new_rows"], replay["rows"]) == (1.0, new, new + data["old_rows"])
    assert data["train_documents"] == MIN_STEPS // 2 * 4  # the 5 structure batches of 4 among 10 steps (half GUR)


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.slow
def test_a_gur_night_warm_starts_from_the_model_in_use_and_stops_at_its_time_budget(tmp_path, wiki):
    from flows.nightly_retrain import nightly_retrain
    from tasks.nightly.config import load_nightly_config
    from tasks.nightly.night import start_of
    from tasks.nightly.recipe import GUR_NIGHT

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_jsonl(corpus / "a.jsonl", wiki[:80])
    model = tiny_bert(tmp_path / "tiny-bert", [d["title"] + " " + d["text"] for d in wiki])
    config = tmp_path / "gur.toml"
    config.write_text(
        f"""[corpus]
path = "{corpus}"

[train]
method = "gur"
init_from = "{model}"
options = {{max_minutes = 1e-5, log_every = 1, eval_every = 0, threads = 1, short_batch = 8, long_batch = 4}}

[evaluate]
holdout = 0.4
stsb = []

[gate]
guards = {{}}
""",
        encoding="utf-8",
    )
    night = nightly_retrain(config_path=str(config), root=str(tmp_path / "data"))
    assert night["decision"] in ("promoted", "refused"), night["reason"]
    manifest = json.loads((Path(night["candidate"]).parent / "_manifest.json").read_text())
    trained = manifest["config"]
    assert trained["method"] == "gur" and trained["init_from"] == str(model)  # a warm start, not GUR from scratch
    assert {k: trained[k] for k in ("pooling", "lr", "temperature")} == {
        k: GUR_NIGHT[k] for k in ("pooling", "lr", "temperature")
    }
    assert trained["max_minutes"] == 1e-5 and manifest["summary"]["stopped_by"] == "time budget (1e-05 min)"
    assert manifest["rows"]["steps"] == 1 < trained["max_steps"]
    # the next night trains from the model in use: the champion once there is one
    cfg = load_nightly_config(config)
    assert start_of(cfg, None) == str(model)
    assert start_of(cfg, {"export": "/models/champion"}) == "/models/champion"


def test_the_method_is_auto_by_default_and_an_unknown_one_is_one_line_naming_the_choices(tmp_path):
    from tasks.nightly.config import load_nightly_config

    (tmp_path / "n.toml").write_text(f'[corpus]\npath = "{tmp_path}"\n', encoding="utf-8")
    assert load_nightly_config(tmp_path / "n.toml").train.method == "auto"
    (tmp_path / "bad.toml").write_text(f'[corpus]\npath = "{tmp_path}"\n[train]\nmethod = "bert"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.toml: \[train\] method must be one of auto, tfcsg, documents, gur"):
        load_nightly_config(tmp_path / "bad.toml")
