"""The `build-pairs` flow: ingest -> split (pairing and shuffle extend it)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from storage.layout import data_root
from tasks.catalog_task import update_catalog
from tasks.ingest_documents import IngestConfig
from tasks.ingest_task import ingest
from tasks.read_corpus import ReaderConfig, default_corpus
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
    workers: int = 0,
    root: str | None = None,
) -> dict[str, dict[str, str]]:
    """Build the pipeline's tables from a corpus (default: the bundled Wikipedia sample)."""
    base = data_root(root)
    reader = ReaderConfig(format=format, text_field=text_field, title_field=title_field, id_field=id_field)
    source = str(Path(input_path).resolve()) if input_path else str(default_corpus())
    documents = run_stage(ingest, base, input_path=source, config=IngestConfig(reader, source_name, docs_per_shard))
    sentences = run_stage(split, base, documents=documents, config=SplitConfig(max_sentence_chars), workers=workers)
    update_catalog(str(base))
    return {"documents": documents, "sentences": sentences}
