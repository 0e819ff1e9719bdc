"""A training run's whole configuration (`TrainConfig`): what `config.json` in a run folder holds, every method's
fields in one flat record (models/training/presets.py fills a method's defaults)."""

from __future__ import annotations

from dataclasses import dataclass, field

from models.training import presets as train_presets

DEFAULT_PROMPTS = (
    "Anarchism is a political <extra_id_0> that rejects hierarchy.",
    "The president of the United States is <extra_id_0> every four years.",
    "Autism is a developmental disorder characterized by difficulties with <extra_id_0> interaction.",
)


@dataclass
class TrainConfig:
    out_dir: str
    shards: str  # gur: the shuffle stage folder; documents: the one its GUR pairs come from (`gur_pairs`)
    method: str = train_presets.METHODS[0]  # gur | tfcsg | simcse (models.tfcsg.model) | documents
    preset: str = "tiny"
    objective: str = train_presets.OBJECTIVES[0]  # lm+cl (GUR-FULL), cl (the paper's GUR-LM), lm (GUR-CL)
    alpha: float = 1.0
    temperature: float = 0.1
    pooling: str = "cls"
    init_from: str = ""  # pretrained encoder folder to warm-start from (its tokenizer is used)
    head: str = "auto"  # "mlp", "none", or "auto": none when warm-starting, else mlp (models.gur.model)
    vocab_size: int = 8000  # WordPiece trained on the shards when not warm-starting
    tokenizer_sample: int = 200_000
    dropout: float = 0.1
    # The attention probabilities' dropout in a pretrained encoder (tfcsg, simcse, documents); None: `dropout`. At 0
    # PyTorch's fused attention kernel runs on the CPU (with dropout it falls back to the full T x T scores): the
    # documents recipe's 256-token step in less memory and time (the results log: docs/results/, the documents
    # trainer's step with and without attention dropout).
    attention_dropout: float | None = None
    max_steps: int = 1000
    # Stop after this many minutes of training (resumes included) as a complete run, at whatever step it reached:
    # a night's time budget. The step count then depends on the machine; the summary says it stopped by time.
    max_minutes: float = 0.0
    lr: float = 1e-4
    schedule: str = "constant"  # constant with warmup (the paper) or cosine (models.training.schedule.get_lr)
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    grad_accum: int = 1
    short_seq_len: int = 32
    long_seq_len: int = 128
    short_batch: int = 64
    long_batch: int = 16
    shuffle_buffer: int = 4096
    heldout_fraction: float = 0.05
    heldout_key: str = "doc"
    fixed_shapes: bool = False  # pad to the bucket length: static shapes, for `compile` on a GPU
    cl_inputs: str = "masked"  # masked: CL on the masked inputs (the paper, one encoder pass); clean: a second pass
    # Throughput (gur, T5 from scratch; see `check_throughput_options`): the same losses, fewer wasted FLOPs.
    attention: str = "eager"  # eager | sdpa | flex (models.gur.attention; flex trains on a GPU only)
    packing: bool = False  # several sentences per row under a block-diagonal mask (models.gur.packing)
    pack_len: int = 0  # packed row width in tokens; 0: each bucket's sequence length
    fused_lm_head: bool = False  # LM head + cross-entropy in chunks, never the full logits (models.gur.fused_head)
    seed: int = 0
    dtype: str = "auto"  # auto: bf16 autocast on CUDA, fp32 on CPU; bf16 on either; fp32 (models.training.precision)
    compile: bool = False
    threads: int = 0
    log_every: int = 10
    eval_every: int = 100
    eval_pairs: int = 512
    eval_batch: int = 32
    ckpt_every: int = 200
    ckpt_every_s: float = 180.0  # also checkpoint when this many seconds passed since the last one (0: off)
    keep_checkpoints: int = 2
    prompts: list[str] = field(default_factory=lambda: list(DEFAULT_PROMPTS))
    stop_at_step: int = 0  # tests: leave the loop after this step with no final checkpoint (as if killed)
    export: bool = True
    # tfcsg / simcse (models.tfcsg.model, models.tfcsg.question_data); `temperature`, `pooling`, `dropout`,
    # `init_from`, `heldout_fraction`, `eval_batch` and `eval_pairs` apply to them too.
    questions: str = ""  # a keywords stage folder, or a file / folder with a text column
    text_field: str = "text"
    losses: str = "kw+s2s"  # '+'-joined from cl, kl, s2s, kw
    negatives: str = "topic-masked"  # all | topic-masked
    sampling: str = "random"  # random | topic-spread: batches that spread each GSDMM topic evenly
    # A nightly candidate on a grown corpus: train on the rows new since `replay_since` (the fingerprint of a
    # keywords output for tfcsg, of a split output for documents: new or changed documents) plus a seeded sample
    # of the others, `replay_ratio` times as many (0: all of them); a run cut to `max_steps` (no `epochs`) shows
    # the new ones first (models/training/replay.py).
    replay_since: str = ""
    replay_ratio: float = 1.0
    replay_source: str = ""  # the task sets it: the `replay_since` output's folder
    # A run the night's budget cut to `max_steps`: it trains on the rows those steps show once, chosen before
    # anything reads them (the documents recipe's clustering embeds only those): new ones first with
    # `replay_since`, else a seeded sample.
    new_first: bool = False
    max_len: int = 32  # tokens of a question (and of its keyword sequence), [CLS] and [SEP] included
    batch_size: int = 64
    epochs: float = 0.0  # > 0: max_steps = the steps that show every training row this often
    cl_weight: float = 1.0
    kw_weight: float = 1.0
    kl_weight: float = 1.0
    s2s_weight: float = 1.0
    kl_detach_target: bool = True  # stop-gradient on h_t: the keyword vector is the KL's target
    kl_activation: str = "sigmoid"  # the paper's sigmoid on x_hat, or linear
    ae_dim: int = 256  # size of the auto-encoder's code z
    # Keeping the start model's general-purpose geometry (models.tfcsg.model; 0 / 1.0: off). The two anchors are
    # losses against a frozen copy of `init_from`; `interpolate` mixes the trained encoder's weights with the
    # start's at export, w * trained + (1 - w) * start, as a run of its own over the unmixed run (tasks.train).
    sim_anchor_weight: float = 0.0
    l2sp_weight: float = 0.0
    interpolate: float = 1.0
    # documents (models/documents/pairs.py): `max_len` is the query's length; `batch_size`, the anchors too.
    pair_kinds: str = "title+ict"
    pair_draw: str = "coin"  # one pair per document an epoch (coin, title-first), or `each` kind it has
    passage_len: int = 128
    same_page: str = "negative"  # or `masked`: sections of one page (its ids' `page#section`) are not negatives
    # documents: GUR's LCS pairs from a shuffle output (`gur_pairs`, its fingerprint; the task resolves it into
    # `shards`) as a `gur_share` of the training batches, on top of the structure pairs' epochs
    # (models/documents/gur_pairs.py).
    gur_pairs: str = ""
    gur_share: float = 0.0
    # documents: distillation from a frozen teacher (models/training/teacher.py; a sentence-transformers folder, ""
    # off): each query's distribution over the batch's passages under the teacher is a target beside `kw`, weighted
    # `teach_weight`, the teacher's cosines over `teacher_temperature` (0: `temperature`).
    teacher: str = ""
    teach_weight: float = 1.0
    teacher_temperature: float = 0.0

    def model_head(self) -> str:
        if self.head not in ("auto", "mlp", "none"):
            raise ValueError(f"head must be auto, mlp or none, got {self.head!r}")
        return ("none" if self.init_from else "mlp") if self.head == "auto" else self.head
