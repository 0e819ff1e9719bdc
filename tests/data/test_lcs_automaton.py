"""The suffix-automaton common substring against an O(nm) DP and the SuffixAutomaton package."""

from __future__ import annotations

import contextlib
import importlib
import logging
import random
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.pair.automaton import (
    LETTERS,
    WEIGHTED,
    CommonSubstring,
    char_weight_table,
    char_weights,
    codepoints,
    common_substring_kernel,
    heaviest_common_substring,
    new_workspace,
    trim_zero_weight,
)
from tests.helpers.pair_reference import common_substring_reference

ALPHABETS = {
    "english": "abcde fgh,.",
    "chinese": "中文字的是在了，。",
    "mixed": "ab 中文1,あ한",
    "repeated": "aab",
    "binary": "ab",
    "astral": "a𠀀😀 ",
}
HASH_ONLY = new_workspace(64, dense_cells=0)  # forces the hash transition layout
TINY_DENSE = new_workspace(64, dense_cells=300)  # dense for short a, hash for longer a

texts = st.sampled_from(sorted(ALPHABETS)).flatmap(
    lambda name: st.tuples(*(st.text(alphabet=ALPHABETS[name], max_size=40) for _ in range(2)))
)


def _all_layouts(a: str, b: str, rule: str) -> list[CommonSubstring]:
    ca, cb = codepoints(a), codepoints(b)
    pw = np.zeros(len(cb) + 1, np.int64)
    np.cumsum(char_weight_table(rule)[cb], out=pw[1:])
    out = [heaviest_common_substring(a, b, rule)]
    if len(a) <= 64:
        out += [CommonSubstring(*common_substring_kernel(ca, cb, pw, ws)) for ws in (HASH_ONLY, TINY_DENSE)]
    return out


def _check(a: str, b: str, rule: str) -> None:
    expected = common_substring_reference(a, b, rule)
    for got in _all_layouts(a, b, rule):
        assert got == expected, (a, b, rule)
    m = expected
    assert a[m.a_start : m.a_start + m.length] == b[m.b_start : m.b_start + m.length]
    assert m.weight == int(char_weights(b[m.b_start : m.b_start + m.length], rule).sum())
    lo = m.longest_length
    assert a[m.longest_a_start : m.longest_a_start + lo] == b[m.longest_b_start : m.longest_b_start + lo]
    assert m.length <= m.longest_length


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(texts, st.sampled_from([WEIGHTED, LETTERS]))
def test_automaton_equals_dp(pair: tuple[str, str], rule: str) -> None:
    _check(*pair, rule)


def test_automaton_equals_dp_longer_strings() -> None:
    """Hundreds-of-characters inputs, where the transition layouts switch; seeded, not hypothesis."""
    rng = random.Random(7)
    for _ in range(60):
        alphabet = ALPHABETS[rng.choice(sorted(ALPHABETS))]
        a = "".join(rng.choices(alphabet, k=rng.randint(0, 300)))
        b = "".join(rng.choices(alphabet, k=rng.randint(0, 300)))
        _check(a, b, rng.choice([WEIGHTED, LETTERS]))


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("", "", (0, 0, 0, 0, 0, 0, 0)),
        ("a", "", (0, 0, 0, 0, 0, 0, 0)),
        ("a", "a", (0, 0, 1, 3, 0, 0, 1)),
        ("a", "b", (0, 0, 0, 0, 0, 0, 0)),
        ("aaaa", "aa", (0, 0, 2, 6, 0, 0, 2)),
        ("xabcabc", "abc", (1, 0, 3, 9, 1, 0, 3)),  # first occurrence in a
    ],
)
def test_edge_cases(a: str, b: str, expected: tuple[int, ...]) -> None:
    assert tuple(heaviest_common_substring(a, b)) == expected
    assert tuple(common_substring_reference(a, b)) == expected


def test_heaviest_is_not_longest() -> None:
    # "aaaaaaa" is longest (7 chars, weight 21); "中文字" is heaviest (3 chars, weight 30).
    m = heaviest_common_substring("aaaaaaa 中文字", "中文字 aaaaaaa")
    assert (m.length, m.weight, m.longest_length) == (3, 30, 7)
    assert "中文字 aaaaaaa"[m.b_start : m.b_start + m.length] == "中文字"


