"""The embed stage on real Wikipedia text with a tiny random BERT: incremental equals cold byte for byte, a new
model re-embeds everything, a SIGKILLed run resumes to the same bytes, and the catalog view switches whole."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from samples.tiny_bert import tiny_bert
from samples.wiki_docs import wiki_documents, write_jsonl
from tests.helpers import REPO

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return wiki_documents(36)


@pytest.fixture(scope="module")
def models(tmp_path_factory, docs) -> tuple[Path, Path]:
    """Two different tiny encoders (A: seed 0; B: the same architecture, other weights)."""
    import torch
    from transformers import BertModel

    base = tmp_path_factory.mktemp("models")
    a = tiny_bert(base / "a", [d["title"] + " " + d["text"] for d in docs])
    b = base / "b"
    b.mkdir()
    for f in a.iterdir():
        if f.is_file() and f.name != "model.safetensors":
            (b / f.name).write_bytes(f.read_bytes())
    torch.manual_seed(1)
    BertModel(BertModel.from_pretrained(str(a)).config).save_pretrained(str(b))
    return a, b


def ingest_folder(folder: Path, root: Path) -> dict[str, str]:
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.task import ingest

    return ingest.fn(str(folder), IngestConfig(source_name="wiki"), str(root), workers=1)


def embed_with(model: Path, documents: dict[str, str], root: Path) -> tuple[dict[str, str], dict]:
    from storage.stage_output import ref_manifest
    from tasks.embed.model_choice import choose_model
    from tasks.embed.task import embed_stage
    from tasks.embed.vectors import EmbedConfig

    chosen = choose_model(root, str(model))
    ref, _ = embed_stage(documents, EmbedConfig(chosen.fingerprint, chosen.path), root)
    return ref, ref_manifest(root, ref)


def parts(root: Path, ref: dict[str, str]) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / ref["path"]).glob("part-*.parquet"))}


def test_a_new_file_embeds_only_its_documents_and_equals_a_cold_embed(tmp_path, docs, models):
    model_a, model_b = models
    corpus, root = tmp_path / "corpus", tmp_path / "root"
    corpus.mkdir()
    write_jsonl(corpus / "2026-01-01.jsonl", docs[:12])
    write_jsonl(corpus / "2026-01-02.jsonl", docs[12:24])
    first, manifest = embed_with(model_a, ingest_folder(corpus, root), root)
    assert manifest["shard_work"] == {"computed": 2, "linked": 0}
    assert manifest["rows"]["embeddings"] == 24

    write_jsonl(corpus / "2026-01-03.jsonl", docs[24:])  # the night's new file
    documents = ingest_folder(corpus, root)
    second, manifest = embed_with(model_a, documents, root)
    assert second != first
    assert manifest["shard_work"] == {"computed": 1, "linked": 2}
    assert manifest["embedded_now"] == 12 and manifest["rows"]["embeddings"] == 36

    cold_root = tmp_path / "cold"
    cold, _ = embed_with(model_a, ingest_folder(corpus, cold_root), cold_root)
    assert cold["fingerprint"] == second["fingerprint"]
    assert parts(root, second) == parts(cold_root, cold)

    table = pq.read_table(root / second["path"] / "part-00002.parquet")
    assert table.schema.field("embedding").type.list_size == 32
    assert set(table.column("model").to_pylist()) == {manifest["config"]["model"]}

    # A promotion: another model's fingerprint, so every shard is embedded again, once.
    _, promoted = embed_with(model_b, documents, root)
    assert promoted["shard_work"] == {"computed": 3, "linked": 0} and promoted["embedded_now"] == 36
    _, again = embed_with(model_b, documents, root)
    assert again["fingerprint"] == promoted["fingerprint"]  # complete: reused as is


def test_vectors_are_unit_length_and_joinable_with_documents(tmp_path, docs, models):
    import duckdb
    import numpy as np

    corpus, root = tmp_path / "corpus", tmp_path / "root"
    corpus.mkdir()
    write_jsonl(corpus / "a.jsonl", docs[:10])
    documents = ingest_folder(corpus, root)
    ref, _ = embed_with(models[0], documents, root)
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT d.title, e.embedding FROM read_parquet('{root / ref['path']}/part-*.parquet') e "
        f"JOIN read_parquet('{root / documents['path']}/part-*.parquet') d USING (doc_id)"
    ).fetchall()
    assert len(rows) == 10 and {r[0] for r in rows} == {d["title"] for d in docs[:10]}
    norms = np.linalg.norm(np.array([r[1] for r in rows]), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)


def test_the_embeddings_view_switches_whole(tmp_path, docs, models):
    """Readers of the catalog during a switch between two models' outputs see one model's rows, never both."""
    from storage.catalog import connect_catalog, refresh_catalog
    from tasks.embed.model_choice import choose_model
    from tasks.embed.outputs import set_active

    corpus, root = tmp_path / "corpus", tmp_path / "root"
    corpus.mkdir()
    write_jsonl(corpus / "a.jsonl", docs[:8])
    documents = ingest_folder(corpus, root)
    outputs = []
    for model in models:
        ref, manifest = embed_with(model, documents, root)
        outputs.append((ref, {"model": manifest["config"]["model"], "model_path": str(model), "spec": str(model)}))
    set_active(root, *outputs[0])
    refresh_catalog(root)
    seen, stop = [], threading.Event()

    def read() -> None:
        while not stop.is_set():
            con = connect_catalog(root)
            try:
                seen.append(con.execute("SELECT count(DISTINCT model), count(*) FROM embeddings").fetchone())
            finally:
                con.close()

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(6):
        set_active(root, *outputs[(i + 1) % 2])
        refresh_catalog(root)
    stop.set()
    reader.join()
    assert seen and set(seen) == {(1, 8)}
    assert outputs[0][1]["model"] != outputs[1][1]["model"]
    assert choose_model(root, str(models[0])).fingerprint == outputs[0][1]["model"]


KILLED = """
import sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from tasks.embed.model_choice import choose_model
from tasks.embed.task import embed_stage
from tasks.embed.vectors import EmbedConfig
root, model, fp = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
chosen = choose_model(root, model)
documents = {"stage": "ingest", "fingerprint": fp, "path": f"ingest/{fp}"}
embed_stage(documents, EmbedConfig(chosen.fingerprint, chosen.path, batch_size=2), root)
"""


@pytest.mark.soak
@pytest.mark.slow
def test_killed_embed_resumes_to_the_same_bytes(tmp_path, models):
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.task import ingest

    docs = wiki_documents(120, sentences=12)
    corpus = write_jsonl(tmp_path / "wiki.jsonl", docs)
    roots = {name: tmp_path / name for name in ("clean", "killed")}
    refs = {
        name: ingest.fn(str(corpus), IngestConfig(source_name="wiki", docs_per_shard=6), str(root), workers=1)
        for name, root in roots.items()
    }
    command = [sys.executable, "-c", KILLED]
    for name in roots:
        assert refs[name]["fingerprint"] == refs["clean"]["fingerprint"]
    fp = refs["clean"]["fingerprint"]
    shards = len(list((roots["clean"] / "ingest" / fp).glob("part-*.parquet")))
    assert shards >= 10
    subprocess.run([*command, str(roots["clean"]), str(models[0]), fp], cwd=REPO, check=True, timeout=300)

    proc = subprocess.Popen([*command, str(roots["killed"]), str(models[0]), fp], cwd=REPO)
    stage = roots["killed"] / "embed"
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline and not list(stage.glob("*/_done/00004")):
        time.sleep(0.002)
    proc.kill()
    proc.wait()
    (out,) = stage.iterdir()
    done = len(list((out / "_done").iterdir()))
    assert not (out / "_manifest.json").exists(), "the run finished before it could be killed"
    assert 0 < done < shards, f"killed with {done}/{shards} shards done"

    subprocess.run([*command, str(roots["killed"]), str(models[0]), fp], cwd=REPO, check=True, timeout=300)
    (clean,) = (roots["clean"] / "embed").iterdir()
    assert {p.name: p.read_bytes() for p in sorted(out.glob("part-*.parquet"))} == {
        p.name: p.read_bytes() for p in sorted(clean.glob("part-*.parquet"))
    }
    assert len(list(out.glob("part-*.parquet"))) == shards
