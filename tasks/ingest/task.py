"""The `ingest` Prefect task: a corpus file or folder -> `documents` + `rejects` tables.

A file is one stream of records. A folder is a corpus of files, each ingested as its own unit
(cached on its content, see `tasks/ingest/folder.py`) and merged in path order.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from prefect import task

from storage.fingerprint import canonical_json, file_signature, fingerprint
from storage.layout import MANIFEST, data_root, record_path, recorded_path, stage_dir
from storage.progress import Progress, current_logger
from storage.shards import sum_shard_stats
from storage.stage_output import StageOutput
from tasks.ingest.documents import INGEST_CODE_VERSION, IngestConfig, default_source_name, ingest_corpus
from tasks.ingest.folder import (
    FOLDER_CODE_VERSION,
    HTML_READER,
    PAGE_COUNTS,
    assemble_folder,
    build_units,
    corpus_delta,
    folder_fingerprint,
    missing_units,
    plan_folder,
    told_versions,
    unit_dirs,
)
from tasks.ingest.read_summary import format_counts, markup_check
from tasks.ingest.readers import detect_format
from tasks.runtime.stage_cache import STAGE_TASK

TABLES = {"documents": "part-*.parquet", "rejects": "rejects/part-*.parquet"}


def ingest_fingerprint(input_path: str, config: IngestConfig) -> tuple[str, dict]:
    """The input files' names, sizes and mtimes are part of it: an edited corpus is re-ingested."""
    path = Path(input_path)
    source = config.source_name or default_source_name(path)
    inputs = {"name": path.name, "source": source, "files": file_signature(path)}
    return fingerprint("ingest", INGEST_CODE_VERSION, config, [canonical_json(inputs)]), inputs


def require_documents(root: Path, documents: dict[str, str], allow_empty: bool) -> None:
    """An input with no documents is a mistake (a wrong field, an empty folder) unless it was asked for."""
    from storage.stage_output import ref_manifest
    from tasks.ingest.readers import CorpusError

    manifest = ref_manifest(root, documents)
    if manifest["rows"].get("documents", 0) or allow_empty:
        return
    reasons = ", ".join(f"{k}={v}" for k, v in manifest["drops"].items()) or "no records at all"
    raise CorpusError(
        f"{manifest['inputs'].get('path')}: 0 documents ({reasons}; the rejects table has a row for each); "
        f"check the path, --format and --text-field, or pass --allow-empty"
    )


@task(name="ingest", **STAGE_TASK)
def ingest(input_path: str, config: IngestConfig, root: str, workers: int = 0) -> dict[str, str]:
    """Stream the corpus into document shards; a finished output folder is reused as is. A folder's
    files are read `workers` at a time (0: one per core), only those no earlier run read."""
    logger = current_logger(__name__)
    if Path(input_path).is_dir():
        return ingest_folder(Path(input_path), config, root, workers, logger)
    fp, inputs = ingest_fingerprint(input_path, config)
    out = StageOutput.open(root, "ingest", fp, log=logger)
    if out.complete:
        return out.cached()
    logger.info("ingest: %s -> %s", input_path, out.dir)
    progress = Progress("ingest records", None, logger)
    ingest_corpus(Path(input_path), config, out.dir, on_record=progress.update)
    stats = sum_shard_stats(out.dir)
    progress.close(documents=stats.get("documents", 0), rejects=stats.get("rejects", 0))
    fmt = detect_format(Path(input_path)) if config.reader.format == "auto" else config.reader.format
    read = {"format": fmt, "documents": stats.get("documents", 0), **{k: stats[k] for k in PAGE_COUNTS if k in stats}}
    markup = markup_check(out.dir)
    _warn_markup(logger, markup)
    return out.finish(
        code_version=INGEST_CODE_VERSION,
        config=config,
        inputs={"path": record_path(out.root, Path(input_path).resolve()), **inputs},
        upstream=[],
        tables=TABLES,
        rows={"documents": stats.get("documents", 0), "rejects": stats.get("rejects", 0)},
        drops={k.split(":", 1)[1]: v for k, v in stats.items() if k.startswith(("reject:", "drop:"))},
        extra={
            "coerced": {k.removeprefix("coerced:"): v for k, v in stats.items() if k.startswith("coerced:")},
            "formats": format_counts([read]),
            "markup": markup,
        },
    )


