"""A generated JSONL corpus that gives every build-pairs stage several shards, and the hashes to compare runs by.

Each document repeats a three-word topic in some of its sentences (so the pair stage finds
title and content pairs), every fourth one has Chinese sentences sharing a word, and ids are
unique: nothing is rejected. 1,000 documents give about 5,000 pairs.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

WORDS = (
    "graph model token sentence paper corpus encoder decoder vector loss batch layer train data shard parquet "
    "stage flow task cache seed split pair shuffle topic keyword title query answer index search river mountain "
    "city north south music film history war king village school market bridge harbor"
).split()
STAGES = ("ingest", "split", "pair", "shuffle")


def write_corpus(path: Path, n_docs: int, sentences: int = 5, vocabulary: int = len(WORDS), seed: int = 7) -> Path:
    """`vocabulary`: how many of `WORDS` to draw from; fewer words share more substrings, so pairing takes longer."""
    rng = random.Random(seed)
    words_ = WORDS[:vocabulary]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n_docs):
            topic = rng.choices(words_, k=3)
            text = []
            for j in range(sentences):
                words = rng.choices(words_, k=rng.randint(5, 12))
                if j % 2 == 0:
                    at = rng.randint(0, len(words))
                    words[at:at] = topic
                text.append(" ".join(words).capitalize() + ".")
            if i % 4 == 0:
                text.append(f"这个模型需要数据。数据来自第{i % 7}号文档！")
            doc = {"id": i, "title": f"Doc {i} {' '.join(topic)}", "text": " ".join(text)}
            f.write(json.dumps(doc, ensure_ascii=False) + "\n")
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def part_hashes(root: Path, refs: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """{stage: {part file relative to the stage folder: SHA-256}} of every `part-*.parquet` of a build-pairs run
    (documents and rejects of ingest, sentences, pairs, and the short/long training shards)."""
    out = {}
    for ref in refs.values():
        folder = root / ref["path"]
        files = sorted(p for p in folder.rglob("part-*.parquet") if not _working(p.relative_to(folder)))
        out[ref["stage"]] = {p.relative_to(folder).as_posix(): sha256(p) for p in files}
    return out


def _working(rel: Path) -> bool:
    """Under `_tmp/`, `_work/` and the like: a stage's working state, not its output."""
    return any(part.startswith("_") for part in rel.parts[:-1])
