"""The nightly gate's held-out share of the corpus: a seeded, hash-based split of its records, kept as a mirror.

    split = split_corpus(corpus, HoldoutConfig(share=0.2), root, cap=2000)   # only new or changed files read
    split.train                       # the training side: JSON Lines the data stages read (TRAIN_FIELDS)
    split.stackoverflow, split.beir   # the suite the held-out records make (tasks/nightly/suite_files.py)

Every file of the corpus is read by ingest's own readers (`tasks/ingest/readers.py: read_member`), in any
format and compression that `build-pairs` reads, with the night's reader options. A record is held out
when a hash of (seed, its normalized text) falls below `share`: the same text is always on the same side,
whatever file or night it arrives in, so no text the gate scores is ever trained on, and a growing corpus
only adds records to each side. A file no reader can open is one reject naming it, as in ingest.

Which suite the held-out records make:
- **labelled**: every file that has records has the label column (`[evaluate] label_field`, `tag`): the
  held-out rows with a label are a question-retrieval suite, `holdout.tsv`, scored as `stackoverflow-holdout`
  (P@1);
- **label-free**, otherwise: retrieval among the held-out documents (tasks/nightly/label_free.py), BEIR
  folders scored as `heldout-title` and `heldout-ict` (and `heldout-pairs` on a GUR night). A corpus where
  neither has `MIN_QUERIES` queries (short texts without labels) gets a clear error.

The split is a mirror of the corpus kept up to date file by file, at one place per corpus and config: a
night reads only the files that are new or changed (by content digest) and deletes those that left, so
the training folder keeps its path from night to night (the ingest then reads only the new files).
The training side of a file is its kept records as JSON Lines (`id`, `title`, `text`): exactly the
records ingest would have read, so the data stages read it with fixed field names.

    <root>/holdout/<fingerprint>/train/<file>.jsonl       each file's records that are not held out
    <root>/holdout/<fingerprint>/parts/<file>.jsonl       each file's held-out records (with `label`)
    <root>/holdout/<fingerprint>/rejects/<file>.jsonl     each file's records no reader could use
    <root>/holdout/<fingerprint>/holdout.tsv, heldout-*/  the suite (tasks/nightly/suite_files.py)
    <root>/holdout/<fingerprint>/_index.json              file -> content digest and counts (written last)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from storage.atomic import atomic_write_json
from storage.fingerprint import fingerprint
from storage.layout import SPLIT_SOURCE, TMP_DIR, record_path, recorded_path
from storage.stable_share import in_share
from tasks.evaluate.overlap import normalize
from tasks.ingest.folder import HTML_READER, content_key, digest_and_version, member_format, told_versions
from tasks.ingest.readers import CorpusFile, corpus_files, read_member
from tasks.ingest.records import LabelledReaderConfig, ReaderConfig, Record
from tasks.nightly.config import LABELLED
from tasks.nightly.jsonl import read_jsonl, write_jsonl
from tasks.nightly.suite_files import MIN_QUERIES, SUITE_DOCUMENTS, write_suite

HOLDOUT_CODE_VERSION = "holdout-v2"  # v2: ingest's readers for every format; label-free suites
INDEX = "_index.json"
SOURCE = SPLIT_SOURCE  # the corpus the split was made from
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


def update_mirror(
    folder: Path, files: dict[str, CorpusFile], index: dict[str, dict], config: HoldoutConfig
) -> tuple[list[str], list[str], list[str]]:
    """Split again the files whose content (or reader) changed since `index` (updated in place) and drop those
    that left the corpus: (changed, removed, marked), by their path in the folder; `marked`: the HTML pages whose
    entry now says that this reader told its version (folder.told_versions)."""
    tmp = folder / TMP_DIR
    formats = {rel: member_format(f, config.reader().format) for rel, f in files.items()}
    checked = told_versions(e for e in index.values() if e.get("checked") == HTML_READER)
    changed_marks = []
    read = {rel: digest_and_version(f.path, formats[rel], checked) for rel, f in files.items()}
    digests = {rel: content_key(read[rel][0], formats[rel], read[rel][1]) for rel in files}
    changed = sorted(rel for rel in files if (index.get(rel) or {}).get("digest") != digests[rel])
    for rel in changed:
        part = split_file(files[rel], config)
        for name, rows in (("train", part.train), ("parts", part.held), ("rejects", part.rejects)):
            path = folder / name / f"{rel}.jsonl"
            if rows:
                write_jsonl(path, rows, tmp)
            else:  # no empty files: an empty JSONL is no corpus file
                path.unlink(missing_ok=True)
        index[rel] = {
            "digest": digests[rel],
            "train": len(part.train),
            "holdout": len(part.held),
            "rejects": len(part.rejects),
            "labelled": part.labelled,
        }
    for rel in files:  # each page's version as this reader told it: the next night takes it as it is
        if formats[rel] == "html" and index[rel].get("checked") != HTML_READER:
            index[rel]["checked"] = HTML_READER
            changed_marks.append(rel)
    removed = sorted(set(index) - set(files))
    for rel in removed:  # files that left the corpus leave both sides
        for name in ("train", "parts", "rejects"):
            (folder / name / f"{rel}.jsonl").unlink(missing_ok=True)
        del index[rel]
    return changed, removed, changed_marks


def split_corpus(corpus: Path, config: HoldoutConfig, root: Path, cap: int = SUITE_DOCUMENTS) -> Split:
    """The split under `<root>/holdout/<fingerprint>/`, keyed by the corpus's path and the config; files whose
    bytes did not change since the last call are not read again. The suite scores at most `cap` held-out
    records (0: all; not in the key: the sides of the split do not depend on it). Raises ValueError when the
    corpus is not labelled and too small or too short for a label-free suite."""
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
    changed, removed, marked = update_mirror(folder, files, index, config)
    with_records = [v for v in index.values() if v["train"] or v["holdout"]]
    kind = "labelled" if with_records and all(v["labelled"] for v in with_records) else "label-free"
    counts = {key: sum(v[key] for v in index.values()) for key in ("train", "holdout", "rejects")}
    counts["files_read"] = len(changed)
    train_path = folder / "train" / f"{corpus.name}.jsonl" if corpus.is_file() else folder / "train"
    built = json.loads((folder / "_suite.json").read_text()) if (folder / "_suite.json").exists() else None
    stale = built is None or built.get("kind") != kind or (built.get("sample") or {}).get("cap", 0) != cap
    if changed or removed or stale:
        held = [row for rel in sorted(index) for row in read_jsonl(folder / "parts" / f"{rel}.jsonl")]
        built = write_suite(folder, kind, held, config.seed, config.pairs, cap)
        built = {**built, "stackoverflow": record_path(root, built["stackoverflow"])}
        built["beir"] = [record_path(root, p) for p in built["beir"]]  # relative to the root, as every record
        atomic_write_json(folder / "_suite.json", built)
        atomic_write_json(index_path, index)
    elif marked:
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
