"""(query, passage) pairs cut from long documents, for the `documents` recipe: a split output -> token batches.

Each document gives up to two pair kinds (`kinds`, '+'-joined):
- `title`: its title -> its body (a section's heading finds the section; what `heldout-title` asks);
- `ict`: the inverse cloze task (Lee et al. 2019): one of its sentences -> the body without that sentence
  (a passage finds another passage of the same text; what `heldout-ict` and page checks ask).
How many pairs a document gives an epoch (`draw`):
- `coin`: one; where a document has both kinds, a seeded coin per (epoch, document) picks one, so an epoch
  costs one pass over the documents whatever the kinds;
- `title-first`: one; its title pair where it has one, else its ICT pair (a corpus without titles still
  trains), at one pass over the documents;
- `each`: one of each kind it has, so an epoch shows every document's title pair and an ICT pair (a
  training row is then a (document, kind)).
The ICT sentence is drawn per (epoch, document), among sentences of four words or more.

The documents come from the split stage (its title row and its sentences), so the recipe reads the
sentences GUR's pairs are mined from. A batch is what `TfcsgLoss` with `losses="kw"` reads: the queries
as `input_ids`, the passages as `kw_input_ids`, and the document's number as `topics` and `text_ids`, so
two pairs of one document are never each other's negatives (negatives "topic-masked"). Queries are cut
to `max_len` tokens, passages to `passage_len` ([CLS] and [SEP] included); a passage keeps its beginning,
where a section says what it is about.
A document is held out of training (scored in-loop only) when a seeded hash of its id is below
`heldout_fraction`.

With `gur_shards` (a shuffle output) and `gur_share` > 0, that share of the batches are GUR's LCS pairs of the
same documents instead (gur_pairs.py), cut to `max_len` on both sides, their document and page masked too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models.documents.gur_pairs import GurOrder, GurPairs, load_gur_pairs, split_index, total_steps
from models.gur.pair_data import is_heldout

KINDS = ("title", "ict")
DRAWS = ("coin", "title-first", "each")
# Batch order: seeded random; by the start model's clusters of documents; or by its clusters of pages, each
# cluster's pages spread over its batches (clusters.py), so a batch holds sections of similar, different pages.
SAMPLINGS = ("random", "clustered", "clustered-pages")
SAME_PAGE = ("negative", "masked")  # are two sections of one page (pages.py) each other's in-batch negatives?
ONE_A_DOCUMENT = ("coin", "title-first")  # draws whose training row is the document itself
MIN_QUERY_WORDS = 4  # an ICT query sentence shorter than this says too little to find its passage


def parse_kinds(spec: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in spec.split("+") if k.strip())
    unknown = sorted(set(kinds) - set(KINDS))
    if not kinds or unknown:
        raise ValueError(f"pair kinds must be '+'-joined from {KINDS}, got {spec!r}")
    return kinds


@dataclass(frozen=True)
class DocumentPairConfig:
    source: str  # a split stage folder (part-*.parquet: doc_id, sent_id, is_title, text) or one such file
    kinds: str = "title+ict"
    draw: str = "coin"  # one pair per document an epoch (`coin`, `title-first`), or `each` kind it has
    max_len: int = 64  # query tokens
    passage_len: int = 128  # passage tokens
    batch_size: int = 32
    seed: int = 0
    heldout_fraction: float = 0.02
    sampling: str = "random"  # QuestionStream's order: seeded random, or `clustered` (models/documents/clusters.py)
    same_page: str = "negative"  # or `masked`: a section's in-batch negatives leave out its page's other sections
    gur_shards: str = ""  # a shuffle output folder: GUR's LCS pairs (gur_pairs.py)
    gur_share: float = 0.0  # the share of the batches that are GUR pairs (with `gur_shards`)
    # A candidate on a grown corpus (models/training/replay.py): the documents new or changed since the split
    # output `replay_source` (the champion's) first, then a seeded sample of the others, `replay_ratio` times as
    # many (0: all of them), within `limit_rows` (the structure rows a step-capped run shows; 0: no cap; without
    # `replay_source` a seeded sample of that many).
    replay_source: str = ""
    replay_ratio: float = 1.0
    limit_rows: int = 0


@dataclass
class Documents:
    ids: list[str]
    titles: list[str]  # "" where the document has none
    sentences: list[list[str]]  # the body's sentences, in order

    @property
    def topics(self) -> np.ndarray:  # QuestionStream's name for the per-row group: here the document itself
        return np.arange(len(self.ids), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.ids)


def _table_files(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    files = sorted(source.glob("part-*.parquet"))
    if not files:
        raise FileNotFoundError(f"{source}: no part-*.parquet files (give a split output folder)")
    return files


def load_documents(source: str | Path) -> Documents:
    """The documents of a split output (the `sentences` table: `doc_id`, `sent_id`, `is_title`, `text`; or one
    Parquet file of it), in its row order: each document's title row and its body's sentences."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"{source}: no such file or folder")
    columns = ["doc_id", "sent_id", "is_title", "text"]
    tables = [pq.read_table(p) for p in _table_files(source)]
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ValueError(f"{source}: not a sentences table (no {', '.join(missing)}); give a split output")
    grouped: dict[str, list[tuple[int, bool, str]]] = {}  # first appearance order: the split's document order
    for doc_id, sent_id, is_title, text in zip(*(table.column(c).to_pylist() for c in columns), strict=True):
        grouped.setdefault(doc_id, []).append((sent_id, bool(is_title), text or ""))
    docs = Documents([], [], [])
    for doc_id, rows in grouped.items():
        rows.sort()
        docs.ids.append(doc_id)
        docs.titles.append(next((t.strip() for _, title, t in rows if title), ""))
        docs.sentences.append([t for _, title, t in rows if not title])
    return docs


