"""`gur`'s argument parser: one small function per command. The options of the flows that take their
parameters from `flows/parameters.py` are made from it (`add_options`): each default and help is the
config field's, written once."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from cli.checks import (
    check_build_pairs,
    check_embed,
    check_evaluate,
    check_mine_keywords,
    check_nightly,
    check_search,
    check_serve,
    check_sts,
    check_train,
)
from cli.commands import (
    cmd_build_pairs,
    cmd_catalog,
    cmd_demo,
    cmd_embed,
    cmd_evaluate,
    cmd_mine_keywords,
    cmd_models,
    cmd_nightly,
    cmd_promote,
    cmd_rollback,
    cmd_search,
    cmd_search_page,
    cmd_serve,
    cmd_server,
    cmd_sql,
    cmd_sts,
    cmd_train,
    cmd_verify,
)
from cli.retention import parse_du, parse_gc

Add = Callable[..., argparse.ArgumentParser]  # `subcommand` with the parser's subparsers bound


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already says it or the option is a flag."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(default" in text or action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
            return text
        if not action.option_strings and action.nargs not in ("?", "*"):
            return text  # a required positional has no default
        return text + " (default: %(default)s)"


class RawHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """`HelpFormatter` that keeps the description's own line breaks (examples, tables)."""


def root_help() -> str:
    from tasks.runtime.parameters import RunOptions, field_of, help_of

    return help_of(field_of(RunOptions, "root")) + "; before or after the command"


def build_parser() -> argparse.ArgumentParser:
    """`gur`, `--root` (before or after the command) and every command in `COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="gur",
        formatter_class=HelpFormatter,
        description="Turn raw unlabeled documents into a domain-adapted text encoder. Every stage writes Parquet "
        "under the data root (--root, else $GUR_HOME, else ./data) and `catalog.duckdb` has a view per table.",
    )
    parser.add_argument("--root", default=None, help=root_help())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=argparse.SUPPRESS, help=root_help())  # SUPPRESS: keeps a --root given before

    def add(name: str, help: str, description: str | None = None, raw: bool = False) -> argparse.ArgumentParser:
        """A command: its description (default: its help line), --root, every option's default in --help."""
        return sub.add_parser(
            name,
            help=help,
            description=description or help[0].upper() + help[1:] + ".",
            parents=[common],
            formatter_class=RawHelpFormatter if raw else HelpFormatter,
        )

    for define in COMMANDS:
        define(add)
    return parser


def parse_demo(add: Add) -> None:
    from flows.parameters import READER_OPTIONS, BuildPairsParams
    from tasks.evaluate.data import DemoRetrievalConfig
    from tasks.runtime.parameters import add_options

    demo = add(
        "demo",
        help="run build-pairs on the bundled Wikipedia sample and show a query",
        description="Run build-pairs (ingest -> split -> pair -> shuffle) on the English Wikipedia sample that ships "
        "with gensim (a MediaWiki dump of about 200 articles), then print two queries over the catalog. "
        f"{DemoRetrievalConfig.held_out_percent}% of the articles are held out for `gur evaluate`'s demo "
        "retrieval set. The reader options are the dump's own; run build-pairs for your corpus.",
    )
    own = [name for name in BuildPairsParams.__dataclass_fields__ if name not in ("input_path", *READER_OPTIONS)]
    add_options(demo, BuildPairsParams, own, help={"source_name": "name used in doc_ids (default: enwiki-sample)"})
    defaults = BuildPairsParams()  # the MediaWiki reader of the bundled dump ignores the field names
    reader = {name: getattr(defaults, name) for name in READER_OPTIONS}
    demo.set_defaults(func=cmd_demo, check=check_build_pairs, input_path=None, **reader)


