"""The `build-pairs` flow: ingest -> split -> pair -> shuffle, then the catalog views."""

from __future__ import annotations

import time
from dataclasses import fields
from pathlib import Path
from typing import NamedTuple

from prefect import flow

from flows.shuffle_pairs import shuffle_on_dask
from storage.layout import data_root
from tasks.evaluate.data import DemoRetrievalConfig
from tasks.ingest.documents import IngestConfig
from tasks.ingest.readers import ReaderConfig, default_corpus
from tasks.ingest.task import ingest, require_documents
from tasks.pair.candidates import PairConfig
from tasks.pair.task import pair
from tasks.runtime.artifacts import publish_build_artifacts
from tasks.runtime.catalog import update_catalog
from tasks.runtime.dask_cluster import dask_scheduler
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


# Parameter defaults are the config dataclasses' own (one place each); the CLI reads the same fields.
@flow(name="build-pairs", log_prints=True)
def build_pairs(
    input_path: str | None = None,
    format: str = ReaderConfig.format,
    text_field: str = ReaderConfig.text_field,
    title_field: str = ReaderConfig.title_field,
    id_field: str = ReaderConfig.id_field,
    source_name: str = IngestConfig.source_name,
    max_doc_bytes: int = ReaderConfig.max_doc_bytes,
    docs_per_shard: int = IngestConfig.docs_per_shard,
    max_sentence_chars: int = SplitConfig.max_sentence_chars,
    pair_rule: str = PairConfig.rule,
    pair_repeat: int = PairConfig.repeat,
    pair_options: dict | None = None,
    seed: int = PairConfig.seed,
    rows_per_shard: int = ShuffleConfig.rows_per_shard,
    memory_limit: str = ShuffleConfig.memory_limit,
    shard_compression: str = ShuffleConfig.shard_compression,
    spill_compression: str = ShuffleConfig.spill_compression,
    workers: int = 0,
    holdout_percent: int | None = None,
    allow_empty: bool = False,
    root: str | None = None,
    dask: str = "",
) -> dict[str, dict[str, str]]:
    """Build training shards from a corpus (default: the bundled Wikipedia sample).

    `pair_rule`: `weighted` (GUR's code), `letters` (the paper's wording) or `none` (no LCS
    filter: the GUR-LCS ablation's data); `pair_repeat`: most pairs a content sentence takes part in;
    `pair_options`: other `PairConfig` fields, e.g. `{"letters_k": 10, "letters_k_by_length": false}`
    (the paper's k = 10 example).
    `seed` drives partner order and the shuffle. Documents over `max_doc_bytes` are rejected.
    `holdout_percent` keeps that share of documents (by title hash) out of the pairs because the
    demo retrieval evaluation uses them; `None`: 20 for the bundled sample, 0 for your corpus.
    `shard_compression`: Parquet codec of the training shards (`snappy`, or `zstd` for ~30%
    smaller files at ~1.4x the encoding time). `spill_compression`: codec of the shuffle's
    intermediate files, which need about 4x the pairs' Parquet size of disk until the stage
    ends (`lz4` halves that for ~30% more time). An input that yields no documents stops the
    run with the reject counts, unless `allow_empty`.
    `dask`: `"local"` runs split, pair and the shuffle's phases as mapped tasks on a local Dask cluster of
    `workers` processes, `"tcp://host:8786"` on a running scheduler whose workers all see the data root
    at the same path; the bytes are those of a run without it.
    """
    base, started = data_root(root), time.time()
    # Built before any stage runs, so a misspelt codec or memory limit fails in a second, not after pairing.
    configs = stage_configs(
        input_path=input_path,
        format=format,
        text_field=text_field,
        title_field=title_field,
        id_field=id_field,
        source_name=source_name,
        max_doc_bytes=max_doc_bytes,
        docs_per_shard=docs_per_shard,
        max_sentence_chars=max_sentence_chars,
        pair_rule=pair_rule,
        pair_repeat=pair_repeat,
        pair_options=pair_options,
        seed=seed,
        rows_per_shard=rows_per_shard,
        memory_limit=memory_limit,
        shard_compression=shard_compression,
        spill_compression=spill_compression,
        holdout_percent=holdout_percent,
    )
    source = str(Path(input_path).resolve()) if input_path else str(default_corpus())
    with dask_scheduler(dask, workers, base) as address:
        documents = run_stage(ingest, base, input_path=source, config=configs.ingest, workers=workers)
        require_documents(base, documents, allow_empty)
        sentences = run_stage(split, base, documents=documents, config=configs.split, workers=workers, dask=address)
        pairs = run_stage(pair, base, sentences=sentences, config=configs.pair, workers=workers, dask=address)
        if address:
            shards = shuffle_on_dask(pairs, configs.shuffle, base, address)
        else:
            shards = run_stage(shuffle, base, pairs=pairs, config=configs.shuffle)
    update_catalog(str(base), [documents, sentences, pairs, shards])
    refs = {"documents": documents, "sentences": sentences, "pairs": pairs, "shards": shards}
    publish_build_artifacts(base, refs, since=started)
    return refs


def stage_configs(
    *,
    input_path: str | None,
    format: str,
    text_field: str,
    title_field: str,
    id_field: str,
    source_name: str,
    max_doc_bytes: int,
    docs_per_shard: int,
    max_sentence_chars: int,
    pair_rule: str,
    pair_repeat: int,
    pair_options: dict | None,
    seed: int,
    rows_per_shard: int,
    memory_limit: str,
    shard_compression: str,
    spill_compression: str,
    holdout_percent: int | None,
) -> StageConfigs:
    """The four stage configs of a build-pairs run from its parameters (the flow's names); raises
    ValueError on a bad value before anything runs (the CLI calls it before Prefect starts)."""
    if holdout_percent is None:
        holdout_percent = DemoRetrievalConfig.held_out_percent if input_path is None else 0
    reader = ReaderConfig(
        format=format, text_field=text_field, title_field=title_field, id_field=id_field, max_doc_bytes=max_doc_bytes
    )
    return StageConfigs(
        ingest=IngestConfig(reader, source_name, docs_per_shard),
        split=SplitConfig(max_sentence_chars),
        pair=pair_config_from(pair_rule, pair_repeat, seed, holdout_percent, pair_options),
        shuffle=ShuffleConfig(
            seed=seed,
            rows_per_shard=rows_per_shard,
            memory_limit=memory_limit,
            shard_compression=shard_compression,
            spill_compression=spill_compression,
        ),
    )


def pair_config_from(rule: str, repeat: int, seed: int, holdout_percent: int, options: dict | None) -> PairConfig:
    """The pair stage's config; unknown `options` keys are an error that lists the known ones."""
    options = dict(options or {})
    fixed = {"rule", "repeat", "seed", "holdout_percent"}
    known = {f.name for f in fields(PairConfig)} - fixed
    unknown = sorted(set(options) - known)
    if unknown:
        what = "set by their own parameters" if set(unknown) <= fixed else f"known: {', '.join(sorted(known))}"
        raise ValueError(f"pair_options: {', '.join(unknown)} not accepted ({what})")
    return PairConfig(rule=rule, repeat=repeat, seed=seed, holdout_percent=holdout_percent, **options)
