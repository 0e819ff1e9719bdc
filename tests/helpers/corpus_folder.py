"""A corpus folder in every format the readers take, written from generated documents.

`write_mixed_folder` puts documents into JSONL, wiki2txt-style JSONL named `.txt`, CSV, TSV, Parquet,
MediaWiki XML and plain-text files, some gzip/bz2/zstd-compressed, plus a hidden file, a TSV
without the text column and a duplicate of an earlier file's document: every record path the
folder reader has. `docs(n, seed)` makes documents the pair stage finds pairs in.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from samples.pair_corpus import WORDS


def docs(n: int, seed: int, prefix: str = "Doc") -> list[dict]:
    """`n` documents of five sentences sharing a three-word topic (pairs for the pair stage)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        topic = rng.choices(WORDS, k=3)
        sentences = []
        for j in range(5):
            words = rng.choices(WORDS, k=rng.randint(5, 12))
            if j % 2 == 0:
                words[rng.randint(0, len(words)) : 0] = topic
            sentences.append(" ".join(words).capitalize() + ".")
        title = f"{prefix} {seed} {i} {' '.join(topic)}"
        out.append({"id": f"{seed}-{i}", "title": title, "text": " ".join(sentences)})
    return out


def jsonl_bytes(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def delimited_bytes(rows: list[dict], delimiter: str, columns: tuple[str, ...] = ("id", "title", "text")) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        writer.writerow([r.get(c, "") for c in columns])
    return buffer.getvalue().encode()


def parquet_bytes(rows: list[dict]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


def mediawiki_bytes(rows: list[dict]) -> bytes:
    pages = "".join(
        f"<page><title>{r['title']}</title><ns>0</ns><id>{i + 1}</id>"
        f"<revision><id>{i + 1}00</id><text>{r['text']}</text></revision></page>"
        for i, r in enumerate(rows)
    )
    return f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">{pages}</mediawiki>\n'.encode()


def zstd(data: bytes) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as out:
        out.write(data)
    return sink.getvalue().to_pybytes()


def write_mixed_folder(folder: Path, per_file: int = 6) -> dict[str, int]:
    """Write the folder; returns {relative path: records in that file} (a text file is one record)."""
    folder.mkdir(parents=True, exist_ok=True)
    batches = iter(docs(per_file, seed) for seed in range(100))
    text_doc = docs(1, 999)[0]
    files = {
        "a.jsonl": jsonl_bytes(next(batches)),
        "b/wiki2txt-output.txt": jsonl_bytes(next(batches)),
        "c.csv": delimited_bytes(next(batches), ","),
        "d.tsv": delimited_bytes(next(batches), "\t"),
        "e.parquet": parquet_bytes(next(batches)),
        "f.xml": mediawiki_bytes(next(batches)),
        "g.jsonl.gz": gzip.compress(jsonl_bytes(next(batches))),
        "h.tsv.bz2": bz2.compress(delimited_bytes(next(batches), "\t")),
        "i.csv.zst": zstd(delimited_bytes(next(batches), ",")),
        "notes/readme.txt": text_doc["text"].encode(),
        "notes/packed.txt.gz": gzip.compress(docs(1, 998)[0]["text"].encode()),
        "no_text_column.tsv": delimited_bytes(next(batches), "\t", columns=("id", "title")),
        "z_copy.jsonl": jsonl_bytes(docs(per_file, 0)[:2]),  # two documents a.jsonl already holds
        ".DS_Store": b"\x00\x00\x00\x01Bud1",
    }
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    records = {rel: per_file for rel in files}
    records.update({"notes/readme.txt": 1, "notes/packed.txt.gz": 1, "no_text_column.tsv": 1, "z_copy.jsonl": 2})
    records[".DS_Store"] = 1
    return records
