"""Defaults live in the config dataclasses: the CLI's option defaults and the flows' parameter defaults
are read from them (or are None: "the config's default"), never written a second time."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from gur_cli import build_pairs_params, build_parser
from tasks.evaluate.scoring import QuestionRetrievalConfig
from tasks.evaluate.suite import DatasetSpec, SuiteConfig
from tasks.ingest.documents import IngestConfig
from tasks.ingest.readers import ReaderConfig
from tasks.keywords.filter import KeywordsConfig
from tasks.pair.candidates import PairConfig
from tasks.shuffle.phases import ShuffleConfig
from tasks.split.sentences import SplitConfig

# Flow parameter -> the config field it sets.
READER = {name: (ReaderConfig, name) for name in ("format", "text_field", "title_field", "id_field")}
BUILD_PAIRS = {
    **READER,
    "max_doc_bytes": (ReaderConfig, "max_doc_bytes"),
    "unit": (ReaderConfig, "unit"),
    "source_name": (IngestConfig, "source_name"),
    "docs_per_shard": (IngestConfig, "docs_per_shard"),
    "max_sentence_chars": (SplitConfig, "max_sentence_chars"),
    "pair_rule": (PairConfig, "rule"),
    "pair_repeat": (PairConfig, "repeat"),
    "seed": (PairConfig, "seed"),  # and ShuffleConfig.seed (see below)
    "rows_per_shard": (ShuffleConfig, "rows_per_shard"),
    "memory_limit": (ShuffleConfig, "memory_limit"),
    "shard_compression": (ShuffleConfig, "shard_compression"),
    "spill_compression": (ShuffleConfig, "spill_compression"),
}
KEYWORDS = {
    **READER,
    **{name: (KeywordsConfig, name) for name in ("k", "ks", "seeds", "seed", "alpha", "beta", "n_iters")},
    **{name: (KeywordsConfig, name) for name in ("threshold", "t", "tau", "t_min", "warm_start")},
}
EVALUATE = {
    "beir_split": (SuiteConfig, "beir_split"),
    "question_queries": (QuestionRetrievalConfig, "max_queries"),
    "limit": (DatasetSpec, "limit"),
    "demo_max_articles": (DatasetSpec, "limit"),
    "batch_size": (SuiteConfig, "batch_size"),
}
FIELDS = {"build-pairs": BUILD_PAIRS, "demo": BUILD_PAIRS, "mine-keywords": KEYWORDS, "evaluate": EVALUATE}
# CLI dest -> flow parameter, where the names differ.
FLOW_NAMES = {"input": "input_path", "iters": "n_iters", "queries": "question_queries"}
# Options that set no config field: inputs, run settings, flow switches.
NOT_CONFIG = {
    "build-pairs": {"input", "workers", "allow_empty", "pair_options", "holdout_percent", "dask"},
    "mine-keywords": {"input", "allow_empty", "unit", "workers", "dask"},
    "evaluate": {"models", "stackoverflow", "stsb", "no_lee", "no_demo", "beir", "device", "workers", "dask"},
}
NOT_CONFIG["demo"] = NOT_CONFIG["build-pairs"]


def field_default(cls: type, name: str):
    (f,) = [f for f in dataclasses.fields(cls) if f.name == name]
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def argv(command: str, *options: str) -> list[str]:
    return [command, "corpus.jsonl", *options] if command == "build-pairs" else [command, *options]


def parse(command: str) -> dict:
    """The options' values under the flow's parameter names."""
    args = build_parser().parse_args(argv(command))
    return {FLOW_NAMES.get(k, k): v for k, v in vars(args).items() if k not in ("func", "check", "command", "root")}


def flows() -> dict:
    from flows.build_pairs import build_pairs
    from flows.evaluate import evaluate
    from flows.mine_keywords import mine_keywords

    return {"build-pairs": build_pairs, "mine-keywords": mine_keywords, "evaluate": evaluate}


@pytest.mark.parametrize("command", FIELDS)
def test_option_defaults_are_the_config_defaults(command):
    parsed = parse(command)
    for param, (cls, name) in FIELDS[command].items():
        if param not in parsed:  # a flow parameter with no option (demo_max_articles)
            continue
        # None: a list option not given (--ks, --seeds); the flow then takes the config's default.
        value = parsed.pop(param)
        assert value is None or value == field_default(cls, name), f"{param}: {value!r}, {cls.__name__}.{name}"
    assert set(parsed) == {FLOW_NAMES.get(k, k) for k in NOT_CONFIG[command]}  # every option is accounted for


def test_one_seed_option_is_both_configs_default():
    assert field_default(PairConfig, "seed") == field_default(ShuffleConfig, "seed")


def test_train_options_default_to_the_config_or_the_preset():
    from models.training.config import TrainConfig

    parsed = parse("train")
    assert parsed["objective"] == field_default(TrainConfig, "objective")
    assert parsed["init_from"] == field_default(TrainConfig, "init_from")
    from_preset = {"pooling", "lr", "text_field", "losses", "negatives", "temperature", "epochs", "batch_size", "seed"}
    assert all(parsed[name] is None for name in from_preset | {"preset", "steps"})
    assert from_preset <= {f.name for f in dataclasses.fields(TrainConfig)}


def test_serve_options_are_the_deployments_defaults():
    from deployments.serve import build_deployments

    parsed = parse("serve")
    signature = inspect.signature(build_deployments).parameters
    assert (parsed["cron"], parsed["timezone"]) == (signature["cron"].default, signature["timezone"].default)


def test_pair_repeat_reaches_the_pair_config():
    from flows.build_pairs import stage_configs

    for command in ("build-pairs", "demo"):
        args = build_parser().parse_args(argv(command, "--pair-repeat", "3"))
        assert stage_configs(**build_pairs_params(args)).pair.repeat == 3
    with pytest.raises(ValueError, match="repeat must be >= 0"):  # before Prefect starts a server
        stage_configs(**build_pairs_params(build_parser().parse_args(["demo", "--pair-repeat", "-1"])))


def test_no_options_build_the_default_configs():
    """So a run without options has the fingerprints (and cache hits) it had before."""
    from flows.build_pairs import stage_configs

    configs = stage_configs(**build_pairs_params(build_parser().parse_args(argv("build-pairs"))))
    assert configs.ingest == IngestConfig() and configs.split == SplitConfig()
    assert configs.pair == PairConfig() and configs.shuffle == ShuffleConfig()
    demo = stage_configs(**build_pairs_params(build_parser().parse_args(["demo"])))
    assert demo.pair.holdout_percent > 0 and demo.shuffle == ShuffleConfig()


@pytest.mark.parametrize("command", ["build-pairs", "mine-keywords", "evaluate"])
def test_flow_parameter_defaults_are_none_or_the_config_defaults(command):
    flow = flows()[command]
    parameters = inspect.signature(flow.fn).parameters
    for param, (cls, name) in FIELDS[command].items():
        default = parameters[param].default
        assert default is None or default == field_default(cls, name), f"{flow.name}: {param}={default!r}"


@pytest.mark.parametrize("command", ["build-pairs", "mine-keywords", "evaluate"])
def test_cli_and_flow_agree_on_the_other_parameters(command):
    """Switches that set no config field (workers, unit, ...) have one default in both; an option left
    empty (None, `models`' [], `--pair-options` "") is not passed on, so the flow's default applies."""
    parameters = inspect.signature(flows()[command].fn).parameters
    for param, value in parse(command).items():
        if param in parameters and param != "input_path" and value not in (None, [], ""):
            assert value == parameters[param].default, f"{command}: {param}"


def test_train_flow_defaults_are_the_config_defaults():
    from flows.train import train_flow
    from models.training.config import TrainConfig

    parameters = inspect.signature(train_flow.fn).parameters
    for name in ("objective", "init_from"):
        assert parameters[name].default == field_default(TrainConfig, name)
    assert all(parameters[name].default is None for name in ("preset", "steps", "pooling", "lr"))


@pytest.mark.parametrize("command", ["build-pairs", "demo", "mine-keywords", "evaluate"])
def test_dask_option_alone_is_a_local_cluster_and_takes_an_address(command):
    assert build_parser().parse_args(argv(command)).dask == ""  # no Dask: nothing changes
    assert build_parser().parse_args(argv(command, "--dask")).dask == "local"
    args = build_parser().parse_args(argv(command, "--dask", "tcp://10.0.0.5:8786", "--workers", "3"))
    assert (args.dask, args.workers) == ("tcp://10.0.0.5:8786", 3)
