"""`gur --help`: every command has a description, every option shows its default, `--root` goes anywhere."""

from __future__ import annotations

import argparse

import pytest

from gur_cli import build_parser
from tasks.ingest.checks import train_option_names
from tasks.ingest.readers import ReaderConfig


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_command_has_a_description():
    for name, parser in commands().items():
        assert parser.description and len(parser.description) > 20, name
        parser.format_help()  # no stray % in a help string


@pytest.mark.parametrize("name", commands())
def test_every_option_shows_its_default(name):
    parser = commands()[name]
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.nargs == 0:  # flags are off unless given
            continue
        if not action.option_strings and action.nargs not in ("?", "*"):  # a required positional
            continue
        assert "(default" in formatter._get_help_string(action), f"gur {name} {action.option_strings or action.dest}"
    text = parser.format_help()
    assert "(default: %" not in text and "==SUPPRESS==" not in text


def test_train_options_help_lists_the_config_fields():
    text = " ".join(commands()["train"].format_help().split())
    for field in train_option_names():
        assert field in text, field
    assert "kl_weight" in train_option_names() and "out_dir" not in train_option_names()


def test_demo_offers_no_reader_options():
    demo = commands()["demo"]
    options = {s for a in demo._actions for s in a.option_strings}
    assert not options & {"--format", "--text-field", "--title-field", "--id-field"}
    args = build_parser().parse_args(["demo"])
    assert (args.format, args.text_field, args.title_field, args.id_field) == (
        ReaderConfig.format,
        ReaderConfig.text_field,
        ReaderConfig.title_field,
        ReaderConfig.id_field,
    )
    assert {"--format", "--text-field"} <= {s for a in commands()["build-pairs"]._actions for s in a.option_strings}


@pytest.mark.parametrize("name", commands())
def test_root_before_or_after_the_command(name):
    required = {
        "build-pairs": ["corpus.jsonl"],
        "sql": ["SELECT 1"],
        "promote": ["export"],
        "server": ["status"],
        "search": ["a query"],
    }.get(name, [])
    parse = build_parser().parse_args
    assert parse([name, *required]).root is None
    assert parse(["--root", "before", name, *required]).root == "before"
    assert parse([name, *required, "--root", "after"]).root == "after"
    assert parse(["--root", "before", name, "--root", "after", *required]).root == "after"


def test_build_pairs_help_names_every_input_a_folder_can_hold():
    text = build_parser()._subparsers._group_actions[0].choices["build-pairs"].format_help()
    assert "folder of .txt files" not in text
    for name in (".jsonl", ".parquet", ".csv/.tsv", "MediaWiki", "gzip/bz2/zstd", "folder of such files"):
        assert name in " ".join(text.split()), name
