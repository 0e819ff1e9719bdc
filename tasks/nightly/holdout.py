"""The nightly gate's own suite: a seeded, hash-based held-out share of the corpus's records.

Every file of the corpus is read by ingest's own readers (`tasks/ingest/readers.py: read_member`), in any
format and compression that `build-pairs` reads, with the night's reader options. A record is held out
when a hash of (seed, its normalized text) falls below `share`: the same text is always on the same side,
whatever file or night it arrives in, so no text the gate scores is ever trained on, and a growing corpus
only adds records to each side. A file no reader can open is one reject naming it, as in ingest.

A large corpus's held-out side is more than the paired test needs and costs two encodings of every record
each night: the gate scores a capped sample of it (`[evaluate] suite_documents`, 2,000 by default: the
records with the smallest seeded hash of their text, so the sample changes only where a new record hashes
lower, and the same on every machine). The records left out of the sample stay held out.

Which suite the held-out records make:
- **labelled**: every file that has records has the label column (`[evaluate] label_field`, `tag`): the
  held-out rows with a label are a question-retrieval suite, `holdout.tsv` (`id`, `title`, `tag`: what
  `load_stackoverflow` reads), scored as `stackoverflow-holdout` (P@1);
- **label-free**, otherwise: retrieval among the held-out documents, two BEIR folders scored as
  `heldout-title` (a document's title -> its body) and `heldout-ict` (the inverse cloze task: one sentence
  of a document -> the rest of it), recall@100 and MRR@10 with per-query values, and for a GUR night
  `heldout-pairs` (a sentence -> its LCS partner: `pair_task`). `label_free_tasks` says how each is
  cut. A corpus where neither has `MIN_QUERIES` queries (short texts without labels) gets a clear error.

The split is a mirror of the corpus kept up to date file by file, at one place per corpus and config: a
night reads only the files that are new or changed (by content digest) and deletes those that left, so
the training folder keeps its path from night to night (the ingest then reads only the new files).
The training side of a file is its kept records as JSON Lines (`id`, `title`, `text`): exactly the
records ingest would have read, so the data stages read it with fixed field names (`training_corpus`).

    <root>/holdout/<fingerprint>/train/<file>.jsonl       each file's records that are not held out
    <root>/holdout/<fingerprint>/parts/<file>.jsonl       each file's held-out records (with `label`)
    <root>/holdout/<fingerprint>/rejects/<file>.jsonl     each file's records no reader could use
    <root>/holdout/<fingerprint>/holdout.tsv              labelled: the held-out rows with labels
    <root>/holdout/<fingerprint>/heldout-title/, heldout-ict/   label-free: the BEIR folders
    <root>/holdout/<fingerprint>/_index.json              file -> content digest and counts (written last)
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from storage.fingerprint import fingerprint
from storage.layout import SPLIT_SOURCE, TMP_DIR, record_path, recorded_path
from storage.stable_share import in_share
from tasks.evaluate.overlap import normalize
from tasks.ingest.readers import CorpusFile, corpus_files, read_member
from tasks.ingest.records import LabelledReaderConfig, ReaderConfig, Record
from tasks.nightly.config import ICT_TASK, LABELLED, PAIR_TASK, TITLE_TASK, NightlyConfig

HOLDOUT_CODE_VERSION = "holdout-v2"  # v2: ingest's readers for every format; label-free suites
HOLDOUT_FILE = "holdout.tsv"
INDEX = "_index.json"
SOURCE = SPLIT_SOURCE  # the corpus the split was made from
MIN_QUERIES = 10  # fewer and the paired test has nothing to stand on
SUITE_DOCUMENTS = 2000  # held-out records the gate scores at most (docs/nightly.md: how the cap was chosen)
ICT_MIN_WORDS = 4  # an ICT query sentence needs some content; shorter ones are used only when nothing else is
TRAIN_FIELDS = ReaderConfig(text_field="text", title_field="title", id_field="id")  # how the mirror is read


@dataclass(frozen=True)
class HoldoutConfig:
    share: float = 0.2  # of the records, scored by the gate and never trained on
    seed: int = 0
    label_field: str = "tag"
    text_field: str = "title"  # the record's text (what is hashed, and what a question suite embeds)
    id_field: str = "id"
    title_field: str = ""
    format: str = "auto"
    pairs: bool = False  # label-free, GUR nights: also a sentence -> its LCS partner (heldout-pairs)

    def reader(self) -> LabelledReaderConfig:
        return LabelledReaderConfig(
            format=self.format,
            text_field=self.text_field,
            title_field=self.title_field,
            id_field=self.id_field,
            label_field=self.label_field,
        )


@dataclass(frozen=True)
class Split:
    """The training corpus (a folder or file of JSON Lines), the suite and what went where."""

    train: Path
    kind: str  # labelled | label-free
    stackoverflow: str = ""  # labelled: the question TSV
    beir: tuple[str, ...] = ()  # label-free: BEIR folders, the primary task's first
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def primary(self) -> str:
        """The gate's metric when `[gate] primary = "auto"`."""
        if self.kind == "labelled":
            return f"{LABELLED}/question_retrieval/precision@1"
        return f"{Path(self.beir[0]).name}/retrieval/mrr@10"

    @property
    def name(self) -> str:
        """What the decision row's `suite` says: the kind, then the datasets scored."""
        return f"{self.kind}: " + (LABELLED if self.kind == "labelled" else ", ".join(Path(p).name for p in self.beir))


