"""The `build-pairs` flow: ingest -> split -> pair -> shuffle, then the catalog views."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from storage.layout import data_root
from tasks.catalog_task import update_catalog
from tasks.eval_data import DemoRetrievalConfig
from tasks.ingest_documents import IngestConfig
from tasks.ingest_task import ingest
from tasks.pair_candidates import PairConfig
from tasks.pair_task import pair
from tasks.read_corpus import ReaderConfig, default_corpus
from tasks.shuffle_pairs import ShuffleConfig
from tasks.shuffle_task import shuffle
from tasks.split_sentences import SplitConfig
from tasks.split_task import split
from tasks.stage_cache import run_stage


@flow(name="build-pairs", log_prints=True)
def build_pairs(
    input_path: str | None = None,
    format: str = "auto",
    text_field: str = "text",
    title_field: str = "title",
    id_field: str = "id",
    source_name: str = "",
    docs_per_shard: int = 2000,
    max_sentence_chars: int = 512,
    pair_rule: str = "weighted",
    pair_repeat: int = 2,
    seed: int = 0,
    rows_per_shard: int = 100_000,
    memory_limit: str = "1GB",
    workers: int = 0,
    holdout_percent: int | None = None,
    root: str | None = None,
) -> dict[str, dict[str, str]]:
    """Build training shards from a corpus (default: the bundled Wikipedia sample).

    `pair_rule`: `weighted` (GUR's code), `letters` (the paper's wording) or `none` (no LCS
    filter: the GUR-LCS ablation's data). `seed` drives partner order and the shuffle.
    `holdout_percent` keeps that share of documents (by title hash) out of the pairs because the
    demo retrieval evaluation uses them; `None`: 20 for the bundled sample, 0 for your corpus.
    """
    base = data_root(root)
    if holdout_percent is None:
        holdout_percent = DemoRetrievalConfig.held_out_percent if input_path is None else 0
    reader = ReaderConfig(format=format, text_field=text_field, title_field=title_field, id_field=id_field)
    source = str(Path(input_path).resolve()) if input_path else str(default_corpus())
    documents = run_stage(ingest, base, input_path=source, config=IngestConfig(reader, source_name, docs_per_shard))
    sentences = run_stage(split, base, documents=documents, config=SplitConfig(max_sentence_chars), workers=workers)
    pairs = run_stage(
        pair,
        base,
        sentences=sentences,
        config=PairConfig(rule=pair_rule, repeat=pair_repeat, seed=seed, holdout_percent=holdout_percent),
        workers=workers,
    )
    shards = run_stage(
        shuffle,
        base,
        pairs=pairs,
        config=ShuffleConfig(seed=seed, rows_per_shard=rows_per_shard, memory_limit=memory_limit),
    )
    update_catalog(str(base))
    return {"documents": documents, "sentences": sentences, "pairs": pairs, "shards": shards}
