"""Sentence splitting on hand-checked Chinese, English and mixed text."""

from __future__ import annotations

import pytest

from tasks.split.sentences import SplitConfig, normalize, split_documents, split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Chinese: full-width terminators, closing quotes stay with their sentence.
        ("他说：“你好。”然后走了。这是第二句！第三句？", ["他说：“你好。”", "然后走了。", "这是第二句！", "第三句？"]),
        ("第一句；第二句……第三句", ["第一句；", "第二句……", "第三句"]),
        ("《三体》是小说。「真的吗？」她问。", ["《三体》是小说。", "「真的吗？」", "她问。"]),
        # English: abbreviations, initials, decimals, lower-case continuation.
        (
            "Dr. Smith paid $1.5 million. He left at 5 p.m. yesterday. Then e.g. this one.",
            ["Dr. Smith paid $1.5 million.", "He left at 5 p.m. yesterday.", "Then e.g. this one."],
        ),
        ("The U.S. economy grew. J. K. Rowling wrote it.", ["The U.S. economy grew.", "J. K. Rowling wrote it."]),
        ('Wait... What? He said "stop." Then left!', ["Wait...", "What?", 'He said "stop."', "Then left!"]),
        ("Version 3.11 is out. See python.org for details.", ["Version 3.11 is out.", "See python.org for details."]),
        # Mixed: an ASCII terminator before a CJK character is a boundary.
        ("I use Python.我喜欢它。And you?", ["I use Python.", "我喜欢它。", "And you?"]),
        ("GitHub 上怎么写删除线？Use ~~text~~.", ["GitHub 上怎么写删除线？", "Use ~~text~~."]),
        # Line breaks are boundaries even without punctuation.
        ("Heading\nA sentence. Another\n\n  indented line  ", ["Heading", "A sentence.", "Another", "indented line"]),
        ("", []),
        ("   \n\n", []),
    ],
)
def test_split(text, expected):
    assert split_sentences(text) == expected


def test_normalize_is_nfkc_casefold_and_collapses_whitespace():
    assert normalize("  Ｈｅｌｌｏ\tWORLD\n  Straße ") == "hello world strasse"
    assert normalize("ＧｉｔＨｕｂ　上的删除线") == "github 上的删除线"


def test_documents_table_title_row_and_cutting():
    long = "Two is " + "x" * 50 + "."
    table, counts = split_documents(
        ["d1", "d2"],
        ["The Title", "A title far longer than twenty"],
        ["One. " + long, "Only sentence."],
        SplitConfig(20),
    )
    rows = table.to_pylist()
    assert [(r["doc_id"], r["sent_id"], r["is_title"]) for r in rows] == [
        ("d1", 0, True),
        ("d1", 1, False),
        ("d1", 2, False),
        ("d1", 3, False),
        ("d1", 4, False),
        ("d1", 5, False),
        ("d2", 0, True),
        ("d2", 1, False),
    ]
    assert rows[0]["norm"] == "the title"
    pieces = [r["text"] for r in rows[2:6]]
    assert "".join(pieces) == long and all(len(p) <= 20 for p in pieces)
    assert pieces[0] == "Two is "  # cut after the last space that fits, then at the limit
    assert rows[6]["text"] == "A title far longer t"  # titles are cropped, and counted
    assert counts == {"cropped_titles": 1, "cut_sentences": 1, "documents_without_sentences": 0}


def test_a_document_without_terminators_keeps_every_character():
    words = [f"w{i}" for i in range(40_000)]
    text = " ".join(words)  # ~230k characters, not one sentence terminator
    table, counts = split_documents(["d"], [None], [text], SplitConfig(512))
    pieces = table.column("text").to_pylist()
    assert "".join(pieces) == text and max(map(len, pieces)) <= 512
    assert all(p.endswith(" ") for p in pieces[:-1])  # never inside a word
    assert counts["cut_sentences"] == 1