def held_out(text: str, share: float, seed: int) -> bool:
    """True for a stable `share` of texts: blake2b(seed, normalized text) read as a number in [0, 1)."""
    return in_share(f"{seed}\x00{normalize(text)}", share)


def _members(corpus: Path) -> list[CorpusFile]:
    return [CorpusFile(corpus, corpus.name, False)] if corpus.is_file() else corpus_files(corpus)


def _row(record: Record) -> dict:
    return {"id": record.source_id, "title": record.title, "text": record.text}


@dataclass(frozen=True)
class FileSplit:
    train: list[dict]  # records to train on
    held: list[dict]  # held-out records, with their `label`
    rejects: list[dict]
    labelled: bool  # some record of the file has a label


def split_file(file: CorpusFile, config: HoldoutConfig) -> FileSplit:
    """One file read as ingest reads it, split by `held_out`; never raises for a bad file (it is one
    reject naming the file)."""
    train, held, rejects, labelled = [], [], [], False
    for item in read_member(file, config.reader()):
        if not isinstance(item, Record):
            rejects.append({"location": item.location, "reason": item.reason, "detail": item.detail})
            continue
        labelled = labelled or bool(item.label)
        if held_out(item.text, config.share, config.seed):
            held.append({**_row(item), "label": item.label})
        else:
            train.append(_row(item))
    return FileSplit(train, held, rejects, labelled)


def _write_jsonl(path: Path, rows: Iterable[dict], tmp_dir: Path) -> None:
    """Replace `path` atomically (the temporary outside the folder the ingest reads): a night killed
    mid-write never leaves half a file, nor a stray temporary, in the training corpus."""
    from storage.atomic import atomic_path

    with atomic_path(path, tmp_dir=tmp_dir) as tmp:
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def update_mirror(
    folder: Path, files: dict[str, CorpusFile], index: dict[str, dict], config: HoldoutConfig
) -> tuple[list[str], list[str]]:
    """Split again the files whose content (or reader) changed since `index` (updated in place) and drop those
    that left the corpus: (changed, removed), by their path in the folder."""
    from tasks.ingest.folder import content_key, file_digest, member_format

    tmp = folder / TMP_DIR
    digests = {
        rel: content_key(file_digest(f.path), member_format(f, config.reader().format)) for rel, f in files.items()
    }
    changed = sorted(rel for rel in files if (index.get(rel) or {}).get("digest") != digests[rel])
    for rel in changed:
        part = split_file(files[rel], config)
        for name, rows in (("train", part.train), ("parts", part.held), ("rejects", part.rejects)):
            path = folder / name / f"{rel}.jsonl"
            if rows:
                _write_jsonl(path, rows, tmp)
            else:  # no empty files: an empty JSONL is no corpus file
                path.unlink(missing_ok=True)
        index[rel] = {
            "digest": digests[rel],
            "train": len(part.train),
            "holdout": len(part.held),
            "rejects": len(part.rejects),
            "labelled": part.labelled,
        }
    removed = sorted(set(index) - set(files))
    for rel in removed:  # files that left the corpus leave both sides
        for name in ("train", "parts", "rejects"):
            (folder / name / f"{rel}.jsonl").unlink(missing_ok=True)
        del index[rel]
    return changed, removed


