"""The documents recipe's GUR pairs: a fixed share of the batches, drawn from a shuffle output's pairs of the
training documents, their documents and pages masked, seeded and resumable."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from models.documents.gur_pairs import is_gur_batch, load_gur_pairs, split_index, total_steps
from models.documents.pairs import DocumentPairConfig, DocumentPairs, DocumentStream
from models.gur.pair_data import is_heldout
from samples.wiki_docs import wiki_documents
from tests.helpers.document_pairs import WordTokenizer, sentences_file


@pytest.fixture(scope="module")
def wiki():
    return wiki_documents(60, sentences=6)


def write_shards(folder: Path, rows: list[tuple[str, str, str]]) -> Path:
    """A shuffle output's layout (`short/` and `long/` part files: doc_id, a, b), the rows split between them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for bucket, part in (("short", rows[::2]), ("long", rows[1::2])):
        (folder / bucket).mkdir(parents=True, exist_ok=True)
        columns = {"doc_id": [r[0] for r in part], "a": [r[1] for r in part], "b": [r[2] for r in part]}
        pq.write_table(pa.table(columns), folder / bucket / "part-00000.parquet")
    return folder


def split_and_shards(tmp_path: Path, wiki: list[dict]) -> tuple[Path, Path, list[tuple[str, str, str]]]:
    """A split table of `wiki` and a shuffle output of two pairs per document (its sentences 0-1 and 2-3) plus
    pairs of a document the split does not hold."""
    import pyarrow.parquet as pq

    split = sentences_file(tmp_path / "part-00000.parquet", wiki)
    table = pq.read_table(split).to_pylist()
    bodies: dict[str, list[str]] = {}
    for row in table:
        if not row["is_title"]:
            bodies.setdefault(row["doc_id"], []).append(row["text"])
    rows = [(d, s[i], s[i + 1]) for d, s in bodies.items() for i in (0, 2) if len(s) > i + 1]
    rows += [("elsewhere", "A sentence of another build.", "Another sentence of it.")]
    return split, write_shards(tmp_path / "shuffle", rows), rows


@pytest.mark.parametrize("share", [0.0, 0.2, 1 / 3, 0.5, 0.75])
def test_the_schedule_spreads_the_share_evenly_and_keeps_every_structure_batch(share):
    flags = [is_gur_batch(i, share) for i in range(600)]
    assert sum(flags) == math.floor(600 * share + 1e-9)
    if share:  # evenly: never two GUR batches in a row below one half, never a long run without one
        gaps = np.diff(np.flatnonzero(flags))
        assert gaps.max() - gaps.min() <= 1
    # each kind's own index counts up from 0 without a gap
    structure = [split_index(i, share)[1] for i in range(600) if not flags[i]]
    gur = [split_index(i, share)[1] for i in range(600) if flags[i]]
    assert structure == list(range(len(structure))) and gur == list(range(len(gur)))
    for steps in (1, 7, 76, 200):  # the smallest total that holds `steps` structure batches
        total = total_steps(steps, share)
        assert sum(not is_gur_batch(i, share) for i in range(total)) == steps
        assert sum(not is_gur_batch(i, share) for i in range(total - 1)) < steps


def test_gur_pairs_of_training_documents_are_kept_and_the_others_counted(tmp_path, wiki):
    split, shards, rows = split_and_shards(tmp_path, wiki)
    data = DocumentPairs(DocumentPairConfig(str(split), heldout_fraction=0.2, seed=3), WordTokenizer())
    numbers = {doc_id: i for i, doc_id in enumerate(data.questions.ids)}
    pairs = load_gur_pairs(shards, numbers, 0.2, 3)
    held = [r for r in rows if r[0] in numbers and is_heldout(r[0], 0.2, 3)]
    assert held and pairs.unknown == 1 and pairs.heldout == len(held)
    assert len(pairs) == len(rows) - 1 - len(held)
    # every kept pair belongs to its document, a training one
    for a, b, number in zip(pairs.a, pairs.b, pairs.documents, strict=True):
        assert a in data.questions.sentences[number] and b in data.questions.sentences[number]
        assert not is_heldout(data.questions.ids[number], 0.2, 3)
    with pytest.raises(FileNotFoundError, match="give a shuffle output"):
        load_gur_pairs(tmp_path / "nothing", numbers, 0.2, 3)


