"""What an ingest read, per format, and whether its documents still look like markup.

    formats = format_counts(files)          # {"html": {"files": 2, "pages": 2, "sections": 41, "documents": 41}}
    markup = markup_check(out_dir)          # a sample of the documents: which files' texts are mostly tags
    lines = summary_lines(manifest)         # what `gur build-pairs` prints under the documents line

The markup check reads at most `SAMPLE_PER_SHARD` documents of each shard (a slice of its first row
group), so it costs the same on a corpus of a thousand documents or of millions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

SAMPLE_PER_SHARD = 200
SAMPLE_SHARDS = 8  # shards sampled, spread over the output
TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*[\s/>]|<!--|&[a-z]+;")
MARKUP_TAGS_PER_KB = 4.0  # prose has none; a page of HTML source has dozens
NAMED_FILES = 10


def format_counts(files: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Files, pages, sections and documents per format, from a manifest's `corpus_files` entries."""
    out: dict[str, dict[str, int]] = {}
    for entry in files:
        counts = out.setdefault(entry["format"], {"files": 0, "pages": 0, "sections": 0, "documents": 0})
        counts["files"] += 1
        counts["documents"] += entry.get("documents", 0)
        for key in ("pages", "sections"):
            counts[key] += entry.get(key, 0)
    return dict(sorted(out.items()))


def looks_like_markup(text: str) -> bool:
    """More than `MARKUP_TAGS_PER_KB` tags (or entities, comments) per 1,000 characters."""
    return len(TAG.findall(text)) * 1000 > MARKUP_TAGS_PER_KB * max(len(text), 1)


def markup_check(out_dir: Path) -> dict[str, Any]:
    """A sample of the documents in `out_dir`: how many look like markup, and the files they come from
    (a location's part before `:`). `warn` when most of the sample does."""
    import pyarrow.parquet as pq

    shards = sorted(Path(out_dir).glob("part-*.parquet"))
    step = max(1, len(shards) // SAMPLE_SHARDS)
    sampled, markup, files = 0, 0, {}
    for shard in shards[::step][:SAMPLE_SHARDS]:
        reader = pq.ParquetFile(shard)
        if reader.metadata.num_row_groups == 0:
            continue
        table = reader.read_row_group(0, columns=["text", "location"]).slice(0, SAMPLE_PER_SHARD)
        texts, locations = table.column("text").to_pylist(), table.column("location").to_pylist()
        for text, location in zip(texts, locations, strict=True):
            sampled += 1
            if looks_like_markup(text):
                markup += 1
                name = (location or "").rsplit(":", 1)[0] if ":" in (location or "") else location or ""
                files[name] = files.get(name, 0) + 1
    return {"sampled": sampled, "markup": markup, "warn": markup * 2 > sampled, "files": sorted(files)[:NAMED_FILES]}


def summary_lines(manifest: dict[str, Any]) -> list[str]:
    """The lines `gur build-pairs` prints for an ingest: documents per format, and the markup warning."""
    lines = []
    formats = manifest.get("formats") or {}
    if formats:
        parts = []
        for fmt, c in formats.items():
            counts = [_count(c["files"], "file")]
            counts += [_count(c[k], k.removesuffix("s")) for k in ("pages", "sections") if c.get(k)]
            parts.append(f"{fmt}: {', '.join([*counts, _count(c['documents'], 'document')])}")
        lines.append("formats: " + "; ".join(parts))
    markup = manifest.get("markup") or {}
    if markup.get("warn"):
        lines.append(
            f"warning: {markup['markup']} of {markup['sampled']} sampled documents look like markup (HTML tags): "
            f"{', '.join(markup['files'])}. Read as plain text? Name their format (.html, --format html)"
        )
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"
