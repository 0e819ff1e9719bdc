"""The pair stage's pure function: columns, pinned examples, pair ids, buckets, determinism."""

from __future__ import annotations

import random
import unicodedata

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from tasks.pair.candidates import PairConfig, SentenceArrays
from tasks.pair.table import (
    PAIR_CODE_VERSION,
    PAIR_SCHEMA,
    _utf8_decode,
    empty_counts,
    pair_table,
    sentence_arrays,
    xxh64,
)
from tests.helpers.pair_reference import reference_select

CONTRACT = ["pair_id", "doc_id", "a_sent_id", "b_sent_id", "a", "b", "kind", "lcs", "lcs_len", "lcs_weight", "bucket"]


def norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def sentences(rows: list[tuple[str, int, bool, str]]) -> pa.Table:
    return pa.table(
        {
            "doc_id": pa.array([r[0] for r in rows], pa.string()),
            "sent_id": pa.array([r[1] for r in rows], pa.int32()),
            "is_title": pa.array([r[2] for r in rows], pa.bool_()),
            "text": pa.array([r[3] for r in rows], pa.string()),
            "norm": pa.array([norm(r[3]) for r in rows], pa.string()),
        }
    )


TOM_AND_JERRY = [
    ("cartoon", 0, True, "Tom and Jerry"),
    ("cartoon", 1, False, "Spike is chasing Tom."),
    ("cartoon", 2, False, "Spike is chasing Jerry."),
    ("cartoon", 3, False, "Tom is chasing Jerry."),
    ("cartoon", 4, False, "Jerry is chasing Tom."),
]


def pair_set(table: pa.Table) -> set[tuple[int, int]]:
    return set(zip(table.column("a_sent_id").to_pylist(), table.column("b_sent_id").to_pylist(), strict=True))


def test_schema_and_version() -> None:
    table, counts = pair_table(sentences(TOM_AND_JERRY), PairConfig())
    assert table.column_names[: len(CONTRACT)] == CONTRACT
    assert table.schema == PAIR_SCHEMA
    assert PAIR_CODE_VERSION == "pair_v2"
    assert set(counts) == set(empty_counts())


def test_paper_example_letters_rule() -> None:
    config = PairConfig(rule="letters", letters_k=10, letters_k_by_length=False, repeat=5)
    table, _ = pair_table(sentences(TOM_AND_JERRY), config)
    rows = {(r["a_sent_id"], r["b_sent_id"]): r for r in table.to_pylist()}
    assert (3, 4) not in rows  # " is chasing ": 9 letters < 10
    kept = rows[(1, 2)]
    assert (kept["lcs"], kept["lcs_weight"], kept["lcs_len"]) == ("spike is chasing", 14, 16)
    assert (kept["a"], kept["b"], kept["kind"], kept["bucket"]) == (
        "Spike is chasing Tom.",
        "Spike is chasing Jerry.",
        "content",
        "short",
    )


def test_paper_example_weighted_rule() -> None:
    table, _ = pair_table(sentences(TOM_AND_JERRY), PairConfig(repeat=5))
    rows = {(r["a_sent_id"], r["b_sent_id"]): r for r in table.to_pylist()}
    assert {(1, 2), (3, 4)} <= set(rows)
    assert (rows[(3, 4)]["lcs"], rows[(3, 4)]["lcs_weight"]) == (" is chasing ", 30)
    assert rows[(1, 2)]["lcs"] == "spike is chasing "


def test_title_pairs_and_buckets() -> None:
    long_tail = " and a much longer tail that pushes this sentence past sixty-four characters"
    rows = [
        ("d", 0, True, "北京大学"),
        ("d", 1, False, "北京大学成立于1898年。"),
        ("d", 2, False, "他在北京大学读书" + long_tail),
        ("d", 3, False, "今天天气很好。"),
    ]
    table, counts = pair_table(sentences(rows), PairConfig())
    got = {(r["a_sent_id"], r["b_sent_id"]): r for r in table.to_pylist()}
    assert set(got) == {(0, 1), (0, 2), (1, 2)}
    assert got[(0, 1)]["kind"] == "title" and got[(0, 1)]["lcs"] == "北京大学"
    assert (got[(0, 1)]["bucket"], got[(0, 2)]["bucket"]) == ("short", "long")
    assert counts["title_pairs"] == 2 and counts["content_pairs"] == 1 and counts["short_pairs"] == 1


