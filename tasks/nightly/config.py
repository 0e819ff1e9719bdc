"""`nightly.toml`: what one nightly-retrain run does. Read once per run; every error names the file and key.

    [corpus]                     # the folder (or file) new documents land in
    path = "/data/support-questions"
    format = "auto"              # as `gur build-pairs --format`
    text_field = "text"
    title_field = "title"
    id_field = "id"

    [train]
    method = "auto"              # auto: the corpus's shape decides (tasks/nightly/recipe.py): short texts get
                                 # tfcsg, documents with bodies get documents; or name one: tfcsg, documents,
                                 # gur (each warm-starts from the model in use; gur: GUR_NIGHT's 15 minutes)
    init_from = ""               # the first night's encoder ("" = the shipped MiniLM)
    preset = "auto"              # tfcsg: paper / cpu / auto (= cpu, the measured one)
    steps = 0                    # 0: the preset's length
    options = {}                 # any TrainConfig field, e.g. {lr = 3e-5}
    teacher = ""                 # documents: a larger encoder whose scores the candidate distils: "auto" (all-
                                 # mpnet-base-v2 where ./run.sh mpnet installed it), a folder, or "" (none)
    replay = "auto"              # tfcsg, documents, R > 0: train on what is new since the champion's data
                                 # plus a seeded sample of the older rows, R times as many; 0: all of them;
                                 # auto: 1 on a later night whose full epoch does not fit the budget, else 0
                                 # (a night the budget caps trains on what is new first either way)

    [keywords]                   # tfcsg: GSDMM on the corpus
    k = 30
    warm_start = false           # start GSDMM from the previous night's fit (KeywordsConfig.warm_start)

    [evaluate]                   # the suite both models are scored on; never text the candidate trained on
    holdout = 0.2                # share of the corpus's records held out for the gate (0: off)
    holdout_seed = 0
    label_field = "tag"          # the corpus is labelled when every file has this column
    stackoverflow = ""           # or a question TSV with tags you name (then holdout is not used)
    stsb = ["STS-B train CSV"]   # STS-B CSVs (the guard's; dev stays for reporting); default: the shared
                                 # data's stsb-en-train.csv where the machine has it, else Lee-50 (below)
    lee = false                  # score Lee-50 (ships with gensim): the guard when STS-B is not there
    beir = []                    # BEIR folders
    question_queries = 0
    suite_documents = 2000       # held-out records the gate scores at most: a seeded sample of them where
                                 # there are more (the rest stay held out, never trained on); 0: all

    [retention]                  # gc at the end of each night (`gur gc`): what the night keeps
    apply = true
    keep_builds = 7              # newest builds of the corpus, and what they were made from
    keep_champions = 5           # predecessors of the champion kept (each `gur rollback` goes one back)
    keep_refused = 1             # newest refused candidates whose weights stay (reused, not retrained)

    [budget]                     # how long a night may take from its start to its decision
    minutes = 180                # training gets what the data stages, the gate and a 10% reserve leave
                                 # (tasks/nightly/budget.py); the embedding for search runs after the decision

    [gate]
    primary = "auto"             # or a metric; auto: the suite's (labelled: P@1; label-free: MRR@10)
    margin = 0.0                 # the gain's whole interval must lie above this
    confidence = 0.95            # of the paired test: bootstrap interval and permutation p-value
    guards = {"stsb-en-train/sts/spearman" = 0.01}   # metric -> allowed drop (lee-50/sts/spearman 0.02
                                 # by default where the STS-B file is not on the machine)

With `holdout`, the candidate trains on the corpus minus a seeded hash-based share of its records and
the gate scores that share (tasks/nightly/holdout.py): a labelled corpus as question retrieval (P@1),
an unlabeled one as retrieval among the held-out documents (title -> body, inverse cloze; MRR@10).
The gate refuses a suite that overlaps the candidate's training input.
The gate promotes only when the primary metric's gain over the champion, query by query, is larger
than its noise (tasks/nightly/significance.py): the lower end of its bootstrap interval above the
margin and the permutation p-value below 1 - confidence; and no guard drops more than allowed.

Metric names are `dataset/task/metric[@k]` as in the `metrics` view (`gur sql "SELECT DISTINCT
dataset, task, metric, k FROM metrics"`).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from storage.fingerprint import HASHED_WHEN_SET
from tasks.ingest.readers import ReaderConfig
from tasks.keywords.filter import KeywordsConfig

CONFIG_NAME = "nightly.toml"
# The datasets a held-out split can make (tasks/nightly/holdout.py writes them under these names).
LABELLED = "stackoverflow-holdout"
TITLE_TASK, ICT_TASK, PAIR_TASK = "heldout-title", "heldout-ict", "heldout-pairs"
DEFAULT_GUARDS = {"stsb-en-train/sts/spearman": 0.01}
# Lee-50 (50 news documents, human pairwise similarity; gensim ships it) guards general similarity where
# the STS-B file is not on the machine. Its 1,225 pairs are fewer than STS-B train's 5,749: a wider allowance.
LEE_GUARDS = {"lee-50/sts/spearman": 0.02}


def default_stsb() -> Path:
    """The guard's set: STS-B train from the shared data (STS-B dev is the reported one)."""
    from storage.shared_data import shared_data

    return shared_data("stsb", "stsb-en-train.csv")


