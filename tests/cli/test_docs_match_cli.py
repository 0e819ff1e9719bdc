"""The docs name what the code defines: every option of every `gur` command (walked from `build_parser()`)
is in that command's row of docs/commands.md, and every deployment `gur serve` registers (`build_deployments`,
built without a server) is named `flow/deployment` in docs/prefect.md and the README."""

from __future__ import annotations

import argparse
import re

import pytest

from cli.parser import build_parser
from tests.helpers import REPO

COMMANDS_PAGE = REPO / "docs" / "commands.md"
ROW = re.compile(r"^\| `gur ([a-z][a-z-]*)([^|]*)` \|", re.M)  # a table row: the command, then its synopsis
OPTION = re.compile(r"--[a-z0-9][a-z0-9-]*")
DEPLOYMENT = re.compile(r"`([a-z][a-z-]*/[a-z][a-z-]*)`")


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def long_options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for action in parser._actions for o in action.option_strings if o.startswith("--")}


def undocumented(parser: argparse.ArgumentParser, page: str) -> list[str]:
    """`gur COMMAND --option` for each option the page leaves out. An option every command has (--root,
    --help) may be said once anywhere on the page; any other must be in its command's own row, as a whole
    word (`--k` is not `--keep-builds`, `gur search`'s row is not `gur search-page`'s)."""
    rows: dict[str, set[str]] = {}
    for name, synopsis in ROW.findall(page):
        rows.setdefault(name, set()).update(OPTION.findall(synopsis))
    anywhere = set(OPTION.findall(page))
    subs = commands(parser)
    shared = set.intersection(*(long_options(p) for p in subs.values()))
    missing = [f"gur {o}" for o in sorted(long_options(parser) | shared) if o not in anywhere]
    for name, sub in subs.items():
        if name not in rows:
            missing.append(f"gur {name} (no row)")
            continue
        missing += [f"gur {name} {o}" for o in sorted(long_options(sub) - shared) if o not in rows[name]]
    return missing


def test_every_option_of_every_command_is_in_docs_commands():
    assert undocumented(build_parser(), COMMANDS_PAGE.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (" --keep-refused N]` | what the data root", "]` | what the data root", ["gur du --keep-refused"]),
        ("--bm25 / --hybrid", "--bm25", ["gur search --hybrid"]),
        ("`--root DIR`", "`DIR`", ["gur --root"]),
        ("| `gur verify [STAGE]` |", "| `verify [STAGE]` |", ["gur verify (no row)"]),
    ],
    ids=["option-left-out-of-its-row", "one-of-two-options", "shared-option", "command-without-a-row"],
)
def test_a_page_that_leaves_one_out_is_caught(old, new, expected):
    page = COMMANDS_PAGE.read_text(encoding="utf-8")
    assert page.count(old) == 1, old
    assert undocumented(build_parser(), page.replace(old, new)) == expected


def test_every_served_deployment_is_named_in_the_docs():
    from deployments.serve import DEPLOYMENTS, build_deployments

    served = [f"{d.flow_name}/{d.name}" for d in build_deployments(schedules=False)]
    assert sorted(served) == sorted(DEPLOYMENTS)
    for page in (REPO / "docs" / "prefect.md", REPO / "README.md"):
        named = set(DEPLOYMENT.findall(page.read_text(encoding="utf-8")))
        assert [d for d in served if d not in named] == [], f"deployments missing from {page.name}"