def test_pair_id_is_the_order_insensitive_hash_of_norm_forms() -> None:
    table, _ = pair_table(sentences(TOM_AND_JERRY), PairConfig(repeat=5))
    for r in table.to_pylist():
        a, b = sorted([norm(r["a"]), norm(r["b"])])
        assert r["pair_id"] == xxhash.xxh64_hexdigest(f"{a}\n{b}".encode())
    flipped = [(d, 10 - s, t, x) for d, s, t, x in TOM_AND_JERRY]  # same texts, reversed sent ids
    other, _ = pair_table(sentences(flipped), PairConfig(repeat=5))
    common = set(table.column("pair_id").to_pylist()) & set(other.column("pair_id").to_pylist())
    assert common  # same pair of texts, same id, whichever side is a


def random_rows(seed: int, n_docs: int = 6) -> list[tuple[str, int, bool, str]]:
    rng = random.Random(seed)
    words = "the cat sat on a mat 北京 大学 天气 很好 😀 ½ Straße".split()
    rows = []
    for d in range(n_docs):
        for s in range(rng.randint(1, 30)):
            rows.append((f"doc{d:02d}", s, s == 0, " ".join(rng.choices(words, k=rng.randint(1, 14)))))
    return rows


def test_matches_reference_selection() -> None:
    rows = random_rows(1)
    table = sentences(rows)
    config = PairConfig(min_weight=12, min_weight_small=6, small_weight=40, repeat=2, stop_gram_limit=None)
    out, counts = pair_table(table, config)
    grouped, arrays = sentence_arrays(table)
    ref = reference_select(grouped.column("norm").to_pylist(), arrays, config)
    expected = sorted(
        (rows[a][0], rows[a][1], rows[b][1], w) for a, b, w in zip(ref.a_row, ref.b_row, ref.match[:, 3], strict=True)
    )
    got = sorted(
        zip(*(out.column(c).to_pylist() for c in ("doc_id", "a_sent_id", "b_sent_id", "lcs_weight")), strict=True)
    )
    assert got == expected
    assert {k: counts[k] for k in ref.counts} == ref.counts


def test_deterministic_bytes_and_input_layout_independent() -> None:
    rows = random_rows(2)
    table = sentences(rows)
    first, counts = pair_table(table, PairConfig())
    second, _ = pair_table(table, PairConfig())
    assert _ipc_bytes(first) == _ipc_bytes(second)
    shuffled = table.take(np.random.default_rng(0).permutation(table.num_rows))  # docs no longer contiguous
    chunked = pa.concat_tables([table.slice(0, 7), table.slice(7)])
    for variant in (shuffled, chunked):
        out, variant_counts = pair_table(variant, PairConfig())
        assert _ipc_bytes(out) == _ipc_bytes(first)
        assert variant_counts == counts
    assert pair_table(table, PairConfig(seed=1))[0].column("pair_id") != first.column("pair_id")


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.combine_chunks())
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("rule", ["weighted", "letters", "none"])
def test_empty_and_single_sentence_inputs(rule: str) -> None:
    config = PairConfig(rule=rule)
    empty, counts = pair_table(sentences([]), config)
    assert empty.num_rows == 0 and empty.schema == PAIR_SCHEMA and counts == empty_counts()
    one, counts = pair_table(sentences([("d", 0, False, "alone")]), config)
    assert one.num_rows == 0 and counts["docs_without_pairs"] == 1


