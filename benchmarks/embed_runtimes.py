"""Embedding runtimes and precisions against `SentenceTransformer.encode` fp32: documents per CPU second and top-10.

    .venv/bin/python benchmarks/embed_runtimes.py --documents ROOT/ingest/FP [--model PATH] [--docs 600]
        [--variants torch-bf16,ov-bf16,ov-int8,ort-int8] [--record]

`--documents` is an ingest output (its `part-*.parquet`); `--docs` of its documents, drawn with `--seed`, are
embedded as the embed stage reads them ("title\\ntext", the model's truncation, batches of 32 sorted by token
count). The reference is the model's own fp32 forward pass in PyTorch; `SentenceTransformer.encode` fp32 on
the same texts is the speed anchor (the figure the issue's targets are stated against). Each variant:

- `torch-bf16`: the model cast to bfloat16 (the embed stage's `precision = "bfloat16"`);
- `ort-fp32`, `ort-int8`: ONNX Runtime on the model exported to ONNX (TorchScript exporter, pooling inside the
  graph); int8 is ONNX Runtime's dynamic quantization (int8 weights per channel, activations per batch);
- `ov-fp32`, `ov-bf16`: OpenVINO on the model converted from PyTorch, at f32 or bf16 inference precision;
- `ov-int8`: OpenVINO after NNCF's post-training static quantization (transformer preset, SmoothQuant),
  calibrated on 300 other documents of the corpus (never the measured ones), run at bf16 for what stays float;
- `ov-w8`: OpenVINO with int8 weights only (NNCF weight compression), activations in bf16.

Printed per variant: CPU seconds (this process, `resource.getrusage`) and documents per CPU second, the ratio to
`SentenceTransformer.encode` fp32, and against the fp32 reference over `--queries` section titles (embedded
in fp32): the mean share of the same top-10 documents, the share of queries whose ten are identical in order,
and the vectors' mean and least cosine. Both runtimes are threads=`--threads` (2: the machine's cores). Needs
`onnxruntime onnx` and `openvino nncf` (pip); a variant whose runtime is missing is skipped with a line.
Run it alone: a second heavy job on the machine inflates every CPU figure.
"""

from __future__ import annotations

import resource
from pathlib import Path

import harness
import numpy as np

VARIANTS = ("torch-bf16", "ort-fp32", "ort-int8", "ov-fp32", "ov-bf16", "ov-int8", "ov-w8")


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def corpus_texts(documents: Path, n: int, calibration: int, seed: int) -> tuple[list[str], list[str], list[str]]:
    """(measured documents, calibration documents, queries): disjoint seeded draws of one ingest output."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = sorted(documents.glob("part-*.parquet"))
    if not parts:
        raise SystemExit(f"{documents}: no part-*.parquet (give an ingest output's folder)")
    table = pa.concat_tables([pq.read_table(p, columns=["title", "text"]) for p in parts])
    titles, texts = table.column("title").to_pylist(), table.column("text").to_pylist()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(texts))
    as_read = [f"{titles[i]}\n{texts[i]}" if titles[i] else texts[i] for i in order]
    queries = [titles[i] for i in rng.permutation(len(texts))[:200] if titles[i]]
    return as_read[:n], as_read[n : n + calibration], queries


def pooled_module(model):
    """The model's whole forward pass as one module of tensors (pooling included): what the exporters trace."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            features = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                features["token_type_ids"] = token_type_ids
            return self.model(features)["sentence_embedding"]

    return Pooled()