def parse_build_pairs(add: Add) -> None:
    from flows.parameters import BuildPairsParams
    from tasks.runtime.parameters import add_options

    build = add(
        "build-pairs",
        help="run the build-pairs flow on a corpus file or folder",
        description="Read a corpus, split it into sentences, pair sentences of one document that share a long "
        "common subsequence (LCS) and write deduplicated, shuffled training shards. Each stage is a Parquet "
        "folder under the data root named by its fingerprint, and a rerun reuses every finished stage. "
        "`gur catalog` lists the tables, `gur sql` queries them.",
    )
    add_options(build, BuildPairsParams)
    build.set_defaults(func=cmd_build_pairs, check=check_build_pairs)


def parse_mine_keywords(add: Add) -> None:
    from flows.parameters import MineKeywordsParams
    from tasks.runtime.parameters import add_options

    kw = add("mine-keywords", help="GSDMM topics and topic-keyword sequences (the TFCSG recipe)")
    add_options(kw, MineKeywordsParams)
    kw.set_defaults(func=cmd_mine_keywords, check=check_mine_keywords)


TRAIN_DESCRIPTION = """One training run. Rerunning the same command reuses a finished run and resumes an
interrupted one from its newest checkpoint (Ctrl-C or SIGTERM saves one).

methods:
  gur     T5 span-corruption LM + in-batch contrastive on the newest `build-pairs` shards
  tfcsg   fine-tune a pretrained encoder (default: the shipped all-MiniLM-L6-v2) on the newest
          `mine-keywords` output: contrastive, KL and keyword-generation losses (--losses)
  simcse  the same encoder, batch, length and epochs, unsupervised SimCSE only (losses cl);
          on a keywords output or on any text column (--texts FILE --text-field F)
  documents
          fine-tune the same encoder, for long documents (manuals, wiki pages), on the newest
          `build-pairs` split output's sentences: title -> body and inverse-cloze pairs of each
          document, and the GUR pairs of the shuffle output mined from that split as a fifth of
          the batches (gur_share 0.2; --options '{"gur_share": 0}' turns them off: docs/nightly-config.md)

presets (tfcsg / simcse; default auto = cpu, the measured one, on every machine; printed at the start):
  paper   the TFCSG paper: Adam lr 3e-5, batch 32, 10 epochs, max length 32, [CLS] pooling,
          losses cl+kl+s2s, every in-batch negative
  cpu     16,000 titles in under 30 minutes on 2 cores: 1 epoch, batch 64, mean pooling, losses
          kw+s2s (question vs its own keyword sequence, plus keyword generation at weight 8) with
          same-topic negatives masked, the export mixed 0.75 with the start's weights (interpolate:
          keeps general similarity; simcse is never mixed); cuts the paper's 10 epochs to 1 and
          takes what measured best on a dev split
  gur: tiny (CPU tests) or small (GUR-Small, the default)
  documents: one preset of its own (models/training/presets.py), whatever --preset names

examples:
  gur mine-keywords questions.tsv --text-field title --title-field ''
  gur train --method tfcsg                              # newest keywords, preset auto
  gur train --method tfcsg --preset cpu --losses cl+kl+s2s --negatives all \
      --options '{"s2s_weight": 1, "interpolate": 1}'  # the paper's losses, weights, no mix
  gur train --method simcse --texts questions.tsv --text-field title
  gur train --method documents                          # newest split output (gur build-pairs)
  gur train --preset tiny --steps 1000                  # GUR"""


def parse_train(add: Add) -> None:
    from models.training.presets import METHODS, OBJECTIVES
    from tasks.ingest.checks import train_option_names

    p = add(
        "train",
        help="train an encoder: GUR on the newest shards, TFCSG on the newest keywords, or SimCSE",
        raw=True,
        description=TRAIN_DESCRIPTION,
    )
    p.add_argument(
        "--method",
        default=METHODS[0],
        choices=METHODS,
        help="training recipe (methods above); documents trains on a split output's sentences: title -> body and "
        "inverse-cloze pairs, and GUR pairs from the shuffle output mined from that split as the option gur_share "
        "of the batches (0.2)",
    )
    p.add_argument("--objective", default=OBJECTIVES[0], choices=OBJECTIVES, help="gur: GUR-FULL, -LM, -CL")
    add_train_run_options(p)
    p.add_argument(
        "--options",
        default="",
        help="any other TrainConfig field (models/training/config.py) as JSON, e.g. "
        '\'{"kl_weight": 0.5, "kl_detach_target": false}\' (default: none, the preset\'s values); fields: '
        + ", ".join(train_option_names()),
    )
    p.set_defaults(func=cmd_train, check=check_train)


