"""The whole pipeline on real text: build-pairs -> train (tiny) -> evaluate the export next to a baseline.

Each flow runs on the previous one's real output (no fixture shards), so a change to a table's
columns or a stage reference that breaks a later stage fails here.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from storage.shared_data import shared_data
from tests.helpers.shared_data import require_shared

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]

SHARED = shared_data()
TRAIN_OPTIONS = dict(
    vocab_size=600,
    tokenizer_sample=3000,
    short_batch=8,
    long_batch=8,
    shuffle_buffer=128,
    log_every=2,
    eval_every=4,
    eval_batch=8,
    ckpt_every=4,
    warmup_steps=2,
    threads=1,
)


def write_corpus(path: Path, articles: int) -> Path:
    """The first articles of the bundled Wikipedia sample as JSONL (a user's corpus format)."""
    from tasks.ingest.readers import ReaderConfig, Record, default_corpus, read_mediawiki

    with path.open("w", encoding="utf-8") as out:
        for rec in read_mediawiki(default_corpus(), ReaderConfig()):
            if isinstance(rec, Record):
                out.write(json.dumps({"id": rec.source_id, "title": rec.title, "text": rec.text}) + "\n")
                articles -= 1
                if articles == 0:
                    break
    return path


def test_build_pairs_then_train_then_evaluate(tmp_path):
    from flows.build_pairs import build_pairs
    from flows.evaluate import evaluate
    from flows.train import train_flow
    from storage.catalog import connect_catalog
    from storage.manifest import read_manifest
    from storage.stage_output import ref_dir

    require_shared(SHARED / "stackoverflow" / "train.tsv", SHARED / "stsb" / "stsb-en-dev.csv")
    root = tmp_path / "data"
    corpus = write_corpus(tmp_path / "wiki.jsonl", articles=12)
    built = build_pairs(input_path=str(corpus), rows_per_shard=500, workers=1, root=str(root))
    shards = read_manifest(ref_dir(root, built["shards"]))
    assert shards["rows"]["rows_out"] > 200

    trained = train_flow(root=str(root), preset="tiny", steps=8, lr=1e-3, options=TRAIN_OPTIONS)
    train_dir = ref_dir(root, trained)
    assert read_manifest(train_dir)["upstream"] == [built["shards"]]  # trained on what build-pairs wrote
    export = train_dir / "export"
    info = json.loads((export / "gur_export.json").read_text())
    assert (
        info["method"] == "gur"
        and info["variant"] == f"lcs lm+cl {trained['fingerprint'][:8]}"  # two runs never share a name
        and info["train_fingerprint"] == trained["fingerprint"]
    )

    result = evaluate(
        models=[str(export), "bm25"],
        stackoverflow=str(SHARED / "stackoverflow" / "train.tsv"),
        stsb=[str(SHARED / "stsb" / "stsb-en-dev.csv")],
        lee=False,
        demo_retrieval=False,
        limit=200,
        root=str(root),
    )
    con = connect_catalog(root)
    try:
        rows = con.execute(
            "SELECT dataset, task, metric, k, value FROM metrics"
            " WHERE model = 'gur' AND variant = ? AND status = 'ok'",
            [info["variant"]],
        ).fetchall()
        baseline = con.execute("SELECT count(*) FROM metrics WHERE model = 'bm25' AND status = 'ok'").fetchone()[0]
    finally:
        con.close()
    tasks = {(task, metric) for _, task, metric, _, _ in rows}
    assert {("question_retrieval", "precision"), ("zero_shot", "accuracy"), ("sts", "spearman")} <= tasks
    assert all(value is not None and math.isfinite(value) for *_, value in rows)
    assert baseline > 0
    assert "gur" in Path(result["report"]).read_text(encoding="utf-8")