def main() -> None:
    parser = harness.parser(__doc__, workdir="temp", workdir_help="keeps the exported models")
    parser.add_argument("--documents", required=True, help="an ingest output folder (part-*.parquet)")
    parser.add_argument("--model", default="", help="a sentence-transformers folder (default: MiniLM)")
    parser.add_argument("--docs", type=int, default=600, help="documents embedded per variant")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=", ".join(VARIANTS))
    args = parser.parse_args()
    import torch
    from sentence_transformers import SentenceTransformer

    from models.encoders import l2_normalise, minilm_path
    from tasks.embed.vectors import token_lengths

    work, show = harness.workdir(args), harness.Lines()
    torch.set_num_threads(args.threads)
    model_path = args.model or str(minilm_path())
    docs, calibration, queries = corpus_texts(Path(args.documents), args.docs, 300, args.seed)
    st = SentenceTransformer(model_path, device="cpu", local_files_only=True).eval()
    tok, limit = st.tokenizer, st.max_seq_length
    names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in tok("a b", return_tensors="np")]
    dim = int(st.get_sentence_embedding_dimension())

    def batches(texts: list[str], size: int = 32):
        lengths = token_lengths(st, texts)  # the embed stage's batch order
        order = sorted(range(len(texts)), key=lambda i: (-lengths[i], i))
        for start in range(0, len(order), size):
            rows = order[start : start + size]
            f = tok([texts[i] for i in rows], truncation=True, max_length=limit, padding=True, return_tensors="np")
            yield rows, {k: f[k].astype(np.int64) for k in names}

    def embed(fn, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), dim), np.float32)
        for rows, features in batches(texts):
            out[rows] = fn(features)
        return l2_normalise(out)

    def torch_fn(model):
        def run(features):
            with torch.inference_mode():
                tensors = {k: torch.from_numpy(v) for k, v in features.items()}
                return model(tensors)["sentence_embedding"].float().numpy()

        return run

    reference = embed(torch_fn(st), docs)
    started = cpu_seconds()
    st.encode(docs, batch_size=32)
    anchor = cpu_seconds() - started
    query_vectors = st.encode(queries, normalize_embeddings=True)
    top_ref = np.argsort(-(query_vectors @ reference.T), axis=1)[:, :10]
    show(
        f"model {Path(model_path).name}, {len(docs)} documents, {len(top_ref)} queries, {args.threads} threads",
        f"SentenceTransformer.encode fp32: {anchor:.1f} CPU s, {len(docs) / anchor:.1f} documents per CPU s",
        "",
        "| variant | CPU s | docs / CPU s | x encode fp32 | top-10 same | ten identical | cosine mean | least |",
        "|---|---|---|---|---|---|---|---|",
    )
    rows = {}

    def measure(name: str, fn) -> None:
        embed(fn, docs[:32])  # warm-up: the runtimes compile per shape
        started = cpu_seconds()
        vectors = embed(fn, docs)
        cpu = cpu_seconds() - started
        top = np.argsort(-(query_vectors @ vectors.T), axis=1)[:, :10]
        same = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top, top_ref, strict=True)]))
        identical = float(np.mean([list(a) == list(b) for a, b in zip(top, top_ref, strict=True)]))
        cosine = np.sum(vectors * reference, axis=1)
        rows[name] = {"cpu_s": cpu, "docs_per_cpu_s": len(docs) / cpu, "vs_encode": anchor / cpu, "top10": same}
        show(
            f"| {name} | {cpu:.1f} | {len(docs) / cpu:.1f} | {anchor / cpu:.2f} | {same:.3f} | {identical:.2f} | "
            f"{cosine.mean():.4f} | {cosine.min():.4f} |"
        )

    wanted = [v for v in args.variants.split(",") if v]
    measure("torch-fp32", torch_fn(st))
    if "torch-bf16" in wanted:
        bf16 = SentenceTransformer(model_path, device="cpu", local_files_only=True).to(torch.bfloat16).eval()
        measure("torch-bf16", torch_fn(bf16))
    example = tok(["hello world"] * 2, return_tensors="pt", padding=True)
    if any(v.startswith("ort-") for v in wanted):
        try:
            import onnxruntime as ort
            from onnxruntime.quantization import QuantType, quantize_dynamic
        except ImportError:
            show("ort-*: skipped (pip install onnxruntime onnx)")
        else:
            onnx_path = work / "model.onnx"
            torch.onnx.export(
                pooled_module(st), tuple(example[k] for k in names), str(onnx_path), input_names=names,
                output_names=["embedding"], dynamic_axes={k: {0: "batch", 1: "tokens"} for k in names},
                opset_version=17, dynamo=False,
            )  # fmt: skip
            options = ort.SessionOptions()
            options.intra_op_num_threads = args.threads

            def ort_fn(path: Path):
                session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
                return lambda features: session.run(None, features)[0]

            if "ort-fp32" in wanted:
                measure("ort-fp32", ort_fn(onnx_path))
            if "ort-int8" in wanted:
                quantize_dynamic(str(onnx_path), str(work / "model.int8.onnx"), weight_type=QuantType.QInt8,
                                 per_channel=True)  # fmt: skip
                measure("ort-int8", ort_fn(work / "model.int8.onnx"))
    if any(v.startswith("ov-") for v in wanted):
        try:
            import nncf
            import openvino as ov
        except ImportError:
            show("ov-*: skipped (pip install openvino nncf)")
        else:
            core = ov.Core()

            def ov_model():  # a fresh conversion: NNCF's weight compression changes a model in place
                return ov.convert_model(pooled_module(st), example_input={k: example[k] for k in names})

            def ov_fn(model, precision: str):
                config = {"INFERENCE_NUM_THREADS": args.threads, "INFERENCE_PRECISION_HINT": precision}
                request = core.compile_model(model, "CPU", config).create_infer_request()
                return lambda features: request.infer(features)[0].copy()

            if "ov-fp32" in wanted:
                measure("ov-fp32", ov_fn(ov_model(), "f32"))
            if "ov-bf16" in wanted:
                measure("ov-bf16", ov_fn(ov_model(), "bf16"))
            if "ov-int8" in wanted:
                calibration_batches = [features for _, features in batches(calibration, 8)]
                data = nncf.Dataset(calibration_batches)  # subset_size counts batches: every one of them
                quantized = nncf.quantize(
                    ov_model(), data, model_type=nncf.ModelType.TRANSFORMER, subset_size=len(calibration_batches)
                )
                measure("ov-int8", ov_fn(quantized, "bf16"))
            if "ov-w8" in wanted:
                weights_int8 = nncf.compress_weights(ov_model(), mode=nncf.CompressWeightsMode.INT8_ASYM)
                measure("ov-w8", ov_fn(weights_int8, "bf16"))
    title = f"Embedding runtimes and precisions: {Path(model_path).name}"
    harness.record(args, title, show.lines, {"anchor_cpu_s": anchor, "rows": rows})


if __name__ == "__main__":
    main()
