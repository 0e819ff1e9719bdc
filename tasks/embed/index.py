"""Nearest neighbours over an `embeddings` output: exact up to `EXACT_MAX` vectors, an HNSW index above.

    vectors = read_vectors(root, embed_ref)           # doc ids + (n, dim) float32 matrix, in table order
    index = open_index(root, embed_ref, vectors)      # ExactIndex, or the HnswIndex built once and kept
    scores, rows = index.search(queries, k)           # best first; rows index `vectors.doc_ids`

Exact search is `tasks/evaluate/search.py: exact_search`, the one `gur evaluate` scores with. The
approximate index is usearch's HNSW (inner product on the unit vectors, so scores are cosines):
DuckDB's `vss` extension has no build for the pinned DuckDB 1.5.6 on PyPI (1.5.5 is the newest),
and usearch is one small wheel without dependencies; the figures that chose it and `EXACT_MAX` are
in the results log (docs/results/, exact and HNSW search; `benchmarks/embed_search.py`). The index is
built single-threaded, which makes it the same bytes for the same vectors, and kept as a stage output of its own
(`<root>/embed-index/<fingerprint>/`, manifest last), so it is built once per embeddings output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from storage.fingerprint import fingerprint

INDEX_STAGE = "embed-index"
INDEX_CODE_VERSION = "hnsw_v1"
INDEX_FILE = "index.usearch"
# Exact search up to this many vectors: below the size where one query's latency (95th percentile, 384-d MiniLM
# vectors, two cores) passes the 50 ms target, with room to spare; above it HNSW at `HnswConfig`'s settings, far
# faster at a recall@10 near exact search's (the results log: docs/results/, exact and HNSW search).
EXACT_MAX = 200_000


@dataclass(frozen=True)
class HnswConfig:
    """usearch HNSW settings (their recall and latency: `benchmarks/embed_search.py`, the results log)."""

    connectivity: int = 16  # edges per node (M)
    expansion_add: int = 128  # candidates while inserting (efConstruction)
    expansion_search: int = field(default=128, compare=False)  # candidates while searching (ef): a query-time knob


@dataclass
class Vectors:
    """An embeddings output in memory: ids in table order and their vectors."""

    doc_ids: list[str]
    matrix: np.ndarray  # (n, dim) float32, unit rows
    model: str  # the model fingerprint the rows carry

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])


def read_vectors(files: list[str | Path]) -> Vectors:
    """Every row of the given `embeddings` Parquet files, in file order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(f, columns=["doc_id", "embedding", "model"]) for f in files]
    if not tables:
        raise FileNotFoundError("no embeddings files")
    table = pa.concat_tables(tables)
    column = table.column("embedding").combine_chunks()
    dim = column.type.list_size
    matrix = np.array(column.values.to_numpy(zero_copy_only=False), np.float32).reshape(-1, dim)  # writable
    models = table.column("model").unique().to_pylist()
    return Vectors(table.column("doc_id").to_pylist(), matrix, models[0] if models else "")


def check_dimension(queries: np.ndarray, dim: int, what: str) -> None:
    """One line when the query vectors do not fit the index (another model made it)."""
    if queries.ndim != 2 or queries.shape[1] != dim:
        got = queries.shape[-1] if queries.ndim else 0
        raise ValueError(
            f"dimension mismatch: {what} holds {dim}-d vectors but the model gives {got}-d ones: "
            "embed the corpus with this model first (gur embed MODEL)"
        )


class ExactIndex:
    """Every dot product (chunked matrix products, `exact_search`)."""

    kind = "exact"

    def __init__(self, vectors: Vectors, what: str = "the embeddings") -> None:
        self.vectors, self.what = vectors, what

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        from tasks.evaluate.search import exact_search

        check_dimension(queries, self.vectors.dim, self.what)
        if not len(self.vectors.doc_ids):
            return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
        return exact_search(queries, self.vectors.matrix, k, device="cpu")


