"""Heaviest common substring of two sentences with a suffix automaton over code-point arrays.

The automaton is built for sentence ``a`` and ``b`` is run through it (matching statistics):
for every end position ``j`` in ``b`` that gives the longest substring of ``b`` ending at ``j``
that also occurs in ``a``. Character weights are never negative, so extending a match to the
left never lowers its weight: the heaviest common substring ending at ``j`` *is* the longest
one, and the heaviest overall is the best of those, read off prefix sums of ``b``'s weights.
The plain longest common substring falls out of the same pass.

Transitions live in an open-addressing hash keyed by ``(state, code point)`` so that the
alphabet (all of Unicode) never needs a dense table; everything is plain arrays so the kernels
compile with numba. The tests check the kernel against an obviously-correct O(nm) dynamic
programme (``tests/helpers/pair_reference.py``).

Ties: heaviest weight first, then the longer substring, then the earliest end in ``b``; the
position in ``a`` is always the first occurrence there.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import NamedTuple

import numba as nb
import numpy as np

WEIGHTED = "weighted"
LETTERS = "letters"

# GUR's released weight (``weight`` in sents2pair.py): a letter (Unicode category L*) with
# ``ord(c) > 10000`` weighs 1.0, any other letter 0.3, anything else 0.1; here times ten, as integers.
HIGH_LETTER_ABOVE = 10000  # decimal, as in GUR's code (U+2710), not 0x10000
HIGH_LETTER_WEIGHT = 10
LETTER_WEIGHT = 3
OTHER_WEIGHT = 1

_N_CODEPOINTS = 0x110000
_CODE_BITS = 21  # every code point fits in 21 bits; hash keys are (state << 21) | code point


class CommonSubstring(NamedTuple):
    """Positions are in code points; ``length == 0`` means nothing in common."""

    a_start: int
    b_start: int
    length: int
    weight: int
    longest_a_start: int
    longest_b_start: int
    longest_length: int


@cache
def _is_letter() -> np.ndarray:
    """Per code point: a letter? ``str.isalpha`` is exactly Unicode category L* (Lu Ll Lt Lm Lo), GUR's test."""
    return np.fromiter(map(str.isalpha, map(chr, range(_N_CODEPOINTS))), dtype=bool, count=_N_CODEPOINTS)


@cache
def char_weight_table(rule: str = WEIGHTED) -> np.ndarray:
    """Weight of every code point as a read-only uint8 array indexed by code point.

    ``weighted`` (GUR's released code, scaled to integers): letters above code point 10000
    (U+2710) 10, other letters 3, anything else 1. The first group is mostly CJK ideographs,
    kana and Hangul syllables, but it also holds fullwidth Latin, Glagolitic, Yi, Latin
    Extended-D and every letter outside the BMP (Old Italic, Gothic, ...), while Hangul Jamo
    (U+1100-U+11FF) falls in the second. ``letters`` (the paper's wording): any letter 1,
    anything else (spaces, digits, punctuation) 0.
    """
    if rule not in (WEIGHTED, LETTERS):
        raise ValueError(f"unknown weight rule {rule!r}")
    letter = _is_letter()
    if rule == LETTERS:
        table = letter.astype(np.uint8)
    else:
        high = np.arange(_N_CODEPOINTS) > HIGH_LETTER_ABOVE
        table = np.where(letter, np.where(high, HIGH_LETTER_WEIGHT, LETTER_WEIGHT), OTHER_WEIGHT).astype(np.uint8)
    table.setflags(write=False)
    return table


