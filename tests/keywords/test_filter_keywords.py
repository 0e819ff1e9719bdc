from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from storage.shared_data import shared_data
from tasks.keywords.filter import (
    KEYWORDS_CODE_VERSION,
    KEYWORDS_SCHEMA,
    TOPICS_SCHEMA,
    KeywordsConfig,
    Token,
    filter_keywords,
    join_keywords,
    lift_keywords,
    mine_keywords_table,
    tokenize,
    tokenizer_fingerprint,
    topic_threshold,
)


def norms(text: str) -> list[str]:
    return [t.norm for t in tokenize(text)]


def test_tokenize_keeps_technical_terms_and_surface_form() -> None:
    tokens = tokenize("C# vs C++ with ASP.NET, node.js and visual-studio on .NET?")
    assert tokens == [
        Token("C#", "c#"),
        Token("vs", "vs"),
        Token("C++", "c++"),
        Token("ASP.NET", "asp.net"),
        Token("node.js", "node.js"),
        Token("visual-studio", "visual-studio"),
        Token(".NET", ".net"),
    ]


def test_tokenize_removes_stopwords_before_fitting() -> None:
    assert norms("How to make font strikethrough on GitHub?") == ["font", "strikethrough", "github"]
    assert norms("What's Python's way? It isn't, don't") == ["python", "way"]
    # words gensim's list would drop but that are content in technical questions
    assert norms("find the system name and show empty fields") == ["find", "system", "name", "show", "empty", "fields"]
    assert tokenize("How do I do it?") == []
    assert [t.surface for t in tokenize("How do I do it?", keep_stopwords=True)] == ["How", "do", "I", "do", "it"]


def test_tokenize_full_width_and_chinese() -> None:
    assert tokenize("ＡＳＰ．ＮＥＴ　ｃ＃") == [Token("ＡＳＰ．ＮＥＴ", "asp.net"), Token("ｃ＃", "c#")]
    tokens = tokenize("如何在GitHub上给字体加删除线？")
    assert [t.surface for t in tokens] == ["GitHub", "字体", "加", "删除", "线"]  # 如何, 在, 上, 给 are stopwords
    assert tokens[0].norm == "github"


def reference_tokenize(text: str | None, keep_stopwords: bool = False) -> list[Token]:
    """tokenize, worked out per occurrence without its per-word cache: what the cached one must equal."""
    import unicodedata

    from tasks.keywords.filter import _TOKEN_RE, _WIDTH, _jieba, is_stopword

    if not text:
        return []
    folded, tokens = text.translate(_WIDTH), []
    for match in _TOKEN_RE.finditer(folded):
        start, end = match.span()
        if match.lastgroup == "han":
            pos = start
            for piece in _jieba().lcut(folded[start:end], HMM=True):
                surface = text[pos : pos + len(piece)]
                pos += len(piece)
                tokens.append(Token(surface, unicodedata.normalize("NFKC", surface)))
            continue
        surface = text[start:end]
        norm = unicodedata.normalize("NFKC", folded[start:end]).lower().replace("’", "'")
        if norm.endswith("'s") and len(norm) > 2:
            surface, norm = surface[:-2], norm[:-2]
        tokens.append(Token(surface, norm))
    return tokens if keep_stopwords else [t for t in tokens if not is_stopword(t.norm)]


def test_tokenize_equals_the_uncached_reference_on_real_titles_and_mixed_scripts() -> None:
    import csv
    import random

    from tests.helpers.shared_data import require_shared

    path = shared_data("stackoverflow", "train.tsv")
    require_shared(path)
    with open(path, encoding="utf-8", newline="") as f:
        titles = [row["title"] for row in csv.DictReader(f, delimiter="\t")][:3000]
    rng = random.Random(0)
    pieces = ["ＡＳＰ．ＮＥＴ", "ｃ＃", "Python's", "PYTHON’S", "isn't", "s's", "'s", "C++"]
    pieces.append("如何在GitHub上给字体加删除线")
    mixed = [" ".join(rng.choice(pieces + t.split()) for _ in range(rng.randint(0, 9))) for t in titles[:500]]
    for text in [*titles, *mixed, "", None]:
        for keep in (False, True):
            assert tokenize(text, keep) == reference_tokenize(text, keep), text