def split_corpus(corpus: Path, config: HoldoutConfig, root: Path, cap: int = SUITE_DOCUMENTS) -> Split:
    """The split under `<root>/holdout/<fingerprint>/`, keyed by the corpus's path and the config; files whose
    bytes did not change since the last call are not read again. The suite scores at most `cap` held-out
    records (0: all; not in the key: the sides of the split do not depend on it). Raises ValueError when the
    corpus is not labelled and too small or too short for a label-free suite."""
    from storage.atomic import atomic_write_json

    corpus = Path(corpus).resolve()
    if not corpus.exists():
        raise FileNotFoundError(f"{corpus}: the corpus is not there")
    files = {f.rel: f for f in _members(corpus)}
    folder = (
        Path(root)
        / "holdout"
        / fingerprint("holdout", HOLDOUT_CODE_VERSION, {"config": config, "corpus": str(corpus)})
    )
    index_path = folder / INDEX
    index = json.loads(index_path.read_text(encoding="utf-8")) if index_path.exists() else {}
    changed, removed = update_mirror(folder, files, index, config)
    with_records = [v for v in index.values() if v["train"] or v["holdout"]]
    kind = "labelled" if with_records and all(v["labelled"] for v in with_records) else "label-free"
    counts = {key: sum(v[key] for v in index.values()) for key in ("train", "holdout", "rejects")}
    counts["files_read"] = len(changed)
    train_path = folder / "train" / f"{corpus.name}.jsonl" if corpus.is_file() else folder / "train"
    built = json.loads((folder / "_suite.json").read_text()) if (folder / "_suite.json").exists() else None
    stale = built is None or built.get("kind") != kind or (built.get("sample") or {}).get("cap", 0) != cap
    if changed or removed or stale:
        held = [row for rel in sorted(index) for row in _read_jsonl(folder / "parts" / f"{rel}.jsonl")]
        built = write_suite(folder, kind, held, config, cap)
        built = {**built, "stackoverflow": record_path(root, built["stackoverflow"])}
        built["beir"] = [record_path(root, p) for p in built["beir"]]  # relative to the root, as every record
        atomic_write_json(folder / "_suite.json", built)
        atomic_write_json(index_path, index)
    (folder / "train").mkdir(parents=True, exist_ok=True)
    if not (folder / SOURCE).exists():
        atomic_write_json(folder / SOURCE, {"corpus": str(corpus)})
    counts.update(built["counts"])
    counts["scored"] = (built.get("sample") or {}).get("scored", counts["holdout"])
    if kind == "label-free" and not built["beir"]:
        raise ValueError(
            f"{corpus}: no labels ({config.label_field!r}) and too few held-out documents with a title and a body "
            f"or with two sentences or more ({MIN_QUERIES} needed for either label-free task; "
            f"{counts['title_queries']} and {counts['ict_queries']} found)"
        )
    # `_suite.json` names its files relative to the root (or, written by earlier versions, where the root was)
    suite = recorded_path(root, built["stackoverflow"]), tuple(recorded_path(root, p) for p in built["beir"])
    return Split(train_path, kind, *suite, counts)


def suite_sample(held: list[dict], cap: int, seed: int) -> list[dict]:
    """At most `cap` of the held-out records (0: all), in their order: those whose seeded hash of the normalized
    text is smallest (a bottom-k sample: a new record displaces one only when it hashes lower)."""
    if not cap or len(held) <= cap:
        return held

    def key(i: int) -> tuple[bytes, int]:
        text = f"{seed}\x00suite\x00{normalize(held[i]['text'])}".encode()
        return hashlib.sha256(text).digest(), i

    keep = set(sorted(range(len(held)), key=key)[:cap])
    return [row for i, row in enumerate(held) if i in keep]


def write_suite(folder: Path, kind: str, held: list[dict], config: HoldoutConfig, cap: int = 0) -> dict:
    """Write the suite the held-out records make (at most `cap` of them: `suite_sample`); returns its
    description (`_suite.json`)."""
    sampled = suite_sample(held, cap, config.seed)
    described = _write_suite(folder, kind, sampled, config)
    return {**described, "sample": {"held_out": len(held), "scored": len(sampled), "cap": cap}}


