"""The tokenizer: WordPiece trained offline on the corpus (the paper's choice), or a pretrained folder's.

Either way the model sees `[CLS] tokens </s>` (a pretrained BERT folder: `[CLS] tokens [SEP]`):
the first token is the projection token, the last real token is EOS, and T5 sentinels
`<extra_id_0>`, ... are special tokens added to the vocabulary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from models.gur.wordpiece_vocab import learn_vocab

PAD, UNK, CLS, EOS = "[PAD]", "[UNK]", "[CLS]", "</s>"
NUM_SENTINELS = 100


def sentinel_tokens(n: int = NUM_SENTINELS) -> list[str]:
    return [f"<extra_id_{i}>" for i in range(n)]


@dataclass
class GurTokenizer:
    """A Hugging Face fast tokenizer plus the ids the model needs."""

    hf: PreTrainedTokenizerBase
    pad_id: int
    cls_id: int
    eos_id: int
    sentinel_ids: list[int]

    @property
    def vocab_size(self) -> int:
        return len(self.hf)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids without special tokens (the collate step crops, masks, then adds [CLS] ... EOS)."""
        return self.hf(texts, add_special_tokens=False)["input_ids"]

    def save(self, path: str | Path) -> None:
        self.hf.save_pretrained(str(path))


def _wrap(hf: PreTrainedTokenizerBase) -> GurTokenizer:
    eos = hf.eos_token or hf.sep_token
    if hf.pad_token is None or hf.cls_token is None or eos is None:
        raise ValueError("tokenizer needs pad, cls and eos (or sep) tokens")
    missing = [t for t in sentinel_tokens() if t not in hf.get_vocab()]
    if missing:
        hf.add_tokens(missing, special_tokens=True)
    return GurTokenizer(
        hf=hf,
        pad_id=hf.pad_token_id,
        cls_id=hf.cls_token_id,
        eos_id=hf.convert_tokens_to_ids(eos),
        sentinel_ids=hf.convert_tokens_to_ids(sentinel_tokens()),
    )


def train_wordpiece(texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2) -> GurTokenizer:
    """Train an uncased WordPiece (BERT normaliser: CJK characters are single tokens) offline; the same texts
    give the same vocabulary in any process (models.gur.wordpiece_vocab: `tokenizers`' trainer does not)."""
    normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words: Counter = Counter()
    for text in texts:
        words.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    special = [PAD, UNK, CLS, EOS, *sentinel_tokens()]
    vocab = learn_vocab(words, vocab_size, min_frequency, special)
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token=UNK))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(special)  # as the trainer does: never split, skipped when decoding
    tok.post_processor = processors.TemplateProcessing(
        single=f"{CLS} $A {EOS}",
        pair=f"{CLS} $A {EOS} $B:1 {EOS}:1",
        special_tokens=[(CLS, tok.token_to_id(CLS)), (EOS, tok.token_to_id(EOS))],
    )
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        unk_token=UNK,
        cls_token=CLS,
        eos_token=EOS,
        extra_special_tokens=sentinel_tokens(),
        model_max_length=512,
    )
    return _wrap(hf)


def load_tokenizer(path: str | Path) -> GurTokenizer:
    """A saved GUR tokenizer or a pretrained model folder's (sentinels are added when missing)."""
    return _wrap(AutoTokenizer.from_pretrained(str(path)))
