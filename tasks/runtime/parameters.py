"""Flow parameters and `gur` options derived from dataclass fields: each default and help written once.

A config field carries its help, and its fixed set of values when it has one, in its metadata:

    memory_limit: str = field(default="1GB", metadata={"help": "memory of the dedup + shuffle stage"})
    rule: str = field(default="weighted", metadata={"help": "LCS rule", "choices": RULES})

A flow's parameters are one frozen dataclass (`flows/parameters.py`) whose fields say which config
field each one sets; the flow's signature, the CLI's options and the configs are read from it:

    @dataclass(frozen=True)
    class ShuffleParams:
        memory_limit: str = setting(ShuffleConfig, "memory_limit")  # default and help: the field's
        dask: str = setting(RunOptions, "dask")

    @flow
    @takes(ShuffleParams)  # def shuffle_flow(memory_limit: str = "1GB", dask: str = "")
    def shuffle_flow(**params):
        p = ShuffleParams(**params)
        config = ShuffleConfig(**config_values(p, ShuffleConfig))

    add_options(parser, ShuffleParams)  # --memory-limit MEMORY_LIMIT  memory of ... (default: 1GB)

Prefect reads a flow's parameters (names, order, defaults, types) from `inspect.signature`, so a
deployment sees the same parameters as a hand-written signature would give it.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field
from typing import Any

SETS = "sets"  # metadata of a parameter: the ((config class, field name), ...) it sets
HELP = "help"  # metadata of a config field or a parameter: its help text, without the default
CHOICES = "choices"  # metadata of a config field: its only accepted values
CLI = "cli"  # metadata of a parameter: argparse overrides (`flags`, `nargs`, ...), or False: no option


def field_of(cls: type, name: str) -> Field:
    try:
        return cls.__dataclass_fields__[name]
    except KeyError:
        raise AttributeError(f"{cls.__name__} has no field {name!r}") from None


def field_default(cls: type, name: str) -> Any:
    """A dataclass field's default (its factory called for a mutable one)."""
    f = field_of(cls, name)
    return f.default_factory() if f.default is MISSING else f.default


def setting(config: type, name: str, *also: tuple[type, str], default: Any = MISSING, **meta: Any) -> Any:
    """A flow parameter that sets field `name` of dataclass `config` (and each `(class, field)` in `also`).

    Its default, help and choices are the field's; `default` replaces the default (None: the config's
    default, chosen at run time), `help=` the help, `cli=` adds argparse overrides (see `add_options`).
    """
    value = field_default(config, name) if default is MISSING else default
    return field(default=value, metadata={SETS: ((config, name), *also), **meta})


def param(default: Any, help: str, **meta: Any) -> Any:
    """A flow parameter that sets no config field (an input, a switch): its default and help are written here."""
    return field(default=default, metadata={HELP: help, **meta})


@dataclass(frozen=True)
class RunOptions:
    """How a flow runs, not what it computes: no fingerprint depends on these."""

    workers: int = field(default=0, metadata={HELP: "processes for CPU-heavy stages (default: all cores)"})
    dask: str = field(
        default="",
        metadata={
            HELP: "run {what} as Prefect tasks on Dask: alone, a local cluster of --workers processes; "
            "tcp://host:8786, a running scheduler whose workers see the data root at the same path (default: no Dask)",
        },
    )
    allow_empty: bool = field(default=False, metadata={HELP: "an input with no documents is not an error"})
    root: str | None = field(default=None, metadata={HELP: "data root (default: $GUR_HOME or ./data)"})


NO_OPTION = {CLI: False}  # a parameter the CLI sets itself (`root`: an option of every command)


def dask_option(what: str) -> dict[str, Any]:
    """The `--dask` option of a flow that runs `what` on Dask: alone, a local cluster; else an address."""
    return {CLI: {"nargs": "?", "const": "local", "metavar": "ADDRESS", "what": what}}


def sets(f: Field) -> tuple[tuple[type, str], ...]:
    return f.metadata.get(SETS, ())


def help_of(f: Field) -> str:
    """A parameter's help: its own, else that of the config field it sets."""
    if HELP in f.metadata:
        return f.metadata[HELP]
    for cls, name in sets(f):
        text = field_of(cls, name).metadata.get(HELP)
        if text:
            return text
    return ""


