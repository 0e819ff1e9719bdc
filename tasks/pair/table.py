"""The ``pair`` stage: sentences table in, pairs table out (GUR's LCS-filtered sentence pairs).

``pair_table`` is pure: Arrow in, Arrow plus drop counts out, deterministic for a given config
(same bytes), no I/O and no Prefect. Text crosses into the compiled kernels as flat arrays
(UTF-8 bytes decoded to code points once per table) and comes back as Arrow buffers, so per-row
Python work is limited to one hash per document.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.pair.automaton import LETTERS, char_weight_table
from tasks.pair.candidates import COUNTERS, PairConfig, SentenceArrays, doc_keys, select_pairs

PAIR_CODE_VERSION = "pair_v2"  # v2: letters above code point 10000 weigh 10, as in GUR (v1: CJK blocks only)

SENTENCE_COLUMNS = ("doc_id", "sent_id", "is_title", "text", "norm")

PAIR_SCHEMA = pa.schema(
    [
        ("pair_id", pa.string()),  # xxh64 hex of "min(norm_a, norm_b)\nmax(norm_a, norm_b)"
        ("doc_id", pa.string()),
        ("a_sent_id", pa.int32()),  # the title for title pairs, else the smaller sent_id
        ("b_sent_id", pa.int32()),
        ("a", pa.string()),  # original text
        ("b", pa.string()),
        ("kind", pa.string()),  # 'title' | 'content'
        ("lcs", pa.string()),  # heaviest common substring of the norm forms
        ("lcs_len", pa.int32()),  # code points
        ("lcs_weight", pa.int32()),  # under the rule's character weights ('none': weighted)
        ("bucket", pa.string()),  # 'short' when both texts are under short_chars characters, else 'long'
        ("rule", pa.string()),
        ("lcs_a_start", pa.int32()),  # position of lcs in norm_a (code points)
        ("lcs_b_start", pa.int32()),
        ("longest_len", pa.int32()),  # plain longest common substring length
    ]
)

_XXH_P1 = 11400714785074694791
_XXH_P2 = 14029467366897019727
_XXH_P3 = 1609587929392839161
_XXH_P4 = 9650029242287828579
_XXH_P5 = 2870177450012600261
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def pair_table(sentences: pa.Table, config: PairConfig) -> tuple[pa.Table, dict[str, int]]:
    """Mine the pairs of every document in ``sentences`` (see ``tasks.pair.candidates`` for the rules).

    Rows of one document must be contiguous (the stage's input is sorted by doc_id, sent_id);
    otherwise the table is sorted first. Returns the pairs (``PAIR_SCHEMA``, sorted by document
    order, a_sent_id, b_sent_id) and counts: ``documents``, ``sentences``, ``pairs``,
    ``title_pairs``, ``content_pairs``, ``short_pairs`` and the drop reasons of
    ``pair_candidates.COUNTERS``.
    """
    missing = [c for c in SENTENCE_COLUMNS if c not in sentences.column_names]
    if missing:
        raise ValueError(f"sentences table lacks columns {missing}")
    sentences, bounds, doc_ids = _grouped(sentences)
    arrays, data, boffs = _arrays(sentences, bounds, doc_ids)
    sel = select_pairs(arrays, config)
    counts = {"documents": len(doc_ids), "sentences": sentences.num_rows, **sel.counts}

    match = sel.match.copy()
    if config.weight_rule == LETTERS:
        _trim_zero_weight(match, sel.a_row, arrays.char_offsets, char_weight_table(LETTERS)[arrays.codes])
    doc_of = np.searchsorted(bounds, sel.a_row, side="right") - 1
    order = np.lexsort((arrays.sent_ids[sel.b_row], arrays.sent_ids[sel.a_row], doc_of))
    a_row, b_row, is_title, match = sel.a_row[order], sel.b_row[order], sel.is_title_pair[order], match[order]
    n = len(a_row)

    a_take, b_take = pa.array(a_row, pa.int64()), pa.array(b_row, pa.int64())
    text = sentences.column("text")
    a_text, b_text = text.take(a_take), text.take(b_take)
    short = pc.and_(
        pc.less(pc.utf8_length(a_text), config.short_chars), pc.less(pc.utf8_length(b_text), config.short_chars)
    )
    lcs_offs, lcs_data = _utf8_encode(arrays.codes, arrays.char_offsets[a_row] + match[:, 0], match[:, 2])
    id_offs, id_data = _pair_ids(data, boffs, a_row, b_row, _HEX)
    columns = {
        "pair_id": pa.StringArray.from_buffers(n, pa.py_buffer(id_offs), pa.py_buffer(id_data)),
        "doc_id": sentences.column("doc_id").take(a_take),
        "a_sent_id": pa.array(arrays.sent_ids[a_row], pa.int32()),
        "b_sent_id": pa.array(arrays.sent_ids[b_row], pa.int32()),
        "a": a_text,
        "b": b_text,
        "kind": pc.if_else(pa.array(is_title, pa.bool_()), "title", "content"),
        "lcs": pa.StringArray.from_buffers(n, pa.py_buffer(lcs_offs), pa.py_buffer(lcs_data)),
        "lcs_len": pa.array(match[:, 2], pa.int32()),
        "lcs_weight": pa.array(match[:, 3], pa.int32()),
        "bucket": pc.if_else(short, "short", "long"),
        "rule": pa.repeat(pa.scalar(config.rule, pa.string()), n),
        "lcs_a_start": pa.array(match[:, 0], pa.int32()),
        "lcs_b_start": pa.array(match[:, 1], pa.int32()),
        "longest_len": pa.array(match[:, 6], pa.int32()),
    }
    table = pa.Table.from_arrays([columns[f.name].cast(f.type) for f in PAIR_SCHEMA], schema=PAIR_SCHEMA)
    n_title = int(is_title.sum())
    counts.update(
        pairs=n,
        title_pairs=n_title,
        content_pairs=n - n_title,
        short_pairs=int(pc.sum(short).as_py() or 0),
    )
    return table, counts


def empty_counts() -> dict[str, int]:
    """The keys ``pair_table`` reports, all zero (for manifests of empty inputs)."""
    keys = ("documents", "sentences", *COUNTERS, "pairs", "title_pairs", "content_pairs", "short_pairs")
    return dict.fromkeys(keys, 0)


def sentence_arrays(sentences: pa.Table) -> tuple[pa.Table, SentenceArrays]:
    """The (grouped) table and its flat kernel arrays, as ``pair_table`` builds them (benchmarks, tests)."""
    sentences, bounds, doc_ids = _grouped(sentences)
    return sentences, _arrays(sentences, bounds, doc_ids)[0]


def _grouped(sentences: pa.Table) -> tuple[pa.Table, np.ndarray, list[str]]:
    """Make each document's rows contiguous; return (table, row bounds per document, doc ids)."""
    for _ in range(2):
        doc = sentences.column("doc_id").combine_chunks().cast(pa.string())
        n = len(doc)
        if n == 0:
            return sentences, np.zeros(1, np.int64), []
        change = pc.not_equal(doc[1:], doc[:-1]).to_numpy(zero_copy_only=False) if n > 1 else np.zeros(0, bool)
        starts = np.concatenate([[0], np.flatnonzero(change) + 1]).astype(np.int64)
        doc_ids = doc.take(pa.array(starts)).to_pylist()
        if len(set(doc_ids)) == len(doc_ids):
            return sentences, np.append(starts, n), doc_ids
        sentences = sentences.sort_by([("doc_id", "ascending"), ("sent_id", "ascending")])
    raise AssertionError("unreachable: sorted table is grouped")


def _arrays(
    sentences: pa.Table, bounds: np.ndarray, doc_ids: list[str]
) -> tuple[SentenceArrays, np.ndarray, np.ndarray]:
    """Flat arrays for the kernels plus the norm column's UTF-8 bytes and byte offsets."""
    norm = sentences.column("norm").combine_chunks().cast(pa.large_string()).fill_null("")
    n = len(norm)
    bufs = norm.buffers()
    boffs = np.frombuffer(bufs[1], np.int64)[norm.offset : norm.offset + n + 1] if n else np.zeros(1, np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if n and bufs[2] is not None else np.zeros(0, np.uint8)
    codes, char_offsets = _utf8_decode(data, boffs)
    arrays = SentenceArrays(
        codes=codes,
        char_offsets=char_offsets,
        doc_bounds=bounds,
        doc_keys=doc_keys(doc_ids),
        sent_ids=np.array(sentences.column("sent_id").to_numpy(), dtype=np.int32),  # writable: one kernel signature
        is_title=sentences.column("is_title").fill_null(False).to_numpy().astype(bool, copy=False),
    )
    return arrays, data, boffs


@nb.njit(cache=True)
def _utf8_decode(data, boffs):
    n = boffs.shape[0] - 1
    count = 0
    for i in range(boffs[0], boffs[n]):
        if (data[i] & 0xC0) != 0x80:
            count += 1
    codes = np.empty(count, np.int32)
    char_offsets = np.empty(n + 1, np.int64)
    k = 0
    for r in range(n):
        char_offsets[r] = k
        i = boffs[r]
        end = boffs[r + 1]
        while i < end:
            b0 = np.int64(data[i])
            if b0 < 0x80:
                c = b0
                step = 1
            elif b0 < 0xE0:
                c = b0 & 0x1F
                step = 2
            elif b0 < 0xF0:
                c = b0 & 0x0F
                step = 3
            else:
                c = b0 & 0x07
                step = 4
            for t in range(1, step):
                if i + t < end:
                    c = (c << 6) | (np.int64(data[i + t]) & 0x3F)
            codes[k] = c
            k += 1
            i += step
    char_offsets[n] = k
    return codes, char_offsets


@nb.njit(cache=True)
def _utf8_encode(codes, starts, lens):
    """UTF-8 of codes[starts[p] : starts[p] + lens[p]] for every p, as Arrow string buffers."""
    n = starts.shape[0]
    offs = np.empty(n + 1, np.int32)
    total = 0
    for p in range(n):
        offs[p] = total
        for t in range(starts[p], starts[p] + lens[p]):
            c = codes[t]
            total += 1 if c < 0x80 else (2 if c < 0x800 else (3 if c < 0x10000 else 4))
    offs[n] = total
    data = np.empty(total, np.uint8)
    k = 0
    for p in range(n):
        for t in range(starts[p], starts[p] + lens[p]):
            c = codes[t]
            if c < 0x80:
                data[k] = c
                k += 1
            elif c < 0x800:
                data[k] = 0xC0 | (c >> 6)
                data[k + 1] = 0x80 | (c & 0x3F)
                k += 2
            elif c < 0x10000:
                data[k] = 0xE0 | (c >> 12)
                data[k + 1] = 0x80 | ((c >> 6) & 0x3F)
                data[k + 2] = 0x80 | (c & 0x3F)
                k += 3
            else:
                data[k] = 0xF0 | (c >> 18)
                data[k + 1] = 0x80 | ((c >> 12) & 0x3F)
                data[k + 2] = 0x80 | ((c >> 6) & 0x3F)
                data[k + 3] = 0x80 | (c & 0x3F)
                k += 4
    return offs, data


@nb.njit(cache=True)
def _trim_zero_weight(match, a_row, char_offsets, w):
    """Drop zero-weight characters (letters rule: spaces, punctuation) from both ends of each lcs."""
    for p in range(match.shape[0]):
        base = char_offsets[a_row[p]]
        sa, sb, ln = match[p, 0], match[p, 1], match[p, 2]
        while ln > 0 and w[base + sa] == 0:
            sa += 1
            sb += 1
            ln -= 1
        while ln > 0 and w[base + sa + ln - 1] == 0:
            ln -= 1
        if ln == 0:
            sa = 0
            sb = 0
        match[p, 0], match[p, 1], match[p, 2] = sa, sb, ln


@nb.njit(cache=True)
def _rotl(x, r):
    return (x << r) | (x >> (np.uint64(64) - r))


@nb.njit(cache=True)
def _read64(buf, i):
    v = np.uint64(0)
    for t in range(8):
        v |= np.uint64(buf[i + t]) << np.uint64(8 * t)
    return v


@nb.njit(cache=True)
def _xxh_round(acc, lane):
    acc = acc + lane * np.uint64(_XXH_P2)
    return _rotl(acc, np.uint64(31)) * np.uint64(_XXH_P1)


@nb.njit(cache=True)
def xxh64(buf, n, seed):
    """XXH64 of buf[:n] (bit-identical to ``xxhash.xxh64``), for hashing inside the kernels."""
    p1, p2, p3, p4, p5 = (
        np.uint64(_XXH_P1),
        np.uint64(_XXH_P2),
        np.uint64(_XXH_P3),
        np.uint64(_XXH_P4),
        np.uint64(_XXH_P5),
    )
    i = 0
    if n >= 32:
        v1 = seed + p1 + p2
        v2 = seed + p2
        v3 = seed
        v4 = seed - p1
        while i + 32 <= n:
            v1 = _xxh_round(v1, _read64(buf, i))
            v2 = _xxh_round(v2, _read64(buf, i + 8))
            v3 = _xxh_round(v3, _read64(buf, i + 16))
            v4 = _xxh_round(v4, _read64(buf, i + 24))
            i += 32
        h = _rotl(v1, np.uint64(1)) + _rotl(v2, np.uint64(7)) + _rotl(v3, np.uint64(12)) + _rotl(v4, np.uint64(18))
        for v in (v1, v2, v3, v4):
            h = (h ^ _xxh_round(np.uint64(0), v)) * p1 + p4
    else:
        h = seed + p5
    h += np.uint64(n)
    while i + 8 <= n:
        h ^= _xxh_round(np.uint64(0), _read64(buf, i))
        h = _rotl(h, np.uint64(27)) * p1 + p4
        i += 8
    if i + 4 <= n:
        v = np.uint64(0)
        for t in range(4):
            v |= np.uint64(buf[i + t]) << np.uint64(8 * t)
        h ^= v * p1
        h = _rotl(h, np.uint64(23)) * p2 + p3
        i += 4
    while i < n:
        h ^= np.uint64(buf[i]) * p5
        h = _rotl(h, np.uint64(11)) * p1
        i += 1
    h ^= h >> np.uint64(33)
    h *= p2
    h ^= h >> np.uint64(29)
    h *= p3
    h ^= h >> np.uint64(32)
    return h


@nb.njit(cache=True)
def _pair_ids(data, boffs, a_row, b_row, hexd):
    """Hex xxh64 of the order-insensitive pair of norm forms, as Arrow string buffers (16 chars each)."""
    n = a_row.shape[0]
    longest = 0
    for r in range(boffs.shape[0] - 1):
        longest = max(longest, boffs[r + 1] - boffs[r])
    scratch = np.empty(2 * longest + 1, np.uint8)
    offs = np.empty(n + 1, np.int32)
    out = np.empty(16 * n, np.uint8)
    for p in range(n):
        x, y = a_row[p], b_row[p]
        lx, ly = boffs[x + 1] - boffs[x], boffs[y + 1] - boffs[y]
        cmp = 0
        for t in range(min(lx, ly)):
            u, v = data[boffs[x] + t], data[boffs[y] + t]
            if u != v:
                cmp = -1 if u < v else 1
                break
        if cmp == 0 and lx != ly:
            cmp = -1 if lx < ly else 1
        if cmp > 0:
            x, y = y, x
            lx, ly = ly, lx
        scratch[:lx] = data[boffs[x] : boffs[x + 1]]
        scratch[lx] = 10  # "\n": never inside a whitespace-collapsed norm
        scratch[lx + 1 : lx + 1 + ly] = data[boffs[y] : boffs[y + 1]]
        h = xxh64(scratch, lx + 1 + ly, np.uint64(0))
        offs[p] = 16 * p
        for t in range(16):
            out[16 * p + t] = hexd[np.int64((h >> np.uint64(60 - 4 * t)) & np.uint64(15))]
    offs[n] = 16 * n
    return offs, out


# The Prefect @task wrapper around pair_table goes below this line; everything above stays Prefect-free.
