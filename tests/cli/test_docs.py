"""The documentation: the mkdocs site builds in strict mode, and strict mode really fails on a broken
link or anchor, a page left out of the nav, or a link to a file outside docs/; every page is in the
nav; docs/files.md lists every tracked file; the README stays short and its links resolve."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO
from tests.helpers.shared_data import in_ci

DOCS = REPO / "docs"
README_MAX_LINES = 260
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def require_mkdocs() -> None:
    """Skip without mkdocs (the `docs` extra) on a laptop; under CI fail, so CI never passes unbuilt docs."""
    if importlib.util.find_spec("mkdocs") is not None:
        return
    message = "mkdocs is not installed (the `docs` extra: pip install -e '.[docs]')"
    if in_ci():
        pytest.fail(f"{message}; CI is set, and CI must build the docs", pytrace=False)
    pytest.skip(message)


def build(project: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )


RESULTS = "results/"  # the results log: one dated entry per measured run


def nav_pages(nav) -> list[str]:
    """Every page a mkdocs nav names, at any depth ("Title: page.md", a bare "page.md", or a section)."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in nav_pages(value)]
    return [p for item in nav for p in nav_pages(item)]


def mkdocs_config() -> dict:
    return yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))


def heading_ids(page: Path) -> set[str]:
    """The anchors mkdocs gives a page's headings (its toc extension's slugify over the heading text)."""
    from markdown.extensions.toc import slugify

    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    titles = re.findall(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.M)
    return {slugify(title.replace("`", ""), "-") for title in titles}


def test_site_builds_in_strict_mode(tmp_path):
    require_mkdocs()
    result = build(REPO, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    for page in nav_pages(mkdocs_config()["nav"]):
        assert (tmp_path / "site" / page.replace(".md", ".html")).is_file(), page


@pytest.mark.parametrize(
    ("append", "extra_page", "expected"),
    [
        ("[a missing page](no-such-page.md)", None, "no-such-page.md"),
        ("[a missing anchor](training.md#no-such-section)", None, "no-such-section"),
        ("[a source file](../gur_cli.py)", None, "../gur_cli.py"),
        ("", "unlisted.md", "unlisted.md"),
    ],
    ids=["broken-link", "broken-anchor", "link-outside-docs", "page-not-in-nav"],
)
def test_strict_build_fails_on_a_broken_docs_tree(tmp_path, append, extra_page, expected):
    require_mkdocs()
    project = tmp_path / "project"
    shutil.copytree(DOCS, project / "docs")
    shutil.copy(REPO / "mkdocs.yml", project / "mkdocs.yml")
    if append:
        with open(project / "docs" / "index.md", "a", encoding="utf-8") as f:
            f.write(f"\n{append}\n")
    if extra_page:
        (project / "docs" / extra_page).write_text("# Not in the nav\n", encoding="utf-8")
    result = build(project, tmp_path / "site")
    assert result.returncode != 0, result.stderr
    assert expected in result.stderr, result.stderr


def test_every_page_is_in_the_nav():
    config = mkdocs_config()
    assert config["docs_dir"] == "docs" and config["strict"] is True
    listed = nav_pages(config["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    # the results log's entries are reached from its index, which the nav names (mkdocs.yml: not_in_nav)
    on_disk = [p for p in pages if not p.startswith(RESULTS) or p == f"{RESULTS}index.md"]
    assert "/results/*.md" in config["not_in_nav"] and f"{RESULTS}index.md" in listed
    assert sorted(listed) == on_disk
    assert len(listed) == len(set(listed)), "a page is listed twice"


def test_files_page_lists_every_tracked_file():
    try:
        tracked = subprocess.run(
            ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"no git checkout to list the tracked files: {exc}")
    text = (DOCS / "files.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```\n(.*?)```", text, flags=re.S)
    listed = [line.split()[0] for block in blocks for line in block.splitlines() if line.strip()]
    assert len(listed) == len(set(listed)), "a file is listed twice"
    folders = [f for f in listed if f.endswith("/")]  # a folder of many entries (the results log), one line
    assert folders == [f"docs/{RESULTS}"], "only the results log is listed as a folder"
    missing = [f for f in tracked if f not in listed and not any(f.startswith(d) for d in folders)]
    assert missing == [], "tracked files missing from docs/files.md"
    listed = [f for f in listed if f not in folders]
    assert [f for f in listed if not (REPO / f).is_file()] == [], "docs/files.md lists files that do not exist"
    lines = [line for block in blocks for line in block.splitlines() if line.strip()]
    assert all(len(line.split(maxsplit=1)) == 2 for line in lines), "every file needs its annotation"


def test_readme_is_short_and_its_links_resolve():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    links = [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert links, "the README links to the docs pages"
    missing = [t for t in links if not (REPO / t.split("#")[0]).exists()]
    assert missing == [], f"README links to files that do not exist: {missing}"


def test_readme_anchors_exist():
    require_mkdocs()
    text = (REPO / "README.md").read_text(encoding="utf-8")
    anchored = [t for t in LINK.findall(text) if "#" in t and not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert anchored, "the README links to sections of the docs pages"
    broken = [t for t in anchored if t.split("#")[1] not in heading_ids(REPO / t.split("#")[0])]
    assert broken == [], f"README links to sections that do not exist: {broken}"