def test_character_weights() -> None:
    assert char_weights("a中あ한é1 ,𠀀", WEIGHTED).tolist() == [3, 10, 10, 10, 3, 1, 1, 1, 10]
    assert char_weights("a中あ한é1 ,𠀀", LETTERS).tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 1]
    with pytest.raises(ValueError):
        char_weight_table("bogus")


def gur_weight(c: str) -> float:
    """GUR's released ``weight`` (sents2pair.py) for one character, rewritten from its code."""
    if unicodedata.category(c)[0] != "L":
        return 0.1
    return 1.0 if ord(c) > 10000 else 0.3


@pytest.mark.parametrize(
    ("char", "expected"),
    [
        ("a", 3),  # Latin
        ("é", 3),
        ("7", 1),  # digit
        (" ", 1),
        ("中", 10),  # CJK ideograph
        ("あ", 10),  # hiragana
        ("カ", 10),  # katakana
        ("한", 10),  # Hangul syllable
        ("\u1100", 3),  # Hangul Jamo choseong kiyeok: a letter below 10000
        ("\U00010300", 10),  # Old Italic letter A: outside the CJK blocks, above 10000
        ("Ａ", 10),  # fullwidth Latin capital A (U+FF21)
        ("\u2184", 3),  # Latin small letter reversed c: a letter just below 10000 (8580)
        ("\u2c00", 10),  # Glagolitic capital letter azu: a letter just above 10000 (11264)
        ("\u2710", 1),  # code point 10000 itself, a dingbat: not a letter
        ("、", 1),  # ideographic comma: not a letter, above 10000
        ("😀", 1),  # emoji: not a letter, above 10000
        ("\U0001d400", 10),  # mathematical bold capital A: a letter (Lu)
    ],
)
def test_weight_matches_gur(char: str, expected: int) -> None:
    assert char_weights(char, WEIGHTED).tolist() == [expected]
    assert expected == round(10 * gur_weight(char))


def test_weight_table_matches_gur_everywhere() -> None:
    table = char_weight_table(WEIGHTED)
    gur = np.fromiter((round(10 * gur_weight(chr(c))) for c in range(len(table))), dtype=np.int64, count=len(table))
    np.testing.assert_array_equal(table, gur)


def test_paper_example_weights() -> None:
    kept = heaviest_common_substring("spike is chasing tom.", "spike is chasing jerry.", LETTERS)
    assert kept.weight == 14
    assert trim_zero_weight("spike is chasing tom.", kept.a_start, kept.length, LETTERS) == (0, 16)
    rejected = heaviest_common_substring("tom is chasing jerry.", "jerry is chasing tom.", LETTERS)
    assert rejected.weight == 9
    weighted = heaviest_common_substring("tom is chasing jerry.", "jerry is chasing tom.", WEIGHTED)
    assert ("tom is chasing jerry."[weighted.a_start : weighted.a_start + weighted.length], weighted.weight) == (
        " is chasing ",
        30,
    )


@contextlib.contextmanager
def _root_logger_restored():
    """SuffixAutomaton clears the root logger's handlers and sets INFO on import: undo that."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, root.propagate, root.disabled)
    try:
        yield
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        root.propagate = saved[2]
        root.disabled = saved[3]


@pytest.fixture(scope="module")
def suffix_automaton_package():
    root = logging.getLogger()
    before = (root.handlers[:], root.level)
    with _root_logger_restored():
        try:
            module = importlib.import_module("SuffixAutomaton")
        except ImportError:
            module = None
    assert (root.handlers, root.level) == before
    if module is None:
        pytest.skip("SuffixAutomaton package not installed (test extra)")
    return module


def test_package_oracle_longest_length(suffix_automaton_package) -> None:
    """The package's ``lcs2(a, [b])`` longest length agrees with ours.

    Its ``lcs1`` is not used: 0.1.6 loses matches (``lcs1`` of "bbab" / "abbaab" is ``[]``).
    """
    rng = random.Random(11)
    for _ in range(2000):
        alphabet = ALPHABETS[rng.choice(sorted(ALPHABETS))]
        a = "".join(rng.choices(alphabet, k=rng.randint(1, 40)))
        b = "".join(rng.choices(alphabet, k=rng.randint(0, 40)))
        found = suffix_automaton_package.lcs2(a, [b])
        assert (found[0][1] if found else 0) == heaviest_common_substring(a, b).longest_length, (a, b)
