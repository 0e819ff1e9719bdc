"""Every attention kernel gives transformers' eager T5 outputs and gradients, the relative-position bias included.

The reference is transformers' own `T5ForConditionalGeneration` forward (`attention="eager"`, the
default path); the candidates run our forward (models.gur.t5_forward) over the same weights. FlexAttention
has no backward on the CPU in torch 2.13: on the CPU its forward is compared, its gradients on a GPU only.
Tests marked `gpu` need CUDA (skipped without it); `benchmarks/gpu_suite` runs them with `-m gpu`.
"""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402

from models.gur.attention import allowed, attend, build_bias, relative_position_bucket  # noqa: E402
from models.gur.model import GurModel, preset_config  # noqa: E402
from models.training.config import TrainConfig  # noqa: E402
from models.training.throughput import check_throughput_options  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny matrices: one intra-op thread (conftest)

VOCAB = 120
CUDA = torch.cuda.is_available()


def tiny(attention: str = "eager", pooling: str = "mean", **kw) -> GurModel:
    torch.manual_seed(0)  # the same weights for every kernel
    cfg = preset_config("tiny", vocab_size=VOCAB, dropout=0.0, pooling=pooling, attention=attention, **kw)
    return GurModel(cfg)


def random_batch(seed: int, rows: int = 6, width: int = 40, label_width: int = 12) -> dict[str, torch.Tensor]:
    """Random tokens, right padding of random lengths (one full row), random labels with -100 padding.

    Width 40 > T5's 16 exact buckets: the logarithmic buckets of the bias are exercised too."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, width + 1, (rows,), generator=g)
    lengths[0] = width
    ids = torch.randint(3, VOCAB, (rows, width), generator=g)
    mask = (torch.arange(width)[None] < lengths[:, None]).long()
    ids = ids * mask  # pad id 0
    ids[torch.arange(rows), 0] = 2  # a [CLS]-like first token
    labels = torch.randint(3, VOCAB, (rows, label_width), generator=g)
    label_lengths = torch.randint(1, label_width + 1, (rows,), generator=g)
    labels[torch.arange(label_width)[None] >= label_lengths[:, None]] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def outputs_and_grads(model: GurModel, batch: dict, grads: bool = True):
    out = model(batch["input_ids"], batch["attention_mask"], labels=batch["labels"])
    emb = out["embeddings"]
    loss = out["lm_loss"] + (emb * torch.linspace(-1, 1, emb.shape[-1], device=emb.device)).sum()
    if not grads:
        return out, {}
    loss.backward()
    return out, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_buckets_are_t5s():
    rel = torch.randint(-300, 300, (64, 64))
    for bidirectional in (True, False):
        for buckets, distance in ((32, 128), (16, 20)):
            ours = relative_position_bucket(rel, bidirectional, buckets, distance)
            theirs = T5Attention._relative_position_bucket(rel, bidirectional, buckets, distance)
            assert torch.equal(ours, theirs)


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@pytest.mark.parametrize("pooling", ["mean", "cls", "eos"])
def test_kernel_equals_transformers_eager_t5(attention, pooling):
    batch = random_batch(seed=1)
    ref_out, ref_grads = outputs_and_grads(tiny("eager", pooling), batch)
    # `eager` alone would take transformers' path: the fused head forces ours with the eager kernel
    model = tiny(attention, pooling, fused_lm_head=attention == "eager")
    assert model.own_forward(None)
    out, grads = outputs_and_grads(model, batch)
    torch.testing.assert_close(out["embeddings"], ref_out["embeddings"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out["lm_loss"], ref_out["lm_loss"], rtol=1e-5, atol=1e-5)
    assert grads.keys() == ref_grads.keys()
    assert any("relative_attention_bias" in n for n in grads)  # the bias is learned through our path too
    for name, g in grads.items():
        torch.testing.assert_close(g, ref_grads[name], rtol=1e-4, atol=1e-5, msg=name)


def test_flex_forward_equals_transformers_eager_t5_on_cpu():
    batch = random_batch(seed=2)
    with torch.no_grad():
        ref, _ = outputs_and_grads(tiny("eager"), batch, grads=False)
        out, _ = outputs_and_grads(tiny("flex"), batch, grads=False)
    torch.testing.assert_close(out["embeddings"], ref["embeddings"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out["lm_loss"], ref["lm_loss"], rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="FlexAttention has no backward on the CPU (torch 2.13): GPU only")
def test_flex_gradients_equal_eager_on_gpu():
    batch = {k: v.cuda() for k, v in random_batch(seed=3).items()}
    _, ref = outputs_and_grads(tiny("eager").cuda(), batch)
    _, grads = outputs_and_grads(tiny("flex").cuda(), batch)
    for name, g in grads.items():
        torch.testing.assert_close(g, ref[name], rtol=1e-3, atol=1e-4, msg=name)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="SDPA's CUDA kernels (memory-efficient, cuDNN) run on a GPU only")
def test_sdpa_bias_gradients_equal_eager_on_gpu():
    """On a GPU SDPA runs a fused kernel, which must also give the gradient of its float mask: the learned
    relative-position bias trains through it. The tiny model's gradients, bias tables included, match eager's."""
    batch = {k: v.cuda() for k, v in random_batch(seed=5).items()}
    _, ref = outputs_and_grads(tiny("eager").cuda(), batch)
    _, grads = outputs_and_grads(tiny("sdpa").cuda(), batch)
    assert grads.keys() == ref.keys()
    assert any("relative_attention_bias" in n for n in grads)
    for name, g in grads.items():
        torch.testing.assert_close(g, ref[name], rtol=1e-3, atol=1e-4, msg=name)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="SDPA's CUDA kernels (memory-efficient, cuDNN) run on a GPU only")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_position_bias_gradient_on_gpu(dtype, causal):
    """`attend` with a bias that needs gradients, on packed segments: SDPA's gradients of q, k, v and the
    (H, Q, K) position bias are as close to the float64 loop reference (on the CPU) as the eager kernel's in
    the same dtype on the GPU (within twice eager's error, plus 1e-5 in float32 or bf16's resolution)."""
    g = torch.Generator().manual_seed(6)
    B, H, T, D = 2, 4, 40, 16
    seg = torch.tensor([[1] * 13 + [2] * 19 + [0] * 8, [3] * 25 + [4] * 15])
    leaves = [torch.randn(B, H, T, D, generator=g, dtype=torch.float64) for _ in range(3)]
    leaves = [t.requires_grad_() for t in (*leaves, torch.randn(H, T, T, generator=g, dtype=torch.float64))]
    ref = reference_attention(*leaves, seg, seg, causal)
    cot = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    want = [ref.detach(), *torch.autograd.grad(ref, leaves, cot)]

    def errors(kind: str) -> list[float]:
        on_gpu = [t.detach().to("cuda", dtype).requires_grad_() for t in leaves]
        seg_gpu = seg.cuda()
        out = attend(*on_gpu[:3], build_bias(kind, seg_gpu, seg_gpu, causal, on_gpu[3], dtype), 0.0)
        got = [out, *torch.autograd.grad(out, on_gpu, cot.to("cuda", dtype))]
        return [
            float((a.detach().double().cpu() - b).abs().max() / b.abs().max()) for a, b in zip(got, want, strict=True)
        ]

    eager, sdpa = errors("eager"), errors("sdpa")
    limit = 1e-5 if dtype == torch.float32 else 2e-2
    for name, e, s in zip(("output", "q", "k", "v", "position bias"), eager, sdpa, strict=True):
        assert s <= 2 * e + limit, f"{name}: sdpa error {s:.2e} against eager's {e:.2e} ({dtype})"


def reference_attention(q, k, v, position, q_seg, k_seg, causal):
    """Plain loops over rows and queries: softmax over the allowed keys of q . k + bias."""
    rows = []
    for b in range(q.shape[0]):
        queries = []
        for i in range(q.shape[2]):
            keys = [
                j
                for j in range(k.shape[2])
                if (q_seg[b, i] == k_seg[b, j] or q_seg[b, i] == 0) and (not causal or j <= i)
            ]
            scores = torch.einsum("hd,hnd->hn", q[b, :, i], k[b, :, keys])  # (H, n)
            if position is not None:
                scores = scores + position[:, i, keys]
            queries.append(torch.einsum("hn,hnd->hd", torch.softmax(scores, -1), v[b, :, keys]))
        rows.append(torch.stack(queries, dim=1))  # (H, Q, D)
    return torch.stack(rows)


@pytest.mark.parametrize("causal", [False, True])
def test_kernels_on_packed_segments_equal_a_loop_reference(causal):
    """Block-diagonal segments (two sentences and padding in a row): values and gradients, bias included."""
    g = torch.Generator().manual_seed(4)
    B, H, T, D = 2, 3, 20, 8
    seg = torch.tensor([[1] * 7 + [2] * 9 + [0] * 4, [3] * 12 + [4] * 8])
    q, k, v = (torch.randn(B, H, T, D, generator=g, dtype=torch.float64) for _ in range(3))
    position = torch.randn(H, T, T, generator=g, dtype=torch.float64)
    leaves = [t.requires_grad_() for t in (q, k, v, position)]
    ref = reference_attention(q, k, v, position, seg, seg, causal)
    cot = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    ref_grads = torch.autograd.grad(ref, leaves, cot)
    for kind in ("eager", "sdpa"):
        out = attend(q, k, v, build_bias(kind, seg, seg, causal, position, torch.float64), 0.0)
        torch.testing.assert_close(out, ref)
        for got, want in zip(torch.autograd.grad(out, leaves, cot), ref_grads, strict=True):
            torch.testing.assert_close(got, want)
    with torch.no_grad():
        flex = attend(
            *(t.float() for t in (q, k, v)), build_bias("flex", seg, seg, causal, position.float(), torch.float32), 0.0
        )
    torch.testing.assert_close(flex.double(), ref.detach(), rtol=1e-5, atol=1e-5)


def test_masks_follow_segments():
    seg = torch.tensor([[1, 1, 2, 0]])
    ok = allowed(seg, seg, causal=False)[0]
    assert ok.tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 1, 1]]  # pads see all, are seen by none
    assert allowed(seg, seg, causal=True)[0].tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 1, 1]]


def test_options_that_cannot_run_are_one_line_errors():
    cpu = torch.device("cpu")
    base = dict(out_dir="", shards="")
    check_throughput_options(TrainConfig(**base, attention="sdpa", packing=True, fused_lm_head=True), cpu)
    with pytest.raises(ValueError, match="flex' trains on a GPU only"):
        check_throughput_options(TrainConfig(**base, attention="flex"), cpu)
    with pytest.raises(ValueError, match="unknown attention"):
        check_throughput_options(TrainConfig(**base, attention="flash"), cpu)
    with pytest.raises(ValueError, match="packing: options of the GUR T5"):
        check_throughput_options(TrainConfig(**base, method="tfcsg", packing=True), cpu)
    with pytest.raises(ValueError, match="pack_len 64 is shorter"):
        check_throughput_options(TrainConfig(**base, packing=True, pack_len=64), cpu)
    with pytest.raises(ValueError, match="a warm start"):
        GurModel(preset_config("tiny", init_from="/nonexistent", attention="sdpa"), load_weights=False)