def _seeded(seed: int, epoch: int, row: int, salt: int) -> np.random.Generator:
    return np.random.default_rng([seed, epoch, row, salt])


class DocumentPairs:
    """Documents, their train / held-out split and batch building. A row is a document number (`coin`,
    `title-first`) or a (document, kind) as `document * len(KINDS) + kind` (`each`). The pair a row gives
    depends on the epoch, which `DocumentStream` passes through `collate`."""

    def __init__(self, config: DocumentPairConfig, tokenizer):
        if config.draw not in DRAWS:
            raise ValueError(f"draw must be one of {DRAWS}, got {config.draw!r}")
        if config.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS} for documents, got {config.sampling!r}")
        if config.same_page not in SAME_PAGE:
            raise ValueError(f"same_page must be one of {SAME_PAGE}, got {config.same_page!r}")
        if not 0 <= config.gur_share < 1:
            raise ValueError(f"gur_share must be within [0, 1), got {config.gur_share}")
        if config.gur_share > 0 and not config.gur_shards:
            raise ValueError("gur_share > 0 needs gur_shards: a shuffle output folder (GUR's pairs)")
        self.config = config
        self.kinds = parse_kinds(config.kinds)
        self.tok = tokenizer
        self.questions = docs = load_documents(config.source)  # `questions`: the name QuestionStream reads
        # A document trains when it can give a pair: a title and a body, or two sentences (ICT).
        usable = np.array([bool(self._kinds_of(i)) for i in range(len(docs))], bool)
        held = np.array([is_heldout(k, config.heldout_fraction, config.seed) for k in docs.ids], bool)
        self.train_rows = self._rows(np.flatnonzero(usable & ~held))
        self.heldout_rows = self._rows(np.flatnonzero(usable & held))
        self.replay: dict[str, int] = {}
        if config.replay_source or config.limit_rows:
            self.train_rows, self.replay = self._new_first(self.train_rows)
        self.unusable = int((~usable).sum())
        self.clusters: np.ndarray | None = None  # `clustered` sampling: a label per row (`set_clusters`)
        self.pages: np.ndarray = docs.topics  # a page number per document (`set_pages`); until then its own
        self.row_pages: np.ndarray | None = None  # `clustered-pages` sampling: a page number per row
        self.teacher = None  # distillation: a Teacher whose own token ids every batch carries (`set_teacher`)
        if len(self.train_rows) == 0:
            raise ValueError(
                f"{config.source}: no document gives a training pair ({len(docs)} documents; a pair needs a title "
                f"and a body, or a body of two sentences for {self.kinds})"
            )
        self.gur: GurPairs | None = None
        if config.gur_share > 0:
            numbers = {doc_id: i for i, doc_id in enumerate(docs.ids)}
            self.gur = load_gur_pairs(config.gur_shards, numbers, config.heldout_fraction, config.seed)
            if not len(self.gur):
                raise ValueError(
                    f"{config.gur_shards}: no GUR pair of a training document of {config.source} "
                    f"({self.gur.unknown} of documents the split does not hold, {self.gur.heldout} held out): "
                    "is it the shuffle output of the same build? gur_share = 0 trains without them"
                )

    def _new_first(self, rows: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
        """The training rows of documents new or changed since `replay_source` first, then a seeded sample of the
        rest (models/training/replay.py), with the counts in documents."""
        from models.training.replay import content_digests, new_first

        c, docs = self.config, self.questions
        changed = np.zeros(len(docs), bool)  # without an earlier split nothing is new: a seeded sample
        if c.replay_source:
            before = load_documents(c.replay_source)
            old = content_digests(before.ids, before.titles, before.sentences)
            now = content_digests(docs.ids, docs.titles, docs.sentences)
            changed = np.array([old.get(i) != now[i] for i in docs.ids], bool)
        of_row = np.array([self.document(int(r)) for r in rows], np.int64)
        chosen, counts = new_first(rows, changed[of_row], c.replay_ratio, c.limit_rows, c.seed)
        documents = {self.document(int(r)) for r in chosen}
        new_docs = set(of_row[changed[of_row]].tolist())
        out = {"new_documents": len(new_docs), "trained_documents": len(documents)}
        return chosen, {**out, "new_trained_documents": len(new_docs & documents), **counts}

    def _rows(self, documents: np.ndarray) -> np.ndarray:
        if self.config.draw in ONE_A_DOCUMENT:
            return documents
        n = len(KINDS)
        return np.array([d * n + KINDS.index(k) for d in documents for k in self._kinds_of(int(d))], np.int64)

    def set_clusters(self, labels: np.ndarray) -> None:
        """`clustered` sampling: each row takes its document's cluster label (`labels`, one per document)."""
        self.clusters = self._per_row(labels)

    def set_pages(self, pages: np.ndarray) -> None:
        """A page number per document (models/documents/pages.py): what `same_page` and `clustered-pages` read."""
        if len(pages) != len(self.questions):
            raise ValueError(f"{len(pages)} page numbers for {len(self.questions)} documents")
        self.pages = np.asarray(pages, np.int64)
        self.row_pages = self._per_row(self.pages)

    def set_teacher(self, teacher) -> None:
        """Every batch from now on also carries the texts in the teacher's tokens (`teacher_` + the key)."""
        self.teacher = teacher

    def _per_row(self, per_document: np.ndarray) -> np.ndarray:
        """A per-document value for every training and held-out row (-1 at numbers that are no row)."""
        rows = np.concatenate([self.train_rows, self.heldout_rows]).astype(np.int64)
        out = np.full(int(rows.max(initial=-1)) + 1, -1, np.int64)
        out[rows] = per_document[[self.document(int(r)) for r in rows]]
        return out

    def document(self, row: int) -> int:
        return row if self.config.draw in ONE_A_DOCUMENT else row // len(KINDS)

    def _kinds_of(self, row: int) -> list[str]:
        d = self.questions
        out = []
        if "title" in self.kinds and d.titles[row] and d.sentences[row]:
            out.append("title")
        if "ict" in self.kinds and len(d.sentences[row]) >= 2:
            out.append("ict")
        return out

    def pair(self, row: int, epoch: int) -> tuple[str, str]:
        """(query, passage) of training row `row` in `epoch`."""
        d = self.questions
        if self.config.draw == "each":
            row, kind = row // len(KINDS), KINDS[row % len(KINDS)]
        else:
            kinds = self._kinds_of(row)
            if len(kinds) == 1 or self.config.draw == "title-first":  # `title` comes first in KINDS order
                kind = kinds[0]
            else:
                kind = kinds[int(_seeded(self.config.seed, epoch, row, 0).integers(2))]
        sentences = d.sentences[row]
        if kind == "title":
            return d.titles[row], " ".join(sentences)
        long_enough = [i for i, s in enumerate(sentences) if len(s.split()) >= MIN_QUERY_WORDS] or list(
            range(len(sentences))
        )
        pick = long_enough[int(_seeded(self.config.seed, epoch, row, 1).integers(len(long_enough)))]
        return sentences[pick], " ".join(s for i, s in enumerate(sentences) if i != pick)

    def counts(self) -> dict[str, int]:
        documents = sorted({self.document(int(r)) for r in self.train_rows})
        kinds = [self._kinds_of(i) for i in documents]
        return {
            "documents": len(self.questions),
            "train_rows": len(self.train_rows),
            "train_documents": len(documents),
            "heldout_rows": len(self.heldout_rows),
            "no_pair": self.unusable,
            "with_title": sum("title" in k for k in kinds),
            "with_ict": sum("ict" in k for k in kinds),
            **self.replay,
            **(
                {"gur_pairs": len(self.gur), "gur_unknown": self.gur.unknown, "gur_heldout": self.gur.heldout}
                if self.gur is not None
                else {}
            ),
        }

    def _encode(self, texts: list[str], length: int) -> tuple[torch.Tensor, torch.Tensor]:
        enc = self.tok(texts, padding=True, truncation=True, max_length=length, return_tensors="pt")
        return enc["input_ids"], enc["attention_mask"]

    def collate(self, rows: np.ndarray, epoch: int = 0) -> dict[str, torch.Tensor]:
        pairs = [self.pair(int(r), epoch) for r in rows]
        batch = self._tokens([q for q, _ in pairs], [p for _, p in pairs], self.config.passage_len)
        return self._mask_groups(batch, np.array([self.document(int(r)) for r in rows], dtype=np.int64))

    def _tokens(self, queries: list[str], passages: list[str], passage_len: int) -> dict[str, Any]:
        """The queries cut to `max_len`, the passages to `passage_len`, in the student's tokens and, with a
        teacher, in its own."""
        batch: dict[str, Any] = {}
        batch["input_ids"], batch["attention_mask"] = self._encode(queries, self.config.max_len)
        batch["kw_input_ids"], batch["kw_attention_mask"] = self._encode(passages, passage_len)
        if self.teacher is not None:
            t = self.teacher
            batch["teacher_input_ids"], batch["teacher_attention_mask"] = t.tokenize(queries, self.config.max_len)
            batch["teacher_kw_input_ids"], batch["teacher_kw_attention_mask"] = t.tokenize(passages, passage_len)
        return batch

    def _mask_groups(self, batch: dict[str, Any], numbers: np.ndarray) -> dict[str, Any]:
        """The document's number: its two pairs (`each`) are never each other's negatives; nor, `masked`, are two
        sections of one page (`topics`: the page's number)."""
        groups = self.pages[numbers] if self.config.same_page == "masked" else numbers
        batch["topics"], batch["text_ids"] = torch.as_tensor(groups), torch.as_tensor(numbers)
        return batch

    def collate_gur(self, pairs: list[tuple[str, str, int]]) -> dict[str, torch.Tensor]:
        """A batch of GUR pairs (query, passage, document number) in `collate`'s layout: both sentences cut to
        `max_len`, the pairs' documents (and pages, `masked`) no negatives of each other."""
        batch = self._tokens([q for q, _, _ in pairs], [p for _, p, _ in pairs], self.config.max_len)
        return self._mask_groups(batch, np.array([d for _, _, d in pairs], dtype=np.int64))

    def heldout_batches(self, batch_size: int, limit: int) -> list[dict[str, torch.Tensor]]:
        rows = self.heldout_rows[:limit]
        starts = range(0, len(rows) - batch_size + 1, batch_size)
        return [self.collate(rows[i : i + batch_size]) for i in starts]


class DocumentStream:
    """`QuestionStream`'s seeded order over documents, with the epoch handed to `collate` (a document's pair
    kind and ICT sentence change from epoch to epoch), and with `gur_share` GUR pair batches among them on a fixed
    schedule (gur_pairs.py). `state_dict` is the global batch counter."""

    def __init__(self, data: DocumentPairs, rank: int = 0, world_size: int = 1):
        from models.tfcsg.question_data import QuestionStream

        self.data = data
        self.order = QuestionStream(data, rank, world_size)
        self.share = data.config.gur_share if data.gur is not None else 0.0
        self.gur = (
            GurOrder(data.gur, data.config.batch_size, data.config.seed, rank, world_size) if self.share else None
        )
        self.index = 0  # global batches drawn, of both kinds

    def steps_for(self, epochs: float) -> int:
        """Optimizer steps that show every document's structure pair `epochs` times, GUR batches on top."""
        return total_steps(self.order.steps_for(epochs), self.share)

    def next_batch(self) -> tuple[str, dict[str, torch.Tensor]]:
        gur, index = split_index(self.index, self.share)
        self.index += 1
        if gur:
            return "gur-pairs", self.data.collate_gur(self.gur.batch(index))
        rows = self.order.rows(index)
        first = index * self.order.global_batch + self.order.rank * self.data.config.batch_size
        return "documents", self.data.collate(rows, epoch=first // len(self.data.train_rows))

    def state_dict(self) -> dict[str, Any]:
        return {"batch_index": self.index}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.index = int(state["batch_index"])
