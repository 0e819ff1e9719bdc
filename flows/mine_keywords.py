"""The `mine-keywords` flow: ingest a question/sentence file (or reuse build-pairs' sentences) -> keywords."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from flows.parameters import UNITS, MineKeywordsParams, keywords_config
from storage.builds_lock import holds_root
from storage.layout import data_root
from tasks.ingest.documents import IngestConfig
from tasks.ingest.readers import ReaderConfig, default_corpus
from tasks.ingest.task import ingest, require_documents
from tasks.keywords.task import keywords
from tasks.runtime.catalog import catalog_at_end
from tasks.runtime.dask_cluster import dask_scheduler
from tasks.runtime.parameters import config_values, takes
from tasks.runtime.stage_cache import run_stage
from tasks.split.sentences import SplitConfig
from tasks.split.task import split


@flow(name="mine-keywords", log_prints=True)
@holds_root  # a gc never runs meanwhile (storage/builds_lock.py)
@takes(MineKeywordsParams)  # the signature: every parameter with its default, one config field each
def mine_keywords(**params: Any) -> dict[str, str]:
    """GSDMM topics and keyword sequences.

    `unit="documents"`: one row per input record (questions, titles); `unit="sentences"`:
    the input is split first (the pipeline's sentences). `ks` sweeps K over `seeds` and keeps
    the K with the best mean NPMI (`seeds=None`: `KeywordsConfig.seeds`). `threshold`: `scaled`
    (max(t_min, tau * topic size)) or `absolute` (the paper's t). `dask`: `"local"` (a cluster of `workers`
    processes) or a scheduler address runs the sweep's fits (and the split) as mapped tasks there.
    """
    p = MineKeywordsParams(**params)
    if p.unit not in UNITS:
        raise ValueError(f"unit must be {' or '.join(map(repr, UNITS))}, got {p.unit!r}")
    base = data_root(p.root)
    reader = ReaderConfig(**config_values(p, ReaderConfig))
    source = str(Path(p.input_path).resolve()) if p.input_path else str(default_corpus())
    config = keywords_config(p)
    with dask_scheduler(p.dask, p.workers, base) as address:
        table = run_stage(ingest, base, input_path=source, config=IngestConfig(reader), workers=p.workers)
        require_documents(base, table, p.allow_empty)
        if p.unit == "sentences":
            table = run_stage(split, base, documents=table, config=SplitConfig(), workers=p.workers, dask=address)
        result = run_stage(keywords, base, source=table, config=config, dask=address)
    catalog_at_end(str(base), [result])
    return result
