"""Every derived flow's parameters, in its signature's order: each one is a config field (its default and
help are the field's, `tasks/runtime/parameters.py`) or, for inputs and switches, written here once.

`flows/*.py` take their signatures from these classes (`@takes`), `gur` its options (`add_options`).
No Prefect import here: `gur --help` and the checks before a run read this module without starting it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from storage.shared_data import missing_default, shared_data
from tasks.evaluate.data import DemoRetrievalConfig
from tasks.evaluate.scoring import QuestionRetrievalConfig
from tasks.evaluate.suite import DatasetSpec, SuiteConfig
from tasks.ingest.documents import IngestConfig
from tasks.ingest.readers import ReaderConfig
from tasks.keywords.filter import KeywordsConfig
from tasks.pair.candidates import PairConfig
from tasks.runtime.parameters import NO_OPTION, RunOptions, config_values, dask_option, param, setting
from tasks.shuffle.phases import ShuffleConfig
from tasks.split.sentences import SplitConfig

READER_OPTIONS = ("format", "text_field", "title_field", "id_field", "unit")  # what `gur demo` leaves to the dump
UNITS = ("documents", "sentences")  # mine-keywords: rows to model
WORKERS_OF_DASK = "workers of a local --dask cluster (default: all cores)"


def stsb_file(lang: str, split: str) -> str:
    """STS-B's `split` file of `lang` in the shared data: `gur sts`' default input, `gur evaluate`'s dev sets."""
    return str(shared_data("stsb", f"stsb-{lang}-{split}.csv").resolve())


# Defaults in the shared data ($GUR_SHARED_DATA, else ../shared/data beside the repository): evaluate's sets,
# skipped with a note where absent (`evaluation_sets`); sts' inputs, an error where absent (`missing_sts_default`).
STACKOVERFLOW = str(shared_data("stackoverflow", "train.tsv").resolve())
STSB_DEV = (stsb_file("en", "dev"), stsb_file("zh", "dev"))
STACKOVERFLOW_SOURCE = "StackOverflow titles as a TSV with columns title and tag, github.com/jacoxu/StackOverflow"
STSB_SOURCE = "github.com/PhilipMay/stsb-multi-mt, data/"


@dataclass(frozen=True)
class BuildPairsParams:
    """The `build-pairs` flow's parameters (flows/build_pairs.py documents them)."""

    input_path: str | None = param(
        None,
        "corpus: a file (.jsonl, .parquet, .csv/.tsv, a .xml MediaWiki dump, .html, .warc, .pdf, .md, .rst, "
        "plain text; gzip/bz2/zstd too) or a folder of such files in any mix and depth",
        cli={"flags": ("input_path",), "metavar": "input"},
    )
    format: str = setting(ReaderConfig, "format")
    text_field: str = setting(ReaderConfig, "text_field")
    title_field: str = setting(ReaderConfig, "title_field")
    id_field: str = setting(ReaderConfig, "id_field")
    unit: str = setting(ReaderConfig, "unit")
    source_name: str = setting(IngestConfig, "source_name")
    max_doc_bytes: int = setting(ReaderConfig, "max_doc_bytes")
    docs_per_shard: int = setting(IngestConfig, "docs_per_shard")
    max_sentence_chars: int = setting(SplitConfig, "max_sentence_chars")
    pair_rule: str = setting(PairConfig, "rule")
    pair_repeat: int = setting(PairConfig, "repeat")
    pair_options: dict | None = param(
        None,
        'other PairConfig fields as JSON, e.g. \'{"letters_k": 10, "letters_k_by_length": false}\' (default: none)',
        cli={"type": str},
    )
    seed: int = setting(PairConfig, "seed", (ShuffleConfig, "seed"))
    rows_per_shard: int = setting(ShuffleConfig, "rows_per_shard")
    memory_limit: str = setting(ShuffleConfig, "memory_limit")
    shard_compression: str = setting(ShuffleConfig, "shard_compression")
    spill_compression: str = setting(ShuffleConfig, "spill_compression")
    workers: int = setting(RunOptions, "workers")
    holdout_percent: int | None = param(
        None,
        "documents kept out of the pairs for evaluation "
        f"(default: {DemoRetrievalConfig.held_out_percent} for the demo, else 0)",
    )
    allow_empty: bool = setting(RunOptions, "allow_empty")
    root: str | None = setting(RunOptions, "root", **NO_OPTION)
    dask: str = setting(RunOptions, "dask", **dask_option("split, pair and the shuffle's phases"))


@dataclass(frozen=True)
class MineKeywordsParams:
    """The `mine-keywords` flow's parameters (flows/mine_keywords.py documents them)."""

    input_path: str | None = param(
        None,
        "questions/sentences file (default: the demo corpus)",
        cli={"flags": ("input_path",), "metavar": "input", "nargs": "?"},
    )
    format: str = setting(ReaderConfig, "format")
    text_field: str = setting(ReaderConfig, "text_field")
    title_field: str = setting(ReaderConfig, "title_field")
    id_field: str = setting(ReaderConfig, "id_field")
    unit: str = param(
        UNITS[0], "rows to model: one per input record, or the input's sentences", cli={"choices": UNITS}
    )
    k: int = setting(KeywordsConfig, "k")
    ks: list[int] | None = setting(KeywordsConfig, "ks", default=None)
    seeds: list[int] | None = setting(KeywordsConfig, "seeds", default=None)
    seed: int = setting(KeywordsConfig, "seed")
    alpha: float = setting(KeywordsConfig, "alpha")
    beta: float = setting(KeywordsConfig, "beta")
    n_iters: int = setting(KeywordsConfig, "n_iters", cli={"flags": ("--iters",)})
    threshold: str = setting(KeywordsConfig, "threshold")
    t: float = setting(KeywordsConfig, "t")
    tau: float = setting(KeywordsConfig, "tau")
    t_min: float = setting(KeywordsConfig, "t_min")
    allow_empty: bool = setting(RunOptions, "allow_empty")
    root: str | None = setting(RunOptions, "root", **NO_OPTION)
    dask: str = setting(RunOptions, "dask", **dask_option("the K sweep's fits"))
    workers: int = setting(RunOptions, "workers", help=WORKERS_OF_DASK)
    warm_start: bool = setting(KeywordsConfig, "warm_start")


