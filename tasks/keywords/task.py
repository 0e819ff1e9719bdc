"""The `keywords` Prefect task: GSDMM topics and topic-keyword sequences over a text table."""

from __future__ import annotations

import base64
import dataclasses
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from storage.fingerprint import fingerprint
from storage.layout import TMP_DIR, data_root, record_path, recorded_path
from storage.progress import current_logger
from storage.shards import finished_shards, read_shard, sweep_temporaries, write_shard
from storage.stage_output import StageOutput, ref_complete, ref_dir, ref_manifest
from tasks.keywords.coherence import plot_sweep, summarize_sweep, sweep_k
from tasks.keywords.filter import (
    KEYWORDS_CODE_VERSION,
    KeywordsConfig,
    mine_keywords_table,
    tokenize,
    tokenizer_fingerprint,
)
from tasks.runtime.artifacts import publish_or_warn
from tasks.runtime.dask_cluster import map_units
from tasks.runtime.parameters import RunOptions
from tasks.runtime.stage_cache import STAGE_TASK

ROWS_PER_SHARD = 200_000


WARM_FIELDS = ("warm_start", "warm_iters")  # hashed only when the warm start is on


def settings_fields(config: KeywordsConfig) -> dict[str, Any]:
    """What the fingerprint hashes of the config: every field but `backend` (and the warm start's when off)."""
    skip = {"backend", *(WARM_FIELDS if not config.warm_start else ())}
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in skip}
    fields["tokenizer_fingerprint"] = tokenizer_fingerprint()  # jieba and stopword list versions
    return fields


def keywords_fingerprint(source: dict[str, str], config: KeywordsConfig, prior: str | None = None) -> str:
    """`prior`: the earlier fit a warm start begins from, whose topics the output depends on."""
    upstream = [source["fingerprint"], *([prior] if prior else [])]
    return fingerprint("keywords", KEYWORDS_CODE_VERSION, settings_fields(config), upstream)


def settings_key(config: KeywordsConfig) -> str:
    """The settings without the input: what a warm start's earlier fit must share with this one."""
    return fingerprint("keywords", KEYWORDS_CODE_VERSION, settings_fields(config))


def prior_fit(root: Path, source: dict[str, str], config: KeywordsConfig, corpus: str | None) -> dict[str, Any] | None:
    """The newest complete keywords output with the same settings over an earlier build of the same corpus
    (`corpus`, its input path): what a warm start begins from. None when there is none, or warm start is off."""
    if not config.warm_start:
        return None
    from storage.manifest_index import complete_manifests

    key = settings_key(config)
    best = None
    for manifest in complete_manifests(root, "keywords").values():
        upstream = (manifest.get("upstream") or [{}])[0]
        if manifest.get("settings_key") != key or upstream.get("fingerprint") == source["fingerprint"]:
            continue
        if corpus is None or recorded_path(root, manifest.get("corpus")) != corpus:  # recorded before a move: as now
            continue
        if best is None or manifest.get("finished_at", 0) > best.get("finished_at", 0):
            best = manifest
    return best


def corpus_path(root: Path, ref: dict[str, str]) -> str | None:
    """The corpus file or folder an output was made from: its ingest's input path (through a split)."""
    while ref_complete(root, ref):
        manifest = ref_manifest(root, ref)
        if ref["stage"] == "ingest":
            return recorded_path(root, (manifest.get("inputs") or {}).get("path")) or None
        if not manifest.get("upstream"):
            return None
        ref = manifest["upstream"][0]
    return None


def prior_topics(root: Path, prior: dict[str, Any]) -> dict[tuple[str, int], int]:
    """(doc_id, sent_id) -> topic of every row the earlier fit gave a topic."""
    folder = root / "keywords" / prior["fingerprint"]
    topics: dict[tuple[str, int], int] = {}
    for shard in finished_shards(folder):
        table = read_shard(shard, ["doc_id", "sent_id", "topic"])
        for doc_id, sent_id, topic in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True):
            if topic is not None:
                topics[(doc_id, sent_id)] = topic
    return topics


