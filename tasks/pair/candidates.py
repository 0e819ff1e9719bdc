"""Which sentence pairs of a document share a long enough common substring, found through an index.

Rule. Every character has a non-negative integer weight (``lcs_automaton.char_weight_table``);
a pair qualifies when its heaviest common substring weighs at least ``hi``, or at least ``lo``
when either sentence is *small* (weighted rule: the sentence weighs <= ``small_weight``; letters
rule with k by length: the sentence has fewer than ``short_chars`` characters).

Index. For a threshold ``W`` the *weighted gram* at a start position ``i`` (with weight > 0) is
the shortest substring starting at ``i`` that weighs >= ``W``. Two sentences share a weighted
gram if and only if their heaviest common substring weighs >= ``W``: a shared gram is a common
substring of weight >= W; conversely, strip zero-weight characters from the front of a common
substring ``s`` of weight >= W, and the gram at its start is the shortest prefix of ``s``
reaching W, the same string in both sentences. Grams are keyed by a rolling hash *and* their
content (colliding hashes are compared character by character), so posting lists are exact and
the candidate set equals brute force; the automaton is run only on pairs about to be kept, to
fill in the ``lcs`` columns (and re-checks the threshold, counting ``below_threshold``, which
stays 0). For two thresholds, a ``hi`` index serves every pair and a ``lo`` index adds pairs
with at least one small sentence. The letters rule uses the same grams with weights 0/1, which
is exact, unlike k-grams over the letter sequence (which would also match across spaces).

Stop-grams. A gram whose posting list is longer than ``stop_gram_limit`` is ignored (counted in
``stop_grams``): this bounds the work on huge boilerplate-heavy documents and is the one place
where the result may differ from brute force. The default (1000) can only bite in documents of
more than 1000 sentences; ``None`` turns it off (the brute-force equality tests do).

Caps (GUR's). A content sentence is used in at most ``repeat`` pairs (title pairs included), a
title in at most ``title_quota`` pairs, a document yields at most ``doc_cap_factor * n`` pairs.
Titles pick partners first, then content sentences in a seeded random order; each visited
sentence takes its qualifying partners in a seeded random order (a hash of seed, document and
the two sentence ids), skipping partners without uses left. Only the visited sentence's
partner set is built, never the list of all pairs. Rule ``none`` (the paper's GUR-LCS ablation)
pairs sentences at random under the same caps: the title takes random partners, then
``repeat`` rounds pair neighbours in a seeded shuffle of the sentences with uses left.

``select_pairs`` / ``qualifying_pairs`` are the compiled paths; the tests check them against
brute-force Python versions in ``tests/helpers/pair_reference.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numba as nb
import numpy as np
import xxhash

from tasks.pair.automaton import (
    LETTERS,
    WEIGHTED,
    char_weight_table,
    common_substring_kernel,
    shared_workspace,
)

RULES = ("weighted", "letters", "none")

# Drop reasons and work counts. "At a turn" counts are taken when a sentence (or title) picks
# partners, so a pair passed over at both sentences' turns counts twice.
COUNTERS = (
    "candidates_checked",  # pairs run through the automaton (one per kept pair, plus failures)
    "below_threshold",  # checked pairs under the threshold: 0 unless the index were wrong (a guard)
    "repeat_cap",  # qualifying partners passed over at a turn because they had used up their pairs
    "doc_cap",  # documents that hit doc_cap_factor * n pairs with sentences still wanting partners
    "stop_grams",  # grams ignored because more than stop_gram_limit sentences share them
    "identical",  # qualifying partners passed over at a turn because their norm equals the sentence's
    "docs_without_pairs",
)
_CHECKED, _BELOW, _REPEAT, _DOCCAP, _STOP, _IDENT, _EMPTY = range(len(COUNTERS))

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_PAIR_SALT = 0x5851F42D4C957F2D
_HASH_BASE = 0x100000001B3


@dataclass(frozen=True)
class PairConfig:
    """How pairs are chosen. Defaults are GUR's code with integer weights (see module doc)."""

    rule: str = field(
        default="weighted",
        metadata={"help": "LCS rule: weighted (GUR code), letters (paper), none (GUR-LCS ablation)", "choices": RULES},
    )
    min_weight: int = 30  # weighted rule: heaviest common substring >= this ...
    min_weight_small: int = 20  # ... or >= this when either sentence is small
    small_weight: int = 150  # weighted rule: a sentence weighing <= this is small
    letters_k: int = 3  # letters rule: common letters >= k ...
    letters_k_short: int = 2  # ... or >= this when either sentence is shorter than short_chars
    letters_k_by_length: bool = True  # off: letters_k for every pair
    short_chars: int = 64  # k-by-length boundary (norm chars); also the 'short' bucket boundary (text chars)
    repeat: int = field(
        default=2,
        metadata={"help": "most pairs a content sentence takes part in, title pairs included (GUR's cap)"},
    )
    title_quota: int = 3  # pairs per title sentence
    doc_cap_factor: int = 2  # pairs per document <= factor * sentences in the document
    seed: int = field(default=0, metadata={"help": "seed of partner choice and shuffle"})
    stop_gram_limit: int | None = 1000  # ignore grams shared by more sentences of a document; None: exact
    holdout_percent: int = 0  # skip documents of the evaluation hold-out (tasks/evaluate/data.is_held_out)

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {self.rule!r}")
        hi, lo = self.thresholds()
        if not 1 <= lo <= hi:
            raise ValueError(f"thresholds must satisfy 1 <= small-sentence threshold <= threshold, got {lo}, {hi}")
        for name in ("repeat", "title_quota", "doc_cap_factor", "short_chars"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if not 0 <= self.holdout_percent <= 100:
            raise ValueError(f"holdout_percent must be in 0..100, got {self.holdout_percent}")
        if self.stop_gram_limit is not None and self.stop_gram_limit < 1:
            raise ValueError("stop_gram_limit must be >= 1 or None")

    @property
    def weight_rule(self) -> str:
        """Character weights for matching and for the ``lcs`` columns (``none`` reports weighted)."""
        return LETTERS if self.rule == "letters" else WEIGHTED

    def thresholds(self) -> tuple[int, int]:
        """(threshold, threshold when either sentence is small)."""
        if self.rule == "letters":
            return self.letters_k, (self.letters_k_short if self.letters_k_by_length else self.letters_k)
        return self.min_weight, self.min_weight_small

    def is_small(self, total_weight: np.ndarray, n_chars: np.ndarray) -> np.ndarray:
        """Which sentences get the lower threshold."""
        if self.rule == "letters":
            if not self.letters_k_by_length:
                return np.zeros(len(n_chars), dtype=bool)
            return np.asarray(n_chars) < self.short_chars
        return np.asarray(total_weight) <= self.small_weight


@dataclass(frozen=True)
class SentenceArrays:
    """A sentences table as flat arrays: the narrow boundary of the compiled kernels.

    Rows are grouped by document (``doc_bounds`` are row offsets); ``char_offsets`` index
    ``codes`` (code points of the normalized text) per row.
    """

    codes: np.ndarray  # int32, all norm texts concatenated
    char_offsets: np.ndarray  # int64, rows + 1
    doc_bounds: np.ndarray  # int64, documents + 1
    doc_keys: np.ndarray  # uint64 per document: xxh64 of the doc_id
    sent_ids: np.ndarray  # int32 per row
    is_title: np.ndarray  # bool per row

    @classmethod
    def from_documents(cls, docs: Sequence[tuple[str, Sequence[tuple[int, bool, str]]]]) -> SentenceArrays:
        """Build from ``[(doc_id, [(sent_id, is_title, norm), ...]), ...]`` (tests, benchmarks)."""
        norms = [s[2] for _, sents in docs for s in sents]
        lens = np.array([len(t) for t in norms], dtype=np.int64)
        offsets = np.zeros(len(norms) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        joined = "".join(norms)
        codes = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int32)
        bounds = np.zeros(len(docs) + 1, np.int64)
        np.cumsum([len(sents) for _, sents in docs], out=bounds[1:])
        return cls(
            codes=codes,
            char_offsets=offsets,
            doc_bounds=bounds,
            doc_keys=doc_keys([d for d, _ in docs]),
            sent_ids=np.array([s[0] for _, sents in docs for s in sents], dtype=np.int32),
            is_title=np.array([s[1] for _, sents in docs for s in sents], dtype=bool),
        )

    @property
    def max_len(self) -> int:
        return int(np.diff(self.char_offsets).max(initial=0))


def doc_keys(doc_ids: Sequence[str]) -> np.ndarray:
    """Per-document seed material: the same document gets the same random choices in any table."""
    return np.array([xxhash.xxh64_intdigest(d.encode("utf-8")) for d in doc_ids], dtype=np.uint64)


@dataclass(frozen=True)
class Selection:
    """Chosen pairs as row indices into the sentences table plus their common substrings.

    ``a_row`` is the title for title pairs, else the row with the smaller ``sent_id``; the
    substring fields follow ``CommonSubstring`` (positions in code points of the norm texts).
    """

    a_row: np.ndarray
    b_row: np.ndarray
    is_title_pair: np.ndarray
    match: np.ndarray  # int64 (pairs, 7): a_start, b_start, length, weight, longest a_start, b_start, length
    counts: dict[str, int]

    def rows(self) -> list[tuple[int, ...]]:
        """Comparable plain tuples, in output order."""
        return [
            (int(a), int(b), bool(t), *map(int, m))
            for a, b, t, m in zip(self.a_row, self.b_row, self.is_title_pair, self.match, strict=True)
        ]


def _weights_and_prefix(arrays: SentenceArrays, config: PairConfig) -> tuple[np.ndarray, np.ndarray]:
    w = char_weight_table(config.weight_rule)[arrays.codes]
    pw = np.zeros(len(w) + 1, np.int64)
    np.cumsum(w, out=pw[1:])
    return w, pw


def _small_flags(arrays: SentenceArrays, pw: np.ndarray, config: PairConfig) -> np.ndarray:
    off = arrays.char_offsets
    return config.is_small(pw[off[1:]] - pw[off[:-1]], np.diff(off))


def _hash_powers(n: int, base: int) -> np.ndarray:
    """base**i mod 2**64 for i <= n (at least 2 entries: the kernels read the base from [1])."""
    out = np.empty(max(n, 1) + 1, np.uint64)
    x = 1
    for i in range(len(out)):
        out[i] = x
        x = (x * base) & _M64
    return out


def _kernel_args(arrays: SentenceArrays, config: PairConfig, hash_base: int = _HASH_BASE) -> tuple:
    """Positional arguments shared by the kernels; tests pass a weak ``hash_base`` to force gram collisions."""
    w, pw = _weights_and_prefix(arrays, config)
    small = _small_flags(arrays, pw, config)
    hi, lo = config.thresholds()
    return (
        arrays.codes,
        w,
        pw,
        arrays.char_offsets,
        arrays.doc_bounds,
        arrays.is_title,
        arrays.sent_ids,
        arrays.doc_keys,
        small,
        hi,
        lo,
        config.stop_gram_limit or 0,
        _hash_powers(arrays.max_len + 1, hash_base),
    )


def select_pairs(arrays: SentenceArrays, config: PairConfig) -> Selection:
    """Pick the pairs of every document (index, caps, automaton) in one compiled pass."""
    args = _kernel_args(arrays, config)
    a, b, t, m, counts = _select_table(
        *args,
        config.rule == "none",
        config.repeat,
        config.title_quota,
        config.doc_cap_factor,
        np.uint64(config.seed & _M64),
        shared_workspace(arrays.max_len),
    )
    return Selection(a, b, t, m, dict(zip(COUNTERS, map(int, counts), strict=True)))


def qualifying_pairs(arrays: SentenceArrays, config: PairConfig) -> tuple[np.ndarray, int]:
    """Every qualifying pair of every document (no caps) as sorted row pairs (i < j), and the stop-gram count.

    Title-title pairs are excluded, as in the stage. For tests and benchmarks; the stage never
    builds this list.
    """
    if config.rule == "none":
        raise ValueError("rule 'none' has no qualifying set")
    pairs, n_stop = _qualifying_table(*_kernel_args(arrays, config))
    n = np.int64(len(arrays.sent_ids))
    keys = np.unique(pairs[:, 0] * n + pairs[:, 1])
    return np.stack([keys // max(n, 1), keys % max(n, 1)], axis=1), int(n_stop)


@nb.njit(cache=True)
def _mix(x):
    """splitmix64 finaliser."""
    z = x + np.uint64(_GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True)
def _u32(x):
    return np.uint64(np.int64(x) & 0xFFFFFFFF)


@nb.njit(cache=True)
def _doc_base(seed, key):
    return _mix(key ^ _mix(seed))


@nb.njit(cache=True)
def _prio_sent(base, sid):
    return _mix(base + _u32(sid))


@nb.njit(cache=True)
def _pair_base(base):
    return _mix(base ^ np.uint64(_PAIR_SALT))


@nb.njit(cache=True)
def _prio_pair(pair_base, sx, sy):
    if sx > sy:
        sx, sy = sy, sx
    return _mix(pair_base + ((_u32(sx) << np.uint64(32)) | _u32(sy)))


@nb.njit(cache=True)
def _prio_round(base, r, sid):
    return _mix(_mix(base ^ (np.uint64(r + 1) * np.uint64(_GOLDEN))) + _u32(sid))


@nb.njit(cache=True)
def _build_index(codes, w, off, r0, n, W, hpow, limit, small, hi):
    """Posting lists of the weighted grams (threshold ``W``) of rows r0 .. r0+n-1.

    Returns (post_ptr, post_sid, sent_lo, sent_hi, sent_grp, n_small, n_stop): group g's
    sentences (local ids) are post_sid[post_ptr[g]:post_ptr[g+1]], sentence s's groups are
    sent_grp[sent_lo[s]:sent_hi[s]]. For W < hi (the index for the small-sentence threshold,
    whose pairs always involve a small sentence) only grams of small sentences
    open groups, other sentences join existing groups only, and each posting list holds its
    ``n_small[g]`` small sentences first.

    One function of ~100 lines on purpose: a numba hot loop whose passes (hash each gram into the
    open-addressing table of groups, count the postings, prefix-sum, fill the posting lists) share a
    dozen working arrays; jitted helpers would take most of them as arguments and hide no detail.
    """
    small_side = W < hi
    total = off[r0 + n] - off[r0]
    slots = 1
    while slots < 2 * total + 2:
        slots *= 2
    mask = slots - 1
    slot_grp = np.full(slots, -1, np.int32)
    slot_hash = np.empty(slots, np.uint64)
    g_start = np.empty(total, np.int64)
    g_len = np.empty(total, np.int32)
    g_last = np.empty(total, np.int32)
    g_cnt = np.zeros(total, np.int32)
    g_small = np.zeros(total, np.int32)
    pg = np.empty(total, np.int32)
    ps = np.empty(total, np.int32)
    sent_lo = np.zeros(n, np.int64)
    sent_hi = np.zeros(n, np.int64)
    maxlen = 0
    for s in range(n):
        maxlen = max(maxlen, off[r0 + s + 1] - off[r0 + s])
    H = np.empty(maxlen + 1, np.uint64)
    base = hpow[1]
    ng = 0
    npost = 0
    for phase in range(2 if small_side else 1):
        for s in range(n):
            if small_side and small[s] != (phase == 0):
                continue
            opens = phase == 0
            sent_lo[s] = npost
            a = off[r0 + s]
            b = off[r0 + s + 1]
            H[0] = np.uint64(0)
            for t in range(b - a):
                H[t + 1] = H[t] * base + np.uint64(codes[a + t] + 1)
            e = a
            acc = 0
            for i in range(a, b):
                while e < b and acc < W:
                    acc += w[e]
                    e += 1
                if acc < W:
                    break
                if w[i] > 0:
                    glen = e - i
                    h = _mix((H[e - a] - H[i - a] * hpow[glen]) ^ np.uint64(glen))
                    k = np.int64(h >> np.uint64(32)) & mask
                    g = -1
                    while True:
                        cand = slot_grp[k]
                        if cand == -1:
                            break
                        if slot_hash[k] == h and g_len[cand] == glen:
                            st = g_start[cand]
                            same = True
                            for t in range(glen):
                                if codes[st + t] != codes[i + t]:
                                    same = False
                                    break
                            if same:
                                g = cand
                                break
                        k = (k + 1) & mask
                    if g == -1 and opens:
                        g = ng
                        ng += 1
                        slot_grp[k] = g
                        slot_hash[k] = h
                        g_start[g] = i
                        g_len[g] = glen
                        g_last[g] = -1
                    if g != -1 and g_last[g] != s:
                        g_last[g] = s
                        g_cnt[g] += 1
                        if small[s]:
                            g_small[g] += 1
                        pg[npost] = g
                        ps[npost] = s
                        npost += 1
                acc -= w[i]
            sent_hi[s] = npost
    post_ptr = np.zeros(ng + 1, np.int64)
    n_stop = 0
    for g in range(ng):
        post_ptr[g + 1] = post_ptr[g] + g_cnt[g]
        if limit > 0 and g_cnt[g] > limit:
            n_stop += 1
    fill = post_ptr[:-1].copy()
    post_sid = np.empty(npost, np.int32)
    for p in range(npost):
        g = pg[p]
        post_sid[fill[g]] = ps[p]
        fill[g] += 1
    return post_ptr, post_sid, sent_lo, sent_hi, pg[:npost], g_small[:ng], n_stop


@nb.njit(cache=True)
def _collect_from(idx, i, only_small, is_title, limit, mark, stamp, out, k):
    post_ptr, post_sid, sent_lo, sent_hi, sent_grp, n_small, _ = idx
    for p in range(sent_lo[i], sent_hi[i]):
        g = sent_grp[p]
        first, last = post_ptr[g], post_ptr[g + 1]
        if limit > 0 and last - first > limit:
            continue
        if only_small:
            last = first + n_small[g]
        for q in range(first, last):
            j = post_sid[q]
            if mark[j] != stamp:
                mark[j] = stamp
                if not is_title[j]:
                    out[k] = j
                    k += 1
    return k


@nb.njit(cache=True)
def _collect(i, idx_hi, idx_lo, use_lo, small, is_title, limit, mark, stamp, out):
    """Qualifying content partners of local sentence i not yet stamped (the caller stamps i and exclusions)."""
    k = _collect_from(idx_hi, i, False, is_title, limit, mark, stamp, out, 0)
    if use_lo:
        k = _collect_from(idx_lo, i, not small[i], is_title, limit, mark, stamp, out, k)
    return k


@nb.njit(cache=True)
def _same_text(codes, off, x, y):
    """Rows x and y have the same norm text."""
    lx = off[x + 1] - off[x]
    if lx != off[y + 1] - off[y]:
        return False
    ax, ay = off[x], off[y]
    for t in range(lx):
        if codes[ax + t] != codes[ay + t]:
            return False
    return True


@nb.njit(cache=True)
def _match(codes, pw, off, x, y, ws):
    """Common substring with the automaton of row x, queried with row y."""
    return common_substring_kernel(
        codes[off[x] : off[x + 1]], codes[off[y] : off[y + 1]], pw[off[y] : off[y + 1] + 1], ws
    )


@nb.njit(cache=True)
def _doc_indexes(codes, w, off, d0, n, small, hi, lo, limit, hpow):
    """The document's ``hi`` index and, when it has a small sentence and lo < hi, its ``lo`` index."""
    small_l = small[d0 : d0 + n]
    idx_hi = _build_index(codes, w, off, d0, n, hi, hpow, limit, small_l, hi)
    use_lo = False
    if lo < hi:
        for s in range(n):
            if small_l[s]:
                use_lo = True
                break
    if use_lo:
        idx_lo = _build_index(codes, w, off, d0, n, lo, hpow, limit, small_l, hi)
    else:
        idx_lo = idx_hi
    return idx_hi, idx_lo, use_lo


@nb.njit(cache=True)
def _qualifying_table(codes, w, pw, off, bounds, is_title, sids, keys, small, hi, lo, limit, hpow):
    """Every qualifying (row, row) pair, each looked up from one side only.

    The ``hi`` index is read from a pair's earlier sentence (its posting lists ascend, so only
    their tails past ``i`` are read), the ``lo`` index from a pair's small sentence (from the
    earlier one when both are small). A pair of an earlier non-small and a later small sentence
    can come out of both; the caller drops the duplicates.
    """
    cap = 1024
    out = np.empty((cap, 2), np.int64)
    k_out = 0
    n_stop = 0
    for d in range(bounds.shape[0] - 1):
        d0 = bounds[d]
        n = bounds[d + 1] - d0
        if n < 2:
            continue
        idx_hi, idx_lo, use_lo = _doc_indexes(codes, w, off, d0, n, small, hi, lo, limit, hpow)
        n_stop += idx_hi[6] + (idx_lo[6] if use_lo else 0)
        small_l = small[d0 : d0 + n]
        title_l = is_title[d0 : d0 + n]
        mark = np.full(n, -1, np.int64)
        buf = np.empty(n, np.int64)
        for i in range(n):
            mark[i] = i
            k = 0
            post_ptr, post_sid, sent_lo, sent_hi, sent_grp, _, _ = idx_hi
            for p in range(sent_lo[i], sent_hi[i]):
                g = sent_grp[p]
                first, q = post_ptr[g], post_ptr[g + 1] - 1
                if limit > 0 and q + 1 - first > limit:
                    continue
                while q >= first and post_sid[q] > i:
                    j = post_sid[q]
                    q -= 1
                    if mark[j] != i:
                        mark[j] = i
                        if not (title_l[i] and title_l[j]):
                            buf[k] = j
                            k += 1
            if use_lo and small_l[i]:
                post_ptr, post_sid, sent_lo, sent_hi, sent_grp, _, _ = idx_lo
                for p in range(sent_lo[i], sent_hi[i]):
                    g = sent_grp[p]
                    if limit > 0 and post_ptr[g + 1] - post_ptr[g] > limit:
                        continue
                    for q in range(post_ptr[g], post_ptr[g + 1]):
                        j = post_sid[q]
                        if mark[j] == i or (small_l[j] and j < i):
                            continue
                        mark[j] = i
                        if not (title_l[i] and title_l[j]):
                            buf[k] = j
                            k += 1
            if k_out + k > cap:
                while k_out + k > cap:
                    cap *= 2
                bigger = np.empty((cap, 2), np.int64)
                bigger[:k_out] = out[:k_out]
                out = bigger
            for t in range(k):
                j = buf[t]
                out[k_out, 0] = d0 + min(i, j)
                out[k_out, 1] = d0 + max(i, j)
                k_out += 1
    return out[:k_out], n_stop


@nb.njit(cache=True)
def _usable(codes, off, d0, i, buf, k, uses, prio, pair_base, sids, counts):
    """Drop partners of i that are identical to it or used up (counted); key the rest by pair priority."""
    kk = 0
    for q in range(k):
        j = buf[q]
        if _same_text(codes, off, d0 + i, d0 + j):
            counts[_IDENT] += 1
        elif uses[j] == 0:
            counts[_REPEAT] += 1
        else:
            buf[kk] = j
            prio[kk] = _prio_pair(pair_base, sids[d0 + i], sids[d0 + j])
            kk += 1
    return kk


@nb.njit(cache=True)
def _pop_min(buf, prio, k):
    """Remove and return the partner with the smallest (pair priority, local id) from buf[:k]."""
    best = 0
    for t in range(1, k):
        if prio[t] < prio[best] or (prio[t] == prio[best] and buf[t] < buf[best]):
            best = t
    j = buf[best]
    buf[best] = buf[k - 1]
    prio[best] = prio[k - 1]
    return j


@nb.njit(cache=True)
def _select_table(
    codes, w, pw, off, bounds, is_title, sids, keys, small, hi, lo, limit, hpow,
    rule_none, repeat, title_quota, cap_factor, seed, ws,
):  # fmt: skip
    """Pairs of every document: titles pick first, then content sentences (see the module doc)."""
    n_rows = is_title.shape[0]
    out_cap = cap_factor * n_rows + 1
    out = (
        np.empty(out_cap, np.int64),  # a row
        np.empty(out_cap, np.int64),  # b row
        np.zeros(out_cap, np.bool_),  # title pair
        np.empty((out_cap, 7), np.int64),  # common substring
        np.zeros(len(COUNTERS), np.int64),
    )
    counts = out[4]
    text = (codes, pw, off, sids, ws)
    k_out = np.int64(0)
    max_deg = max(repeat, title_quota, 1)
    for d in range(bounds.shape[0] - 1):
        d0 = bounds[d]
        n = bounds[d + 1] - d0
        base = _doc_base(seed, keys[d])
        uses = np.empty(n, np.int64)
        for s in range(n):
            uses[s] = 0 if is_title[d0 + s] else repeat
        state = (
            uses,
            np.empty((n, max_deg), np.int64),  # adj: partners so far
            np.zeros(n, np.int64),  # adj_n
            np.full(n, -1, np.int64),  # mark: stamp of the last turn that saw the sentence
            np.empty(n, np.int64),  # buf: partners of the current turn
            np.empty(n, np.uint64),  # prio: their pair priorities
        )
        indexed = 0 if rule_none else n  # rule none needs no index
        idx_hi, idx_lo, use_lo = _doc_indexes(codes, w, off, d0, indexed, small, hi, lo, limit, hpow)
        counts[_STOP] += idx_hi[6] + (idx_lo[6] if use_lo else 0)
        doc = (d0, n, is_title[d0 : d0 + n], small[d0 : d0 + n], base, _pair_base(base), cap_factor * n, k_out)
        index = (idx_hi, idx_lo, use_lo, hi, lo, limit, rule_none)
        k_doc, capped, stamp = _title_turns(text, doc, index, state, out, k_out, title_quota)
        if not capped:
            if rule_none:
                k_doc, capped = _random_rounds(text, doc, state, out, k_doc, repeat)
            else:
                k_doc, capped = _lcs_turns(text, doc, index, state, out, k_doc, stamp)
        counts[_DOCCAP] += capped
        counts[_EMPTY] += k_doc == k_out
        k_out = k_doc
    return out[0][:k_out], out[1][:k_out], out[2][:k_out], out[3][:k_out], counts


@nb.njit(cache=True)
def _partners(i, doc, index, state, stamp, text, counts):
    """Usable partners of local sentence i at its turn, in buf[:k] with their priorities (rule none: all)."""
    d0, n, title_l, small_l, _, pair_base, _, _ = doc
    idx_hi, idx_lo, use_lo, _, _, limit, rule_none = index
    uses, adj, adj_n, mark, buf, prio = state
    codes, _, off, sids, _ = text
    if rule_none:
        k = 0
        for j in range(n):
            if not title_l[j]:
                buf[k] = j
                k += 1
    else:
        mark[i] = stamp
        for q in range(adj_n[i]):
            mark[adj[i, q]] = stamp
        k = _collect(i, idx_hi, idx_lo, use_lo, small_l, title_l, limit, mark, stamp, buf)
    return _usable(codes, off, d0, i, buf, k, uses, prio, pair_base, sids, counts)


@nb.njit(cache=True)
def _title_turns(text, doc, index, state, out, k_out, title_quota):
    """Each title takes up to ``title_quota`` partners; returns (pairs so far, capped, last stamp)."""
    codes, pw, off, _, ws = text
    d0, n, title_l, small_l, _, _, cap, k_first = doc
    _, _, use_lo, hi, lo, _, rule_none = index
    uses, _, _, _, buf, prio = state
    out_a, out_b, out_t, out_m, counts = out
    k_doc = k_out
    stamp = np.int64(0)
    for t in range(n):
        if not title_l[t]:
            continue
        stamp += 1
        k = _partners(t, doc, index, state, stamp, text, counts)
        taken = 0
        while taken < title_quota and k > 0:
            if k_doc - k_first >= cap:
                return k_doc, True, stamp
            j = _pop_min(buf, prio, k)
            k -= 1
            res = _match(codes, pw, off, d0 + t, d0 + j, ws)
            counts[_CHECKED] += 1
            if not rule_none and res[3] < (lo if (use_lo and (small_l[t] or small_l[j])) else hi):
                counts[_BELOW] += 1
                continue
            out_a[k_doc] = d0 + t
            out_b[k_doc] = d0 + j
            out_t[k_doc] = True
            for f in range(7):
                out_m[k_doc, f] = res[f]
            k_doc += 1
            taken += 1
            uses[j] -= 1
    return k_doc, False, stamp


@nb.njit(cache=True)
def _content_order(base, r, sids, d0, title_l, uses):
    """Content sentences in seeded random order: round ``r`` of rule none (those with uses left), or -1 for turns."""
    n = title_l.shape[0]
    members = np.empty(n, np.int64)
    order_keys = np.empty(n, np.uint64)
    m = 0
    for s in range(n):
        if title_l[s] or (r >= 0 and uses[s] == 0):
            continue
        members[m] = s
        order_keys[m] = _prio_round(base, r, sids[d0 + s]) if r >= 0 else _prio_sent(base, sids[d0 + s])
        m += 1
    return members[:m][np.argsort(order_keys[:m], kind="mergesort")]


@nb.njit(cache=True)
def _lcs_turns(text, doc, index, state, out, k_doc, stamp):
    """Content sentences in turn take their best-priority qualifying partners; returns (pairs, capped)."""
    d0, _, title_l, small_l, base, _, cap, k_first = doc
    _, _, use_lo, hi, lo, _, _ = index
    uses, _, _, _, buf, prio = state
    counts = out[4]
    for i in _content_order(base, np.int64(-1), text[3], d0, title_l, uses):
        if uses[i] == 0:
            continue
        if k_doc - k_first >= cap:
            return k_doc, True
        stamp += 1
        k = _partners(i, doc, index, state, stamp, text, counts)
        while uses[i] > 0 and k > 0:
            if k_doc - k_first >= cap:
                return k_doc, True
            j = _pop_min(buf, prio, k)
            k -= 1
            k_doc = _emit_content(
                text, d0, i, j, state, out, k_doc, lo if use_lo and (small_l[i] or small_l[j]) else hi
            )
    return k_doc, False


@nb.njit(cache=True)
def _random_rounds(text, doc, state, out, k_doc, repeat):
    """Rule none: each round pairs neighbours in a seeded shuffle of the sentences with uses left."""
    codes, _, off, _, _ = text
    d0, _, title_l, _, base, _, cap, k_first = doc
    uses, adj, adj_n, _, _, _ = state
    counts = out[4]
    for r in range(repeat):
        order = _content_order(base, np.int64(r), text[3], d0, title_l, uses)
        for p in range(0, order.shape[0] - 1, 2):
            x, y = order[p], order[p + 1]
            if k_doc - k_first >= cap:
                return k_doc, True
            if _same_text(codes, off, d0 + x, d0 + y):
                counts[_IDENT] += 1
                continue
            seen = False
            for q in range(adj_n[x]):
                seen = seen or adj[x, q] == y
            if not seen:
                k_doc = _emit_content(text, d0, x, y, state, out, k_doc, np.int64(0))
    return k_doc, False


@nb.njit(cache=True)
def _emit_content(text, d0, x, y, state, out, k_doc, thr):
    """Check content pair (x, y) and record it with a = the smaller sent_id (then row); returns the new count."""
    codes, pw, off, sids, ws = text
    uses, adj, adj_n, _, _, _ = state
    out_a, out_b, _, out_m, counts = out
    ax, by = d0 + x, d0 + y
    if sids[by] < sids[ax] or (sids[by] == sids[ax] and by < ax):
        ax, by = by, ax
    res = _match(codes, pw, off, ax, by, ws)
    counts[_CHECKED] += 1
    if res[3] < thr:
        counts[_BELOW] += 1
        return k_doc
    out_a[k_doc] = ax
    out_b[k_doc] = by
    for f in range(7):
        out_m[k_doc, f] = res[f]
    uses[x] -= 1
    uses[y] -= 1
    adj[x, adj_n[x]] = y
    adj_n[x] += 1
    adj[y, adj_n[y]] = x
    adj_n[y] += 1
    return k_doc + 1