def codepoints(text: str) -> np.ndarray:
    """The code points of ``text`` as int32 (lone surrogates pass through unchanged)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int32)


def char_weights(text: str, rule: str = WEIGHTED) -> np.ndarray:
    """Per-character weights of ``text`` under ``rule`` (int64)."""
    return char_weight_table(rule)[codepoints(text)].astype(np.int64)


DENSE_CELLS = 1 << 17  # dense transition rows are used while states * alphabet fits in this many cells


def new_workspace(max_len: int, dense_cells: int = DENSE_CELLS) -> tuple[np.ndarray, ...]:
    """Scratch arrays for automata of sentences up to ``max_len`` code points, reused across calls.

    ``dense_cells=0`` forces the hash layout (tests cover both).
    """
    n = max(int(max_len), 1)
    states = 2 * n + 2
    edges = 3 * n + 4
    slots = 1 << int(np.ceil(np.log2(2 * edges + 2)))
    return (
        np.empty(states, np.int32),  # 0 length: longest string of the state
        np.empty(states, np.int32),  # 1 link: suffix link
        np.empty(states, np.int32),  # 2 first: end position of the first occurrence in a
        np.empty(states, np.int32),  # 3 head: first outgoing edge of the state (hash layout)
        np.empty(edges, np.int32),  # 4 edge_to
        np.empty(edges, np.int32),  # 5 edge_next: next edge of the same state
        np.empty(edges, np.int32),  # 6 edge_char
        np.empty(slots, np.int64),  # 7 slot_key: (state << 21) | code point, -1 when empty
        np.empty(slots, np.int32),  # 8 slot_edge
        np.full(_N_CODEPOINTS, -1, np.int32),  # 9 loc: code point -> letter of a's alphabet, -1 at rest
        np.empty(n, np.int32),  # 10 alphabet: a's distinct code points (to reset loc)
        np.empty(max(int(dense_cells), 1), np.int32),  # 11 dense transitions, row per state
    )


def shared_workspace(max_len: int) -> tuple[np.ndarray, ...]:
    """A per-process workspace for up to ``max_len`` code points (kernels hold the GIL, so sharing is safe)."""
    return _workspace_of_size(1 << max(int(max_len) - 1, 0).bit_length())


@lru_cache(maxsize=4)
def _workspace_of_size(size: int) -> tuple[np.ndarray, ...]:
    return new_workspace(size)


@nb.njit(cache=True)
def _slot_of(key, mask):
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64(h >> np.uint64(40)) & mask


@nb.njit(cache=True)
def _find_edge(state, c, slot_key, slot_edge, mask):
    key = (np.int64(state) << _CODE_BITS) | np.int64(c)
    i = _slot_of(key, mask)
    while True:
        k = slot_key[i]
        if k == key:
            return slot_edge[i]
        if k == -1:
            return -1
        i = (i + 1) & mask


@nb.njit(cache=True)
def _add_edge(state, c, to, n_edges, ws, mask):
    head, edge_to, edge_next, edge_char, slot_key, slot_edge = ws[3], ws[4], ws[5], ws[6], ws[7], ws[8]
    key = (np.int64(state) << _CODE_BITS) | np.int64(c)
    i = _slot_of(key, mask)
    while slot_key[i] != -1:
        i = (i + 1) & mask
    slot_key[i] = key
    slot_edge[i] = n_edges
    edge_to[n_edges] = to
    edge_char[n_edges] = c
    edge_next[n_edges] = head[state]
    head[state] = n_edges
    return n_edges + 1


@nb.njit(cache=True)
def _build_hashed(a, ws):
    """Suffix automaton of ``a`` with transitions in a hash keyed by (state, code point); returns the mask."""
    length, link, first, head, edge_to, edge_next, edge_char, slot_key, slot_edge = ws[:9]
    n = a.shape[0]
    slots = 1
    while slots < 2 * (3 * n + 4) + 2:
        slots *= 2
    mask = slots - 1
    slot_key[:slots] = -1
    length[0] = 0
    link[0] = -1
    first[0] = -1
    head[0] = -1
    size = 1
    last = 0
    n_edges = 0
    for pos in range(n):
        c = a[pos]
        cur = size
        size += 1
        length[cur] = length[last] + 1
        first[cur] = pos
        head[cur] = -1
        p = last
        while p != -1 and _find_edge(p, c, slot_key, slot_edge, mask) == -1:
            n_edges = _add_edge(p, c, cur, n_edges, ws, mask)
            p = link[p]
        if p == -1:
            link[cur] = 0
        else:
            q = edge_to[_find_edge(p, c, slot_key, slot_edge, mask)]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = size
                size += 1
                length[clone] = length[p] + 1
                link[clone] = link[q]
                first[clone] = first[q]
                head[clone] = -1
                e = head[q]
                while e != -1:
                    n_edges = _add_edge(clone, edge_char[e], edge_to[e], n_edges, ws, mask)
                    e = edge_next[e]
                while p != -1:
                    e = _find_edge(p, c, slot_key, slot_edge, mask)
                    if edge_to[e] != q:
                        break
                    edge_to[e] = clone
                    p = link[p]
                link[q] = clone
                link[cur] = clone
        last = cur
    return mask


@nb.njit(cache=True)
def _build_dense(a, ws, sigma):
    """Suffix automaton of ``a`` with a dense row of ``sigma`` transitions per state (letters via ws loc)."""
    length, link, first, loc, trans = ws[0], ws[1], ws[2], ws[9], ws[11]
    trans[:sigma] = -1
    length[0] = 0
    link[0] = -1
    first[0] = -1
    size = 1
    last = 0
    for pos in range(a.shape[0]):
        x = loc[a[pos]]
        cur = size
        size += 1
        length[cur] = length[last] + 1
        first[cur] = pos
        trans[cur * sigma : (cur + 1) * sigma] = -1
        p = last
        while p != -1 and trans[p * sigma + x] == -1:
            trans[p * sigma + x] = cur
            p = link[p]
        if p == -1:
            link[cur] = 0
        else:
            q = trans[p * sigma + x]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = size
                size += 1
                length[clone] = length[p] + 1
                link[clone] = link[q]
                first[clone] = first[q]
                trans[clone * sigma : (clone + 1) * sigma] = trans[q * sigma : (q + 1) * sigma]
                while p != -1 and trans[p * sigma + x] == q:
                    trans[p * sigma + x] = clone
                    p = link[p]
                link[q] = clone
                link[cur] = clone
        last = cur


@nb.njit(cache=True)
def _match(b, pw, ws, mask, sigma, dense):
    """Run ``b`` through the automaton (matching statistics) and keep the heaviest and the longest match.

    Returns (a_start, b_start, length, weight, longest_a_start, longest_b_start, longest_length).
    """
    length, link, first, edge_to, slot_key, slot_edge, loc, trans = (
        ws[0],
        ws[1],
        ws[2],
        ws[4],
        ws[7],
        ws[8],
        ws[9],
        ws[11],
    )
    v = 0
    cur = 0
    best_w = 0
    best_len = 0
    best_a = 0
    best_b = 0
    long_len = 0
    long_a = 0
    long_b = 0
    for j in range(b.shape[0]):
        c = b[j]
        if dense:
            x = loc[c]
            if x == -1:  # not in a at all
                v = 0
                cur = 0
                continue
            t = trans[v * sigma + x]
            while t == -1 and v != 0:
                v = link[v]
                cur = length[v]
                t = trans[v * sigma + x]
        else:
            e = _find_edge(v, c, slot_key, slot_edge, mask)
            while e == -1 and v != 0:
                v = link[v]
                cur = length[v]
                e = _find_edge(v, c, slot_key, slot_edge, mask)
            t = -1 if e == -1 else edge_to[e]
        if t == -1:
            cur = 0
            continue
        v = t
        cur += 1
        w = pw[j + 1] - pw[j + 1 - cur]
        if w > best_w or (w == best_w and cur > best_len):
            best_w = w
            best_len = cur
            best_a = first[v] - cur + 1
            best_b = j - cur + 1
        if cur > long_len:
            long_len = cur
            long_a = first[v] - cur + 1
            long_b = j - cur + 1
    return best_a, best_b, best_len, best_w, long_a, long_b, long_len


@nb.njit(cache=True)
def common_substring_kernel(a, b, pw, ws):
    """Heaviest and longest common substring of code-point arrays ``a`` and ``b`` (see module doc).

    ``pw`` are prefix sums of ``b``'s weights (length len(b) + 1); ``ws`` from ``new_workspace``.
    Small alphabets get dense transition rows, large ones the hash layout.
    """
    loc, alphabet, trans = ws[9], ws[10], ws[11]
    sigma = np.int64(0)
    for c in a:
        if loc[c] == -1:
            loc[c] = sigma
            alphabet[sigma] = c
            sigma += 1
    dense = (2 * a.shape[0] + 2) * max(sigma, 1) <= trans.shape[0]
    mask = np.int64(0)
    if dense:
        _build_dense(a, ws, sigma)
    else:
        mask = _build_hashed(a, ws)
    res = _match(b, pw, ws, mask, sigma, dense)
    for t in range(sigma):
        loc[alphabet[t]] = -1
    return res


def _prefix(weights: np.ndarray) -> np.ndarray:
    out = np.zeros(weights.shape[0] + 1, np.int64)
    np.cumsum(weights, out=out[1:])
    return out


def heaviest_common_substring(a: str, b: str, rule: str = WEIGHTED) -> CommonSubstring:
    """Heaviest (and longest) common substring of two strings under ``rule``'s character weights."""
    ca, cb = codepoints(a), codepoints(b)
    pw = _prefix(char_weight_table(rule)[cb].astype(np.int64))
    return CommonSubstring(*common_substring_kernel(ca, cb, pw, shared_workspace(len(ca))))


def trim_zero_weight(text: str, start: int, length: int, rule: str = WEIGHTED) -> tuple[int, int]:
    """Drop zero-weight characters (letters rule: spaces, punctuation) from both ends of a match."""
    table = char_weight_table(rule)
    end = start + length
    while start < end and table[ord(text[start])] == 0:
        start += 1
    while end > start and table[ord(text[end - 1])] == 0:
        end -= 1
    return start, end - start
