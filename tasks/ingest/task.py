"""The `ingest` Prefect task: a corpus file or folder -> `documents` + `rejects` tables."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from storage.fingerprint import canonical_json, file_signature, fingerprint
from storage.progress import Progress, current_logger
from storage.shards import sum_shard_stats
from storage.stage_output import StageOutput
from tasks.ingest.documents import INGEST_CODE_VERSION, IngestConfig, default_source_name, ingest_corpus
from tasks.runtime.stage_cache import STAGE_TASK


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
def ingest(input_path: str, config: IngestConfig, root: str) -> dict[str, str]:
    """Stream the corpus into document shards; a finished output folder is reused as is."""
    fp, inputs = ingest_fingerprint(input_path, config)
    logger = current_logger(__name__)
    out = StageOutput.open(root, "ingest", fp, log=logger)
    if out.complete:
        return out.cached()
    logger.info("ingest: %s -> %s", input_path, out.dir)
    progress = Progress("ingest records", None, logger)
    ingest_corpus(Path(input_path), config, out.dir, on_record=progress.update)
    stats = sum_shard_stats(out.dir)
    progress.close(documents=stats.get("documents", 0), rejects=stats.get("rejects", 0))
    return out.finish(
        code_version=INGEST_CODE_VERSION,
        config=config,
        inputs={"path": str(input_path), **inputs},
        upstream=[],
        tables={"documents": "part-*.parquet", "rejects": "rejects/part-*.parquet"},
        rows={"documents": stats.get("documents", 0), "rejects": stats.get("rejects", 0)},
        drops={k.removeprefix("reject:"): v for k, v in stats.items() if k.startswith("reject:")},
        extra={"coerced": {k.removeprefix("coerced:"): v for k, v in stats.items() if k.startswith("coerced:")}},
    )
