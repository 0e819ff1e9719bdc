"""The label-free suite's tasks, cut from held-out documents (`id`, `title`, `text`) with no label at all.

    tasks = label_free_tasks(held, seed)   # heldout-title: a title -> its body; heldout-ict: a sentence -> the rest
    tasks[PAIR_TASK] = pair_task(held)     # a GUR night: a sentence -> its LCS partner

Each task is (corpus, queries, qrels) for a BEIR folder (tasks/nightly/suite_files.py writes them); every
choice is seeded and keyed by content, so the same documents always give the same queries.
"""

from __future__ import annotations

import hashlib

from tasks.evaluate.overlap import normalize
from tasks.nightly.config import ICT_TASK, TITLE_TASK
from tasks.pair.candidates import PairConfig
from tasks.pair.table import pair_table
from tasks.split.sentences import SplitConfig, split_documents, split_sentences

ICT_MIN_WORDS = 4  # an ICT query sentence needs some content; shorter ones are used only when nothing else is


Task = tuple[list[dict], list[dict], list[tuple[str, str]]]  # corpus, queries, qrels (query id, doc id)


def label_free_tasks(docs: list[dict], seed: int) -> dict[str, Task]:
    """The two label-free retrieval tasks over held-out documents (`id`, `title`, `text`), in their order.

    - title -> body: each distinct (normalized) title of a document with a body is a query; the documents
      are the bodies alone (the title would give the answer away); every document with that title is
      relevant.
    - inverse cloze: for each document of two sentences or more, one sentence (seeded; of `ICT_MIN_WORDS`
      words or more where the document has one) is the query, and that document without the sentence is the
      one relevant target among all held-out documents (title and text, the query's sentence removed).
    """
    doc_ids = [f"d{i}" for i in range(len(docs))]
    body = [{"_id": d, "title": "", "text": doc["text"]} for d, doc in zip(doc_ids, docs, strict=True)]
    by_title: dict[str, list[str]] = {}
    first_title: dict[str, str] = {}
    for d, doc in zip(doc_ids, docs, strict=True):
        if doc.get("title") and doc["text"].strip():
            key = normalize(doc["title"])
            by_title.setdefault(key, []).append(d)
            first_title.setdefault(key, doc["title"])
    title_queries = [{"_id": f"q{i}", "text": first_title[key]} for i, key in enumerate(by_title)]
    title_qrels = [(f"q{i}", d) for i, key in enumerate(by_title) for d in by_title[key]]

    cloze, ict_queries, ict_qrels = [], [], []
    for d, doc in zip(doc_ids, docs, strict=True):
        sentences = split_sentences(doc["text"])
        title = doc.get("title") or ""
        if len(sentences) < 2:
            cloze.append({"_id": d, "title": title, "text": doc["text"]})
            continue
        pick = pick_sentence(sentences, f"{seed}\x00{normalize(title)}\x00{normalize(doc['text'])}")
        rest = " ".join(s for i, s in enumerate(sentences) if i != pick)
        cloze.append({"_id": d, "title": title, "text": rest})
        ict_queries.append({"_id": f"q{len(ict_queries)}", "text": sentences[pick]})
        ict_qrels.append((ict_queries[-1]["_id"], d))
    return {TITLE_TASK: (body, title_queries, title_qrels), ICT_TASK: (cloze, ict_queries, ict_qrels)}


def pair_task(docs: list[dict]) -> Task:
    """GUR's own signal as a task: the held-out documents are split and paired exactly as the split and pair
    stages do (same rules, default settings); each pair's first sentence is a query whose one relevant
    target is its LCS partner, among every held-out sentence that is not itself a query."""
    ids = [f"d{i}" for i in range(len(docs))]
    sentences, _ = split_documents(ids, [d.get("title") for d in docs], [d["text"] for d in docs], SplitConfig())
    pairs, _ = pair_table(sentences, PairConfig())
    rows = [r for r in pairs.select(["kind", "a", "b"]).to_pylist() if r["kind"] == "content" and r["a"] != r["b"]]
    targets = {r["b"] for r in rows}
    partners: dict[str, list[str]] = {}
    for r in rows:
        if r["a"] not in targets:  # a query never sits among the candidates (it would find itself)
            partners.setdefault(r["a"], []).append(r["b"])
    texts = list(dict.fromkeys(s for s in sentences.column("text").to_pylist() if s not in partners))
    sid = {text: f"s{i}" for i, text in enumerate(texts)}
    corpus = [{"_id": sid[text], "title": "", "text": text} for text in texts]
    queries = [{"_id": f"q{i}", "text": a} for i, a in enumerate(partners)]
    qrels = [(f"q{i}", sid[b]) for i, a in enumerate(partners) for b in dict.fromkeys(partners[a])]
    return corpus, queries, qrels


def pick_sentence(sentences: list[str], key: str) -> int:
    """A seeded, content-keyed choice of the query sentence: the same document always gives the same one."""
    long = [i for i, s in enumerate(sentences) if len(s.split()) >= ICT_MIN_WORDS] or list(range(len(sentences)))
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return long[int.from_bytes(digest, "big") % len(long)]
