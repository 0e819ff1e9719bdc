"""P@1 on the StackOverflow dev titles through the `embeddings` table and `gur search` equals `gur evaluate`'s
(`tasks.evaluate.scoring.question_retrieval`, what its unit runs) for the same model, so the page and the
benchmarks cannot disagree."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from samples.tiny_bert import STACKOVERFLOW
from tests.helpers import REPO
from tests.helpers.shared_data import require_shared

pytestmark = pytest.mark.usefixtures("one_thread")
N = 300  # the first titles in file order (tags interleaved there; no duplicate title among them)


@pytest.mark.slow
def test_p_at_1_through_the_embeddings_equals_evaluate(tmp_path):
    require_shared(STACKOVERFLOW)
    from storage.catalog import connect_catalog, refresh_catalog
    from tasks.embed.model_choice import choose_model
    from tasks.embed.outputs import set_active
    from tasks.embed.search import DenseSearcher
    from tasks.embed.task import embed_stage
    from tasks.embed.vectors import EmbedConfig
    from tasks.evaluate.data import load_stackoverflow
    from tasks.evaluate.models import resolve_model
    from tasks.evaluate.scoring import question_retrieval
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.readers import ReaderConfig
    from tasks.ingest.task import ingest

    data = load_stackoverflow(STACKOVERFLOW, limit=N)
    assert len(set(data.texts)) == N
    (evaluated,) = [
        m.value for m in question_retrieval(resolve_model("minilm"), data) if m.metric == "precision" and m.k == 1
    ]

    # The same titles as a corpus: ingest (text = title, no title column), embed, the `embeddings` view.
    tsv = tmp_path / "titles.tsv"
    with open(tsv, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t").writerows([["id", "title"], *([str(i), t] for i, t in enumerate(data.texts))])
    root = tmp_path / "root"
    reader = ReaderConfig(text_field="title", title_field="")
    documents = ingest.fn(str(tsv), IngestConfig(reader, source_name="so"), str(root))
    chosen = choose_model(root, "minilm")
    ref, _ = embed_stage(documents, EmbedConfig(chosen.fingerprint, chosen.path), root)
    set_active(root, ref, {"model": chosen.fingerprint, "model_path": chosen.path, "spec": "minilm"})
    refresh_catalog(root)
    con = connect_catalog(root)
    try:
        rows = con.execute(
            "SELECT CAST(d.source_id AS INTEGER), e.doc_id FROM embeddings e "  # no build: the documents' files
            f"JOIN read_parquet('{root / documents['path']}/part-*.parquet') d USING (doc_id)"
        ).fetchall()
    finally:
        con.close()
    row_of = {doc_id: i for i, doc_id in rows}
    assert sorted(row_of.values()) == list(range(N))

    # Each title is a `gur search` query (embedded on its own); its first hit other than itself is its answer.
    # A title alone in its tag has nothing to find: evaluate scores no query for it either.
    searcher = DenseSearcher.open(root)
    per_tag = np.bincount(data.labels)
    hits = []
    for i, title in enumerate(data.texts):
        if per_tag[data.labels[i]] < 2:
            continue
        ranked = [row_of[d] for d, _ in searcher.search(title, 2) if row_of[d] != i]
        hits.append(data.labels[ranked[0]] == data.labels[i])
    assert len(hits) < N and float(np.mean(hits)) == evaluated  # 300 titles: a tag of one title among them

    # and the command itself answers the first query as the library does
    env = {**os.environ, "GUR_HOME": str(root)}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gur_cli, sys; sys.exit(gur_cli.main())",
            "search",
            data.texts[0],
            "--k",
            "2",
            "--json",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    printed = [h["doc_id"] for h in json.loads(done.stdout)["hits"]]
    assert printed == [d for d, _ in searcher.search(data.texts[0], 2)]