def test_none_rule_keeps_caps_and_reports_lcs() -> None:
    rows = [("d", i, i == 0, f"{i} unrelated {'x' * i}") for i in range(21)]
    table, counts = pair_table(sentences(rows), PairConfig(rule="none", repeat=2, title_quota=3))
    uses: dict[int, int] = {}
    for r in table.to_pylist():
        for s in (r["a_sent_id"], r["b_sent_id"]):
            uses[s] = uses.get(s, 0) + 1
        assert r["rule"] == "none"
        assert r["lcs"] in norm(r["a"]) and r["lcs"] in norm(r["b"])
    assert uses[0] == 3 and max(v for s, v in uses.items() if s) <= 2
    assert counts["pairs"] == table.num_rows <= 2 * len(rows)


def test_missing_column() -> None:
    with pytest.raises(ValueError, match="norm"):
        pair_table(sentences(TOM_AND_JERRY).drop_columns(["norm"]), PairConfig())


def test_utf8_decode_and_xxh64() -> None:
    texts = ["", "a", "Straße", "北京", "😀𠀀x", "mixed 中文 text"]
    arr = pa.array(texts, pa.large_string())
    boffs = np.frombuffer(arr.buffers()[1], np.int64)
    codes, offsets = _utf8_decode(np.frombuffer(arr.buffers()[2], np.uint8), boffs)
    assert ["".join(map(chr, codes[offsets[i] : offsets[i + 1]])) for i in range(len(texts))] == texts
    rng = np.random.default_rng(0)
    for n in [0, 1, 3, 4, 7, 8, 15, 31, 32, 33, 64, 100, 257]:
        data = rng.integers(0, 256, n, dtype=np.uint8)
        assert int(xxh64(data, n, np.uint64(0))) == xxhash.xxh64_intdigest(data.tobytes())


def test_arrays_from_table_match_from_documents() -> None:
    rows = random_rows(3)
    _, arrays = sentence_arrays(sentences(rows))
    docs: dict[str, list] = {}
    for d, s, t, x in rows:
        docs.setdefault(d, []).append((s, t, norm(x)))
    expected = SentenceArrays.from_documents(list(docs.items()))
    for field in ("codes", "char_offsets", "doc_bounds", "doc_keys", "sent_ids", "is_title"):
        np.testing.assert_array_equal(getattr(arrays, field), getattr(expected, field))


def test_held_out_documents_never_reach_the_pairs(tmp_path):
    """The evaluation hold-out (by title, the rule of the demo retrieval set) is removed before pairing."""
    import pyarrow.parquet as pq

    from tasks.evaluate.data import is_held_out
    from tasks.pair.shards import drop_held_out, pair_shard

    titles = [f"Article {i}" for i in range(40)]
    held = {t for t in titles if is_held_out(t, 20)}
    assert 0 < len(held) < len(titles)  # the fixture exercises both sides of the rule
    rows = []
    for i, title in enumerate(titles):
        rows.append((f"d{i}", 0, True, title))
        rows.append((f"d{i}", 1, False, f"The history of {title.lower()} begins with a founding story."))
        rows.append((f"d{i}", 2, False, f"Later the history of {title.lower()} begins a second chapter."))
    table = sentences(rows)

    kept, n_held = drop_held_out(table, 20)
    assert n_held == len(held)
    assert set(kept["doc_id"].to_pylist()) == {f"d{i}" for i, t in enumerate(titles) if t not in held}
    assert drop_held_out(table, 0) == (table, 0)

    pq.write_table(table, tmp_path / "sentences.parquet")
    counts = pair_shard(str(tmp_path / "sentences.parquet"), str(tmp_path / "out"), 0, PairConfig(holdout_percent=20))
    assert counts["held_out_for_evaluation"] == len(held)
    pairs = pq.read_table(tmp_path / "out" / "part-00000.parquet")
    paired = set(pairs["doc_id"].to_pylist())
    assert paired and not paired & {f"d{i}" for i, t in enumerate(titles) if t in held}
