"""The `ingest` Prefect task: a corpus file or folder -> `documents` + `rejects` tables."""

from __future__ import annotations

import time
from pathlib import Path

from prefect import task
from prefect.cache_policies import CachePolicy

from storage.fingerprint import canonical_json, file_signature, fingerprint
from storage.layout import data_root, stage_dir
from storage.manifest import is_complete, write_manifest
from storage.shards import sum_shard_stats
from storage.stage_output import build_manifest, stage_ref
from tasks.ingest_documents import INGEST_CODE_VERSION, IngestConfig, default_source_name, ingest_corpus
from tasks.progress import Progress, current_logger
from tasks.stage_cache import stage_cache_policy

# The input files' names, sizes and mtimes join the cache key: an edited corpus is re-ingested.
_INPUT_FILES = CachePolicy.from_cache_key_fn(lambda ctx, params: canonical_json(file_signature(params["input_path"])))


def ingest_fingerprint(input_path: str, config: IngestConfig) -> tuple[str, dict]:
    path = Path(input_path)
    source = config.source_name or default_source_name(path)
    inputs = {"name": path.name, "source": source, "files": file_signature(path)}
    return fingerprint("ingest", INGEST_CODE_VERSION, config, [canonical_json(inputs)]), inputs


@task(name="ingest", cache_policy=stage_cache_policy(INGEST_CODE_VERSION) + _INPUT_FILES)
def ingest(input_path: str, config: IngestConfig, root: str) -> dict[str, str]:
    """Stream the corpus into document shards; a finished output folder is reused as is."""
    started = time.time()
    fp, inputs = ingest_fingerprint(input_path, config)
    out = stage_dir(data_root(root), "ingest", fp)
    logger = current_logger(__name__)
    if is_complete(out):
        logger.info("ingest: reusing complete output %s", out)
        return stage_ref("ingest", fp)
    logger.info("ingest: %s -> %s", input_path, out)
    progress = Progress("ingest records", None, logger)
    ingest_corpus(Path(input_path), config, out, on_record=progress.update)
    stats = sum_shard_stats(out)
    progress.close(documents=stats.get("documents", 0), rejects=stats.get("rejects", 0))
    drops = {k.removeprefix("reject:"): v for k, v in stats.items() if k.startswith("reject:")}
    write_manifest(
        out,
        build_manifest(
            stage="ingest",
            fingerprint=fp,
            code_version=INGEST_CODE_VERSION,
            config=config,
            inputs={"path": str(input_path), **inputs},
            upstream=[],
            tables={"documents": "part-*.parquet", "rejects": "rejects/part-*.parquet"},
            rows={"documents": stats.get("documents", 0), "rejects": stats.get("rejects", 0)},
            drops=drops,
            started_at=started,
        ),
    )
    return stage_ref("ingest", fp)
