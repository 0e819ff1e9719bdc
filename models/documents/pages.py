"""The page each document is a section of, for the `documents` recipe: sections of one page are not each other's
negatives (`same_page = "masked"`), and `clustered-pages` batches hold sections of similar but different pages.

A page is what the corpus's own ids say: a document whose source id is `page#section` (as ingest's page readers
name the sections of an HTML, Markdown or PDF page, and as section dumps often name theirs) belongs to `page`; an
id without `#` is a page of its own. No label is read: the ids are the corpus's structure, as a site's URLs are.
The ids come from the ingest output the split stage read (the split manifest's `documents` input), since the
split table keeps only the hashed `doc_id`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def page_of(source_id: str) -> str:
    """`page#section` -> `page`; an id without `#` names a page of its own."""
    page, hash_, _ = source_id.partition("#")
    return page if hash_ else source_id


def page_numbers(doc_ids: list[str], source_ids: dict[str, str]) -> np.ndarray:
    """A number per document (in `doc_ids` order), equal for documents of one page; a document without a known
    source id is a page of its own."""
    numbers: dict[str, int] = {}
    out = np.empty(len(doc_ids), np.int64)
    for i, doc_id in enumerate(doc_ids):
        source_id = source_ids.get(doc_id)
        key = page_of(source_id) if source_id else f"\0{doc_id}"
        out[i] = numbers.setdefault(key, len(numbers))
    return out


def split_source_ids(split: Path) -> dict[str, str]:
    """`doc_id` -> the corpus's own id, read from the ingest output a split output was made from. Empty when
    `split` is not a stage folder with such a manifest (a lone Parquet file, a folder copied out of a root)."""
    import pyarrow.parquet as pq

    from storage.layout import recorded_path

    folder = split if split.is_dir() else split.parent
    manifest = folder / "_manifest.json"
    if not manifest.is_file():
        return {}
    documents = json.loads(manifest.read_text(encoding="utf-8")).get("inputs", {}).get("documents")
    ingest = Path(recorded_path(folder.parents[1], documents)) if documents else None
    if ingest is None or not ingest.is_dir():
        return {}
    out: dict[str, str] = {}
    for part in sorted(ingest.glob("part-*.parquet")):
        table = pq.read_table(part, columns=["doc_id", "source_id"])
        out.update(zip(table.column("doc_id").to_pylist(), table.column("source_id").to_pylist(), strict=True))
    return out
