"""Sentence splitting on hand-checked Chinese, English and mixed text."""

from __future__ import annotations

import pytest

from tasks.split_sentences import SplitConfig, normalize, split_documents, split_sentences


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


def test_documents_table_title_row_and_cropping():
    table, counts = split_documents(
        ["d1", "d2"], ["The Title", None], ["One. Two is " + "x" * 50 + ".", "Only sentence."], SplitConfig(20)
    )
    rows = table.to_pylist()
    assert [(r["doc_id"], r["sent_id"], r["is_title"]) for r in rows] == [
        ("d1", 0, True),
        ("d1", 1, False),
        ("d1", 2, False),
        ("d2", 1, False),
    ]
    assert rows[0]["norm"] == "the title"
    assert len(rows[2]["text"]) == 20 and rows[2]["text"].startswith("Two is x")
    assert counts == {"cropped_sentences": 1, "documents_without_sentences": 0}
