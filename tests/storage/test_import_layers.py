"""The layers of docs/architecture.md, read from every import in the code (function-level ones included): storage/
imports nothing of the product, retention reads the root through storage/ only, no package of tasks/ imports
one that imports it back, nothing below the flows imports them, and no product or benchmark code imports the
tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import REPO

PRODUCT = ("storage", "models", "tasks", "flows", "cli", "deployments", "samples", "gur_cli")


def imports(path: Path) -> set[str]:
    """Every module `path` imports by absolute name, wherever the import stands."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py"))


def ids(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("path", sources("storage"), ids=ids)
def test_storage_imports_nothing_of_the_product(path):
    found = {n for n in imports(path) if n.split(".")[0] in PRODUCT and n.split(".")[0] != "storage"}
    assert not found, f"{ids(path)} imports {sorted(found)}: storage/ is the bottom layer"


@pytest.mark.parametrize("path", sources("tasks/retention"), ids=ids)
def test_retention_reads_the_root_through_storage_only(path):
    found = {
        n for n in imports(path) if n.split(".")[0] in PRODUCT and not n.startswith(("storage", "tasks.retention"))
    }
    assert not found, f"{ids(path)} imports {sorted(found)}: gc decides from the root's records (storage/)"


@pytest.mark.parametrize("path", sources("storage", "models", "tasks", "samples"), ids=ids)
def test_nothing_below_the_flows_imports_them(path):
    found = {n for n in imports(path) if n.split(".")[0] in ("flows", "cli", "deployments", "gur_cli", "benchmarks")}
    assert not found, f"{ids(path)} imports {sorted(found)}: a higher layer"


@pytest.mark.parametrize("path", sources(*PRODUCT[:-1], "benchmarks") + [REPO / "gur_cli.py"], ids=ids)
def test_no_product_or_benchmark_code_imports_the_tests(path):
    found = {n for n in imports(path) if n.split(".")[0] == "tests"}
    assert not found, f"{ids(path)} imports {sorted(found)}"


def test_no_package_of_tasks_imports_one_that_imports_it_back():
    graph: dict[str, set[str]] = {}
    for path in sources("tasks"):
        rel = path.relative_to(REPO / "tasks").parts
        if len(rel) < 2:
            continue
        own = rel[0]
        graph.setdefault(own, set()).update(
            n.split(".")[1] for n in imports(path) if n.startswith("tasks.") and n.split(".")[1] != own
        )

    def reaches(start: str) -> set[str]:
        seen, stack = set(), [start]
        while stack:
            for nxt in graph.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    assert len(graph) > 5  # the stage packages were read
    cycles = sorted(p for p in graph if p in reaches(p))
    assert not cycles, f"tasks packages on an import cycle: {cycles}"