def read_texts(root, source: dict[str, str]) -> pa.Table:
    """(doc_id, sent_id, text) from a `split` output (sentences) or an `ingest` output (one row per document)."""
    tables = [read_shard(p) for p in finished_shards(ref_dir(root, source))]
    table = pa.concat_tables(tables) if tables else pa.table({"doc_id": [], "text": []})
    if "sent_id" not in table.column_names:
        table = table.append_column("sent_id", pa.array([0] * table.num_rows, pa.int32()))
    return table.select(["doc_id", "sent_id", "text"]).cast(
        pa.schema([("doc_id", pa.string()), ("sent_id", pa.int32()), ("text", pa.string())])
    )


def publish_artifacts(topics: pa.Table, sweep: list[dict], summary: str) -> None:
    """Tables and a summary in the Prefect UI; one that fails to publish is a warning, never a failed stage."""

    def make() -> None:
        from prefect.artifacts import create_markdown_artifact, create_table_artifact

        rows = [{k: (", ".join(v) if isinstance(v, list) else v) for k, v in r.items()} for r in topics.to_pylist()]
        create_table_artifact(rows, key="keywords-topics", description="GSDMM topics")
        if sweep:
            create_table_artifact(sweep, key="keywords-k-sweep", description="coherence by K and seed")
        create_markdown_artifact(summary, key="keywords-summary")

    publish_or_warn(make, "mine-keywords")


def plot_markdown(plot: Path) -> str:
    """The coherence-vs-K plot inline (a data URI: the UI cannot read the data root), and its path."""
    data = base64.b64encode(plot.read_bytes()).decode("ascii")
    return f"\n\n![coherence vs K](data:image/png;base64,{data})\n\nplot: `{plot}`"


@task(name="k-sweep-fit", retries=2, retry_delay_seconds=1, cache_policy=NO_CACHE, persist_result=False)
def sweep_fit(docs_path: str, k: int, seed: int, config: KeywordsConfig) -> dict[str, Any]:
    """One (K, seed) point of the K sweep, on a Dask worker: `sweep_k`'s row for it."""
    docs = pq.read_table(docs_path).column("words").to_pylist()
    fit = dict(alpha=config.alpha, beta=config.beta, n_iters=config.n_iters, top_n=config.top_n)
    return sweep_k(docs, None, [k], [seed], **fit, backend=config.backend, repeated_tokens=config.repeated_tokens)[0]


def mine_on_dask(texts: pa.Table, config: KeywordsConfig, work: Path, address: str):
    """`mine_keywords_table` with the K sweep's fits as mapped tasks on the Dask scheduler at `address`:
    the same rows (the sweep's in (K, seed) order, as `sweep_k` makes them), then the chosen K's fit here."""
    started = time.perf_counter()
    docs = [d for d in ([t.norm for t in tokenize(text)] for text in texts.column("text").to_pylist()) if d]
    if not docs:
        return mine_keywords_table(texts, config)  # nothing to fit: no sweep either
    work.mkdir(parents=True, exist_ok=True)
    docs_path = work / "sweep_docs.parquet"  # on the shared root: the workers read it, nobody ships it
    pq.write_table(pa.table({"words": pa.array(docs, pa.list_(pa.string()))}), docs_path)
    points = [(k, seed) for k in config.ks for seed in config.seeds]
    names = [f"k-sweep-{k}-seed-{seed}" for k, seed in points]
    calls = [{"docs_path": str(docs_path), "k": k, "seed": seed, "config": config} for k, seed in points]
    sweep = map_units(sweep_fit, calls, address, names, progress="keywords: K sweep {done}/{total} fits done")
    sweep_s = time.perf_counter() - started
    best = summarize_sweep(sweep, config.coherence_metric)[1]
    kw, topics, stats, _ = mine_keywords_table(texts, dataclasses.replace(config, ks=(), k=best))
    stats = {**stats, "k_source": "sweep", "seconds": {**stats["seconds"], "sweep": sweep_s}}
    return kw, topics, stats, sweep


