"""Test helper: `shuffle`-stage-like shards from real text, until the real shuffle stage lands.

Sentences of the gensim Wikipedia sample (the demo corpus), paired as (title, sentence) and
(consecutive sentences) within a document, bucketed by length, shuffled by a seeded hash and
written as `<out>/{short,long}/part-NNNNN.parquet` with the shards table's columns. The LCS
columns are placeholders (no LCS filtering here).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SHARD_SCHEMA = pa.schema(
    [
        ("pair_id", pa.string()),
        ("doc_id", pa.string()),
        ("a_sent_id", pa.int32()),
        ("b_sent_id", pa.int32()),
        ("a", pa.string()),
        ("b", pa.string()),
        ("kind", pa.string()),
        ("lcs", pa.string()),
        ("lcs_len", pa.int32()),
        ("lcs_weight", pa.int32()),
        ("bucket", pa.string()),
        ("shuffle_key", pa.uint64()),
    ]
)


# Six two-sentence documents (doc_id, a, b): batches small enough for exact checks on a tiny model.
TINY_PAIRS = [
    ("d1", "Anarchism is a political philosophy.", "Anarchists reject involuntary hierarchy."),
    ("d2", "Autism is a developmental disorder.", "Autistic children show repetitive behaviour."),
    ("d3", "Albedo measures the reflectance of a surface.", "Snow has a high albedo."),
    ("d4", "Alabama is a state in the southeast.", "Montgomery is the capital of Alabama."),
    ("d5", "Achilles was a hero of the Trojan War.", "Homer tells of the wrath of Achilles."),
    ("d6", "Abraham Lincoln was the sixteenth president.", "Lincoln led the Union in the Civil War."),
]


@functools.lru_cache(maxsize=1)
def demo_documents() -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """(doc_id, title, sentences) for every article of the demo corpus (parsed once per process)."""
    from tasks.ingest.readers import ReaderConfig, Record, default_corpus, read_mediawiki
    from tasks.split.sentences import split_sentences

    docs = []
    for rec in read_mediawiki(default_corpus(), ReaderConfig()):
        if isinstance(rec, Record):
            sents = tuple(s for s in split_sentences(rec.text) if len(s.split()) >= 4)
            if len(sents) >= 4:
                docs.append((f"wiki:{rec.source_id}", rec.title or "", sents))
    return tuple(docs)


def longest_common_substring(a: str, b: str) -> str:
    """Longest common substring of the casefolded texts (difflib; fine for sentence-sized strings)."""
    x, y = a.casefold(), b.casefold()
    m = difflib.SequenceMatcher(None, x, y, autojunk=False).find_longest_match(0, len(x), 0, len(y))
    return x[m.a : m.a + m.size]


def _key(seed: int, text: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}:{text}".encode(), digest_size=8).digest(), "big")


def write_demo_shards(
    out: str | Path,
    max_docs: int | None = None,
    max_pairs_per_doc: int | None = None,
    shards_per_bucket: int = 2,
    row_group_rows: int = 256,
    seed: int = 0,
    short_chars: int = 64,
    min_lcs: int = 0,
    window: int = 1,
) -> dict[str, int]:
    """Write the shards; returns rows per bucket (also in `_manifest.json`, written last).

    `min_lcs` > 0 keeps only pairs (title vs each sentence, sentence i vs i+1..i+window) whose
    longest common substring has at least that many characters, like the `lcs` pair rule.
    """
    out = Path(out)
    rows: dict[str, list[dict]] = {"short": [], "long": []}
    for doc_id, title, sents in demo_documents()[:max_docs]:
        for row in _document_pairs(doc_id, title, sents, max_pairs_per_doc, short_chars, min_lcs, window, seed):
            rows[row["bucket"]].append(row)
    counts = {
        bucket: _write_bucket(out / bucket, items, shards_per_bucket, row_group_rows) for bucket, items in rows.items()
    }
    manifest = {"stage": "shuffle", "rows": counts, "tables": {"shards": "*/part-*.parquet"}}
    (out / "_manifest.json").write_text(json.dumps(manifest, indent=2))
    return counts


def _document_pairs(
    doc_id: str,
    title: str,
    sents: tuple[str, ...],
    max_pairs: int | None,
    short_chars: int,
    min_lcs: int,
    window: int,
    seed: int,
) -> list[dict]:
    """One document's pair rows: the title with its first sentence (with every sentence when `min_lcs`), each
    sentence with the next `window`, those under `min_lcs` left out, at most `max_pairs`."""
    titled = [(0, i + 1, title, s, "title") for i, s in enumerate(sents)] if title else []
    pairs = (titled if min_lcs else titled[:1]) + [
        (i + 1, j + 1, sents[i], sents[j], "content")
        for i in range(len(sents))
        for j in range(i + 1, min(i + 1 + window, len(sents)))
    ]
    found = []
    for a_id, b_id, a, b, kind in pairs:
        if max_pairs is not None and len(found) >= max_pairs:
            break
        lcs = longest_common_substring(a, b) if min_lcs else ""
        if len(lcs) < min_lcs:
            continue
        bucket = "short" if max(len(a), len(b)) < short_chars else "long"
        pair_id = hashlib.blake2b(f"{a}\t{b}".encode(), digest_size=8).hexdigest()
        found.append(
            dict(
                pair_id=pair_id,
                doc_id=doc_id,
                a_sent_id=a_id,
                b_sent_id=b_id,
                a=a,
                b=b,
                kind=kind,
                lcs=lcs,
                lcs_len=len(lcs),
                lcs_weight=0,
                bucket=bucket,
                shuffle_key=_key(seed, pair_id),
            )
        )
    return found


def _write_bucket(folder: Path, items: list[dict], shards: int, row_group_rows: int) -> int:
    """A bucket's rows in shuffle-key order over `shards` files; returns how many."""
    items.sort(key=lambda r: r["shuffle_key"])
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-len(items) // shards) if items else 0
    for k in range(shards if items else 0):
        table = pa.Table.from_pylist(items[k * per : (k + 1) * per], schema=SHARD_SCHEMA)
        pq.write_table(table, folder / f"part-{k:05d}.parquet", row_group_size=row_group_rows)
    return len(items)
