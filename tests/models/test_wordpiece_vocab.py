"""The WordPiece vocabulary: the same texts give the same vocabulary in every process (`tokenizers`' trainer
numbers its `##` symbols in hash-map order, so its ties break differently each run), the merges equal an
obviously-correct BPE on random words, and the vocabulary is the reference trainer's up to those ties."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from models.gur.tokenizer import PAD, UNK, sentinel_tokens, train_wordpiece
from models.gur.wordpiece_vocab import PREFIX, _merge, learn_vocab
from samples.train_shards import demo_documents

REPO = Path(__file__).resolve().parents[2]


def naive_vocab(words: Counter, vocab_size: int, min_frequency: int, special: list[str]) -> list[str]:
    """BPE as the textbook has it: recount every pair after every merge, take the most frequent (smaller ids on
    a tie)."""
    ordered = sorted(words.items())
    alphabet = sorted({c for w, _ in ordered for c in w})
    tails = sorted({PREFIX + c for w, _ in ordered for c in w[1:]})
    tokens = list(dict.fromkeys([*special, *alphabet, *tails]))
    ids = {t: i for i, t in enumerate(tokens)}
    symbols = [[ids[w[0]], *(ids[PREFIX + c] for c in w[1:])] for w, _ in ordered]
    while len(tokens) < vocab_size:
        counts: Counter = Counter()
        for word, (_, n) in zip(symbols, ordered, strict=True):
            for pair in pairwise(word):
                counts[pair] += n
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        if counts[best] < min_frequency:
            break
        a, b = tokens[best[0]], tokens[best[1]]
        merged = a + b[len(PREFIX) :] if b.startswith(PREFIX) else a + b
        if merged not in ids:
            ids[merged] = len(tokens)
            tokens.append(merged)
        symbols = [_merge(word, best, ids[merged]) for word in symbols]
    return tokens


@pytest.mark.parametrize("seed", range(12))
def test_merges_equal_the_textbook_bpe_on_random_words(seed):
    rng = np.random.default_rng(seed)
    letters = "abcd"[: rng.integers(2, 5)]
    words = Counter(
        {
            "".join(rng.choice(list(letters), size=rng.integers(1, 7))): int(rng.integers(1, 6))
            for _ in range(rng.integers(3, 30))
        }
    )
    vocab_size, min_frequency = int(rng.integers(5, 60)), int(rng.integers(1, 3))
    got = learn_vocab(words, vocab_size, min_frequency, ["[PAD]", "[UNK]"])
    assert got == naive_vocab(words, vocab_size, min_frequency, ["[PAD]", "[UNK]"])
    assert len(got) == len(set(got)) and len(got) <= max(vocab_size, len(naive_vocab(words, 0, 1, ["[PAD]", "[UNK]"])))


def test_the_same_texts_give_the_same_vocabulary_in_every_process(tmp_path):
    """Two processes with other hash seeds (string sets and the `tokenizers` hash maps both move with them)."""
    script = (
        "import sys, json; sys.path.insert(0, sys.argv[1])\n"
        "from samples.train_shards import demo_documents\n"
        "from models.gur.tokenizer import train_wordpiece\n"
        "texts = [s for d in demo_documents()[:40] for s in d[2]]\n"
        "print(json.dumps(sorted(train_wordpiece(texts, vocab_size=3000).hf.get_vocab().items())))\n"
    )
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run(
            [sys.executable, "-c", script, str(REPO)], env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]


def test_the_vocabulary_is_the_reference_trainers_up_to_ties():
    """`tokenizers`' WordPieceTrainer on the same texts (the public reference): nearly every token the same, and
    the texts cut into as many tokens, none unknown."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    texts = [s for d in demo_documents()[:60] for s in d[2]]
    special = [PAD, UNK, "[CLS]", "</s>", *sentinel_tokens()]
    ref = Tokenizer(models.WordPiece(unk_token=UNK))
    ref.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    ref.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    ref.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=4000, min_frequency=2, special_tokens=special))
    ours = train_wordpiece(texts, vocab_size=4000)
    assert ours.vocab_size == ref.get_vocab_size() == 4000
    assert len(set(ours.hf.get_vocab()) & set(ref.get_vocab())) / 4000 > 0.95
    mine = ours.encode_batch(texts)
    theirs = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    n_mine, n_theirs = sum(map(len, mine)), sum(map(len, theirs))
    assert abs(n_mine - n_theirs) / n_theirs < 0.01
    assert ours.hf.unk_token_id not in {t for ids in mine for t in ids}

    def letters(tokens: list[str]) -> str:
        return "".join(t.removeprefix(PREFIX) for t in tokens)

    for a, b in zip(mine[:50], theirs[:50], strict=True):  # the same characters, whatever the cuts
        assert letters(ours.hf.convert_ids_to_tokens(a)) == letters([ref.id_to_token(i) for i in b])
    assert [ours.hf.convert_ids_to_tokens(i) for i in range(4)] == [PAD, UNK, "[CLS]", "</s>"]
