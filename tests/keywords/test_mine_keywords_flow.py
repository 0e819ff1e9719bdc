"""The mine-keywords flow on real StackOverflow titles: tables, catalog views, sweep plot, cache."""

from __future__ import annotations

import json

import duckdb
import pytest

from storage.shared_data import shared_data
from tests.helpers.flow_runs import task_states
from tests.helpers.shared_data import require_shared

pytestmark = pytest.mark.usefixtures("prefect_harness")
SO_TRAIN = shared_data("stackoverflow", "train.tsv")


@pytest.fixture()
def titles(tmp_path):
    require_shared(SO_TRAIN)
    lines = SO_TRAIN.read_text(encoding="utf-8").splitlines()
    header, body = lines[0], lines[1:]
    sample = [line for i, line in enumerate(body) if i % 800 < 40]  # 40 titles of each of the 20 tags
    path = tmp_path / "so.tsv"
    path.write_text("\n".join([header, *sample]) + "\n", encoding="utf-8")
    return path


def test_mine_keywords_on_stackoverflow_titles(tmp_path, titles):
    from flows.mine_keywords import mine_keywords

    root = tmp_path / "data"
    params = dict(
        input_path=str(titles), text_field="title", title_field="", ks=[5, 10], seeds=[0, 1, 2], root=str(root)
    )
    ref = mine_keywords(**params)
    out = root / ref["path"]
    manifest = json.loads((out / "_manifest.json").read_text())
    assert (out / "topic_sweep.png").stat().st_size > 1000
    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    rows = con.execute("SELECT text, keywords FROM keywords").fetchall()
    n_topics = con.execute("SELECT count(*) FROM topics").fetchone()[0]
    sweep = con.execute("SELECT k, count(*) FROM topic_sweep GROUP BY k ORDER BY k").fetchall()
    con.close()
    assert len(rows) == manifest["rows"]["keywords"] >= 790
    assert all(kw for _, kw in rows), "every question gets a keyword sequence"
    # Keywords are words of the question, in its order and surface form.
    for text, kw in rows[:200]:
        positions = [text.find(w) for w in kw]
        assert all(p >= 0 for p in positions) and positions == sorted(positions), (text, kw)
    assert sweep == [(5, 3), (10, 3)] and 1 <= n_topics <= 10
    again = mine_keywords(**params, return_state=True)
    assert again.result() == ref
    assert {k: v for k, v in task_states(again).items() if k != "update-catalog"} == {
        "ingest": "Cached",
        "keywords": "Cached",
    }
    with pytest.raises(ValueError, match="at least 3 distinct seeds"):
        mine_keywords(**(params | {"seeds": [0, 1]}))


def test_sweep_plot_is_published_inline(tmp_path, titles):
    from flows.mine_keywords import mine_keywords
    from tests.helpers.flow_runs import flow_artifacts

    state = mine_keywords(
        input_path=str(titles),
        text_field="title",
        title_field="",
        ks=[3, 6],
        root=str(tmp_path / "d"),
        return_state=True,
    )
    # This run's artifacts only: the session's server holds every test's, past read_artifacts' default page.
    summary = flow_artifacts(state)["keywords-summary"]
    assert "![coherence vs K](data:image/png;base64,iVBOR" in summary  # a PNG, inline
