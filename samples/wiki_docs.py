"""Real documents with a title and a body of several sentences, from the Wikipedia sample gensim ships:
an unlabeled corpus for the nightly label-free suite."""

from __future__ import annotations

import json
from pathlib import Path


def wiki_documents(n: int, sentences: int = 6) -> list[dict]:
    """The first `n` articles of three sentences or more, each cut to its first `sentences` sentences."""
    from tasks.ingest.readers import ReaderConfig, Record, default_corpus, read_corpus
    from tasks.split.sentences import split_sentences

    docs = []
    for item in read_corpus(default_corpus(), ReaderConfig(format="mediawiki")):
        if not isinstance(item, Record) or not item.title:
            continue
        parts = split_sentences(item.text)
        if len(parts) >= 3:
            docs.append({"id": item.source_id, "title": item.title, "text": " ".join(parts[:sentences])})
        if len(docs) == n:
            break
    return docs


def write_jsonl(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    return path
