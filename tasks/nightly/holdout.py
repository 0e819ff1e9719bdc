"""The nightly gate's own suite: a seeded, hash-based held-out share of the corpus's labelled rows.

A row is held out when a hash of (seed, its normalized question text) falls below `share`: the
same text is always on the same side, whatever file or night it arrives in, so no text the gate
scores is ever trained on, and a growing corpus only adds rows to each side. The training side is
the corpus minus the held-out rows, each file rewritten in its own format (a file whose rows are
all kept is written unchanged in content, so the ingest of that content is reused); the gate
side is one `holdout.tsv` (`id`, `title`, `tag`: what `load_stackoverflow` reads).

A corpus is labelled when every file is a `.tsv`, `.csv` or `.jsonl` file with the label column;
otherwise `split_corpus` returns None and the user names a suite (`[evaluate] stackoverflow`).

    <root>/holdout/<fingerprint>/train/<file>   the corpus without the held-out rows
    <root>/holdout/<fingerprint>/holdout.tsv    the held-out rows with labels
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass, replace
from pathlib import Path

from storage.fingerprint import content_signature, fingerprint
from storage.stage_output import StageOutput
from tasks.evaluate.overlap import normalize
from tasks.nightly.config import NightlyConfig

HOLDOUT_CODE_VERSION = "holdout-v1"
HOLDOUT_FILE = "holdout.tsv"
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


def _write(path: Path, columns: list[str], rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in DELIMITERS:
        with open(path, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, columns, delimiter=DELIMITERS[path.suffix], lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    else:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def split_corpus(corpus: Path, config: HoldoutConfig, root: Path) -> tuple[Path, Path, dict] | None:
    """(training corpus, held-out TSV, counts) under `<root>/holdout/<fingerprint>/`, or None when the corpus is
    not labelled. The folder is keyed by the corpus's content and the config: an unchanged corpus is a cache hit."""
    files = corpus_files(corpus)
    tables = {p: _rows(p) for p in files}
    if not files or any(t is None or config.label_field not in t[0] for t in tables.values()):
        return None
    fp = fingerprint("holdout", HOLDOUT_CODE_VERSION, {"config": config, "corpus": content_signature(corpus)})
    out = StageOutput.open(root, "holdout", fp)
    train = out.dir / "train" / (corpus.name if corpus.is_file() else "")
    if out.complete:
        counts = json.loads((out.dir / "_manifest.json").read_text(encoding="utf-8"))["rows"]
        return train if corpus.is_file() else train.parent, out.dir / HOLDOUT_FILE, counts
    gate_rows, kept = [], 0
    for path, (columns, rows) in tables.items():
        keep = []
        for row in rows:
            text, label = row.get(config.text_field) or "", row.get(config.label_field) or ""
            if text and label and held_out(text, config.share, config.seed):
                gate_rows.append({"id": row.get(config.id_field, len(gate_rows)), "title": text, "tag": label})
            else:
                keep.append(row)
        kept += len(keep)
        _write(train if corpus.is_file() else out.dir / "train" / path.relative_to(corpus), columns, keep)
    _write(out.dir / HOLDOUT_FILE, ["id", "title", "tag"], gate_rows)
    counts = {"train": kept, "holdout": len(gate_rows)}
    out.finish(
        code_version=HOLDOUT_CODE_VERSION,
        config=config,
        inputs={"corpus": str(corpus)},
        upstream=[],
        tables={},
        rows=counts,
        drops={},
    )
    return train if corpus.is_file() else out.dir / "train", out.dir / HOLDOUT_FILE, counts


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
