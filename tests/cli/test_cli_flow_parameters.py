"""Flow parameters derived from `flows/parameters.py`: the signature Prefect and the deployments read is the
one a hand-written `def flow(name: type = default, ...)` would give, names, order, defaults and types, and
`gur`'s options are the same parameters with the config fields' help."""

from __future__ import annotations

import argparse
import dataclasses
import typing

import pytest
from prefect.utilities.callables import parameter_schema

from flows.parameters import BuildPairsParams, EvaluateParams, MineKeywordsParams
from gur_cli import build_parser
from tasks.runtime.parameters import (
    CLI,
    config_fields,
    config_values,
    field_default,
    field_of,
    flow_signature,
    help_of,
    params_from,
)

DERIVED = {"build-pairs": BuildPairsParams, "mine-keywords": MineKeywordsParams, "evaluate": EvaluateParams}


def flow(name: str):
    from flows.build_pairs import build_pairs
    from flows.evaluate import evaluate
    from flows.mine_keywords import mine_keywords

    return {"build-pairs": build_pairs, "mine-keywords": mine_keywords, "evaluate": evaluate}[name]


def hand_written(params: type):
    """The function a person would write for `params`: `def f(name: type = default, ...)`, from source text."""
    hints = typing.get_type_hints(params)

    def spelled(hint) -> str:
        return hint.__name__ if isinstance(hint, type) else repr(hint).replace("typing.", "")

    args = ", ".join(f"{f.name}: {spelled(hints[f.name])} = {f.default!r}" for f in dataclasses.fields(params))
    namespace: dict = {}
    exec(f"def f({args}):\n    pass", namespace)
    return namespace["f"]


def expected_defaults(params: type) -> dict:
    """Each parameter's default as its config field has it (None where the parameter says "the config's")."""
    out = {}
    for f in dataclasses.fields(params):
        sets = f.metadata.get("sets")
        out[f.name] = None if f.default is None else field_default(*sets[0]) if sets else f.default
    return out


@pytest.mark.parametrize("name", DERIVED)
def test_the_flow_schema_is_that_of_a_hand_written_signature(name):
    params, fn = DERIVED[name], flow(name)
    schema = parameter_schema(fn.fn).model_dump(mode="json")
    assert schema == parameter_schema(hand_written(params)).model_dump(mode="json")
    assert fn.parameters.model_dump(mode="json") == schema  # what `to_deployment` sends to the server
    properties = schema["properties"]
    assert list(properties) == [f.name for f in dataclasses.fields(params)]
    assert [p["position"] for p in properties.values()] == list(range(len(properties)))
    assert {k: p.get("default") for k, p in properties.items()} == expected_defaults(params)


def test_deployments_carry_the_derived_parameters():
    from deployments.serve import build_deployments

    deployments = {d.name: d for d in build_deployments(schedules=False)}
    for name, params in DERIVED.items():
        schema = deployments[name]._parameter_openapi_schema.model_dump(mode="json")  # what `serve` registers
        assert list(schema["properties"]) == [f.name for f in dataclasses.fields(params)]
        assert schema == parameter_schema(flow(name).fn).model_dump(mode="json")


@pytest.mark.parametrize("params", DERIVED.values())
def test_a_setting_has_its_config_fields_type(params):
    hints = typing.get_type_hints(params)
    for name, (config, field) in config_fields(params).items():
        want, got = typing.get_type_hints(config)[field], hints[name]
        if params.__dataclass_fields__[name].default is None is not field_default(config, field):  # the config's
            (got,) = [a for a in typing.get_args(got) if a is not type(None)]
            if typing.get_origin(want) is tuple:  # a list option for a tuple field (--ks 10 20 30)
                want = list[typing.get_args(want)[0]]
        assert got == want, f"{params.__name__}.{name}: {got} is not {config.__name__}.{field}: {want}"


def commands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.mark.parametrize("name", DERIVED)
def test_every_parameter_is_an_option_with_the_config_fields_help(name):
    params, parser = DERIVED[name], commands()[name]
    actions = {a.dest: a for a in parser._actions}
    for f in dataclasses.fields(params):
        if f.metadata.get(CLI) is False:  # root: an option of every command, not of one flow
            assert f.name == "root" or f.name == "demo_max_articles"
            continue
        dest = (f.metadata.get(CLI) or {}).get("dest", f.name)
        assert dest in actions, f"gur {name}: no option for {f.name}"
        if f.metadata.get("sets") and "help" not in f.metadata:
            config, field = f.metadata["sets"][0]
            help = field_of(config, field).metadata["help"]
            head, _, tail = help.replace("%", "%%").partition("{what}")  # `--dask` names what runs on Dask
            assert help and actions[dest].help.startswith(head) and tail in actions[dest].help, f"{name}: {f.name}"
            assert help_of(f) == help


def test_options_reach_the_configs():
    from flows.build_pairs import stage_configs
    from flows.parameters import keywords_config
    from gur_cli import build_pairs_params

    args = build_parser().parse_args(["build-pairs", "c.jsonl", "--rows-per-shard", "7", "--seed", "3"])
    configs = stage_configs(**build_pairs_params(args))
    assert (configs.shuffle.rows_per_shard, configs.shuffle.seed, configs.pair.seed) == (7, 3, 3)
    args = build_parser().parse_args(["mine-keywords", "--iters", "5", "--ks", "4", "8", "--threshold", "absolute"])
    config = keywords_config(MineKeywordsParams(**params_from(args, MineKeywordsParams)))
    assert (config.n_iters, config.ks, config.seeds, config.threshold) == (5, (4, 8), (0, 1, 2), "absolute")
    assert config_values(BuildPairsParams(seed=4), type(configs.shuffle))["seed"] == 4


def test_signature_keeps_the_flow_callable_by_keyword():
    signature = flow_signature(BuildPairsParams)
    bound = signature.bind(input_path="c.jsonl", workers=2)
    bound.apply_defaults()
    assert BuildPairsParams(**bound.arguments) == BuildPairsParams(input_path="c.jsonl", workers=2)