def _write_suite(folder: Path, kind: str, held: list[dict], config: HoldoutConfig) -> dict:
    tmp = folder / TMP_DIR
    (folder / HOLDOUT_FILE).unlink(missing_ok=True)
    for name in (TITLE_TASK, ICT_TASK):
        shutil.rmtree(folder / name, ignore_errors=True)
    if kind == "labelled":
        rows = [
            {"id": r["id"] or str(i), "title": r["text"], "tag": r["label"]} for i, r in enumerate(held) if r["label"]
        ]
        _write_tsv(folder / HOLDOUT_FILE, rows, tmp)
        return {
            "kind": kind,
            "stackoverflow": str(folder / HOLDOUT_FILE),
            "beir": [],
            "counts": {"questions": len(rows)},
        }
    tasks = label_free_tasks(held, config.seed)
    if config.pairs:
        tasks[PAIR_TASK] = pair_task(held)
    beir = []
    for name in tasks:
        corpus, queries, qrels = tasks[name]
        if len(queries) >= MIN_QUERIES:
            write_beir(folder / name, corpus, queries, qrels, tmp)
            beir.append(str(folder / name))
    counts = {"title_queries": len(tasks[TITLE_TASK][1]), "ict_queries": len(tasks[ICT_TASK][1])}
    if PAIR_TASK in tasks:
        counts["pair_queries"] = len(tasks[PAIR_TASK][1])
    if not any(Path(p).name in (TITLE_TASK, ICT_TASK) for p in beir):
        beir = []  # pairs alone are no suite: the error names the two tasks every corpus can have
    return {"kind": kind, "stackoverflow": "", "beir": beir, "counts": counts}


def _write_tsv(path: Path, rows: list[dict], tmp_dir: Path) -> None:
    from storage.atomic import atomic_path

    with atomic_path(path, tmp_dir=tmp_dir) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, ["id", "title", "tag"], delimiter="\t", lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)


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
    from tasks.split.sentences import split_sentences

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
    from tasks.pair.candidates import PairConfig
    from tasks.pair.table import pair_table
    from tasks.split.sentences import SplitConfig, split_documents

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


def write_beir(out: Path, corpus: list[dict], queries: list[dict], qrels: list[tuple[str, str]], tmp: Path) -> None:
    """A BEIR-layout folder (`tasks/evaluate/data.py: load_beir` reads it; split `test`)."""
    _write_jsonl(out / "corpus.jsonl", corpus, tmp)
    _write_jsonl(out / "queries.jsonl", queries, tmp)
    from storage.atomic import atomic_path

    with atomic_path(out / "qrels" / "test.tsv", tmp_dir=tmp) as path:
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t1" for q, d in qrels]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class GateSuite:
    """What the gate scores: a question TSV (`stackoverflow`) or BEIR folders, and its primary metric."""

    stackoverflow: str
    beir: tuple[str, ...]
    primary: str
    name: str
    train_records: int = 0  # of the split: what the candidate trains on (0: a named suite, not counted)
    scored: int = 0  # held-out records the suite is made of (after `suite_documents`)
    records: int = 0  # of the whole corpus: what search embeds


def training_corpus(cfg: NightlyConfig, train: Path) -> NightlyConfig:
    """The night's config reading the split's training mirror (JSON Lines with fixed field names)."""
    fields = {"path": str(train), "format": "auto", "text_field": "text", "title_field": "title", "id_field": "id"}
    return replace(cfg, corpus=replace(cfg.corpus, **fields))


def gate_suite(cfg: NightlyConfig, base: Path) -> tuple[NightlyConfig, GateSuite]:
    """(the config the night trains with, the suite the gate scores): with `holdout`, the corpus minus its
    held-out records and the suite those make; else the corpus and the question suite the user named."""
    from tasks.evaluate.suite import DatasetSpec

    e, c = cfg.evaluate, cfg.corpus
    if e.stackoverflow:
        label = DatasetSpec("stackoverflow", e.stackoverflow).label
        return cfg, GateSuite(e.stackoverflow, (), f"{label}/question_retrieval/precision@1", f"named: {label}")
    gur = cfg.train.method == "gur"
    share = HoldoutConfig(e.holdout, e.holdout_seed, e.label_field, **c.reader_fields(), pairs=gur)
    try:
        split = split_corpus(Path(c.path), share, base, cap=e.suite_documents)
    except ValueError as exc:
        raise ValueError(
            f"{cfg.source}: {exc}. Name a small labelled suite in [evaluate] stackoverflow: a TSV with a header "
            "and the columns id, title (the question) and tag (its label), text the candidate never trains on"
        ) from None
    n = split.counts
    scored = (
        f" (a seeded sample of {n['scored']} scored: [evaluate] suite_documents)" if n["scored"] < n["holdout"] else ""
    )
    print(
        f"gate suite {split.name}, from {n['holdout']} held-out records{scored}; training on {n['train']}; "
        f"{n['rejects']} rejects; {n['files_read']} file(s) read this night ({split.train.parent})"
    )
    suite = GateSuite(
        split.stackoverflow, split.beir, split.primary, split.name, n["train"], n["scored"], n["train"] + n["holdout"]
    )
    return training_corpus(cfg, split.train), suite