NIGHT_METHODS = ("auto", "tfcsg", "documents", "gur")
SECTIONS = ("corpus", "train", "keywords", "evaluate", "gate", "retention", "budget")


@dataclass(frozen=True)
class CorpusConfig:
    path: str
    format: str = ReaderConfig.format
    text_field: str = ReaderConfig.text_field
    title_field: str = ReaderConfig.title_field
    id_field: str = ReaderConfig.id_field

    def reader_fields(self) -> dict[str, str]:
        """How the corpus is read, as the stages' flow parameters (`format`, `text_field`, `title_field`,
        `id_field`): passed whole, so a reader option added here reaches every stage."""
        return {"format": self.format, "text_field": self.text_field, "title_field": self.title_field,
                "id_field": self.id_field}  # fmt: skip

    def reader(self) -> ReaderConfig:
        return ReaderConfig(**self.reader_fields())


@dataclass(frozen=True)
class TrainSection:
    method: str = "auto"
    init_from: str = ""
    preset: str = "auto"
    steps: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    replay: float | str = "auto"  # tasks/nightly/budget.py: replay_ratio
    # tasks/nightly/teacher.py: "", "auto" or a folder; the night resolves it into options (hashed only when set)
    teacher: str = field(default="", metadata={HASHED_WHEN_SET: True})


@dataclass(frozen=True)
class KeywordsSection:
    k: int = KeywordsConfig.k
    unit: str = "documents"
    warm_start: bool = False


@dataclass(frozen=True)
class EvaluateSection:
    holdout: float = 0.2
    holdout_seed: int = 0
    label_field: str = "tag"
    stackoverflow: str = ""
    stsb: list[str] = field(default_factory=lambda: [str(default_stsb())])
    lee: bool = False
    beir: list[str] = field(default_factory=list)
    question_queries: int = 0
    suite_documents: int = 2000


@dataclass(frozen=True)
class GateSection:
    primary: str = "auto"  # the suite's own metric (tasks/nightly/holdout.py: Split.primary)
    margin: float = 0.0
    confidence: float = 0.95
    guards: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_GUARDS))