def add_train_run_options(p: argparse.ArgumentParser) -> None:
    """`gur train`'s inputs, and the settings a preset chooses when not given (models/training/presets.py)."""
    from models.training.presets import QUESTION_PRESETS

    p.add_argument(
        "--preset",
        default=None,
        choices=["tiny", "small", *QUESTION_PRESETS],
        help="gur: tiny/small (default small); tfcsg/simcse: paper/cpu/auto (default auto)",
    )
    p.add_argument(
        "--steps", type=int, default=None, help="optimizer steps (default: gur 10000; tfcsg/simcse: from the epochs)"
    )
    p.add_argument("--variant", default="lcs", choices=["lcs", "none"], help="gur: pair rule of the shards")
    p.add_argument(
        "--pooling", default=None, choices=["cls", "mean", "eos"], help="sentence vector pooling (default: preset's)"
    )
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default: gur 1e-4; tfcsg/simcse 3e-5)")
    p.add_argument(
        "--init-from", default="", help="warm-start from a local model folder (tfcsg/simcse default: MiniLM)"
    )
    p.add_argument("--nproc", type=int, default=0, help="processes (GPUs) for torchrun; 0: one per GPU, else 1")
    p.add_argument("--keywords", default=None, help="tfcsg/simcse: keywords fingerprint (default: the newest)")
    p.add_argument(
        "--texts",
        default=None,
        help="simcse: a .tsv/.csv/.jsonl/.parquet file of texts instead (default: none, the newest keywords)",
    )
    p.add_argument("--text-field", default=None, help="column with the text (default: text)")
    p.add_argument(
        "--losses",
        default=None,
        help="tfcsg: '+'-joined cl, kl, s2s, kw (default: the preset's; paper: cl+kl+s2s, cpu: kw+s2s)",
    )
    p.add_argument(
        "--negatives",
        default=None,
        choices=["all", "topic-masked"],
        help="tfcsg/simcse: in-batch negatives (default: the preset's; paper: all, cpu: topic-masked)",
    )
    p.add_argument("--temperature", type=float, default=None, help="contrastive temperature (default: 0.05)")
    p.add_argument(
        "--epochs", type=float, default=None, help="tfcsg/simcse: passes over the data (default: the preset's)"
    )
    p.add_argument(
        "--batch-size", type=int, default=None, help="tfcsg/simcse: questions per batch (default: the preset's)"
    )
    p.add_argument("--seed", type=int, default=None, help="seed of data order, dropout and new weights (default: 0)")


def parse_evaluate(add: Add) -> None:
    from flows.parameters import EvaluateParams
    from tasks.runtime.parameters import add_options

    ev = add(
        "evaluate",
        help="evaluate models and baselines on retrieval, question retrieval, STS, zero-shot",
        description="Evaluate model folders and baselines (bm25, minilm, untrained, glove, word2vec). A default "
        "file that is not on this machine (the shared data: $GUR_SHARED_DATA, else ../shared/data beside the "
        "repository) is skipped with a note; a given file that is missing is reported as not run. Results: the "
        "metrics table, report.md and charts.",
    )
    add_options(ev, EvaluateParams)
    ev.set_defaults(func=cmd_evaluate, check=check_evaluate)


