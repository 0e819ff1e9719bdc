"""Exact top-100 search, ours (`tasks.evaluate.search`) vs `sentence_transformers.util.semantic_search`.

    .venv/bin/python benchmarks/search.py                 # encode 20k real texts with MiniLM, then search
    .venv/bin/python benchmarks/search.py --random        # random unit vectors: search only, no encoding

Queries and documents are the same 20,000 texts (16,000 StackOverflow titles plus STS-B
English train sentences), so each search is a 20k x 20k exact top-100. Prints encode time,
both search times, their ratio, and whether the results agree: identical ids, or ids that
differ only among scores equal to within 1e-5 (duplicate titles embed identically, and
semantic_search re-normalises, so near-equal scores may swap places).
"""

from __future__ import annotations

import time

import harness
import numpy as np
from harness import shared_data

from tasks.evaluate.search import exact_search


def load_texts(n: int) -> list[str]:
    from tasks.evaluate.data import load_stackoverflow, load_stsb

    texts = list(dict.fromkeys(load_stackoverflow(shared_data("stackoverflow", "train.tsv")).texts))
    pairs = load_stsb(shared_data("stsb", "stsb-en-train.csv"))
    texts += [t for t in dict.fromkeys(pairs.a + pairs.b) if t not in set(texts)]
    if len(texts) < n:
        raise SystemExit(f"only {len(texts)} texts available, asked for {n}")
    return texts[:n]


def compare(ours: tuple[np.ndarray, np.ndarray], theirs: list[list[dict]]) -> tuple[int, int, int]:
    """(rows with identical ids, rows differing only among (near-)tied scores, other rows).

    Scores must match position by position. Ids may differ only within a group of equal scores
    (same set of ids per score), and in the lowest group, which the top-k cut may split anywhere.
    """
    our_scores, our_ids = ours
    their_ids = np.array([[hit["corpus_id"] for hit in row] for row in theirs])
    their_scores = np.array([[hit["score"] for hit in row] for row in theirs], dtype=np.float32)
    np.testing.assert_allclose(our_scores, their_scores, atol=1e-5)
    same = (our_ids == their_ids).all(axis=1)
    tie_only = 0
    for row in np.flatnonzero(~same):
        keys = np.round(our_scores[row] * 1e5).astype(np.int64)
        lowest = keys.min()
        tie_only += all(
            set(our_ids[row][keys == key]) == set(their_ids[row][keys == key]) for key in set(keys) if key != lowest
        )
    return int(same.sum()), tie_only, int((~same).sum()) - tie_only


def main() -> int:
    parser = harness.parser(__doc__, workdir=None)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--random", action="store_true", help="random unit vectors instead of encoded texts")
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args()

    import torch
    from sentence_transformers.util import semantic_search

    show = harness.Lines()
    show(f"torch {torch.__version__}, {torch.get_num_threads()} threads, cuda={torch.cuda.is_available()}")
    figures: dict = {"n": args.n, "k": args.k}
    if args.random:
        rng = np.random.default_rng(0)
        emb = rng.normal(size=(args.n, 384)).astype(np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        show(f"{args.n} random 384-d unit vectors")
    else:
        from tasks.evaluate.models import resolve_model

        texts = load_texts(args.n)
        model = resolve_model("minilm")
        started = time.perf_counter()
        emb = model.encode(texts, batch_size=args.batch_size)
        encode_s = time.perf_counter() - started
        show(f"encode {len(texts)} texts with MiniLM: {encode_s:.1f} s ({len(texts) / encode_s:.0f} texts/s)")
        figures["encode_s"] = encode_s

    started = time.perf_counter()
    ours = exact_search(emb, emb, args.k)
    ours_s = time.perf_counter() - started
    tensor = torch.from_numpy(emb)
    started = time.perf_counter()
    theirs = semantic_search(tensor, tensor, top_k=args.k)
    theirs_s = time.perf_counter() - started
    same, ties, other = compare(ours, theirs)
    show(f"exact_search     {args.n} x {args.n} top-{args.k}: {ours_s:.2f} s")
    show(f"semantic_search  {args.n} x {args.n} top-{args.k}: {theirs_s:.2f} s")
    show(f"time ratio semantic_search / exact_search: {theirs_s / ours_s:.2f}")
    show(f"same ids: {same} rows; differing only among scores tied to 1e-5: {ties}; other differences: {other}")
    figures.update(exact_search_s=ours_s, semantic_search_s=theirs_s, same=same, ties=ties, other=other)
    vectors = "random unit vectors" if args.random else "MiniLM vectors"
    title = f"Exact top-{args.k} search against semantic_search, {args.n:,} x {args.n:,} {vectors}"
    harness.record(args, title, show.lines, figures)
    return 0 if other == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