def test_a_share_of_the_batches_are_gur_pairs_masked_by_document_and_page_and_a_resume_continues(tmp_path, wiki):
    from models.tfcsg.losses import topic_negative_mask

    split, shards, _ = split_and_shards(tmp_path, wiki)
    config = DocumentPairConfig(
        str(split), batch_size=8, heldout_fraction=0.2, seed=3, gur_shards=str(shards), gur_share=1 / 3, max_len=16
    )
    tok = WordTokenizer()  # one vocabulary: equal texts, equal ids
    data = DocumentPairs(config, tok)
    data.set_pages(np.arange(len(data.questions)) // 2)  # two documents a page
    plain = DocumentStream(DocumentPairs(DocumentPairConfig(**{**config.__dict__, "gur_share": 0.0}), tok))
    stream = DocumentStream(data)
    structure_steps = plain.steps_for(1.0)
    assert stream.steps_for(1.0) == total_steps(structure_steps, 1 / 3) > structure_steps
    names, batches = [], []
    for _ in range(9):
        name, batch = stream.next_batch()
        names.append(name)
        batches.append(batch)
    assert names == ["documents", "documents", "gur-pairs"] * 3
    # the structure batches are those of a run without GUR's pairs, in the same order
    for name, batch in zip(names, batches, strict=True):
        if name == "documents":
            assert np.array_equal(batch["text_ids"], plain.next_batch()[1]["text_ids"])
    gur = batches[2]
    assert gur["kw_input_ids"].shape[1] <= 16 and gur["input_ids"].shape[1] <= 16
    # pairs of one page (two documents) are never each other's negatives; other pages are
    pages = data.pages[gur["text_ids"].numpy()]
    mask = topic_negative_mask(gur["topics"], gur["text_ids"]).numpy()
    assert np.array_equal(mask, pages[:, None] == pages[None, :])
    # resumed from a state mid-way: the same next batches, GUR and structure alike
    fresh = DocumentStream(DocumentPairs(config, tok))
    fresh.data.set_pages(data.pages)
    fresh.load_state_dict({"batch_index": 5})
    state_next = [fresh.next_batch()[1]["input_ids"] for _ in range(4)]
    assert all(torch_equal(a, b) for a, b in zip(state_next, [b["input_ids"] for b in batches[5:9]], strict=True))


def torch_equal(a, b) -> bool:
    return a.shape == b.shape and bool((a == b).all())


def test_a_share_without_shards_or_without_usable_pairs_is_a_clear_error(tmp_path, wiki):
    split, _, _ = split_and_shards(tmp_path, wiki)
    with pytest.raises(ValueError, match="needs gur_shards"):
        DocumentPairs(DocumentPairConfig(str(split), gur_share=0.3), WordTokenizer())
    with pytest.raises(ValueError, match=r"within \[0, 1\)"):
        DocumentPairs(DocumentPairConfig(str(split), gur_share=1.0, gur_shards="x"), WordTokenizer())
    other = write_shards(tmp_path / "other", [("elsewhere", "One sentence.", "Another one.")])
    with pytest.raises(ValueError, match="same build"):
        DocumentPairs(DocumentPairConfig(str(split), gur_share=0.3, gur_shards=str(other)), WordTokenizer())


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.slow
def test_gur_train_documents_reads_the_roots_shuffle_output_and_names_it_in_manifest_and_lineage(
    tmp_path, wiki, capsys
):
    from flows.build_pairs import build_pairs
    from flows.train import train_flow
    from samples.tiny_bert import tiny_bert
    from samples.wiki_docs import write_jsonl
    from storage.manifest import read_manifest

    root = tmp_path / "root"
    refs = build_pairs(input_path=str(write_jsonl(tmp_path / "wiki.jsonl", wiki)), root=str(root))
    model = tiny_bert(tmp_path / "tiny-bert", [d["title"] + " " + d["text"] for d in wiki])
    options = {"eval_every": 0, "threads": 1, "interpolate": 1.0, "sampling": "random", "gur_share": 0.5}
    ref = train_flow(method="documents", root=str(root), init_from=str(model), steps=4, options=options)
    manifest = read_manifest(root / ref["path"])
    shuffle = refs["shards"]
    assert manifest["inputs"] == {"split": refs["sentences"]["path"], "shuffle": shuffle["path"]}
    assert manifest["upstream"] == [refs["sentences"], shuffle]
    assert manifest["config"]["gur_pairs"] == shuffle["fingerprint"] and manifest["config"]["gur_share"] == 0.5
    assert manifest["rows"]["gur_pairs"] > 0 and manifest["rows"]["steps"] == 4
    # without GUR's pairs (share 0) it is another run; a sentences file has no shuffle output: structure alone
    plain = train_flow(
        method="documents", root=str(root), init_from=str(model), steps=4, options={**options, "gur_share": 0.0}
    )
    assert plain["fingerprint"] != ref["fingerprint"]
    assert "shuffle" not in read_manifest(root / plain["path"])["inputs"]
    # a newer build of another corpus in the root: a run on the first split still takes the first split's pairs
    other = build_pairs(input_path=str(write_jsonl(tmp_path / "other.jsonl", wiki[:30])), root=str(root))
    assert other["shards"] != shuffle
    again = train_flow(
        method="documents", root=str(root), init_from=str(model), steps=4, options=options, shards=refs["sentences"]
    )
    assert again == ref
    texts = next((root / refs["sentences"]["path"]).glob("part-*.parquet"))
    alone = train_flow(
        method="documents", root=str(root), init_from=str(model), steps=4, options=options, texts=str(texts)
    )
    assert read_manifest(root / alone["path"])["config"]["gur_share"] == 0.0
    # ... and says so (the flow's own print goes to Prefect's log: the choice itself, called directly)
    from flows.train import gur_pairs_source
    from tasks.train.task import file_ref

    config = {"gur_share": 0.5}
    capsys.readouterr()
    gur_pairs_source(root, config, None, file_ref(texts))
    assert config["gur_share"] == 0.0 and "no shuffle output mined from this split" in capsys.readouterr().out