class HnswIndex:
    """usearch HNSW over the rows (keys are row numbers), inner product."""

    kind = "hnsw"

    def __init__(self, index, dim: int, what: str = "the index") -> None:
        self.index, self.dim, self.what = index, dim, what

    @classmethod
    def build(cls, matrix: np.ndarray, config: HnswConfig = HnswConfig(), threads: int = 1) -> HnswIndex:
        """`threads` > 1 builds faster but not the same bytes twice (the product builds with one)."""
        from usearch.index import Index

        index = Index(
            ndim=matrix.shape[1],
            metric="ip",
            dtype="f32",
            connectivity=config.connectivity,
            expansion_add=config.expansion_add,
            expansion_search=config.expansion_search,
        )
        if len(matrix):
            index.add(np.arange(len(matrix), dtype=np.uint64), np.ascontiguousarray(matrix), threads=threads)
        return cls(index, matrix.shape[1])

    @classmethod
    def load(cls, path: Path, config: HnswConfig = HnswConfig(), what: str = "the index") -> HnswIndex:
        """Memory-mapped (`view`): a search process starts in milliseconds whatever the index size."""
        from usearch.index import Index

        index = Index.restore(str(path), view=True)
        index.expansion_search = config.expansion_search
        return cls(index, index.ndim, what)

    def save(self, path: Path) -> None:
        self.index.save(str(path))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        check_dimension(queries, self.dim, self.what)
        k = min(k, len(self.index))
        if k == 0:
            return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
        matches = self.index.search(np.ascontiguousarray(queries, np.float32), k, threads=1)
        keys = np.asarray(matches.keys, np.int64).reshape(len(queries), -1)
        scores = (1.0 - np.asarray(matches.distances, np.float32)).reshape(len(queries), -1)
        return scores, keys


def index_fingerprint(embed_fp: str, config: HnswConfig) -> str:
    key = {k: v for k, v in asdict(config).items() if k != "expansion_search"}
    return fingerprint(INDEX_STAGE, INDEX_CODE_VERSION, key, [embed_fp])


def build_index_output(root: Path, embed_ref: dict[str, str], vectors: Vectors, config: HnswConfig, log=None) -> Path:
    """The HNSW index of an embeddings output as a stage output of its own; built unless complete."""
    import time

    from storage.atomic import atomic_path
    from storage.stage_output import StageOutput

    out = StageOutput.open(root, INDEX_STAGE, index_fingerprint(embed_ref["fingerprint"], config), log=log)
    path = out.dir / INDEX_FILE
    if out.complete:
        return path
    started = time.perf_counter()
    index = HnswIndex.build(vectors.matrix, config)
    out.dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        index.save(tmp)
    out.finish(
        code_version=INDEX_CODE_VERSION,
        config=config,
        inputs={"embeddings": embed_ref["path"]},
        upstream=[embed_ref],
        tables={},
        rows={"vectors": len(vectors.doc_ids), "dim": vectors.dim},
        drops={},
        timings={"build_s": round(time.perf_counter() - started, 3)},
    )
    return path


def open_index(
    root: Path,
    embed_ref: dict[str, str],
    vectors: Vectors,
    exact_max: int = EXACT_MAX,
    config: HnswConfig = HnswConfig(),
    log=None,
) -> ExactIndex | HnswIndex:
    """Exact search up to `exact_max` vectors; above, the kept HNSW index (built now when missing)."""
    what = f"the embeddings {embed_ref['path']}"
    if len(vectors.doc_ids) <= exact_max:
        return ExactIndex(vectors, what)
    path = build_index_output(root, embed_ref, vectors, config, log)
    index = HnswIndex.load(path, config, f"the index of {embed_ref['path']}")
    if index.dim != vectors.dim:
        raise ValueError(
            f"dimension mismatch: {path} holds {index.dim}-d vectors, {embed_ref['path']} {vectors.dim}-d ones: "
            f"delete {path.parent} and search again"
        )
    return index
