"""Does the label-free gate decide like a labelled one? A ladder of models scored on both suites of one corpus.

    .venv/bin/python benchmarks/gate_ladder.py [--docs /usr/share/doc/python3-doc/html/_sources] [--workdir DIR]

The corpus has labels and bodies: the Python documentation's reST sources (Debian's `python3-doc`), one
document per section (`title`: its heading, `text`: its prose, `page`: the page it is on). A night's split
(tasks/nightly/holdout.py, the seeded hash-based 20%) cuts both suites from the same held-out sections:
- labelled (`label_field = "page"`): question retrieval, a section's prose -> other sections of its page
  (P@1, as the gate scores a labelled corpus);
- label-free (no label field): heading -> prose (`heldout-title`, MRR@10, the gate's primary) and the
  inverse cloze task (`heldout-ict`, MRR@10).
The ladder: MiniLM (the start), BM25, MiniLM's architecture untrained, SimCSE from MiniLM on StackOverflow
titles (`cpu` preset; far below MiniLM on its own domain), TFCSG from MiniLM on the split's training side
(the `cpu` preset: mixed 0.75 with the start), its unmixed run and a 0.5 mix. Each model is gated against
MiniLM (margin 0, 95% paired test) on each suite; the orderings and their Kendall tau are printed, with
STS-B train and Lee-50 Spearman (the general-similarity guards) side by side.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import harness
from harness import shared_data

PYTHON_DOCS = Path("/usr/share/doc/python3-doc/html/_sources")
ADORNMENT = set("=-~^\"*+#:.'`_")
SUITES = ("labelled P@1", "title MRR@10", "ICT MRR@10")


# --- the corpus: reST sections ---------------------------------------------------------------------------


def _adornment(line: str) -> bool:
    line = line.rstrip()
    return len(line) >= 3 and len(set(line)) == 1 and line[0] in ADORNMENT


def _clean(text: str) -> str:
    """reST inline markup -> plain text: roles, literals, links, emphasis."""
    text = re.sub(r":[\w:+.-]+:`~?([^`<]*?)\s*(?:<[^>]*>)?`", r"\1", text)
    text = re.sub(r"``([^`]*)``", r"\1", text)
    text = re.sub(r"`([^`<]*?)\s*(?:<[^>]*>)?`_{1,2}", r"\1", text)
    text = re.sub(r"\*\*?([^*]+)\*\*?", r"\1", text)
    return re.sub(r"\s+", " ", text.replace("::", ":")).strip()


def rst_sections(source: str) -> list[tuple[str, str]]:
    """(heading, prose) of each section of a reST page: prose is the unindented paragraphs (directives,
    literal blocks, tables and field lists dropped)."""
    lines = source.splitlines()
    sections: list[tuple[str, list[str]]] = []
    title, body, i = None, [], 0
    while i < len(lines):
        line, following = lines[i], lines[i + 1] if i + 1 < len(lines) else ""
        over = _adornment(line) and i + 2 < len(lines) and _adornment(lines[i + 2]) and lines[i + 1].strip()
        under = line.strip() and not line[0].isspace() and not _adornment(line) and _adornment(following)
        if over or (under and len(following.rstrip()) >= len(line.rstrip())):
            sections.append((title, body))
            title, body = (lines[i + 1] if over else line).strip(), []
            i += 3 if over else 2
            continue
        body.append(line)
        i += 1
    sections.append((title, body))
    out = []
    for heading, text in sections:
        if not heading:
            continue
        paragraphs, current, skipping = [], [], False
        for line in text:
            if not line.strip():
                if current:
                    paragraphs.append(" ".join(current))
                current, skipping = [], False
            elif line[0].isspace() or skipping or _adornment(line) or line.startswith((".. ", ":", "+-", "|")):
                skipping = skipping or line.startswith(".. ")
            else:
                current.append(line.strip())
        if current:
            paragraphs.append(" ".join(current))
        prose = _clean(" ".join(paragraphs))
        if prose:
            out.append((_clean(heading), prose))
    return out


def docs_corpus(sources: Path, out: Path, min_words: int = 20) -> dict[str, int]:
    """One JSONL file per top-level folder of the documentation (`id`, `title`, `text`, `page`); a section
    needs a body of `min_words` words and two sentences or more. Returns counts."""
    from tasks.split.sentences import split_sentences

    out.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[dict]] = {}
    for path in sorted(sources.rglob("*.rst.txt")):
        page = path.relative_to(sources).as_posix().removesuffix(".rst.txt")
        for n, (heading, prose) in enumerate(rst_sections(path.read_text(encoding="utf-8", errors="replace"))):
            if len(prose.split()) >= min_words and len(split_sentences(prose)) >= 2:
                row = {"id": f"{page}#{n}", "title": heading, "text": prose, "page": page}
                groups.setdefault(page.split("/")[0] if "/" in page else "top", []).append(row)
    for name, rows in groups.items():
        (out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {"sections": sum(map(len, groups.values())), "files": len(groups)}


# --- the ladder --------------------------------------------------------------------------------------------


def score(models: dict[str, str], suites: dict[str, tuple[str, str]], extra: dict[str, tuple[str, str]]) -> dict:
    """Each model on each suite: the primary value and its per-query values (suites), or the value (extra:
    STS sets). `suites`: name -> (dataset kind, path) with the metric the gate reads."""
    from tasks.evaluate.suite import DatasetSpec, SuiteConfig, run_unit

    wanted = {"stackoverflow": ("question_retrieval", "precision", 1), "beir": ("retrieval", "mrr", 10)}
    table: dict[str, dict] = {}
    for label, spec in models.items():
        row: dict[str, object] = {}
        for name, (kind, path) in {**suites, **extra}.items():
            if kind in ("stsb", "lee") and spec == "bm25":
                continue
            result = run_unit(spec, DatasetSpec(kind, path), SuiteConfig())
            if kind in wanted:
                task, metric, k = wanted[kind]
                value = next(v for v in result.values if (v.task, v.metric, v.k) == (task, metric, k))
                row[name] = (value.value, value.per_query)
            else:
                row[name] = next(v.value for v in result.values if v.metric == "spearman")
        table[label] = row
        print(f"  scored {label}: " + ", ".join(f"{k} {_value(v):.3f}" for k, v in row.items()), flush=True)
    return table


def _value(cell) -> float:
    return cell[0] if isinstance(cell, tuple) else cell


def gate_decisions(table: dict, start: str, suites: list[str], confidence: float = 0.95) -> dict:
    """For each model and suite: would the gate (margin 0, paired test) promote it over `start`?"""
    from tasks.nightly.gate import gate
    from tasks.nightly.significance import paired_test

    out: dict[str, dict[str, bool]] = {}
    for label, row in table.items():
        if label == start:
            continue
        out[label] = {}
        for name in suites:
            (cand, cand_q), (champ, champ_q) = row[name], table[start][name]
            test = paired_test(cand_q, champ_q, confidence)
            out[label][name] = gate({"p": cand}, {"p": champ}, "p", 0.0, {}, test).promote
    return out


def ordering(table: dict, name: str) -> list[str]:
    """Models from best to worst on one column (ties keep the table's order)."""
    return sorted((m for m in table if name in table[m]), key=lambda m: -_value(table[m][name]))


def kendall_tau(table: dict, a: str, b: str) -> float:
    """Kendall's tau-b between two columns over the models that have both."""
    from scipy.stats import kendalltau

    models = [m for m in table if a in table[m] and b in table[m]]
    return float(kendalltau([_value(table[m][a]) for m in models], [_value(table[m][b]) for m in models]).statistic)


def markdown(table: dict, decisions: dict, columns: list[str], start: str) -> str:
    lines = [
        "| model | " + " | ".join(columns) + " | labelled gate | label-free gate |",
        "|---" * (len(columns) + 3) + "|",
    ]
    for label, row in table.items():
        cells = [f"{_value(row[c]):.3f}" if c in row else "-" for c in columns]
        gates = (
            ("(champion)", "(champion)")
            if label == start
            else (
                "promote" if decisions[label][SUITES[0]] else "refuse",
                "promote" if decisions[label][SUITES[1]] else "refuse",
            )
        )
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {gates[0]} | {gates[1]} |")
    return "\n".join(lines)


def main() -> None:
    parser = harness.parser(__doc__, workdir_help="keeps the corpus, the splits and the trained runs")
    parser.add_argument("--docs", default=str(PYTHON_DOCS), help="reST sources (apt-get install python3-doc)")
    parser.add_argument("--share", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stackoverflow", default=str(shared_data("stackoverflow", "train.tsv")))
    parser.add_argument("--stsb", default=str(shared_data("stsb", "stsb-en-train.csv")))
    args = parser.parse_args()

    from flows.mine_keywords import mine_keywords
    from flows.train import train_flow
    from models.encoders import minilm_path
    from storage.stage_output import ref_dir
    from tasks.nightly.holdout import HoldoutConfig, split_corpus

    work, show = harness.workdir(args), harness.Lines()
    root, corpus = work / "data", work / "corpus"
    started = time.time()
    counts = docs_corpus(Path(args.docs), corpus)
    show(f"corpus: {counts['sections']} sections in {counts['files']} files")
    fields = {"text_field": "text", "title_field": "title", "share": args.share, "seed": args.seed}
    labelled = split_corpus(corpus, HoldoutConfig(label_field="page", **fields), root)
    free = split_corpus(corpus, HoldoutConfig(label_field="", **fields), root)
    assert labelled.kind == "labelled" and free.kind == "label-free"
    show(f"held out: {labelled.counts['holdout']} sections; training on {labelled.counts['train']}")

    minilm = str(minilm_path())
    kw = mine_keywords(input_path=str(labelled.train), text_field="text", title_field="title", root=str(root))
    tfcsg = train_flow(method="tfcsg", preset="cpu", init_from=minilm, keywords=kw["fingerprint"], root=str(root))
    manifest = json.loads((ref_dir(root, tfcsg) / "_manifest.json").read_text())
    unmixed = root / manifest["unmixed"]["path"] / "export"
    half = train_flow(
        method="tfcsg",
        preset="cpu",
        init_from=minilm,
        keywords=kw["fingerprint"],
        root=str(root),
        options={"interpolate": 0.5},
    )
    simcse = train_flow(
        method="simcse",
        preset="cpu",
        init_from=minilm,
        texts=args.stackoverflow,
        root=str(root),
        options={"text_field": "title"},
    )
    train_s = time.time() - started
    models = {
        "MiniLM (start)": "minilm",
        "BM25": "bm25",
        "MiniLM untrained": "untrained:0",
        "SimCSE on StackOverflow titles": str(ref_dir(root, simcse) / "export"),
        "TFCSG unmixed": str(unmixed),
        "TFCSG default (mix 0.75)": str(ref_dir(root, tfcsg) / "export"),
        "TFCSG mix 0.5": str(ref_dir(root, half) / "export"),
    }
    title, ict = free.beir
    suites = {
        SUITES[0]: ("stackoverflow", labelled.stackoverflow),
        SUITES[1]: ("beir", title),
        SUITES[2]: ("beir", ict),
    }
    extra = {"Lee-50 rho": ("lee", "")}
    if Path(args.stsb).is_file():
        extra = {"STS-B train rho": ("stsb", args.stsb), **extra}
    table = score(models, suites, extra)
    decisions = gate_decisions(table, "MiniLM (start)", list(SUITES))
    columns = [*SUITES, *extra]
    show(markdown(table, decisions, columns, "MiniLM (start)"))
    for name in SUITES:
        show(f"{name} ordering: " + " > ".join(ordering(table, name)))
    taus = {f"{a} vs {b}": kendall_tau(table, a, b) for a, b in ((SUITES[0], SUITES[1]), (SUITES[0], SUITES[2]))}
    if "STS-B train rho" in extra:
        taus["STS-B train rho vs Lee-50 rho"] = kendall_tau(table, "STS-B train rho", "Lee-50 rho")
    for name, tau in taus.items():
        show(f"Kendall tau, {name}: {tau:+.3f}")
    agree = sum(d[SUITES[0]] == d[SUITES[1]] for d in decisions.values())
    show(f"gate decisions against MiniLM: labelled and label-free agree on {agree} of {len(decisions)} models")
    show(f"{time.time() - started:.0f} s wall, {train_s:.0f} s of it training")
    figures = {
        "corpus": counts,
        "held_out": labelled.counts["holdout"],
        "table": {m: {k: _value(v) for k, v in row.items()} for m, row in table.items()},
        "decisions": decisions,
        "tau": taus,
    }
    harness.record(args, f"The gate ladder on {counts['sections']:,} documentation sections", show.lines, figures)


if __name__ == "__main__":
    main()