@dataclass(frozen=True)
class RetentionSection:
    apply: bool = True  # gc at the end of each night (tasks/retention/plan.py says what it keeps)
    keep_builds: int = 7
    keep_champions: int = 5
    keep_refused: int = 1

    def __post_init__(self) -> None:
        # TOML has real booleans: a quoted "false" would be a true value here, and true a 1.
        if not isinstance(self.apply, bool):
            raise ValueError(f"apply must be true or false (no quotes), not {self.apply!r}")
        for name in ("keep_builds", "keep_champions", "keep_refused"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be a whole number, not {value!r}")

    def config(self):
        from tasks.retention.plan import RetentionConfig

        return RetentionConfig(self.keep_builds, self.keep_champions, self.keep_refused)


@dataclass(frozen=True)
class BudgetSection:
    minutes: float = 180.0  # from the night's start to its decision (tasks/nightly/budget.py plans within it)
    probe: bool = True  # a first night times a few steps and documents before it plans (tasks/nightly/probe.py)

    def __post_init__(self) -> None:
        if isinstance(self.minutes, bool) or not isinstance(self.minutes, int | float) or self.minutes <= 0:
            raise ValueError(f"minutes must be a number above 0, not {self.minutes!r}")
        if not isinstance(self.probe, bool):
            raise ValueError(f"probe must be true or false (no quotes), not {self.probe!r}")


@dataclass(frozen=True)
class NightlyConfig:
    source: str  # the file it was read from
    corpus: CorpusConfig
    train: TrainSection
    keywords: KeywordsSection
    evaluate: EvaluateSection
    gate: GateSection
    retention: RetentionSection = RetentionSection()
    budget: BudgetSection = BudgetSection()
    notes: tuple[str, ...] = ()  # what the loader chose for the user (a default that fell back), printed each night


def _section(cls, data: dict, name: str, source: Path):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{source}: [{name}] has unknown keys {unknown}; known: {sorted(known)}")
    try:
        return cls(**data)
    except (TypeError, ValueError) as exc:  # a required key is missing, or a value the section refuses
        raise ValueError(f"{source}: [{name}] {exc}") from None


def retention_settings(path: Path) -> RetentionSection:
    """Only the `[retention]` section of a nightly.toml (what `gur gc` and `gur du` keep by default), checked
    as a night checks it; the defaults when the section is absent."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: not readable as TOML ({exc})") from None
    return _retention(data, Path(path))


def _retention(data: dict, source: Path) -> RetentionSection:
    section = _section(RetentionSection, data.get("retention", {}), "retention", source)
    try:
        section.config()
    except ValueError as exc:
        raise ValueError(f"{source}: [retention] {exc}") from None
    return section


def _absolute(path: str, base: Path) -> str:
    """Paths in the file are relative to the file's folder."""
    return str((base / path).resolve()) if path else ""


def suite_labels(evaluate: EvaluateSection) -> list[str]:
    """The dataset names the suite's metrics carry (`dataset/task/metric[@k]`)."""
    from tasks.evaluate.suite import DatasetSpec

    question = [DatasetSpec("stackoverflow", evaluate.stackoverflow).label] if evaluate.stackoverflow else []
    holdout = [LABELLED, TITLE_TASK, ICT_TASK, PAIR_TASK] if evaluate.holdout and not evaluate.stackoverflow else []
    sets = [DatasetSpec("stsb", p).label for p in evaluate.stsb] + (["lee-50"] if evaluate.lee else [])
    return question + holdout + sets + [DatasetSpec("beir", p).label for p in evaluate.beir]


def similarity_guard(
    evaluate: EvaluateSection, gate: GateSection, given: dict, source: Path
) -> tuple[EvaluateSection, GateSection, tuple[str, ...]]:
    """The general-similarity guard that this machine can score. A default STS-B file that is not here
    becomes the Lee-50 guard (one note, never a refusal every night); a file the user named that is not
    here, or a guard on the missing default, is an error naming the key, the file and the fix."""
    missing = [p for p in evaluate.stsb if not Path(p).is_file()]
    if not missing:
        return evaluate, gate, ()
    fix = (
        "download STS-B's public CSVs (stsb-en-train.csv: sentence1,sentence2,score without a header) to a path "
        "and name it in [evaluate] stsb, or turn the STS guard off with stsb = [] and [gate] guards = {}"
    )
    if "stsb" in given.get("evaluate", {}):
        raise ValueError(f"{source}: [evaluate] stsb names {missing[0]}, which is not on this machine: {fix}")
    if "guards" in given.get("gate", {}):
        if any(name.split("/", 1)[0] == "stsb-en-train" for name in gate.guards):
            raise ValueError(
                f"{source}: [gate] guards name stsb-en-train, whose default file {missing[0]} is not on this "
                f"machine: {fix}"
            )
        return replace(evaluate, stsb=[]), gate, ()
    note = (
        f"{source}: the default STS guard's file {missing[0]} is not on this machine; guarding general "
        f"similarity with Lee-50 (lee-50/sts/spearman, allowed drop {LEE_GUARDS['lee-50/sts/spearman']}) "
        "instead. To guard with STS-B, name its train CSV in [evaluate] stsb"
    )
    return replace(evaluate, stsb=[], lee=True), replace(gate, guards=dict(LEE_GUARDS)), (note,)


def load_nightly_config(path: str | Path) -> NightlyConfig:
    source = Path(path).resolve()
    data = _read_sections(source)
    base = source.parent
    corpus = _section(CorpusConfig, data["corpus"], "corpus", source)
    corpus = CorpusConfig(**{**corpus.__dict__, "path": _absolute(corpus.path, base)})
    train = _train_section(data, source, base)
    evaluate = _evaluate_section(data, source, base)
    gate = _section(GateSection, data.get("gate", {}), "gate", source)
    if not 0.5 <= gate.confidence < 1.0:
        raise ValueError(f"{source}: [gate] confidence must be in [0.5, 1), not {gate.confidence}")
    evaluate, gate, notes = similarity_guard(evaluate, gate, data, source)
    retention = _retention(data, source)
    _check_gate_names(gate, evaluate, source)
    return NightlyConfig(
        source=str(source),
        corpus=corpus,
        train=train,
        keywords=_section(KeywordsSection, data.get("keywords", {}), "keywords", source),
        evaluate=evaluate,
        gate=gate,
        retention=retention,
        budget=_section(BudgetSection, data.get("budget", {}), "budget", source),
        notes=notes,
    )


def _read_sections(source: Path) -> dict:
    """The file's TOML: known sections only, and a `[corpus] path`."""
    if not source.exists():
        raise FileNotFoundError(f"{source}: no nightly config (see `gur nightly --help` for an example)")
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{source}: {exc}") from None
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ValueError(f"{source}: unknown sections {unknown}; known: {list(SECTIONS)}")
    if "corpus" not in data or "path" not in data["corpus"]:
        raise ValueError(f"{source}: [corpus] path is required (the folder new documents land in)")
    return data


def _train_section(data: dict, source: Path, base: Path) -> TrainSection:
    """`[train]`, checked: a known method, a replay ratio; `init_from` relative to the file's folder."""
    train = _section(TrainSection, data.get("train", {}), "train", source)
    if train.method not in NIGHT_METHODS:
        raise ValueError(f"{source}: [train] method must be one of {', '.join(NIGHT_METHODS)}, not {train.method!r}")
    if train.replay != "auto" and (
        isinstance(train.replay, bool) or not isinstance(train.replay, int | float) or train.replay < 0
    ):
        raise ValueError(
            f'{source}: [train] replay must be "auto" or a number >= 0 (older rows per new one; 0: all), '
            f"not {train.replay!r}"
        )
    if not isinstance(train.teacher, str):
        raise ValueError(f'{source}: [train] teacher must be "", "auto" or a model folder, not {train.teacher!r}')
    teacher = train.teacher if train.teacher in ("", "auto") else _absolute(train.teacher, base)
    return TrainSection(**{**train.__dict__, "init_from": _absolute(train.init_from, base), "teacher": teacher})


def _evaluate_section(data: dict, source: Path, base: Path) -> EvaluateSection:
    """`[evaluate]`, its paths relative to the file's folder, checked: a suite size, a holdout share, a question
    suite."""
    evaluate = _section(EvaluateSection, data.get("evaluate", {}), "evaluate", source)
    evaluate = EvaluateSection(
        **{
            **evaluate.__dict__,
            "stackoverflow": _absolute(evaluate.stackoverflow, base),
            "stsb": [p if Path(p).is_absolute() else _absolute(p, base) for p in evaluate.stsb],
            "beir": [_absolute(p, base) for p in evaluate.beir],
        }
    )
    if not isinstance(evaluate.suite_documents, int) or evaluate.suite_documents < 0:
        raise ValueError(
            f"{source}: [evaluate] suite_documents must be a whole number of records (0: all), "
            f"not {evaluate.suite_documents!r}"
        )
    if not 0.0 <= evaluate.holdout < 1.0:
        raise ValueError(f"{source}: [evaluate] holdout must be a share in [0, 1), not {evaluate.holdout}")
    if not (evaluate.stackoverflow or evaluate.holdout):
        raise ValueError(
            f"{source}: [evaluate] needs a question suite: holdout > 0 (a share of the corpus's labelled rows) "
            "or stackoverflow = a labelled TSV the candidate does not train on"
        )
    return evaluate


def _check_gate_names(gate: GateSection, evaluate: EvaluateSection, source: Path) -> None:
    """Every metric the gate names (its primary, its guards) is one of a dataset the suite scores."""
    suite = set(suite_labels(evaluate))
    for name in ((gate.primary,) if gate.primary != "auto" else ()) + tuple(gate.guards):
        if name.split("/", 1)[0] not in suite:
            key = "primary" if name == gate.primary else "guards"
            raise ValueError(
                f"{source}: [gate] {key} {name!r} names a dataset the suite does not score "
                f"(it scores: {', '.join(sorted(suite))})"
            )