def parse_sts(add: Add) -> None:
    from flows.parameters import stsb_file

    st = add(
        "sts",
        help="supervised STS-B: the survey's model families (word vectors to LLMs) trained and scored",
        description="Train and score STS model families on STS-B (MSE on score/5, Pearson, Spearman), each "
        "(family, language, seed) a cached unit; rows go to the metrics table (task sts_supervised) and a report "
        "puts the survey's published figures beside ours. Families: w2v-sg w2v-cbow glove rnn lstm gru rnn-glove "
        "lstm-glove gru-glove infersent cross-minilm cross-minilm-mlp cross-mpnet cross-mpnet-mlp sbert-minilm "
        "sbert-mpnet minilm-zeroshot llm-zeroshot llm-sft llm-lora, or KIND:DIR (cross, cross-mlp, siamese, zeroshot, "
        "llm-sft, llm-lora, llm-zeroshot) for a model folder, e.g. siamese:data/train/<fp>/export.",
    )
    st.add_argument("families", nargs="*", help="families to run (default: the preset's table)")
    st.add_argument("--lang", nargs="+", default=["en"], choices=["en", "zh"], help="languages (default: en)")
    for split, what in (("train", "training"), ("dev", "dev")):
        st.add_argument(
            f"--{split}",
            default=None,
            help=f"{what} CSV (default: {stsb_file('LANG', split)}; when that file is absent, gur sts stops "
            f"before any work: pass --{split} FILE)",
        )
    st.add_argument("--test", default=None, help="test CSV, scored too when given (default: none)")
    st.add_argument(
        "--preset",
        default="cpu",
        choices=["cpu", "paper"],
        help="cpu: the English table in under 90 min on 2 cores; paper: the survey's settings (GPU) ",
    )
    st.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds, one unit each (default: 0)")
    st.add_argument(
        "--holdout",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="train on all but a seeded SHARE of the training pairs and score that share too (split "
        "<train>-holdoutNN): choose settings on it, never on dev (default: 0, train on all)",
    )
    st.add_argument(
        "--options",
        default=None,
        help="StsTrainConfig fields (models/sts/train.py) as JSON for every trained family, e.g. "
        "'{\"max_steps\": 20}' (default: none, the preset's values)",
    )
    st.set_defaults(func=cmd_sts, check=check_sts)


def parse_sql(add: Add) -> None:
    sql = add(
        "sql",
        help='query the catalog, e.g. gur sql "SELECT count(*) FROM sentences"',
        description="Run one DuckDB SQL query over the catalog (<root>/catalog.duckdb, read-only) and print the "
        "first rows as a table. Each table is a view over the newest complete output of its stage: documents, "
        "sentences, pairs, shards, rejects, keywords, metrics, promotions, ... (`gur catalog` lists them).",
    )
    sql.add_argument("query", help="SQL over the views: documents, sentences, rejects, ...")
    sql.add_argument("--limit", type=int, default=50, help="rows to print at most")
    sql.set_defaults(func=cmd_sql)


def parse_catalog(add: Add) -> None:
    catalog = add(
        "catalog",
        help="list the catalog's views with row counts",
        description="List the views of <root>/catalog.duckdb with their row counts and definitions: one view per "
        "table, over the newest complete output of its stage. --refresh rebuilds them from the stage manifests "
        "(after moving the data root, or when a run could not update the catalog).",
    )
    catalog.add_argument("--refresh", action="store_true", help="rebuild the views first (e.g. after moving the root)")
    catalog.set_defaults(func=cmd_catalog)


def parse_verify(add: Add) -> None:
    verify = add(
        "verify",
        help="check every stage output's files against its manifest (sizes and SHA-256)",
        description="Check every complete stage output (or one stage's) against the sizes and SHA-256 hashes\n"
        "its manifest recorded. A damaged output is marked invalid (its manifest moves to _invalid.json):\n"
        "readers stop using it and the next run that needs it rebuilds it. Exit status 1 when any was\n"
        "damaged. (Every cache hit already checks sizes; hashes read every byte, so they are checked here.)",
        raw=True,
    )
    verify.add_argument("stage", nargs="?", default=None, help="one stage, e.g. shuffle (default: every stage)")
    verify.set_defaults(func=cmd_verify)