def test_filter_keeps_order_surface_form_and_first_occurrence() -> None:
    tokens = tokenize("How to make Font strikethrough on GitHub with font tags?")
    counts = {"font": 120, "strikethrough": 101, "github": 300, "tags": 100}
    # strict rule n_z^w > t: "tags" at exactly 100 is dropped; "font" is kept once, as first written
    assert filter_keywords(tokens, counts, 100) == ["Font", "strikethrough", "GitHub"]
    assert filter_keywords(tokens, counts, 150) == ["GitHub"]
    assert filter_keywords(tokens, counts, 1000) == []


def test_thresholds() -> None:
    assert topic_threshold(5000, "absolute", 100, 0.1, 2) == 100
    assert topic_threshold(5000, "scaled", 100, 0.1, 2) == pytest.approx(500)
    assert topic_threshold(10, "scaled", 100, 0.1, 2) == 2  # t_min for small topics
    with pytest.raises(ValueError):
        topic_threshold(10, "relative", 100, 0.1, 2)


def test_lift_fallback_orders_by_lift_then_count_then_position() -> None:
    tokens = tokenize("parse json array in bash script")
    # topic z has n_z = 100 tokens; the corpus n = 1000.
    # lift = n_z^w * n / (n_z * n^w): json 10*1000/(100*50) = 2, array 5*1000/(100*100) = 0.5,
    # parse 2*1000/(100*2) = 10, bash 20*1000/(100*20) = 10 (exclusive, more frequent than parse), script 1.
    topic_counts = {"parse": 2, "json": 10, "array": 5, "bash": 20, "script": 10}
    totals = {"parse": 2, "json": 50, "array": 100, "bash": 20, "script": 100}
    assert lift_keywords(tokens, topic_counts, 100, totals, 1000, 1) == ["bash"]
    assert lift_keywords(tokens, topic_counts, 100, totals, 1000, 2) == ["parse", "bash"]  # original order
    assert lift_keywords(tokens, topic_counts, 100, totals, 1000, 3) == ["parse", "json", "bash"]


def test_join_keywords() -> None:
    assert join_keywords(["font", "GitHub"]) == "font GitHub"
    assert join_keywords(["字体", "删除", "GitHub", "线"]) == "字体删除 GitHub 线"


def hand_made_table() -> pa.Table:
    texts = (
        ["How to parse JSON in Python?", "Python JSON decoding error", "Read a JSON file with Python"] * 4
        + ["Bash script loop over files", "bash: loop over lines of a file", "Exit a Bash loop early"] * 4
        + ["Python recursion depth", "How do I do it?", ""]
    )
    return pa.table(
        {
            "doc_id": [f"d{i // 3}" for i in range(len(texts))],
            "sent_id": pa.array([i % 3 for i in range(len(texts))], pa.int32()),
            "text": texts,
        }
    )


def test_mine_keywords_table_on_hand_made_topics() -> None:
    table = hand_made_table()
    config = KeywordsConfig(k=2, n_iters=20, threshold="scaled", tau=0.5, t_min=2, seed=0)
    keywords, topics, stats, sweep_rows = mine_keywords_table(table, config)
    assert keywords.schema == KEYWORDS_SCHEMA and topics.schema == TOPICS_SCHEMA
    assert keywords.column("text").to_pylist() == table.column("text").to_pylist()  # row order kept
    rows = keywords.to_pylist()
    # two topics: the 13 Python questions and the 12 Bash questions
    assert topics.column("size").to_pylist() == [13, 12]
    assert rows[0]["keywords"] == ["JSON", "Python"] and rows[0]["fallback"] is False
    assert rows[2]["keywords"] == ["JSON", "Python"]  # "Read"/"file" occur in only 4 of 13 questions
    # thresholds are 0.5 * 13 = 6.5 and 0.5 * 12 = 6: "script"/"files" (4 of 12) drop, surface forms kept
    assert rows[12]["keywords"] == ["Bash", "loop"] and rows[13]["keywords"] == ["bash", "loop"]
    assert topics.column("threshold").to_pylist() == [6.5, 6.0]
    assert {r["topic"] for r in rows[:12]} == {0} and {r["topic"] for r in rows[12:24]} == {1}
    # "Python recursion depth" -> only "Python" passes (13 > 6.5)
    assert rows[24]["keywords"] == ["Python"]
    # stopwords only: no topic, raw words as fallback; blank text: the only possible empty row
    assert rows[25] == {**rows[25], "topic": None, "keywords": ["How", "do", "I", "it"], "fallback": True}
    assert rows[26]["keywords"] == [] and rows[26]["topic"] is None
    assert stats["empty"] == 1 and stats["fallback_raw"] == 1
    assert all(r["keywords"] for r in rows if r["text"])  # never empty
    assert stats["code_version"] == KEYWORDS_CODE_VERSION and stats["populated_topics"] == 2
    assert sweep_rows == []
    assert topics.column("top_words").to_pylist()[1][:2] == ["bash", "loop"]


