"""Streaming pair batches from the `shuffle` stage's shards, resumable from a small state dict.

Layout read: `<shards>/<bucket>/part-*.parquet` (buckets `short` and `long`), columns `doc_id`,
`pair_id`, `a`, `b` at least. Per bucket, the row groups of all its files are visited in a
seeded order per epoch (`rank::world` of it under DDP) and their rows go through a shuffle
buffer. Each batch comes from one bucket (drawn in proportion to the bucket's rows) and is
padded to its longest row (with `fixed_shapes`: to the bucket's sequence length), or with
`packing` packed several sentences per row (`models.gur.packing`). A pair
whose document is already in the batch is deferred to a later batch, so the in-batch
negatives of a pair never come from its own document. Held-out pairs (a seeded hash of
`doc_id` or `pair_id` below `heldout_fraction`) are skipped here; `heldout_pairs` serves them.

`state_dict()` holds everything needed to continue the same stream: per bucket the epoch,
the row-group position, the row offset inside it, the buffer and deferred pairs, and the
numpy RNG (bucket choice, buffer draws, cropping and masking).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models.gur.packing import pack_encoder, pack_targets
from models.gur.span_masking import MASK_RATIO, corrupt, max_target_len
from models.gur.tokenizer import GurTokenizer
from storage.stable_share import in_share

BUCKETS = ("short", "long")
Pair = tuple[str, str, str]  # (doc_id, a, b)


@dataclass(frozen=True)
class DataConfig:
    shards: str  # the shuffle stage folder (absolute)
    short_seq_len: int = 32
    long_seq_len: int = 128
    short_batch: int = 64
    long_batch: int = 16
    shuffle_buffer: int = 4096
    seed: int = 0
    mask_ratio: float = MASK_RATIO
    heldout_fraction: float = 0.05
    heldout_key: str = "doc"  # "doc": held-out documents; "pair": held-out pairs
    max_deferred: int = 4096  # deferred pairs beyond this are dropped (counted)
    fixed_shapes: bool = False  # pad every batch to the bucket's full length (static shapes for torch.compile)
    clean_views: bool = False  # also emit unmasked inputs for the contrastive loss
    packing: bool = False  # several sentences per row (models.gur.packing)
    pack_len: int = 0  # packed row width; 0: the bucket's sequence length

    def seq_len(self, bucket: str) -> int:
        return self.short_seq_len if bucket == "short" else self.long_seq_len

    def pack_width(self, bucket: str) -> int:
        """The packed row width of `bucket`, 0 without packing."""
        return (self.pack_len or self.seq_len(bucket)) if self.packing else 0

    def batch_size(self, bucket: str) -> int:
        return self.short_batch if bucket == "short" else self.long_batch


def _parquet():
    """pyarrow.parquet, imported when shards are read (collate alone runs without pyarrow)."""
    import pyarrow.parquet as pq

    return pq


def is_heldout(key: str, fraction: float, seed: int = 0) -> bool:
    """Stable across runs and machines: blake2b(seed, key) as a number in [0, 1) < fraction."""
    return in_share(f"{seed}:{key}", fraction)


def bucket_files(shards: str | Path, bucket: str) -> list[Path]:
    return sorted((Path(shards) / bucket).glob("part-*.parquet"))


def label_len(seq_len: int, ratio: float = MASK_RATIO) -> int:
    """Fixed label width for a bucket: the longest target, rounded up to a multiple of 8."""
    n = max_target_len(seq_len - 2, ratio)
    return (n + 7) // 8 * 8


def crop_and_mask(
    texts: list[str], tok: GurTokenizer, seq_len: int, rng: np.random.Generator | None, ratio: float
) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """(input rows, span targets, clean rows) of `texts`: each cropped to `seq_len - 2` tokens at a random start
    (the head without `rng`), then span-masked with `rng`; the draws in text order, crop before mask."""
    body = seq_len - 2
    rows: list[list[int]] = []
    targets: list[list[int]] = []
    clean: list[list[int]] = []
    for ids in tok.encode_batch(texts):
        if len(ids) > body:
            start = int(rng.integers(0, len(ids) - body + 1)) if rng is not None else 0
            ids = ids[start : start + body]
        clean.append([tok.cls_id, *ids, tok.eos_id])
        target: list[int] = []
        if rng is not None:
            ids, target = corrupt(ids, tok.sentinel_ids, tok.eos_id, rng, ratio)
        rows.append([tok.cls_id, *ids, tok.eos_id])
        targets.append(target)
    return rows, targets, clean


def collate(
    pairs: list[Pair],
    tok: GurTokenizer,
    seq_len: int,
    rng: np.random.Generator | None,
    ratio: float = MASK_RATIO,
    fixed_shape: bool = False,
    clean_views: bool = False,
    pack_len: int = 0,
) -> dict[str, torch.Tensor]:
    """Pairs -> padded tensors; rows 0..N-1 are the `a` sides, N..2N-1 the `b` sides.

    Over-long sentences are randomly cropped to `seq_len - 2` tokens (head-cropped when `rng`
    is None, for evaluation). With `rng`, spans are masked (inputs get sentinels, labels the
    spans); without, inputs are the plain sentences and labels are all -100. Padding goes to
    the longest row rounded up to a multiple of 8, or with `fixed_shape` (static shapes for
    torch.compile) to input_ids, attention_mask: (2N, seq_len) and labels: (2N, label_len(seq_len)).
    `clean_views` adds `cl_input_ids` / `cl_attention_mask`: the same crops unmasked, for a
    contrastive loss on clean sentences (the paper computes it on the masked inputs).
    `pack_len` > 0 packs the same sentences, masks and targets into rows of that many tokens
    instead (`models.gur.packing`; no further random draws, so the batch holds what the padded one would).
    """
    texts = [p[1] for p in pairs] + [p[2] for p in pairs]
    rows, targets, clean = crop_and_mask(texts, tok, seq_len, rng, ratio)
    if pack_len:
        batch, packed_rows = pack_encoder(rows, pack_len, tok.pad_id, fixed_shape)
        batch.update(pack_targets(targets, packed_rows))
        if clean_views:
            batch.update(pack_encoder(clean, pack_len, tok.pad_id, fixed_shape, prefix="cl_")[0])
        return batch
    width, lwidth = seq_len, label_len(seq_len, ratio)
    if not fixed_shape:
        width = min(seq_len, _round8(max(len(r) for r in rows)))
        lwidth = min(lwidth, _round8(max(1, max(len(t) for t in targets))))
    input_ids = torch.full((len(texts), width), tok.pad_id, dtype=torch.long)
    labels = torch.full((len(texts), lwidth), -100, dtype=torch.long)
    for i, (row, target) in enumerate(zip(rows, targets, strict=True)):
        input_ids[i, : len(row)] = torch.tensor(row)
        if target:
            labels[i, : len(target)] = torch.tensor(target)
    attention_mask = (input_ids != tok.pad_id).long()
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    if clean_views:
        cwidth = seq_len if fixed_shape else min(seq_len, _round8(max(len(r) for r in clean)))
        cl_ids = torch.full((len(texts), cwidth), tok.pad_id, dtype=torch.long)
        for i, row in enumerate(clean):
            cl_ids[i, : len(row)] = torch.tensor(row)
        batch.update(cl_input_ids=cl_ids, cl_attention_mask=(cl_ids != tok.pad_id).long())
    return batch


def _round8(n: int) -> int:
    return (n + 7) // 8 * 8


class PairStream:
    """An endless, resumable iterator of (bucket, batch) over the shards."""

    def __init__(self, config: DataConfig, tok: GurTokenizer, rank: int = 0, world_size: int = 1):
        self.config = config
        self.tok = tok
        self.rank = rank
        self.world_size = world_size
        self.units: dict[str, list[tuple[Path, int]]] = {}
        rows: dict[str, int] = {}
        for bucket in BUCKETS:
            units, n = [], 0
            for path in bucket_files(config.shards, bucket):
                meta = _parquet().ParquetFile(path).metadata
                units.extend((path, rg) for rg in range(meta.num_row_groups) if meta.row_group(rg).num_rows > 0)
                n += meta.num_rows
            if units:
                self.units[bucket] = units
                rows[bucket] = n
        if not self.units:
            raise FileNotFoundError(f"no shards under {config.shards}/{{{','.join(BUCKETS)}}}/part-*.parquet")
        self.buckets = list(self.units)
        total = sum(rows.values())
        self.weights = np.array([rows[b] / total for b in self.buckets])
        self.rng = np.random.default_rng([config.seed, rank])
        self.state: dict[str, dict[str, Any]] = {
            b: {"epoch": 0, "unit_pos": 0, "row_offset": 0, "buffer": [], "deferred": []} for b in self.buckets
        }
        self.dropped_deferred = 0
        self._rows: dict[str, list[Pair] | None] = {b: None for b in self.buckets}  # current row group, cached

    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": self.rng.bit_generator.state,
            "buckets": {
                b: {k: (list(v) if isinstance(v, list) else v) for k, v in s.items()} for b, s in self.state.items()
            },
            "dropped_deferred": self.dropped_deferred,
            "rank": self.rank,
            "world_size": self.world_size,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        for b, s in state["buckets"].items():
            if b in self.state:
                self.state[b] = {k: (list(v) if isinstance(v, list) else v) for k, v in s.items()}
        self.dropped_deferred = state.get("dropped_deferred", 0)
        self._rows = {b: None for b in self.buckets}

    def _epoch_units(self, bucket: str, epoch: int) -> list[tuple[Path, int]]:
        units = self.units[bucket]
        order = np.random.default_rng([self.config.seed, BUCKETS.index(bucket), epoch]).permutation(len(units))
        if len(units) >= self.world_size:
            order = order[self.rank :: self.world_size]
        return [units[i] for i in order]

    def _read_unit(self, bucket: str, unit: tuple[Path, int]) -> list[Pair]:
        path, rg = unit
        table = _parquet().ParquetFile(path).read_row_group(rg, columns=["doc_id", "pair_id", "a", "b"])
        cols = table.to_pydict()
        cfg = self.config
        strided = len(self.units[bucket]) < self.world_size  # too few row groups to split: split rows instead
        out = []
        for i, (doc, pid, a, b) in enumerate(zip(cols["doc_id"], cols["pair_id"], cols["a"], cols["b"], strict=True)):
            if strided and i % self.world_size != self.rank:
                continue
            if is_heldout(doc if cfg.heldout_key == "doc" else pid, cfg.heldout_fraction, cfg.seed):
                continue
            out.append((doc, a, b))
        return out

    def _fill(self, bucket: str) -> None:
        """Top the buffer up from the current row group and the next ones; an epoch ends once its rows are drawn."""
        s = self.state[bucket]
        wrapped = False
        while len(s["buffer"]) < self.config.shuffle_buffer:
            units = self._epoch_units(bucket, s["epoch"])
            if s["unit_pos"] >= len(units):
                if s["buffer"]:
                    return  # drain this epoch's rows before starting the next
                if wrapped:
                    raise RuntimeError(f"bucket {bucket!r} has no training pairs for rank {self.rank}")
                s["epoch"] += 1
                s["unit_pos"] = s["row_offset"] = 0
                self._rows[bucket] = None
                wrapped = True
                continue
            if self._rows[bucket] is None:
                self._rows[bucket] = self._read_unit(bucket, units[s["unit_pos"]])
            rows = self._rows[bucket]
            take = min(self.config.shuffle_buffer - len(s["buffer"]), len(rows) - s["row_offset"])
            s["buffer"].extend(rows[s["row_offset"] : s["row_offset"] + take])
            s["row_offset"] += take
            if s["row_offset"] >= len(rows):
                s["unit_pos"] += 1
                s["row_offset"] = 0
                self._rows[bucket] = None

    def _draw(self, bucket: str) -> Pair:
        s = self.state[bucket]
        self._fill(bucket)
        buf = s["buffer"]
        i = int(self.rng.integers(len(buf)))
        buf[i], buf[-1] = buf[-1], buf[i]
        return tuple(buf.pop())

    def next_pairs(self, bucket: str) -> list[Pair]:
        """One batch of pairs from distinct documents: deferred pairs first, then buffer draws."""
        s = self.state[bucket]
        size = self.config.batch_size(bucket)
        batch: list[Pair] = []
        docs: set[str] = set()
        still: list[Pair] = []
        for pair in s["deferred"]:
            if len(batch) < size and pair[0] not in docs:
                batch.append(tuple(pair))
                docs.add(pair[0])
            else:
                still.append(pair)
        s["deferred"] = still
        attempts = 0
        while len(batch) < size:
            pair = self._draw(bucket)
            attempts += 1
            if pair[0] in docs:
                s["deferred"].append(pair)
                if len(s["deferred"]) > self.config.max_deferred:
                    s["deferred"].pop(0)
                    self.dropped_deferred += 1
                if attempts > 50 * size + self.config.shuffle_buffer:
                    raise RuntimeError(f"cannot fill a {size}-pair batch from distinct documents in bucket {bucket!r}")
                continue
            batch.append(pair)
            docs.add(pair[0])
        return batch

    def next_batch(self) -> tuple[str, dict[str, torch.Tensor]]:
        bucket = self.buckets[int(self.rng.choice(len(self.buckets), p=self.weights))]
        pairs = self.next_pairs(bucket)
        cfg = self.config
        seq_len = cfg.seq_len(bucket)
        return bucket, collate(
            pairs,
            self.tok,
            seq_len,
            self.rng,
            cfg.mask_ratio,
            cfg.fixed_shapes,
            cfg.clean_views,
            cfg.pack_width(bucket),
        )


def heldout_pairs(config: DataConfig, limit: int) -> dict[str, list[Pair]]:
    """Held-out pairs per bucket, in file order, up to `limit` per bucket."""
    out: dict[str, list[Pair]] = {}
    for bucket in BUCKETS:
        pairs: list[Pair] = []
        for path in bucket_files(config.shards, bucket):
            cols = _parquet().read_table(path, columns=["doc_id", "pair_id", "a", "b"]).to_pydict()
            for doc, pid, a, b in zip(cols["doc_id"], cols["pair_id"], cols["a"], cols["b"], strict=True):
                if is_heldout(doc if config.heldout_key == "doc" else pid, config.heldout_fraction, config.seed):
                    pairs.append((doc, a, b))
            if len(pairs) >= limit:
                break
        if pairs:
            out[bucket] = pairs[:limit]
    return out


def distinct_doc_batches(pairs: list[Pair], batch_size: int) -> list[list[Pair]]:
    """Greedy split into full batches whose pairs come from distinct documents (leftovers dropped)."""
    batches: list[list[Pair]] = []
    pending = list(pairs)
    while True:
        batch, docs, rest = [], set(), []
        for p in pending:
            if len(batch) < batch_size and p[0] not in docs:
                batch.append(p)
                docs.add(p[0])
            else:
                rest.append(p)
        if len(batch) < batch_size:
            return batches
        batches.append(batch)
        pending = rest