def write_tables(
    out: Path, kw: pa.Table, topics: pa.Table, sweep: list[dict], config: KeywordsConfig
) -> tuple[Path | None, int]:
    """The keywords, topics and topic_sweep tables, the sweep's plot, and the summary (logged and published):
    (the plot or None, the rows that needed the fallback)."""
    logger = current_logger(__name__)
    for i in range(max(1, -(-kw.num_rows // ROWS_PER_SHARD))):
        write_shard(out, i, kw.slice(i * ROWS_PER_SHARD, ROWS_PER_SHARD))
    write_shard(out, 0, topics, table_name="topics")
    sweep_table = pa.Table.from_pylist(sweep) if sweep else pa.table({"k": pa.array([], pa.int64())})
    write_shard(out, 0, sweep_table, table_name="topic_sweep")
    plot = None
    if sweep:
        plot = plot_sweep(sweep, out / "topic_sweep.png", config.coherence_metric)
    fallback = pc.sum(kw.column("fallback")).as_py() or 0
    summary = (
        f"**keywords** {kw.num_rows} rows, {topics.num_rows} populated topics, "
        f"{fallback} rows ({fallback / max(kw.num_rows, 1):.1%}) needed the fallback"
    )
    if sweep:
        best = summarize_sweep(sweep, config.coherence_metric)[1]
        summary += f"; K sweep picked K={best} by mean {config.coherence_metric}"
    logger.info(summary.replace("**", ""))
    publish_artifacts(topics, sweep, summary + (plot_markdown(plot) if plot else ""))
    return plot, fallback


@task(name="keywords", **STAGE_TASK)
def keywords(source: dict[str, str], config: KeywordsConfig, root: str, dask: str = RunOptions.dask) -> dict[str, str]:
    """Fit GSDMM (optionally sweeping K) and write `keywords`, `topics` and `topic_sweep` tables; with `dask`
    (a scheduler address) the sweep's fits run as mapped tasks on that cluster."""
    logger = current_logger(__name__)
    base = data_root(root)
    corpus = corpus_path(base, source)
    prior = prior_fit(base, source, config, corpus)
    stage = StageOutput.open(
        root, "keywords", keywords_fingerprint(source, config, prior and prior["fingerprint"]), log=logger
    )
    if stage.complete:
        return stage.cached()
    out = stage.dir
    sweep_temporaries(out)
    texts = read_texts(stage.root, source)
    logger.info("keywords: %d rows from %s, K=%s -> %s", texts.num_rows, source["path"], config.ks or config.k, out)
    if dask and config.ks and texts.num_rows:
        kw, topics, stats, sweep = mine_on_dask(texts, config, out / TMP_DIR, dask)
    else:
        kw, topics, stats, sweep = mine_keywords_table(texts, config, prior_topics(base, prior) if prior else None)
    if config.warm_start:
        logger.info(
            "keywords: %s, %d of %d rows started in their earlier topic; %d sweeps (moved: %s)",
            f"warm start from keywords/{prior['fingerprint']}" if prior else "no earlier fit: a cold start",
            stats.get("warm_rows", 0),
            stats.get("fitted_rows", 0),
            stats.get("sweeps", 0),
            stats.get("moved_per_sweep", []),
        )
    plot, fallback = write_tables(out, kw, topics, sweep, config)
    sweep_temporaries(out)
    numbers = {k: v for k, v in stats.items() if isinstance(v, (int, float))}
    return stage.finish(
        code_version=KEYWORDS_CODE_VERSION,
        config={**dataclasses.asdict(config), "tokenizer_fingerprint": tokenizer_fingerprint()},
        inputs={"source": source["path"]},
        upstream=[source],
        tables={
            "keywords": "part-*.parquet",
            "topics": "topics/part-*.parquet",
            "topic_sweep": "topic_sweep/part-*.parquet",
        },
        rows={"keywords": kw.num_rows, "topics": topics.num_rows, "fallback": int(fallback)},
        drops={k: int(stats.get(k, 0)) for k in ("empty", "threshold_empty", "fallback_lift", "fallback_raw")},
        extra={
            "stats": numbers,
            "plot": "topic_sweep.png" if plot else None,
            "settings_key": settings_key(config),
            "corpus": record_path(base, corpus),  # relative: a held-out split's training side
            "convergence": {
                "sweeps": stats.get("sweeps"),
                "moved_per_sweep": stats.get("moved_per_sweep"),
                "warm_start_from": prior["fingerprint"] if prior else None,
                "warm_rows": stats.get("warm_rows", 0),
            },
        },
    )
