"""The embed stage's fast path and scale-out: bfloat16 against float32 on the real MiniLM (the same top results,
another fingerprint), worker processes and a 2-worker Dask cluster writing the bytes of one process, and how
`auto` and the worker count are chosen."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from samples.tiny_bert import tiny_bert
from samples.wiki_docs import wiki_documents, write_jsonl
from tests.helpers.shared_data import in_ci

CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f {extra}\nbogomips\t: 4000\n"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[dict]]:
    """Real Wikipedia articles in 4 files (4 documents shards, one per file)."""
    docs = wiki_documents(48, sentences=6)
    folder = tmp_path_factory.mktemp("corpus")
    for i in range(4):
        write_jsonl(folder / f"part{i}.jsonl", docs[i * 12 : (i + 1) * 12])
    return folder, docs


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, corpus) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("models") / "tiny", [d["title"] + " " + d["text"] for d in corpus[1]])


def ingest_folder(folder: Path, root: Path) -> dict[str, str]:
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.task import ingest

    return ingest.fn(str(folder), IngestConfig(source_name="wiki"), str(root), workers=1)


def embed(model: Path | str, documents: dict[str, str], root: Path, precision: str = "float32", **run) -> dict:
    from tasks.embed.model_choice import choose_model
    from tasks.embed.task import embed_stage
    from tasks.embed.vectors import EmbedConfig

    chosen = choose_model(root, str(model))
    ref, _ = embed_stage(documents, EmbedConfig(chosen.fingerprint, chosen.path, precision=precision), root, **run)
    return ref


def parts(root: Path, ref: dict[str, str]) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / ref["path"]).glob("part-*.parquet"))}


def vectors(root: Path, ref: dict[str, str]) -> np.ndarray:
    tables = [pq.read_table(p) for p in sorted((root / ref["path"]).glob("part-*.parquet"))]
    return np.concatenate([np.stack(t.column("embedding").to_numpy(zero_copy_only=False)) for t in tables])


def test_auto_precision_is_bfloat16_only_where_the_cpu_computes_it():
    from tasks.embed.vectors import EMBED_BATCH, EmbedConfig, native_bf16, resolve_precision

    assert native_bf16(CPUINFO.format(extra="avx512_bf16 avx512_vnni")) or _cuda()
    assert native_bf16(CPUINFO.format(extra="amx_bf16 amx_tile")) or _cuda()
    if not _cuda():
        assert not native_bf16(CPUINFO.format(extra="avx512_vnni"))  # AVX-512 without BF16: emulated, slower
        assert not native_bf16("")
    assert resolve_precision("auto", native=True) == "bfloat16"
    assert resolve_precision("auto", native=False) == "float32"
    assert resolve_precision("float32", native=True) == "float32"
    with pytest.raises(ValueError, match="precision 'half'"):
        resolve_precision("half")
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        EmbedConfig("fp", precision="auto")  # resolved before a config is made
    # float32 keeps the key it had before precision was a choice; bfloat16 is another output.
    assert EmbedConfig("fp").key() == {"model": "fp", "unit": "documents", "batch_size": EMBED_BATCH}
    assert EmbedConfig("fp", precision="bfloat16").key()["precision"] == "bfloat16"
    assert EmbedConfig("fp", threads=3).key() == EmbedConfig("fp").key()


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_worker_count_follows_the_pending_work():
    from tasks.embed.task import TEXTS_PER_WORKER, embed_workers

    assert embed_workers(0, shards=10, texts=100 * TEXTS_PER_WORKER) == 1  # default: this process, every core
    assert embed_workers(4, shards=10, texts=100 * TEXTS_PER_WORKER) == 4
    assert embed_workers(4, shards=2, texts=100 * TEXTS_PER_WORKER) == 2  # one a shard at most
    assert embed_workers(4, shards=10, texts=2 * TEXTS_PER_WORKER) == 2  # one per TEXTS_PER_WORKER texts
    assert embed_workers(4, shards=10, texts=TEXTS_PER_WORKER - 1) == 1  # not worth a process


def test_bfloat16_gives_the_same_top_results_under_another_fingerprint(tmp_path, corpus):
    """The real MiniLM on real articles: bfloat16 vectors within 0.001 cosine of float32's, the same top 5 of
    every title query (queries in float32, as search embeds them), and a separate output."""
    import torch

    from models.encoders import minilm_path
    from tasks.embed.vectors import encode_texts, load_encoder

    folder, docs = corpus
    root = tmp_path / "root"
    documents = ingest_folder(folder, root)
    old = torch.get_num_threads()
    try:
        full = embed("minilm", documents, root, "float32")
        half = embed("minilm", documents, root, "bfloat16")
        queries = encode_texts(load_encoder(str(minilm_path())), [d["title"] for d in docs], 64)
    finally:
        torch.set_num_threads(old)
    assert full["fingerprint"] != half["fingerprint"]
    a, b = vectors(root, full), vectors(root, half)
    assert a.shape == b.shape == (48, 384)
    cosines = np.sum(a * b, axis=1)
    assert cosines.min() > 0.999, cosines.min()
    assert not np.array_equal(a, b)  # really computed in bfloat16
    top = lambda v: np.argsort(-(queries @ v.T), axis=1, kind="stable")[:, :5]  # noqa: E731
    same = np.mean([len(set(x) & set(y)) / 5 for x, y in zip(top(a), top(b), strict=True)])
    assert same >= 0.99, same


def test_worker_processes_write_the_bytes_of_one_process(tmp_path, corpus, tiny, monkeypatch, caplog):
    from tasks.embed import task

    folder, _ = corpus
    roots = {name: tmp_path / name for name in ("one", "two")}
    refs = {}
    refs["one"] = embed(tiny, ingest_folder(folder, roots["one"]), roots["one"], workers=1)
    monkeypatch.setattr(task, "TEXTS_PER_WORKER", 1)  # tiny shards: spawn anyway, to compare
    caplog.set_level("INFO")
    refs["two"] = embed(tiny, ingest_folder(folder, roots["two"]), roots["two"], workers=2)
    assert "embed: 2 worker processes" in caplog.text
    assert refs["one"] == refs["two"]  # the worker count is in no fingerprint
    one, two = parts(roots["one"], refs["one"]), parts(roots["two"], refs["two"])
    assert len(one) == 4 and one == two


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_dask_cluster_of_two_workers_writes_the_bytes_of_a_local_run(tmp_path, corpus, tiny, caplog):
    try:
        import distributed
    except ImportError as exc:
        if in_ci():
            pytest.fail(f"distributed is not installed ({exc})", pytrace=False)
        pytest.skip(f"distributed is not installed ({exc})")
    from tasks.runtime.dask_cluster import dask_scheduler

    folder, _ = corpus
    local_root, dask_root = tmp_path / "local", tmp_path / "dask"
    local = embed(tiny, ingest_folder(folder, local_root), local_root, workers=1)
    documents = ingest_folder(folder, dask_root)
    caplog.set_level("INFO")
    with dask_scheduler("local", 2, dask_root) as address:
        with distributed.Client(address) as client:
            assert len(client.scheduler_info()["workers"]) == 2
        ref = embed(tiny, documents, dask_root, dask=address)
    assert "embed: 4/4 shards done" in caplog.text  # the shards ran as tasks on the cluster
    assert ref == local
    assert parts(dask_root, ref) == parts(local_root, local)
    assert (dask_root / ref["path"] / "_manifest.json").exists()
