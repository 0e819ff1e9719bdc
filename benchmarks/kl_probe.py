"""What TFCSG's KL task does to MiniLM: how far from uniform its two distributions are, and how strongly
its gradient pulls on the encoder next to the contrastive losses'.

    .venv/bin/python benchmarks/kl_probe.py [--batches 4] [--keywords DATA_ROOT/keywords/<fp>]

For batches of 64 StackOverflow titles (the newest keywords output under `$GUR_HOME`, or
`--keywords`): the perplexity of softmax(h_t) and of softmax(x_hat) as a share of the vector size
(1.0 = uniform), ell_kl, and the norm of each loss's gradient on the encoder's weights, with the
paper's sigmoid on x_hat and without it. Prints a table.
"""

from __future__ import annotations

import harness
import numpy as np
import torch


def perplexity_share(v: torch.Tensor) -> float:
    """exp(entropy) of softmax(v) over the vector size: 1.0 is the uniform distribution."""
    p = torch.softmax(v.float(), -1)
    return float(torch.exp(-(p * p.log()).sum(-1)).mean() / v.shape[-1])


def encoder_grad_norm(model, loss) -> float:
    model.zero_grad(set_to_none=True)
    loss.backward(retain_graph=True)
    grads = [p.grad.norm() ** 2 for p in model.encoder.parameters() if p.grad is not None]
    return float(torch.stack(grads).sum().sqrt()) if grads else 0.0


def main() -> None:
    parser = harness.parser(__doc__, workdir=None)
    parser.add_argument("--keywords", default=None, help="a keywords stage folder (default: the newest)")
    parser.add_argument("--batches", type=int, default=4)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from models.encoders import minilm_path
    from models.tfcsg.losses import contrastive_loss, kl_loss, topic_negative_mask
    from models.tfcsg.model import TfcsgModel
    from models.tfcsg.question_data import QuestionConfig, QuestionData, QuestionStream
    from storage.layout import data_root
    from storage.stage_output import latest_ref

    source = args.keywords or str(data_root(None) / latest_ref(data_root(None), "keywords")["path"])
    tok = AutoTokenizer.from_pretrained(str(minilm_path()))
    data = QuestionData(QuestionConfig(source=source, heldout_fraction=0.0), tok)
    stream = QuestionStream(data)
    print(f"keywords: {source}")
    show = harness.Lines()
    show(f"{len(data.train_rows)} questions, {args.batches} batches of 64, MiniLM, mean pooling")
    show("| x_hat | perplexity share softmax(h_t) | softmax(x_hat) | ell_kl | grad norm kl | cl | kw |")
    show("|---|---|---|---|---|---|---|")
    figures = {"questions": len(data.train_rows), "batches": args.batches}
    for activation in ("sigmoid", "linear"):
        torch.manual_seed(0)
        model = TfcsgModel(str(minilm_path()), pooling="mean", kl_activation=activation)
        rows = []
        for i in range(args.batches):
            batch = stream.data.collate(stream.rows(i))
            mask = topic_negative_mask(batch["topics"], batch["text_ids"])
            h_q, h_q2 = model.sentence(
                torch.cat([batch["input_ids"]] * 2), torch.cat([batch["attention_mask"]] * 2)
            ).chunk(2)
            h_t = model.sentence(batch["kw_input_ids"], batch["kw_attention_mask"])
            x_hat = model.reconstruct(h_q)
            kl = kl_loss(h_t.detach(), x_hat)
            rows.append(
                (
                    perplexity_share(h_t),
                    perplexity_share(x_hat),
                    float(kl),
                    encoder_grad_norm(model, kl),
                    encoder_grad_norm(model, contrastive_loss(h_q, h_q2, 0.05, mask)),
                    encoder_grad_norm(model, contrastive_loss(h_q, h_t, 0.05, mask)),
                )
            )
        m = np.mean(rows, axis=0)
        names = ("perplexity_h_t", "perplexity_x_hat", "kl", "grad_kl", "grad_cl", "grad_kw")
        figures[activation] = dict(zip(names, m.tolist(), strict=True))
        show(f"| {activation} | {m[0]:.3f} | {m[1]:.4f} | {m[2]:.4f} | {m[3]:.4f} | {m[4]:.3f} | {m[5]:.3f} |")
    harness.record(args, "TFCSG's KL task on MiniLM: its distributions and its gradient", show.lines, figures)


if __name__ == "__main__":
    main()