def test_lift_fallback_when_threshold_removes_everything() -> None:
    config = KeywordsConfig(k=2, n_iters=20, threshold="absolute", t=100, fallback_words=1)
    keywords, _, stats, _ = mine_keywords_table(hand_made_table(), config)
    rows = keywords.to_pylist()
    assert all(r["fallback"] for r in rows)
    assert all(len(r["keywords"]) == 1 for r in rows if r["topic"] is not None)
    assert stats["fallback_lift"] == 25 and stats["threshold_empty"] == 27


def test_sweep_picks_k_and_results_are_reproducible() -> None:
    config = KeywordsConfig(ks=(2, 4), seeds=(0, 1, 2), n_iters=10)
    first = mine_keywords_table(hand_made_table(), config)
    second = mine_keywords_table(hand_made_table(), dataclasses.replace(config, backend="numpy"))
    assert first[0].equals(second[0]) and first[1].equals(second[1])
    assert first[3] == second[3] and len(first[3]) == 6
    assert first[2]["k_source"] == "sweep" and first[2]["k"] in (2, 4)


def test_config_validation_and_fingerprint() -> None:
    with pytest.raises(ValueError):
        KeywordsConfig(threshold="relative")
    with pytest.raises(ValueError):
        KeywordsConfig(tokenizer="tok_v0")
    assert KeywordsConfig(backend="numpy") == KeywordsConfig()  # backends give identical output
    assert tokenizer_fingerprint().startswith("tok_v1+jieba-")


def test_tables_without_content_words() -> None:
    table = pa.table({"doc_id": ["a", "b"], "sent_id": pa.array([0, 1], pa.int32()), "text": [None, "the of"]})
    keywords, topics, stats, _ = mine_keywords_table(table, KeywordsConfig(ks=(2, 3)))
    assert keywords.column("keywords").to_pylist() == [[], ["the", "of"]]
    assert topics.num_rows == 0 and stats["k_source"] == "config" and stats["empty"] == 1
    empty = table.slice(0, 0)
    assert mine_keywords_table(empty, KeywordsConfig())[0].num_rows == 0


def test_every_parameter_that_changes_keywords_changes_the_fingerprint():
    import dataclasses

    from tasks.keywords.task import keywords_fingerprint

    source = {"stage": "ingest", "fingerprint": "0123456789abcdef", "path": "ingest/0123456789abcdef"}
    base = KeywordsConfig()
    changes = dict(seed=1, k=31, ks=(10, 20), alpha=0.2, beta=0.05, n_iters=31, threshold="absolute", t=50.0)
    changes |= dict(tau=0.2, t_min=3.0)
    prints = {keywords_fingerprint(source, base)}
    for name, value in changes.items():
        prints.add(keywords_fingerprint(source, dataclasses.replace(base, **{name: value})))
    assert len(prints) == 1 + len(changes)
    other = dict(source, fingerprint="fedcba9876543210")
    assert keywords_fingerprint(other, base) not in prints
    assert keywords_fingerprint(source, dataclasses.replace(base, backend="numpy")) in prints  # same labels
