"""The nightly gate's own suite: a seeded, hash-based held-out share of the corpus's labelled rows.

A row is held out when a hash of (seed, its normalized question text) falls below `share`: the
same text is always on the same side, whatever file or night it arrives in, so no text the gate
scores is ever trained on, and a growing corpus only adds rows to each side. The training side is
the corpus minus the held-out rows, each file rewritten in its own format (a file whose rows are
all kept is written unchanged in content, so the ingest of that content is reused); the gate
side is one `holdout.tsv` (`id`, `title`, `tag`: what `load_stackoverflow` reads).

A corpus is labelled when every file is a `.tsv`, `.csv` or `.jsonl` file with the label column;
otherwise `split_corpus` returns None and the user names a suite (`[evaluate] stackoverflow`).

The split is a mirror of the corpus kept up to date file by file, at one place per corpus and
config: a night rewrites only the files that are new or changed (by content digest) and deletes
those that left, so the training folder keeps its path from night to night (the ingest then
reads only the new files and reports what changed since the last night, see
`tasks/ingest/folder.py`).

    <root>/holdout/<fingerprint>/train/<file>        the corpus without the held-out rows
    <root>/holdout/<fingerprint>/parts/<file>.tsv    each file's held-out rows
    <root>/holdout/<fingerprint>/holdout.tsv         all held-out rows with labels, in file order
    <root>/holdout/<fingerprint>/_index.json         file -> content digest and counts (written last)
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass, replace
from pathlib import Path

from storage.fingerprint import fingerprint
from storage.layout import TMP_DIR
from tasks.evaluate.overlap import normalize
from tasks.nightly.config import NightlyConfig

HOLDOUT_CODE_VERSION = "holdout-v1"
HOLDOUT_FILE = "holdout.tsv"
INDEX = "_index.json"
DELIMITERS = {".tsv": "\t", ".csv": ","}


@dataclass(frozen=True)
class HoldoutConfig:
    share: float = 0.2  # of the labelled rows, scored by the gate and never trained on
    seed: int = 0
    label_field: str = "tag"
    text_field: str = "title"  # the question text (what is hashed, and what the gate embeds)
    id_field: str = "id"


def held_out(text: str, share: float, seed: int) -> bool:
    """True for a stable `share` of texts: blake2b(seed, normalized text) read as a number in [0, 1)."""
    digest = hashlib.blake2b(f"{seed}\x00{normalize(text)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < share


def corpus_files(path: Path) -> list[Path]:
    return [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and p.name[0] != ".")


def _rows(path: Path) -> tuple[list[str], list[dict]] | None:
    """(columns, rows) of a labelled-corpus candidate file, or None when it is not a table we can split."""
    text = path.read_text(encoding="utf-8")
    if path.suffix in DELIMITERS:
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=DELIMITERS[path.suffix])
        return list(reader.fieldnames or []), list(reader)
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        return sorted({k for r in rows for k in r}), rows
    return None


def _write(path: Path, columns: list[str], rows: list[dict], tmp_dir: Path | None = None) -> None:
    """Replace `path` atomically (the temporary in `tmp_dir`, outside the folder the ingest reads): a night
    killed mid-write never leaves half a file, nor a stray temporary, in the training corpus."""
    from storage.atomic import atomic_path

    with atomic_path(path, tmp_dir=tmp_dir) as tmp:
        if path.suffix in DELIMITERS:
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                writer = csv.DictWriter(f, columns, delimiter=DELIMITERS[path.suffix], lineterminator="\n")
                writer.writeheader()
                writer.writerows(rows)
        else:
            tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def split_corpus(corpus: Path, config: HoldoutConfig, root: Path) -> tuple[Path, Path, dict] | None:
    """(training corpus, held-out TSV, counts) under `<root>/holdout/<fingerprint>/`, or None when the corpus is
    not labelled. The folder is keyed by the corpus's path and the config; files whose bytes did not change
    since the last call are not read again."""
    from storage.atomic import atomic_write_json
    from tasks.ingest.folder import file_digest

    corpus = Path(corpus).resolve()
    files = {(p.name if corpus.is_file() else p.relative_to(corpus).as_posix()): p for p in corpus_files(corpus)}
    folder = (
        Path(root)
        / "holdout"
        / fingerprint("holdout", HOLDOUT_CODE_VERSION, {"config": config, "corpus": str(corpus)})
    )
    index_path = folder / INDEX
    index = json.loads(index_path.read_text(encoding="utf-8")) if index_path.exists() else {}
    digests = {rel: file_digest(path) for rel, path in files.items()}
    changed = {rel for rel in files if (index.get(rel) or {}).get("digest") != digests[rel]}
    tables = {rel: _rows(files[rel]) for rel in sorted(changed)}
    if not files or any(t is None or config.label_field not in t[0] for t in tables.values()):
        return None
    for rel in sorted(changed):
        columns, rows = tables[rel]
        keep, gate = split_rows(rows, config)
        _write(folder / "train" / rel, columns, keep, folder / TMP_DIR)
        _write(folder / "parts" / f"{rel}.tsv", ["id", "title", "tag"], gate, folder / TMP_DIR)
        index[rel] = {"digest": digests[rel], "train": len(keep), "holdout": len(gate)}
    removed = sorted(set(index) - set(files))
    for rel in removed:  # files that left the corpus
        (folder / "train" / rel).unlink(missing_ok=True)
        (folder / "parts" / f"{rel}.tsv").unlink(missing_ok=True)
        del index[rel]
    suite = folder / HOLDOUT_FILE
    if changed or removed or not suite.exists():
        gate_rows = [row for rel in sorted(index) for row in _rows(folder / "parts" / f"{rel}.tsv")[1]]
        _write(suite, ["id", "title", "tag"], gate_rows, folder / TMP_DIR)
        atomic_write_json(index_path, index)
    counts = {"train": sum(v["train"] for v in index.values()), "holdout": sum(v["holdout"] for v in index.values())}
    train = folder / "train"
    return (train / corpus.name if corpus.is_file() else train), suite, counts


def split_rows(rows: list[dict], config: HoldoutConfig) -> tuple[list[dict], list[dict]]:
    """(rows to train on, held-out rows as `id`, `title`, `tag`) of one file."""
    keep, gate = [], []
    for row in rows:
        text, label = row.get(config.text_field) or "", row.get(config.label_field) or ""
        if text and label and held_out(text, config.share, config.seed):
            gate.append({"id": row.get(config.id_field, len(gate)), "title": text, "tag": label})
        else:
            keep.append(row)
    return keep, gate


def gate_suite(cfg: NightlyConfig, base: Path) -> tuple[NightlyConfig, str]:
    """(the config the night trains with, the question suite the gate scores): with `holdout`, the corpus
    minus its held-out labelled rows and those rows; else the corpus and the suite the user named."""
    e = cfg.evaluate
    if e.stackoverflow:
        return cfg, e.stackoverflow
    share = HoldoutConfig(e.holdout, e.holdout_seed, e.label_field, cfg.corpus.text_field, cfg.corpus.id_field)
    split = split_corpus(Path(cfg.corpus.path), share, base)
    if split is None:
        raise ValueError(
            f"{cfg.source}: the corpus {cfg.corpus.path} has no {e.label_field!r} column in every file, so no "
            "held-out suite can be cut from it: name one in [evaluate] stackoverflow (text the candidate never "
            "trains on)"
        )
    train, suite, counts = split
    print(f"gate suite: {counts['holdout']} held-out labelled rows ({suite}); training on {counts['train']} rows")
    return replace(cfg, corpus=replace(cfg.corpus, path=str(train))), str(suite)
