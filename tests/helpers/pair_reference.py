"""Brute-force references for the pair stage: the oracles its compiled paths are tested against.

- ``common_substring_reference``: the O(len(a) * len(b)) dynamic programme for the heaviest and
  longest common substring (``tasks/pair/automaton.py``'s suffix automaton);
- ``reference_qualifying``: every qualifying pair of every document, each pair checked with the
  DP (``tasks/pair/candidates.qualifying_pairs``'s gram index);
- ``reference_select``: GUR's caps and seeded partner order written plainly over brute-force
  partner sets (``tasks/pair/candidates.select_pairs``), with plain-Python copies of the seeded
  priority hashes.

Test-only: the product never calls any of this, so it lives under ``tests/``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tasks.pair.automaton import WEIGHTED, CommonSubstring, char_weight_table
from tasks.pair.candidates import _GOLDEN, _M64, _PAIR_SALT, COUNTERS, PairConfig, Selection, SentenceArrays


def common_substring_reference(a: str, b: str, rule: str = WEIGHTED) -> CommonSubstring:
    """O(len(a) * len(b)) dynamic programme with the same result and tie-breaking as the automaton."""
    table = char_weight_table(rule)
    pw = [0]
    for ch in b:
        pw.append(pw[-1] + int(table[ord(ch)]))
    best = (0, 0, 0, 0)  # weight, length, a_start, b_start
    longest = (0, 0, 0)  # length, a_start, b_start
    prev = [0] * (len(a) + 1)
    for j, cb in enumerate(b):
        cur = [0] * (len(a) + 1)
        ms, a_end = 0, -1
        for i, ca in enumerate(a):
            if ca == cb:
                cur[i + 1] = prev[i] + 1
                if cur[i + 1] > ms:
                    ms, a_end = cur[i + 1], i
        prev = cur
        if ms == 0:
            continue
        w = pw[j + 1] - pw[j + 1 - ms]
        if w > best[0] or (w == best[0] and ms > best[1]):
            best = (w, ms, a_end - ms + 1, j - ms + 1)
        if ms > longest[0]:
            longest = (ms, a_end - ms + 1, j - ms + 1)
    w, n, sa, sb = best
    return CommonSubstring(sa, sb, n, w, longest[1], longest[2], longest[0])


def _mix_py(x: int) -> int:
    """splitmix64 finaliser: ``pair_candidates._mix`` on Python ints; the ``*_py`` helpers below mirror its callers."""
    z = (x + _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _doc_base_py(seed: int, key: int) -> int:
    return _mix_py(key ^ _mix_py(seed & _M64))


def _prio_sent_py(base: int, sid: int) -> int:
    return _mix_py((base + (sid & 0xFFFFFFFF)) & _M64)


def _prio_pair_py(base: int, sx: int, sy: int) -> int:
    sx, sy = min(sx, sy), max(sx, sy)
    return _mix_py((_mix_py(base ^ _PAIR_SALT) + (((sx & 0xFFFFFFFF) << 32) | (sy & 0xFFFFFFFF))) & _M64)


def _prio_round_py(base: int, r: int, sid: int) -> int:
    return _mix_py((_mix_py(base ^ (((r + 1) * _GOLDEN) & _M64)) + (sid & 0xFFFFFFFF)) & _M64)


def _reference_setup(norms: Sequence[str], arrays: SentenceArrays, config: PairConfig):
    table = char_weight_table(config.weight_rule)
    weights = np.array([sum(int(table[ord(c)]) for c in t) for t in norms], dtype=np.int64)
    small = config.is_small(weights, np.array([len(t) for t in norms], dtype=np.int64))
    hi, lo = config.thresholds()

    def qualifies(x: int, y: int) -> tuple[bool, tuple[int, ...]]:
        m = common_substring_reference(norms[x], norms[y], config.weight_rule)
        thr = lo if (small[x] or small[y]) else hi
        return m.weight >= thr, tuple(m)

    return qualifies


def reference_qualifying(norms: Sequence[str], arrays: SentenceArrays, config: PairConfig) -> np.ndarray:
    """Brute force: every pair of every document checked with the O(nm) DP."""
    qualifies = _reference_setup(norms, arrays, config)
    out = []
    for d in range(len(arrays.doc_bounds) - 1):
        d0, d1 = int(arrays.doc_bounds[d]), int(arrays.doc_bounds[d + 1])
        for x in range(d0, d1):
            for y in range(x + 1, d1):
                if arrays.is_title[x] and arrays.is_title[y]:
                    continue
                if qualifies(x, y)[0]:
                    out.append((x, y))
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def reference_select(norms: Sequence[str], arrays: SentenceArrays, config: PairConfig) -> Selection:
    """The selection of ``select_pairs`` written plainly over brute-force partner sets (no stop-grams)."""
    qualifies = _reference_setup(norms, arrays, config)
    none = config.rule == "none"
    counts = dict.fromkeys(COUNTERS, 0)
    rows: list[tuple] = []
    sids = [int(s) for s in arrays.sent_ids]

    def match(x: int, y: int) -> tuple[bool, tuple[int, ...]]:
        counts["candidates_checked"] += 1
        if none:
            return True, tuple(common_substring_reference(norms[x], norms[y], config.weight_rule))
        ok, m = qualifies(x, y)
        return ok, m

    def run_doc(d0: int, d1: int, base: int) -> None:
        n = d1 - d0
        titles = [r for r in range(d0, d1) if arrays.is_title[r]]
        content = [r for r in range(d0, d1) if not arrays.is_title[r]]
        uses = {r: config.repeat for r in content}
        adj: dict[int, set[int]] = {r: set() for r in content}
        cap = config.doc_cap_factor * n
        n_doc = 0
        capped = False

        def usable(x: int, partners: list[int]) -> list[int]:
            keep = []
            for y in partners:
                if norms[x] == norms[y]:
                    counts["identical"] += 1
                elif uses[y] == 0:
                    counts["repeat_cap"] += 1
                else:
                    keep.append(y)
            return sorted(keep, key=lambda y, x=x: (_prio_pair_py(base, sids[x], sids[y]), y))

        for t in titles:
            if capped:
                break
            partners = content if none else [y for y in content if qualifies(t, y)[0]]
            taken = 0
            for y in usable(t, partners):
                if taken >= config.title_quota:
                    break
                if n_doc >= cap:
                    capped = True
                    break
                ok, m = match(t, y)
                if not ok:
                    continue
                rows.append((t, y, True, *m))
                n_doc += 1
                taken += 1
                uses[y] -= 1

        def emit(x: int, y: int) -> None:
            nonlocal n_doc
            a, b = (x, y) if (sids[x], x) < (sids[y], y) else (y, x)
            ok, m = match(a, b)
            if not ok:
                return
            rows.append((a, b, False, *m))
            n_doc += 1
            uses[x] -= 1
            uses[y] -= 1
            adj[x].add(y)
            adj[y].add(x)

        if none:
            for r in range(config.repeat):
                if capped:
                    break
                order = sorted(
                    (x for x in content if uses[x] > 0), key=lambda x, r=r: (_prio_round_py(base, r, sids[x]), x)
                )
                for x, y in zip(order[0::2], order[1::2], strict=False):
                    if n_doc >= cap:
                        capped = True
                        break
                    if norms[x] == norms[y]:
                        counts["identical"] += 1
                    elif y not in adj[x]:
                        emit(x, y)
        else:
            for x in sorted(content, key=lambda x: (_prio_sent_py(base, sids[x]), x)):
                if uses[x] == 0:
                    continue
                if n_doc >= cap:
                    capped = True
                    break
                partners = [y for y in content if y != x and y not in adj[x] and qualifies(x, y)[0]]
                for y in usable(x, partners):
                    if uses[x] == 0:
                        break
                    if n_doc >= cap:
                        capped = True
                        break
                    emit(x, y)
                if capped:
                    break
        counts["doc_cap"] += capped
        counts["docs_without_pairs"] += n_doc == 0

    for d in range(len(arrays.doc_bounds) - 1):
        run_doc(
            int(arrays.doc_bounds[d]),
            int(arrays.doc_bounds[d + 1]),
            _doc_base_py(config.seed, int(arrays.doc_keys[d])),
        )

    arr = np.array([r[3:] for r in rows], dtype=np.int64).reshape(-1, 7)
    return Selection(
        np.array([r[0] for r in rows], dtype=np.int64),
        np.array([r[1] for r in rows], dtype=np.int64),
        np.array([r[2] for r in rows], dtype=bool),
        arr,
        counts,
    )
