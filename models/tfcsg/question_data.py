"""Question batches for TFCSG and SimCSE: a `keywords` stage output (or any text column) -> token batches.

Rows are read once and tokenized once (short texts: a million questions are a few hundred MB).
Training order is a seeded permutation per epoch, read as one endless sequence: global batch g
takes positions [g * B * W, (g + 1) * B * W) and rank r its r-th slice of B, so every row is seen
once per epoch, the state is one counter, and a resumed run continues the same order.
A row is held out (not trained on, scored every `eval_every` steps) when a seeded hash of its
key is below `heldout_fraction`. Texts longer than the max length are truncated and counted.

A batch holds what the losses need:
- `input_ids`, `attention_mask` (B, T): `[CLS] q [SEP]`;
- `kw_input_ids`, `kw_attention_mask`: `[CLS] keywords [SEP]`;
- `s2s_input_ids`, `s2s_attention_mask`, `s2s_segments`, `s2s_labels`: `[CLS] q [SEP] keywords [SEP]`,
  segment 1 from the first keyword on; labels hold, at each position from the first [SEP] on, the
  next token when that token is a keyword token or the closing [SEP] (-100 elsewhere);
- `topics` (B,) GSDMM topic (-1 when unknown), `text_ids` (B,) one id per distinct normalised text.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models.gur.pair_data import is_heldout


@dataclass(frozen=True)
class QuestionConfig:
    source: str  # a keywords stage folder, or a Parquet / CSV / TSV / JSONL file or folder of texts
    text_field: str = "text"
    max_len: int = 32  # tokens of a question with [CLS] and [SEP]; the keyword sequence gets the same
    batch_size: int = 64
    seed: int = 0
    heldout_fraction: float = 0.05
    need_keywords: bool = True
    need_s2s: bool = False
    sampling: str = "random"  # random | topic-spread (see spread_order)
    # Replay (a nightly candidate on a grown corpus): train on the rows `replay_source` (an earlier keywords
    # output) does not hold, plus a seeded sample of those it holds, `replay_ratio` times as many as the new (0:
    # all of them), within `limit_rows` (the rows a step-capped run shows; 0: no cap): new rows first.
    replay_source: str = ""
    replay_ratio: float = 1.0
    limit_rows: int = 0


@dataclass
class Questions:
    """Column lists of the input, one entry per row."""

    texts: list[str]
    keywords: list[str] | None  # the keyword words joined by spaces; None for plain texts
    topics: np.ndarray  # (N,) int64, -1 when the source has no topics
    keys: list[str]

    def __len__(self) -> int:
        return len(self.texts)


def _files(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    files = sorted(source.glob("part-*.parquet")) or sorted(source.glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"{source}: no part-*.parquet files")
    return files


def _read_table(path: Path, text_field: str):
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    import pyarrow.parquet as pq

    name = path.name.lower()
    if name.endswith(".parquet"):
        return pq.read_table(path)
    if name.endswith((".tsv", ".csv")):
        delimiter = "\t" if name.endswith(".tsv") else ","
        opts = pcsv.ReadOptions(block_size=1 << 24)
        parse = pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=True)  # quoted as the csv module writes
        strings = pcsv.ConvertOptions(column_types={text_field: pa.string()})
        return pcsv.read_csv(path, read_options=opts, parse_options=parse, convert_options=strings)
    if name.endswith((".jsonl", ".json")):
        return pjson.read_json(path)
    raise ValueError(f"{path}: unknown text file type (use .parquet, .csv, .tsv or .jsonl)")


def load_questions(source: str | Path, text_field: str = "text") -> Questions:
    """Rows of a keywords stage (text, keywords, topic) or of any file with a text column."""
    import pyarrow as pa

    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"{source}: no such file or folder")
    parts = [_read_table(p, text_field) for p in _files(source)]
    table = pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]
    field = text_field if text_field in table.column_names else None
    if field is None:
        raise ValueError(f"{source}: no column {text_field!r}; columns: {', '.join(table.column_names)}")
    texts = table.column(field).to_pylist()
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str) or not t.strip()]
    if bad:
        raise ValueError(f"{source}: row {bad[0]} has no text in {field!r} ({len(bad)} such rows)")
    keywords = None
    if "keywords" in table.column_names:
        keywords = [" ".join(words or []) for words in table.column("keywords").to_pylist()]
    topics = (
        np.array([-1 if t is None else t for t in table.column("topic").to_pylist()], dtype=np.int64)
        if "topic" in table.column_names
        else np.full(len(texts), -1, np.int64)
    )
    if "doc_id" in table.column_names:
        sent = table.column("sent_id").to_pylist() if "sent_id" in table.column_names else [0] * len(texts)
        keys = [f"{d}:{s}" for d, s in zip(table.column("doc_id").to_pylist(), sent, strict=True)]
    else:
        keys = [str(i) for i in range(len(texts))]
    return Questions(texts, keywords, topics, keys)


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def replay_rows(
    rows: np.ndarray, keys: list[str], old: set[str], ratio: float, seed: int, capacity: int = 0
) -> tuple[np.ndarray, dict[str, int]]:
    """The rows whose key is not in `old` (new since the earlier input) first, then a seeded sample of the others,
    `ratio` times as many as the new ones (0: all of them), all within `capacity` rows (0: no cap), in row order;
    and the counts (models/training/replay.py)."""
    from models.training.replay import new_first

    return new_first(rows, np.array([keys[i] not in old for i in rows], bool), ratio, capacity, seed)


class QuestionData:
    """Tokenized rows, the train / held-out split and batch building; no state of its own."""

    def __init__(self, config: QuestionConfig, tokenizer):
        if config.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}, got {config.sampling!r}")
        self.config = config
        self.tok = tokenizer
        q = load_questions(config.source, config.text_field)
        if config.need_keywords and q.keywords is None:
            raise ValueError(
                f"{config.source}: no `keywords` column; the keyword losses need a keywords table "
                "(`gur mine-keywords QUESTIONS` makes one)"
            )
        self.questions = q
        text_index: dict[str, int] = {}
        self.text_ids = np.array([text_index.setdefault(_norm(t), len(text_index)) for t in q.texts], np.int64)
        body = config.max_len - 2  # room for [CLS] and [SEP]
        self.q_ids, n_q = self._tokenize(q.texts, body)
        self.kw_ids, n_kw = self._tokenize(q.keywords, body) if q.keywords is not None else ([], 0)
        self.truncated = {"questions": n_q, "keywords": n_kw}
        held = np.array([is_heldout(k, config.heldout_fraction, config.seed) for k in q.keys], bool)
        self.train_rows = np.flatnonzero(~held)
        self.heldout_rows = np.flatnonzero(held)
        self.replay = {}
        if config.replay_source or config.limit_rows:  # no earlier input: nothing is new, a seeded sample
            earlier = load_questions(config.replay_source, config.text_field) if config.replay_source else q
            old = set(earlier.keys)
            self.train_rows, self.replay = replay_rows(
                self.train_rows, q.keys, old, config.replay_ratio, config.seed, config.limit_rows
            )
        if len(self.train_rows) == 0:
            raise ValueError(f"{config.source}: no rows left to train on (heldout_fraction {config.heldout_fraction})")

    def _tokenize(self, texts: list[str], limit: int) -> tuple[list[list[int]], int]:
        ids = self.tok(texts, add_special_tokens=False)["input_ids"]
        return [row[:limit] for row in ids], sum(len(row) > limit for row in ids)

    def counts(self) -> dict[str, int]:
        return {
            "rows": len(self.questions),
            "train_rows": len(self.train_rows),
            "heldout_rows": len(self.heldout_rows),
            "truncated_questions": self.truncated["questions"],
            "truncated_keywords": self.truncated["keywords"],
            **self.replay,
        }

    def _pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1
        return ids, mask

    def collate(self, rows: np.ndarray, keywords: bool | None = None) -> dict[str, torch.Tensor]:
        """`keywords`: include the keyword sequences (default: when the losses need them)."""
        cls, sep = self.tok.cls_token_id, self.tok.sep_token_id
        batch: dict[str, torch.Tensor] = {}
        batch["input_ids"], batch["attention_mask"] = self._pad([[cls, *self.q_ids[i], sep] for i in rows])
        if self.config.need_keywords if keywords is None else keywords:
            batch["kw_input_ids"], batch["kw_attention_mask"] = self._pad([[cls, *self.kw_ids[i], sep] for i in rows])
        if self.config.need_s2s:
            seqs, segments, labels = [], [], []
            for i in rows:
                source, target = [cls, *self.q_ids[i], sep], [*self.kw_ids[i], sep]
                seqs.append(source + target)
                segments.append([0] * len(source) + [1] * len(target))
                # position t predicts token t + 1: from the first [SEP] to the last keyword token
                labels.append([-100] * (len(source) - 1) + target + [-100])
            batch["s2s_input_ids"], batch["s2s_attention_mask"] = self._pad(seqs)
            width = batch["s2s_input_ids"].shape[1]
            batch["s2s_segments"] = torch.tensor([s + [0] * (width - len(s)) for s in segments], dtype=torch.long)
            batch["s2s_labels"] = torch.tensor([s + [-100] * (width - len(s)) for s in labels], dtype=torch.long)
        batch["topics"] = torch.from_numpy(self.questions.topics[rows])
        batch["text_ids"] = torch.from_numpy(self.text_ids[rows])
        return batch

    def heldout_batches(self, batch_size: int, limit: int) -> list[dict[str, torch.Tensor]]:
        """Fixed held-out batches of (question, keywords) for in-batch accuracy (SimCSE too, as a yardstick
        shared with TFCSG); empty without keywords."""
        if self.questions.keywords is None:
            return []
        rows = self.heldout_rows[:limit]
        starts = range(0, len(rows) - batch_size + 1, batch_size)
        return [self.collate(rows[i : i + batch_size], keywords=True) for i in starts]


SAMPLINGS = ("random", "topic-spread")  # questions; documents take random or clustered


def spread_order(topics: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A seeded permutation that spreads every topic evenly over the epoch.

    The i-th of a topic's n rows (in a random order) goes to position (i + u) / n, u ~ U(0, 1), and
    the rows are read in position order: any window of B rows holds each topic about B * n / N
    times, never the clumps a plain permutation makes, so fewer in-batch negatives share the
    question's topic (rows without a topic, -1, are spread as one group).
    """
    position = np.empty(len(topics))
    for topic in np.unique(topics):
        members = np.flatnonzero(topics == topic)
        n = len(members)
        position[rng.permutation(members)] = (np.arange(n) + rng.random(n)) / n
    return np.argsort(position, kind="stable")