def keywords_config(p: MineKeywordsParams) -> KeywordsConfig:
    """The keywords stage's config; `ks` / `seeds` None (or empty): the config's own."""
    values = config_values(p, KeywordsConfig)
    for name in ("ks", "seeds"):
        values[name] = tuple(values[name] or getattr(KeywordsConfig, name))
    return KeywordsConfig(**values)


@dataclass(frozen=True)
class EvaluateParams:
    """The `evaluate` flow's parameters (flows/evaluate.py documents them). `lee` and `demo_retrieval` are
    the CLI's `--no-lee` / `--no-demo` flags."""

    models: list[str] | None = param(
        None, "model folders or baseline names (default: all baselines)", cli={"flags": ("models",)}
    )
    stackoverflow: str | None = param(
        STACKOVERFLOW,
        f"titles TSV (default: {STACKOVERFLOW}, skipped with a note if absent; '' skips)",
        cli={"default": None},  # not given: the flow's default
    )
    stsb: list[str] | None = param(
        None,
        "STS-B CSV files (default: en and zh dev of the shared data, each skipped with a note if absent; none: skip)",
    )
    lee: bool = param(
        True,
        "skip the Lee-50 document similarity set",
        cli={"flags": ("--no-lee",), "dest": "no_lee", "default": False},
    )
    demo_retrieval: bool = param(
        True,
        "skip the held-out demo retrieval set",
        cli={"flags": ("--no-demo",), "dest": "no_demo", "default": False},
    )
    beir: list[str] | None = param(None, "BEIR-layout folders (corpus.jsonl, queries.jsonl, qrels/) (default: none)")
    beir_split: str = setting(SuiteConfig, "beir_split")
    question_queries: int = setting(QuestionRetrievalConfig, "max_queries", cli={"flags": ("--queries",)})
    limit: int = setting(DatasetSpec, "limit")
    demo_max_articles: int = setting(DatasetSpec, "limit", **NO_OPTION)
    batch_size: int = setting(SuiteConfig, "batch_size")
    device: str | None = param(None, "cpu, cuda, ... (default: cuda when present)")
    root: str | None = setting(RunOptions, "root", **NO_OPTION)
    dask: str = setting(RunOptions, "dask", **dask_option("the units (model x dataset)"))
    workers: int = setting(RunOptions, "workers", help=WORKERS_OF_DASK)


def evaluation_sets(p: EvaluateParams) -> tuple[EvaluateParams, list[str]]:
    """`p` without the default files this machine lacks, and a note for each: the StackOverflow titles and the
    STS-B dev sets are optional, so an absent default is skipped (a given file that is absent is reported as
    not run). No set left is an error, raised before any work, that names the skipped defaults."""
    notes, skipped = [], []
    stackoverflow, stsb = p.stackoverflow, p.stsb
    if stackoverflow == STACKOVERFLOW and not Path(stackoverflow).is_file():
        fix = f"skipped: to add it, pass --stackoverflow FILE (the {STACKOVERFLOW_SOURCE})"
        notes.append(missing_default("--stackoverflow", Path(stackoverflow), fix))
        skipped.append("--stackoverflow")
        stackoverflow = ""
    if stsb is None:
        stsb = [f for f in STSB_DEV if Path(f).is_file()]
        for f in STSB_DEV:
            if f not in stsb:
                fix = f"skipped: to add it, pass --stsb FILE.. ({Path(f).name} from {STSB_SOURCE})"
                notes.append(missing_default("--stsb", Path(f), fix))
        skipped += ["--stsb"] if len(stsb) < len(STSB_DEV) else []
    p = replace(p, stackoverflow=stackoverflow, stsb=stsb)
    if not (p.stackoverflow or p.stsb or p.lee or p.demo_retrieval or p.beir):
        why = f" (the defaults of {' and '.join(skipped)} are not on this machine: {shared_data()})"
        raise ValueError(
            f"no evaluation set selected{why if skipped else ''}: give --stackoverflow, --stsb, --beir, "
            "or keep Lee-50 / demo"
        )
    return p, notes


def missing_sts_default(lang: str, train: str | None, dev: str | None) -> str | None:
    """The one-line error for a default STS-B file of `lang` this machine lacks (None: all there). The files
    are required inputs, so the line names the options to pass."""
    left = [split for split, given in (("train", train), ("dev", dev)) if not given]
    for split in left:
        path = Path(stsb_file(lang, split))
        if not path.is_file():
            names = " and ".join(f"stsb-{lang}-{s}.csv" for s in left)
            options = " ".join(f"--{s} FILE" for s in left)
            return missing_default(f"--{split}", path, f"download {names} ({STSB_SOURCE}) and pass {options}")
    return None
