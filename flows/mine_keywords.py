"""The `mine-keywords` flow: ingest a question/sentence file (or reuse build-pairs' sentences) -> keywords."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from storage.layout import data_root
from tasks.ingest.documents import IngestConfig
from tasks.ingest.readers import ReaderConfig, default_corpus
from tasks.ingest.task import ingest, require_documents
from tasks.keywords.filter import KeywordsConfig
from tasks.keywords.task import keywords
from tasks.runtime.catalog import update_catalog
from tasks.runtime.dask_cluster import dask_scheduler
from tasks.runtime.stage_cache import run_stage
from tasks.split.sentences import SplitConfig
from tasks.split.task import split


@flow(name="mine-keywords", log_prints=True)
def mine_keywords(
    input_path: str | None = None,
    format: str = ReaderConfig.format,
    text_field: str = ReaderConfig.text_field,
    title_field: str = ReaderConfig.title_field,
    id_field: str = ReaderConfig.id_field,
    unit: str = "documents",
    k: int = KeywordsConfig.k,
    ks: list[int] | None = None,
    seeds: list[int] | None = None,
    seed: int = KeywordsConfig.seed,
    alpha: float = KeywordsConfig.alpha,
    beta: float = KeywordsConfig.beta,
    n_iters: int = KeywordsConfig.n_iters,
    threshold: str = KeywordsConfig.threshold,
    t: float = KeywordsConfig.t,
    tau: float = KeywordsConfig.tau,
    t_min: float = KeywordsConfig.t_min,
    allow_empty: bool = False,
    root: str | None = None,
    dask: str = "",
    workers: int = 0,
) -> dict[str, str]:
    """GSDMM topics and keyword sequences.

    `unit="documents"`: one row per input record (questions, titles); `unit="sentences"`:
    the input is split first (the pipeline's sentences). `ks` sweeps K over `seeds` and keeps
    the K with the best mean NPMI (`seeds=None`: `KeywordsConfig.seeds`). `threshold`: `scaled`
    (max(t_min, tau * topic size)) or `absolute` (the paper's t). `dask`: `"local"` (a cluster of `workers`
    processes) or a scheduler address runs the sweep's fits (and the split) as mapped tasks there.
    """
    if unit not in ("documents", "sentences"):
        raise ValueError(f"unit must be 'documents' or 'sentences', got {unit!r}")
    base = data_root(root)
    reader = ReaderConfig(format=format, text_field=text_field, title_field=title_field, id_field=id_field)
    source = str(Path(input_path).resolve()) if input_path else str(default_corpus())
    config = KeywordsConfig(
        k=k,
        ks=tuple(ks or KeywordsConfig.ks),
        seeds=tuple(seeds or KeywordsConfig.seeds),
        seed=seed,
        alpha=alpha,
        beta=beta,
        n_iters=n_iters,
        threshold=threshold,
        t=t,
        tau=tau,
        t_min=t_min,
    )
    with dask_scheduler(dask, workers, base) as address:
        table = run_stage(ingest, base, input_path=source, config=IngestConfig(reader), workers=workers)
        require_documents(base, table, allow_empty)
        if unit == "sentences":
            table = run_stage(split, base, documents=table, config=SplitConfig(), workers=workers, dask=address)
        result = run_stage(keywords, base, source=table, config=config, dask=address)
    update_catalog(str(base), [result])
    return result