def clustered_order(clusters: np.ndarray, rng: np.random.Generator, groups: np.ndarray | None = None) -> np.ndarray:
    """A seeded permutation that reads the rows cluster by cluster: the clusters in a random order, each
    cluster's rows in a random order, so a window of a batch's rows comes mostly from one or two clusters.
    With `groups` (a page per row, whose rows share a cluster), a cluster's rows are read in `spread_order`'s
    positions instead: each group's rows spread evenly over the cluster, so a window holds few rows of one group."""
    keys = rng.permutation(int(clusters.max()) + 2)  # a random rank per cluster label (-1 included)
    if groups is None:
        within = rng.random(len(clusters))
    else:
        within = np.empty(len(clusters))
        within[spread_order(groups, rng)] = np.arange(len(clusters))
    return np.lexsort((within, keys[clusters + 1]))


class QuestionStream:
    """Endless seeded batches over the training rows; `state_dict` is the global batch counter."""

    def __init__(self, data: QuestionData, rank: int = 0, world_size: int = 1):
        self.data, self.rank, self.world = data, rank, world_size
        self.batch_index = 0
        self._epoch_cache: tuple[int, np.ndarray] | None = None

    @property
    def global_batch(self) -> int:
        return self.data.config.batch_size * self.world

    def steps_per_epoch(self) -> int:
        return -(-len(self.data.train_rows) // self.global_batch)

    def steps_for(self, epochs: float) -> int:
        """Optimizer steps that show every training row `epochs` times (a fraction rounds up)."""
        return max(1, int(np.ceil(epochs * len(self.data.train_rows) / self.global_batch)))

    def _order(self, epoch: int) -> np.ndarray:
        if self._epoch_cache is None or self._epoch_cache[0] != epoch:
            rng = np.random.default_rng([self.data.config.seed, epoch])
            rows = self.data.train_rows
            if self.data.config.sampling == "topic-spread":
                order = rows[spread_order(self.data.questions.topics[rows], rng)]
            elif self.data.config.sampling == "clustered":  # documents (models/documents/clusters.py)
                order = rows[clustered_order(self.data.clusters[rows], rng)]
            elif self.data.config.sampling == "clustered-pages":  # documents: a cluster's pages spread over it
                order = rows[clustered_order(self.data.clusters[rows], rng, self.data.row_pages[rows])]
            else:
                order = rows[rng.permutation(len(rows))]
            self._epoch_cache = (epoch, order)
        return self._epoch_cache[1]

    def rows(self, batch_index: int) -> np.ndarray:
        n, size = len(self.data.train_rows), self.data.config.batch_size
        start = batch_index * self.global_batch + self.rank * size
        positions = range(start, start + size)
        return np.array([self._order(p // n)[p % n] for p in positions])

    def next_batch(self) -> tuple[str, dict[str, torch.Tensor]]:
        rows = self.rows(self.batch_index)
        self.batch_index += 1
        return "questions", self.data.collate(rows)

    def state_dict(self) -> dict[str, Any]:
        return {"batch_index": self.batch_index}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batch_index = int(state["batch_index"])
