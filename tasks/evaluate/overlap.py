"""Did a model train on the texts it is scored on? The texts' fingerprint and their overlap with its training input.

A model folder made by `train` is `<root>/train/<fingerprint>/export`; the run's manifest names its
input (a `keywords`, `shuffle` or `split` output). Its texts (`text`; for a `split` output, the documents
recipe's input, each document's body: its sentences joined; for a `shuffle` or `pair` output, GUR's pairs,
the bodies of the documents of the `split` output they were mined from) are compared with the evaluation's
texts after `normalize`. Those recipes count whole documents because they learn a document's own sentences
(against its own body, or paired with another of its sentences): a held-out section whose heading
("Examples") or one sentence also stands in another, training, section was not trained on.
Texts of fewer than `MIN_WORDS` words are not counted: a heading ("Structs") that is also the whole body of a
training section, or a generated fragment ("1.34.0 · source") that hundreds of reference pages share,
names no document, so it cannot leak one (a corpus of generated reference pages has dozens of them).
Other models (baselines, downloaded encoders, SimCSE on a plain file) have no known training input:
their overlap is unknown (None).
"""

from __future__ import annotations

import json
from pathlib import Path

from storage.fingerprint import fingerprint
from storage.layout import MANIFEST
from tasks.evaluate.data import LabelledTexts, RetrievalSet, SimilarityPairs

TEXT_COLUMNS = ("text", "a", "b")
MIN_WORDS = 4  # a shorter text is a heading or a generated fragment, not a document's content (ICT_MIN_WORDS too)


def normalize(text: str) -> str:
    """Case and spacing do not make a text new."""
    return " ".join(str(text).lower().split())


def suite_texts(data: LabelledTexts | SimilarityPairs | RetrievalSet) -> list[str]:
    """The texts an evaluation scores, in dataset order."""
    if isinstance(data, LabelledTexts):
        return list(data.texts)
    if isinstance(data, SimilarityPairs):
        return [*data.a, *data.b]
    return [*data.queries, *data.docs]


def texts_fingerprint(texts: list[str]) -> str:
    """One hash of the texts in order: two evaluations with the same value scored the same texts."""
    return fingerprint("texts", "v1", texts)


def training_input(model: str) -> tuple[str, list[Path]] | None:
    """(`<stage>/<fingerprint>`, its Parquet files) a `train` export learned from, or None when unknown."""
    export = Path(model)
    manifest_path = export.parent / MANIFEST
    if export.name != "export" or not manifest_path.exists():
        return None
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    upstream = manifest.get("upstream") or []
    if not upstream:
        return None
    ref = upstream[0]
    root = export.parents[2]  # <root>/train/<fp>/export -> <root>
    if ref.get("stage") in PAIR_STAGES:  # pairs of sentences: the documents they were mined from
        ref = mined_from(root, ref) or ref
    folder = root / ref["path"]
    return ref["path"], sorted(folder.rglob("part-*.parquet"))


PAIR_STAGES = ("shuffle", "pair")


def mined_from(root: Path, ref: dict[str, str]) -> dict[str, str] | None:
    """The `split` output a pair or shuffle output's pairs were mined from (through its upstream), or None."""
    for _ in range(len(PAIR_STAGES) + 1):
        if ref.get("stage") == "split":
            return ref
        manifest_path = root / ref["path"] / MANIFEST
        if not manifest_path.exists():
            return None
        upstream = json.loads(manifest_path.read_text(encoding="utf-8")).get("upstream") or []
        if not upstream:
            return None
        ref = upstream[0]
    return None


SENTENCE_COLUMNS = ("doc_id", "sent_id", "is_title", "text")  # a split output: the sentences table


def document_bodies(table) -> set[str]:
    """The normalized body of each document of a sentences table (its non-title sentences in order)."""
    bodies: dict[str, list[tuple[int, str]]] = {}
    rows = zip(*(table.column(c).to_pylist() for c in SENTENCE_COLUMNS), strict=True)
    for doc_id, sent_id, is_title, text in rows:
        if not is_title and text is not None:
            bodies.setdefault(doc_id, []).append((sent_id, text))
    return {normalize(" ".join(t for _, t in sorted(parts))) for parts in bodies.values()}


def training_texts(files: list[Path]) -> set[str]:
    import pyarrow.parquet as pq

    texts: set[str] = set()
    for path in files:
        names = set(pq.read_schema(path).names)
        if set(SENTENCE_COLUMNS) <= names:
            texts |= document_bodies(pq.read_table(path, columns=list(SENTENCE_COLUMNS)))
            continue
        columns = [c for c in TEXT_COLUMNS if c in names]
        if columns:
            table = pq.read_table(path, columns=columns)
            for column in columns:
                texts.update(normalize(t) for t in table.column(column).to_pylist() if t is not None)
    return texts


def overlap(model: str, texts: list[str]) -> dict[str, object]:
    """How many of `texts` (distinct, normalized, of `MIN_WORDS` words or more) the model's training input
    holds: `{"training_input", "texts", "overlap"}`, with `overlap` None when its training input is unknown."""
    distinct = {normalize(t) for t in texts}
    found = training_input(model)
    if found is None:
        return {"training_input": None, "texts": len(distinct), "overlap": None}
    name, files = found
    counted = {t for t in distinct if len(t.split()) >= MIN_WORDS}
    return {"training_input": name, "texts": len(distinct), "overlap": len(counted & training_texts(files))}