def parse_serve(add: Add) -> None:
    from deployments.serve import NIGHTLY_CRON, NIGHTLY_TZ

    serve = add(
        "serve",
        help="serve the deployments (needs a Prefect server: `gur server start`, or PREFECT_API_URL)",
        description="Serve every deployment (build-pairs, mine-keywords, train, evaluate, nightly-retrain, sts, "
        "embed) from this process until it is stopped; `prefect deployment run FLOW/DEPLOYMENT` starts a run, which "
        "executes here with this process's working directory and GUR_HOME. nightly-retrain runs on a cron schedule "
        "with a concurrency limit of 1. Needs a running Prefect server: `gur server start` (or PREFECT_API_URL set).",
    )
    serve.add_argument("--cron", default=NIGHTLY_CRON, help="nightly-retrain schedule (default: '%(default)s')")
    serve.add_argument("--timezone", default=NIGHTLY_TZ, help="timezone of the cron schedule ")
    serve.add_argument("--no-schedules", action="store_true", help="serve nightly-retrain without its schedule")
    serve.add_argument("--nightly-config", default=None, help="nightly.toml (default: <root>/nightly.toml)")
    serve.set_defaults(func=cmd_serve, check=check_serve)


def nightly_example() -> str:
    from tasks.nightly import config as nightly_config

    return nightly_config.__doc__.split("\n\n", 1)[1].split("\nMetric names")[0]


def parse_nightly(add: Add) -> None:
    nightly = add(
        "nightly",
        help="run nightly-retrain once now (what the schedule runs)",
        raw=True,
        description="One nightly-retrain run: data stages on the corpus, a candidate trained from the champion,\n"
        "candidate vs champion on the frozen evaluation suite, and the gate. The config file:\n\n" + nightly_example(),
    )
    nightly.add_argument("--config", default=None, help="the config file (default: <root>/nightly.toml)")
    nightly.set_defaults(func=cmd_nightly, check=check_nightly)


def parse_champion(add: Add) -> None:
    """`models`, `promote`, `rollback`: the champion model."""
    models = add("models", help="the champion model and every earlier one")
    models.set_defaults(func=cmd_models)
    promote = add("promote", help="make a model folder the champion by hand (recorded)")
    promote.add_argument("export", help="a model folder, e.g. data/train/<fingerprint>/export")
    promote.add_argument("--reason", default="", help="why (goes into the promotions table)")
    rollback = add(
        "rollback",
        help="make the champion's predecessor the champion again; no night promotes the rolled-back model again "
        "(recorded)",
    )
    for command in (promote, rollback):
        command.add_argument(
            "--embed",
            action="store_true",
            help="search (gur search, the search page) moves to the new champion's embeddings of the documents in "
            "use when they are on disk; with --embed, also when they are not: the documents are embedded now, "
            "holding the root (minutes on a CPU for tens of thousands); without it, the next night does that",
        )
    promote.set_defaults(func=cmd_promote)
    rollback.set_defaults(func=cmd_rollback)


def parse_server(add: Add) -> None:
    server = add(
        "server",
        help="start, stop or check a local Prefect server that every gur command then uses",
        description="`gur server start` runs `prefect server start` in the background on 127.0.0.1 and records "
        "its pid and URL in Prefect's home (gur-server.json). Every later gur command uses it instead of starting "
        "an ephemeral server of its own (10-60 s each), and its runs stay in the UI. An explicit PREFECT_API_URL "
        "wins. `gur serve` needs it too. `gur server stop` stops it; `status` exits 3 when none is running.",
    )
    server.add_argument("action", choices=["start", "stop", "status"], help="what to do")
    server.add_argument("--port", type=int, default=4200, help="port of `start` (UI and API)")
    server.set_defaults(func=cmd_server)


