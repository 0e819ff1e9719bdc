"""Checks of each command's inputs and options that run before Prefect is imported or a server started:
a wrong path, column or option is one line within a second, not an error from inside a flow."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any


def json_option(text: str, option: str) -> object:
    import json

    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{option}: not valid JSON ({exc}): {text}") from None


def check_dask(args: argparse.Namespace) -> None:
    """`--dask` takes an optional value, so `--dask corpus.jsonl` would take the input for an address."""
    value = getattr(args, "dask", "")
    if value not in ("", "local") and "://" not in value:
        raise ValueError(f"--dask {value!r}: not a scheduler address (tcp://host:8786); put --dask after the input")


def flow_params(args: argparse.Namespace, params: type) -> Any:
    """A flow's parameters (`flows/parameters.py`) from the options `add_options` made of them."""
    from tasks.runtime.parameters import params_from

    return params(**params_from(args, params))


def reader_config(params: object) -> Any:
    from tasks.ingest.readers import ReaderConfig
    from tasks.runtime.parameters import config_values

    return ReaderConfig(**config_values(params, ReaderConfig))


def check_build_pairs(args: argparse.Namespace) -> None:
    from flows.parameters import BuildPairsParams
    from tasks.ingest.checks import check_corpus

    check_dask(args)
    if args.input_path is not None:
        check_corpus(args.input_path, reader_config(flow_params(args, BuildPairsParams)))
    if args.pair_options and not isinstance(json_option(args.pair_options, "--pair-options"), dict):
        raise ValueError("--pair-options must be a JSON object, e.g. '{\"letters_k\": 10}'")


def check_mine_keywords(args: argparse.Namespace) -> None:
    from flows.parameters import MineKeywordsParams, keywords_config
    from tasks.ingest.checks import check_corpus

    check_dask(args)
    params = flow_params(args, MineKeywordsParams)
    if args.input_path is not None:
        check_corpus(args.input_path, reader_config(params))
    keywords_config(params)  # its own checks (thresholds, K values, seeds)


def check_train(args: argparse.Namespace) -> None:
    from tasks.ingest.checks import check_text_file, check_train_options, require_path
    from tasks.train.task import check_fingerprint

    check_train_options(json_option(args.options, "--options") if args.options else {})
    check_fingerprint(args.keywords)
    if args.method == "gur":
        given = [f"--{k.replace('_', '-')}" for k, v in train_flags(args).items() if v is not None]
        if given or args.keywords or args.texts:
            raise ValueError(f"{' '.join(given) or '--keywords/--texts'}: options of --method tfcsg / simcse")
    if args.texts:
        if args.method != "simcse":
            raise ValueError("--texts: a text file trains --method simcse; tfcsg needs keywords (gur mine-keywords)")
        check_text_file(args.texts, args.text_field or "text")
    if args.init_from:
        require_path(args.init_from, "--init-from")


def check_evaluate(args: argparse.Namespace) -> None:
    from tasks.ingest.checks import require_path

    check_dask(args)
    for model in args.models:
        if ":" not in model and ("/" in model or os.sep in model or Path(model).exists()):
            require_path(model, "model")
    if args.stackoverflow:
        require_path(args.stackoverflow, "--stackoverflow")
    for path in [*(args.stsb or []), *(args.beir or [])]:
        require_path(path)


def check_sts(args: argparse.Namespace) -> None:
    from flows.parameters import missing_sts_default
    from tasks.ingest.checks import check_sts_options, require_path
    from tasks.sts.data import check_holdout
    from tasks.sts.families import parse_family

    for family in args.families:
        parse_family(family)  # an unknown name or a missing model folder: one line, before Prefect starts
    for path in (args.train, args.dev, args.test):
        if path:
            require_path(path)
    if (args.train or args.dev or args.test) and len(args.lang) > 1:
        raise ValueError("--train/--dev/--test name one language's files: give one --lang")
    if args.holdout:
        check_holdout(args.holdout, "--holdout")
    if args.options:
        check_sts_options(json_option(args.options, "--options"))
    for lang in args.lang:  # last: an option error is named even where the default files are missing
        missing = missing_sts_default(lang, args.train, args.dev)
        if missing:
            raise FileNotFoundError(missing)


def check_nightly(args: argparse.Namespace) -> None:
    from storage.layout import data_root
    from tasks.ingest.checks import require_path
    from tasks.nightly.config import CONFIG_NAME, load_nightly_config

    config = load_nightly_config(args.config or data_root(args.root) / CONFIG_NAME)
    require_path(config.corpus.path, f"{config.source}: [corpus] path")


def check_serve(args: argparse.Namespace) -> None:
    from deployments.local_server import running_server
    from tasks.ingest.checks import require_path

    if args.nightly_config:
        require_path(args.nightly_config, "--nightly-config")
    if not os.environ.get("PREFECT_API_URL") and not running_server():
        # On an ephemeral server of its own, runs triggered from elsewhere would never be seen.
        raise ValueError("gur serve needs a running Prefect server: `gur server start` first (or set PREFECT_API_URL)")


def check_embed(args: argparse.Namespace) -> None:
    from storage.layout import data_root
    from tasks.embed.model_choice import choose_model

    choose_model(data_root(args.root), args.model)  # a missing or non-encoder folder, or no default: one line
    if args.batch_size < 1:
        raise ValueError(f"--batch-size {args.batch_size}: give 1 or more")
    if args.workers < 0:
        raise ValueError(f"--workers {args.workers}: give 0 (this process, on every core) or more")
    check_dask(args)


def check_search(args: argparse.Namespace) -> None:
    from tasks.embed.search import check_query

    args.query = check_query(args.query)  # an empty query: one line, before anything loads
    if args.k < 1:
        raise ValueError(f"--k {args.k}: give 1 or more results")


def train_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The `gur train` options that set TrainConfig fields of tfcsg / simcse (None: the preset's)."""
    return {
        "losses": args.losses,
        "negatives": args.negatives,
        "temperature": args.temperature,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "seed": args.seed,
        "text_field": args.text_field,
    }
