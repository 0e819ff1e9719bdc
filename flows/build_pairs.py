"""The `build-pairs` flow: ingest -> split -> pair -> shuffle, then the catalog views."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, NamedTuple

from prefect import flow

from flows.parameters import BuildPairsParams
from flows.shuffle_pairs import shuffle_on_dask
from storage.builds_lock import holds_root
from storage.layout import data_root
from tasks.evaluate.data import DemoRetrievalConfig
from tasks.ingest.documents import IngestConfig
from tasks.ingest.readers import ReaderConfig, default_corpus
from tasks.ingest.task import ingest, require_documents
from tasks.pair.candidates import PairConfig
from tasks.pair.task import pair
from tasks.runtime.artifacts import publish_build_artifacts
from tasks.runtime.catalog import catalog_at_end
from tasks.runtime.dask_cluster import dask_scheduler
from tasks.runtime.parameters import config_values, takes
from tasks.runtime.stage_cache import run_stage
from tasks.shuffle.phases import ShuffleConfig
from tasks.shuffle.task import shuffle
from tasks.split.sentences import SplitConfig
from tasks.split.task import split


class StageConfigs(NamedTuple):
    ingest: IngestConfig
    split: SplitConfig
    pair: PairConfig
    shuffle: ShuffleConfig


@flow(name="build-pairs", log_prints=True)
@holds_root  # a gc never runs meanwhile (storage/builds_lock.py)
@takes(BuildPairsParams)  # the signature: every parameter with its default, one config field each
def build_pairs(**params: Any) -> dict[str, dict[str, str]]:
    """Build training shards from a corpus (default: the bundled Wikipedia sample).

    `pair_rule`: `weighted` (GUR's code), `letters` (the paper's wording) or `none` (no LCS
    filter: the GUR-LCS ablation's data); `pair_repeat`: most pairs a content sentence takes part in;
    `pair_options`: other `PairConfig` fields, e.g. `{"letters_k": 10, "letters_k_by_length": false}`
    (the paper's k = 10 example).
    `seed` drives partner order and the shuffle. Documents over `max_doc_bytes` are rejected.
    `holdout_percent` keeps that share of documents (by title hash) out of the pairs because the
    demo retrieval evaluation uses them; `None`: 20 for the bundled sample, 0 for your corpus.
    `shard_compression`: Parquet codec of the training shards (`snappy`, or `zstd` for smaller
    files at more encoding time). `spill_compression`: codec of the shuffle's intermediate
    files, which need several times the pairs' Parquet size of disk until the stage ends (`lz4`
    less, for more time; the results log: docs/results/, the shuffle's intermediates uncompressed
    and its shards in snappy). An input that yields no documents stops the run with the reject counts,
    unless `allow_empty`.
    `dask`: `"local"` runs split, pair and the shuffle's phases as mapped tasks on a local Dask cluster of
    `workers` processes, `"tcp://host:8786"` on a running scheduler whose workers all see the data root
    at the same path; the bytes are those of a run without it.
    """
    p = BuildPairsParams(**params)
    base, started = data_root(p.root), time.time()
    # Built before any stage runs, so a misspelt codec or memory limit fails in a second, not after pairing.
    configs = stage_configs(**params)
    source = str(Path(p.input_path).resolve()) if p.input_path else str(default_corpus())
    with dask_scheduler(p.dask, p.workers, base) as address:
        documents = run_stage(ingest, base, input_path=source, config=configs.ingest, workers=p.workers)
        require_documents(base, documents, p.allow_empty)
        sentences = run_stage(split, base, documents=documents, config=configs.split, workers=p.workers, dask=address)
        pairs = run_stage(pair, base, sentences=sentences, config=configs.pair, workers=p.workers, dask=address)
        if address:
            shards = shuffle_on_dask(pairs, configs.shuffle, base, address)
        else:
            shards = run_stage(shuffle, base, pairs=pairs, config=configs.shuffle)
    catalog_at_end(str(base), [documents, sentences, pairs, shards])
    refs = {"documents": documents, "sentences": sentences, "pairs": pairs, "shards": shards}
    publish_build_artifacts(base, refs, since=started)
    return refs


def corpus_documents(root: str, **params: Any) -> dict[str, str]:
    """The ingest stage alone over a corpus (`BuildPairsParams` fields), in the calling flow: every document the
    folder yields, as build-pairs reads it (cached per file). The nightly job embeds these for search, held-out
    documents included."""
    configs = stage_configs(**params)
    base = data_root(root)
    documents = run_stage(ingest, base, input_path=str(Path(params["input_path"]).resolve()), config=configs.ingest)
    require_documents(base, documents, False)
    return documents


def stage_configs(**params: Any) -> StageConfigs:
    """The four stage configs of a build-pairs run from its parameters (any of `BuildPairsParams`, the others
    default); raises ValueError on a bad value before anything runs (the CLI calls it before Prefect starts)."""
    p = BuildPairsParams(**params)
    holdout_percent = p.holdout_percent
    if holdout_percent is None:
        holdout_percent = DemoRetrievalConfig.held_out_percent if p.input_path is None else 0
    reader = ReaderConfig(**config_values(p, ReaderConfig))
    return StageConfigs(
        ingest=IngestConfig(reader, **config_values(p, IngestConfig)),
        split=SplitConfig(**config_values(p, SplitConfig)),
        pair=pair_config_from(p.pair_options, holdout_percent=holdout_percent, **config_values(p, PairConfig)),
        shuffle=ShuffleConfig(**config_values(p, ShuffleConfig)),
    )


def pair_config_from(options: dict | None, **fields: Any) -> PairConfig:
    """The pair stage's config: `fields` set by their own parameters, `options` the others; an unknown or
    doubly set `options` key is an error that lists the known ones."""
    options = dict(options or {})
    fixed = set(fields)
    known = {f.name for f in dataclasses.fields(PairConfig)} - fixed
    unknown = sorted(set(options) - known)
    if unknown:
        what = "set by their own parameters" if set(unknown) <= fixed else f"known: {', '.join(sorted(known))}"
        raise ValueError(f"pair_options: {', '.join(unknown)} not accepted ({what})")
    return PairConfig(**fields, **options)