def ingest_folder(folder: Path, config: IngestConfig, root: str, workers: int, logger: logging.Logger):
    """Each file of `folder` through its own cached unit, then the folder's tables from the units."""
    source = config.source_name or default_source_name(folder)
    previous = previous_folder_build(data_root(root), str(folder.resolve()))
    units = plan_folder(folder, config, told_by(previous))
    fp = folder_fingerprint(units, config, source)
    out = StageOutput.open(root, "ingest", fp, log=logger)
    if out.complete:
        return out.cached()
    pending = missing_units(units, config, source, out.root)
    with Progress("ingest files", len(pending), logger, unit="files", heartbeat=True) as progress:
        build_units(pending, config, source, out.root, workers, on_unit=progress.update)
    computed = len(pending)
    before = (
        stage_dir(out.root, "ingest", previous["fingerprint"]) if previous and previous.get("fingerprint") else None
    )
    merged = assemble_folder(
        list(zip(units, unit_dirs(units, config, source, out.root), strict=True)), out.dir, source, before
    )
    delta = corpus_delta(previous.get("corpus_files") if previous else None, merged["files"])
    markup = markup_check(out.dir)
    _warn_markup(logger, markup)
    logger.info(
        "ingest: %s: %d files (%d new, %d changed, %d removed since the last build), %d read, %d reused; "
        "%d documents, %d rejects",
        folder,
        len(units),
        delta["files_new"],
        delta["files_changed"],
        delta["files_removed"],
        computed,
        len(units) - computed,
        merged["totals"]["documents"],
        merged["totals"]["rejects"],
    )
    return out.finish(
        code_version=FOLDER_CODE_VERSION,
        config=config,
        inputs={
            "path": record_path(out.root, folder.resolve()),
            "name": folder.name,
            "source": source,
            "kind": "folder",
        },
        upstream=[],
        tables=TABLES,
        rows={"documents": merged["totals"]["documents"], "rejects": merged["totals"]["rejects"]},
        drops=merged["drops"],
        extra={
            "records": merged["totals"]["records"],
            "corpus_files": merged["files"],
            "html_reader": HTML_READER,  # the reader that told the HTML files' versions in their keys
            "delta": {**delta, "previous": previous["fingerprint"] if previous else None},
            "file_work": {"read": computed, "reused": len(units) - computed},
            "formats": format_counts(merged["files"]),
            "markup": markup,
        },
    )


def _warn_markup(logger: logging.Logger, markup: dict) -> None:
    if markup["warn"]:
        logger.warning(
            "ingest: %d of %d sampled documents look like markup: %s", markup["markup"], markup["sampled"],
            ", ".join(markup["files"]),
        )  # fmt: skip


def told_by(previous: dict | None) -> dict[str, str | None]:
    """The HTML pages' reader versions that the last build of the folder told (`folder.told_versions`), when this
    reader told them: telling one reads the page twice, and an unchanged page need not be told again."""
    if not previous or previous.get("html_reader") != HTML_READER:
        return {}
    return told_versions(f for f in previous.get("corpus_files") or [] if f["format"] == "html")


def previous_folder_build(root: Path, folder: str) -> dict | None:
    """The newest complete ingest of the same folder (what the night adds to, and whose pages' versions the plan
    reuses; where it has this build's fingerprint, the build returns it as cached before the delta is asked):
    found through the manifest index, then only its manifest read whole."""
    from storage.manifest_index import complete_manifests

    best = None
    for out_dir, manifest in complete_manifests(root, "ingest").items():
        inputs = manifest.get("inputs") or {}
        # a held-out split's training side is recorded relative to the root
        same = inputs.get("kind") == "folder" and recorded_path(root, inputs.get("path")) == folder
        if not same:
            continue
        if best is None or manifest.get("finished_at", 0) > best[1].get("finished_at", 0):
            best = (out_dir, manifest)
    if best is None:
        return None
    try:
        return json.loads((best[0] / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