def choices_of(f: Field) -> tuple | None:
    for cls, name in sets(f):
        found = field_of(cls, name).metadata.get(CHOICES)
        if found:
            return tuple(found)
    return None


def config_fields(params: type) -> dict[str, tuple[type, str]]:
    """{parameter: (config class, field)} for every parameter that sets a config field (the first it sets)."""
    return {f.name: sets(f)[0] for f in dataclasses.fields(params) if sets(f)}


def config_values(params: object, config: type) -> dict[str, Any]:
    """{field: value} of `config`'s fields that parameters set, read from a parameters instance."""
    return {
        name: getattr(params, f.name) for f in dataclasses.fields(params) for cls, name in sets(f) if cls is config
    }


def flow_signature(params: type, returns: Any = inspect.Signature.empty) -> inspect.Signature:
    """The signature of a function taking `params`' fields as keyword arguments, in their order, with their
    defaults and (evaluated) types: what Prefect reads a flow's parameters and their schema from."""
    hints = typing.get_type_hints(params)
    return inspect.Signature(
        [
            inspect.Parameter(
                f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default, annotation=hints[f.name]
            )
            for f in dataclasses.fields(params)
        ],
        return_annotation=returns,
    )


def takes(params: type) -> Callable[[Callable], Callable]:
    """Decorator: `fn(**params)` gets the signature `flow_signature(params)` (apply it under `@flow`)."""

    def apply(fn: Callable) -> Callable:
        returns = typing.get_type_hints(fn).get("return", inspect.Signature.empty)
        fn.__signature__ = flow_signature(params, returns)
        return fn

    return apply


def _plain_type(hint: Any) -> tuple[Any, Any]:
    """(the type without `| None`, the item type of a list or tuple, else None)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = args[0] if len(args) == 1 else hint
        args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (list, tuple):
        return origin, args[0]
    return hint, None


def option_kwargs(f: Field, hint: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """(flags, add_argument keyword arguments) of one parameter: `--name-with-dashes`, its type, default,
    help and choices; the parameter's `cli` metadata overrides any of them (`flags=("input",)`: positional)."""
    overrides = dict(f.metadata.get(CLI) or {})
    flags = tuple(overrides.pop("flags", ("--" + f.name.replace("_", "-"),)))
    kind, item = _plain_type(hint)
    text = help_of(f).replace("{what}", overrides.pop("what", ""))
    if f.default is None and sets(f) and "(default" not in text:  # None: the config's default
        default = field_default(*sets(f)[0])
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else default
        text += f" (default: {shown})"
    kwargs: dict[str, Any] = {"default": f.default, "help": text.replace("%", "%%")}  # argparse formats help
    if kind is bool:
        kwargs["action"] = "store_true"
    elif item is not None:
        kwargs.update(nargs="*", type=item)
    elif kind in (int, float):
        kwargs["type"] = kind
    if choices_of(f):
        kwargs["choices"] = choices_of(f)
    if flags[0].startswith("-"):
        kwargs["dest"] = f.name
        if kind is not bool and "choices" not in {**kwargs, **overrides}:  # `--iters ITERS`, not N_ITERS
            kwargs["metavar"] = flags[0].lstrip("-").replace("-", "_").upper()
    kwargs.update(overrides)
    return flags, kwargs


def add_options(
    parser: argparse.ArgumentParser,
    params: type,
    names: list[str] | tuple[str, ...] | None = None,
    help: dict[str, str] | None = None,
) -> None:
    """One option per field of `params` (or of the fields `names`, in that order) that has one.

    The option stores the parameter's name (`args.n_iters` for `--iters`); `help` replaces a parameter's
    help for this command.
    """
    hints = typing.get_type_hints(params)
    chosen = names if names is not None else [f.name for f in dataclasses.fields(params)]
    for name in chosen:
        f = params.__dataclass_fields__[name]
        if f.metadata.get(CLI) is False:
            continue
        flags, kwargs = option_kwargs(f, hints[name])
        if help and name in help:
            kwargs["help"] = help[name]
        parser.add_argument(*flags, **kwargs)


def params_from(args: argparse.Namespace, params: type) -> dict[str, Any]:
    """The parameters `add_options` stored in `args` (others keep their defaults)."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(params) if hasattr(args, f.name)}