def parse_embed(add: Add) -> None:
    embed = add(
        "embed",
        help="embed the documents with a model (default: the champion) -> the `embeddings` view",
        description="Run the embed flow: each document's title and text (cut to the model's max length) as an "
        "L2-normalised vector, cached per ingest unit and model, so a new file embeds only its documents and a "
        "new model everything once. The output becomes the catalog's `embeddings` view (doc_id, embedding, "
        "model), which joins `documents` on doc_id; `gur search` reads it. Details: docs/search.md.",
    )
    embed.add_argument(
        "model",
        nargs="?",
        default=None,
        help="minilm or a model folder (default: the model in use: the champion, else the start model)",
    )
    embed.add_argument("--documents", default=None, help="an ingest fingerprint (default: the catalog's documents)")
    embed.add_argument(
        "--sentences",
        action="store_true",
        help="embed the build's sentences instead (table sentence_embeddings, which gur search does not read)",
    )
    embed.add_argument("--batch-size", type=int, default=32, help="texts per forward pass")
    embed.add_argument(
        "--precision",
        choices=("auto", "float32", "bfloat16"),
        default="auto",
        help="auto (default): bfloat16 where the CPU (AVX512-BF16, AMX) or GPU computes it natively (more "
        "documents per CPU second), else float32; the precision is part of the output's fingerprint",
    )
    embed.add_argument(
        "--workers",
        type=int,
        default=0,
        help="processes on this machine, each with its share of the cores (default: this process on every "
        "core, the fastest on an idle machine; N > 1 wins on a busy one); with --dask alone, the local cluster's",
    )
    embed.add_argument(
        "--dask",
        nargs="?",
        const="local",
        default="",
        metavar="ADDRESS",
        help="embed the shards as Prefect tasks on Dask: alone, a local cluster of --workers processes; "
        "tcp://host:8786, a running scheduler whose workers see the data root at the same path; the same bytes "
        "(default: no Dask)",
    )
    embed.set_defaults(func=cmd_embed, check=check_embed)


def parse_search(add: Add) -> None:
    """`search` and `search-page`."""
    search = add(
        "search",
        help='search the embedded documents: gur search "how to sort a dict"',
        description="Rank the documents for a query: dense (the `embeddings` view's model, or --model's "
        "embeddings; exact search up to 200,000 vectors, an HNSW index above), --bm25 (bm25s over title + text) "
        "or --hybrid (reciprocal rank fusion of both). Prints rank, doc_id, title, a snippet and the score.",
    )
    search.add_argument("query", help="the query text")
    search.add_argument(
        "--model", default=None, help="search this model's embeddings (default: the `embeddings` view's model)"
    )
    search.add_argument("--k", type=int, default=10, help="results")
    mode = search.add_mutually_exclusive_group()
    mode.add_argument("--bm25", action="store_const", dest="mode", const="bm25", help="BM25 only")
    mode.add_argument("--hybrid", action="store_const", dest="mode", const="hybrid", help="dense and BM25 fused (RRF)")
    search.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    search.set_defaults(func=cmd_search, check=check_search, mode="dense")
    page = add(
        "search-page",
        help="serve a local search page on 127.0.0.1: champion, its start model and BM25 side by side",
        description="Serve a page with a query box and three result lists side by side: the embeddings in use "
        "(the champion), the model it was trained from (embedded once if needed) and BM25. Bound to 127.0.0.1 "
        "only; Ctrl-C stops it.",
    )
    page.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any free one)")
    page.add_argument("--k", type=int, default=10, help="results per list")
    page.set_defaults(func=cmd_search_page)


COMMANDS = (
    parse_demo, parse_build_pairs, parse_mine_keywords, parse_train, parse_evaluate, parse_sts, parse_sql,
    parse_catalog, parse_verify, parse_gc, parse_du, parse_serve, parse_nightly, parse_champion, parse_server,
    parse_embed, parse_search,
)  # fmt: skip
