"""The tokenizer: WordPiece trained offline on the corpus (the paper's choice), or a pretrained folder's.

Either way the model sees `[CLS] tokens </s>` (a pretrained BERT folder: `[CLS] tokens [SEP]`):
the first token is the projection token, the last real token is EOS, and T5 sentinels
`<extra_id_0>`, ... are special tokens added to the vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

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
    """Train an uncased WordPiece (BERT normaliser: CJK characters are single tokens) offline."""
    tok = Tokenizer(models.WordPiece(unk_token=UNK))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    special = [PAD, UNK, CLS, EOS, *sentinel_tokens()]
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=special)
    tok.train_from_iterator(texts, trainer=trainer)
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
