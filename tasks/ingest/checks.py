"""Input checks that `gur` runs before Prefect starts: a misspelt path or column is one line within a second,
not a traceback after the server's start-up. Files are opened with the readers' own code (`read_corpus`)."""

from __future__ import annotations

import csv
import difflib
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.ingest.raw_bytes import _open_binary
from tasks.ingest.readers import corpus_files, detect_format, file_format
from tasks.ingest.records import FORMATS, STRUCTURED, CorpusError, ReaderConfig

# Column names to suggest when the named one is missing and no name is close to it, best first.
LIKELY = {
    "--text-field": ("body", "text", "content", "question", "sentence", "abstract", "description", "title"),
    "--title-field": ("title", "heading", "subject", "name"),
    "--id-field": ("id", "doc_id", "_id", "uid", "key"),
}
HEAD_BYTES = 1 << 24  # the first JSON record is parsed only when it is smaller than this


def require_path(path: str | Path, what: str = "") -> Path:
    """`path` as a Path; a missing one is `FileNotFoundError` with a one-line message."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what + ' ' if what else ''}{path}: no such file or folder")
    return p


def field_names(path: Path, fmt: str) -> tuple[list[str], str] | None:
    """The field names of a tabular input and where they were read (`corpus.csv (line 1)`): a CSV/TSV
    header, the first JSON Lines record's keys, the first Parquet file's schema. None for formats without
    named fields, and for inputs the reader itself will report on (an unreadable file, a non-object record)."""
    if fmt in ("csv", "tsv"):
        with _open_binary(path) as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="")
            try:
                header = next(csv.reader(text, delimiter="\t" if fmt == "tsv" else ","), None)
            except csv.Error:
                return None
        return (header, f"{path} (line 1)") if header is not None else None
    if fmt in ("jsonl", "wiki2txt"):
        with _open_binary(path) as stream:
            for lineno, line in enumerate(iter(lambda: stream.readline(HEAD_BYTES), b""), start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    return None
                return (list(record), f"{path} (line {lineno})") if isinstance(record, dict) else None
        return None
    if fmt == "parquet":
        try:
            return list(pq.ParquetFile(path).schema_arrow.names), f"{path} (schema)"
        except (pa.ArrowException, OSError):
            return None
    return None


def suggest(name: str, names: list[str], option: str) -> str | None:
    """The column the user most likely meant: a close spelling, else a usual name for that option."""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return close[0]
    lower = {n.lower(): n for n in names}
    return next((lower[c] for c in LIKELY.get(option, ()) if c in lower), None)


def check_columns(path: Path, fmt: str, named: dict[str, str]) -> None:
    """Every `{option: column}` in `named` is a field of the input; else one line naming the fields it has."""
    found = field_names(path, fmt)
    if found is None:
        return
    names, where = found
    for option, name in named.items():
        if not name or name in names:
            continue
        message = f"no column {name!r} in {where}; it has: {', '.join(names) or 'nothing'}"
        guess = suggest(name, names, option)
        if guess:
            message += f" — try {option} {guess}"
        if option != "--text-field":
            message += f" (or {option} '' for none)"
        raise CorpusError(message)


def check_corpus(path: str | Path, config: ReaderConfig) -> None:
    """The input exists, its format is known, and its fields include the text field and any title or id
    field named differently from `ReaderConfig`'s defaults (those are optional: a CSV without `title` is fine).
    A folder passes when one of its structured files has them: files without them become rejects."""
    p = require_path(path)
    if config.format not in (*FORMATS, "auto"):
        raise CorpusError(f"{path}: unknown format {config.format!r}; expected one of {', '.join(FORMATS)}, auto")
    default = ReaderConfig()
    named = {"--text-field": config.text_field}
    if config.title_field != default.title_field:
        named["--title-field"] = config.title_field
    if config.id_field != default.id_field:
        named["--id-field"] = config.id_field
    if p.is_dir():
        check_folder(p, config, named)
        return
    fmt = detect_format(p) if config.format == "auto" else config.format
    check_columns(p, fmt, named)


def check_folder(folder: Path, config: ReaderConfig, named: dict[str, str]) -> None:
    """The first structured file of `folder` with the named fields ends the check; when none has them,
    the first one's error (a misspelt `--text-field` would make every such file a reject)."""
    first_error = None
    for file in corpus_files(folder):
        if file.hidden:
            continue
        try:
            fmt = file_format(file.path, config.format)
        except (OSError, CorpusError):
            continue  # the reader reports it as a reject naming the file
        if fmt not in STRUCTURED:
            continue
        try:
            check_columns(file.path, fmt, named)
            return
        except CorpusError as exc:
            first_error = first_error or exc
    if first_error is not None:
        raise CorpusError(f"{first_error} (and every other structured file of {folder})")


def check_text_file(path: str | Path, text_field: str) -> None:
    """A `.tsv/.csv/.jsonl/.parquet` file of texts (`gur train --texts`) exists and has `text_field`."""
    p = require_path(path)
    check_columns(p, detect_format(p), {"--text-field": text_field})


MODELS = Path(__file__).resolve().parents[2] / "models"
SET_BY_TRAIN = ("out_dir", "shards", "method", "questions", "replay_source")  # the train command sets these itself


def config_field_names(source: Path, class_name: str) -> list[str]:
    """The fields of dataclass `class_name`, read from its module's source (importing the module would
    load torch: seconds before a one-line error)."""
    import ast

    tree = ast.parse(source.read_text(encoding="utf-8"))
    config = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == class_name)
    return [n.target.id for n in config.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]


def train_option_names() -> list[str]:
    """The `TrainConfig` fields `gur train --options` accepts."""
    fields = config_field_names(MODELS / "training" / "config.py", "TrainConfig")
    return [name for name in fields if name not in SET_BY_TRAIN]


def check_config_options(options: object, known: list[str], config: str, example: str, listed: str) -> dict:
    """`--options` is a JSON object of `config`'s fields; an unknown name is one line with the closest."""
    if not isinstance(options, dict):
        raise ValueError(f"--options must be a JSON object, e.g. '{example}'")
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"--options: {name!r} is not a {config} field; {hint}({listed} lists them)")
    return options


def check_train_options(options: object) -> dict:
    return check_config_options(
        options, train_option_names(), "TrainConfig", '{"kl_weight": 0.5}', "`gur train --help`"
    )


def check_sts_options(options: object) -> dict:
    known = config_field_names(MODELS / "sts" / "train.py", "StsTrainConfig")
    return check_config_options(options, known, "StsTrainConfig", '{"epochs": 4}', "models/sts/train.py")
