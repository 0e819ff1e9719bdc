"""`gur`: run the pipeline's flows, query its tables, serve its deployments."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

# Before Prefect is imported: no telemetry, and room for a slow first ephemeral-server start.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")

DEFAULT = "(default: %(default)s)"  # argparse fills in the option's default
DEMO_QUERIES = (
    "SELECT bucket, count(*) AS pairs, round(avg(lcs_len), 1) AS avg_lcs_len FROM shards GROUP BY bucket",
    "SELECT a, b, lcs FROM shards WHERE bucket = 'short' LIMIT 5",
)


def format_table(columns: list[str], rows: list[tuple], max_width: int = 60) -> str:
    """A plain aligned text table; long cells are cut with an ellipsis."""

    def cell(value: object) -> str:
        text = "NULL" if value is None else str(value).replace("\n", " ")
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([line, rule, *body, f"({len(rows)} row{'s' if len(rows) != 1 else ''})"])


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (DuckDB's `LINE 1: ...` excerpt and its caret are left out)."""
    lines = [line.strip() for line in str(exc).splitlines()]
    kept = [line for line in lines if line and not line.startswith("LINE ") and set(line) != {"^"}]
    return " ".join(kept) or type(exc).__name__


class QueryError(ValueError):
    """A query DuckDB refused; the message is DuckDB's, on one line."""


def run_sql(root: Path, query: str, limit: int) -> str:
    import duckdb

    from storage.catalog import connect_catalog

    con = connect_catalog(root)
    try:
        cursor = con.execute(query)
        columns = [d[0] for d in cursor.description] if cursor.description else []
        rows = cursor.fetchmany(limit) if columns else []
    except duckdb.Error as exc:
        raise QueryError(one_line(exc)) from exc
    finally:
        con.close()
    return format_table(columns, rows) if columns else "OK"


class QuietPrefectFailures(logging.Filter):
    """Keeps Prefect's failure lines (tracebacks, "Finished in state Failed") off the console, where `gur`
    prints the error once; they still reach the Prefect API and its UI. Not installed with GUR_DEBUG=1."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("prefect"):
            return True
        if record.levelno >= logging.ERROR:
            return False
        message = record.getMessage()
        return not (message.startswith("Finished in state") and ("Failed" in message or "Crashed" in message))


def quiet_prefect_console() -> None:
    """Install `QuietPrefectFailures` on Prefect's console handlers (after `import prefect` configured them)."""
    if os.environ.get("GUR_DEBUG") == "1":
        return
    from prefect.logging.handlers import PrefectConsoleHandler

    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, PrefectConsoleHandler) and not any(
                isinstance(f, QuietPrefectFailures) for f in handler.filters
            ):
                handler.addFilter(QuietPrefectFailures())


def use_running_server() -> None:
    """Point Prefect at the server `gur server start` started, when it is up (before Prefect is imported:
    its settings are read once). An explicit PREFECT_API_URL wins."""
    from deployments.local_server import running_server

    if not os.environ.get("PREFECT_API_URL"):
        url = running_server()
        if url:
            os.environ["PREFECT_API_URL"] = url


def start_prefect() -> None:
    """Called once a flow module is imported, before its flow runs: Prefect's failure lines off the console,
    and without a server to use, the ephemeral one started now under a lock (`deployments.local_server`)."""
    from prefect.settings import get_current_settings

    from deployments.local_server import start_ephemeral

    quiet_prefect_console()
    settings = get_current_settings()
    if not settings.api.url and settings.server.ephemeral.enabled:
        start_ephemeral(Path(settings.home))


def cmd_server(args: argparse.Namespace) -> int:
    from deployments.local_server import prefect_home, running_server, start_server, stop_server

    if args.action == "start":
        record = start_server(port=args.port)
        print(
            f"Prefect server {'already running' if record.get('already') else 'started'} (pid {record['pid']}): "
            f"UI {record['ui_url']}, API {record['api_url']}\n"
            f"gur commands run their flows on it until `gur server stop`; log: {record['log']}"
        )
    elif args.action == "stop":
        record = stop_server()
        print(f"stopped the Prefect server (pid {record['pid']})" if record else "no server started by gur")
    else:
        url = running_server()
        print(
            f"Prefect server up: API {url} (PREFECT_HOME {prefect_home()})"
            if url
            else "no server started by gur is running: each command starts an ephemeral one (`gur server start`)"
        )
        return 0 if url else 3
    return 0


def reader_config(args: argparse.Namespace):
    from tasks.ingest.readers import ReaderConfig

    return ReaderConfig(
        format=args.format,
        text_field=args.text_field,
        title_field=args.title_field,
        id_field=args.id_field,
        max_doc_bytes=getattr(args, "max_doc_bytes", ReaderConfig.max_doc_bytes),
    )


def json_option(text: str, option: str) -> object:
    import json

    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{option}: not valid JSON ({exc}): {text}") from None


# Checks of each command's inputs and options that run before Prefect is imported or a server started.
def check_dask(args: argparse.Namespace) -> None:
    """`--dask` takes an optional value, so `--dask corpus.jsonl` would take the input for an address."""
    value = getattr(args, "dask", "")
    if value not in ("", "local") and "://" not in value:
        raise ValueError(f"--dask {value!r}: not a scheduler address (tcp://host:8786); put --dask after the input")


def check_build_pairs(args: argparse.Namespace) -> None:
    from tasks.ingest.checks import check_corpus

    check_dask(args)
    if args.input is not None:
        check_corpus(args.input, reader_config(args))
    if args.pair_options and not isinstance(json_option(args.pair_options, "--pair-options"), dict):
        raise ValueError("--pair-options must be a JSON object, e.g. '{\"letters_k\": 10}'")


def check_mine_keywords(args: argparse.Namespace) -> None:
    from tasks.ingest.checks import check_corpus

    check_dask(args)
    if args.input is not None:
        check_corpus(args.input, reader_config(args))
    keywords_config(args)  # its own checks (thresholds, K values, seeds)


def check_train(args: argparse.Namespace) -> None:
    from tasks.ingest.checks import check_text_file, check_train_options, require_path
    from tasks.train.task import check_fingerprint

    check_train_options(json_option(args.options, "--options") if args.options else {})
    check_fingerprint(args.keywords)
    if args.method == "gur":
        given = [f"--{k.replace('_', '-')}" for k, v in train_flags(args).items() if v is not None]
        if given or args.keywords or args.texts:
            raise ValueError(f"{' '.join(given) or '--keywords/--texts'}: options of --method tfcsg / simcse")
    if args.texts:
        if args.method != "simcse":
            raise ValueError("--texts: a text file trains --method simcse; tfcsg needs keywords (gur mine-keywords)")
        check_text_file(args.texts, args.text_field or "text")
    if args.init_from:
        require_path(args.init_from, "--init-from")


def check_evaluate(args: argparse.Namespace) -> None:
    from tasks.ingest.checks import require_path

    check_dask(args)
    for model in args.models:
        if ":" not in model and ("/" in model or os.sep in model or Path(model).exists()):
            require_path(model, "model")
    if args.stackoverflow:
        require_path(args.stackoverflow, "--stackoverflow")
    for path in [*(args.stsb or []), *(args.beir or [])]:
        require_path(path)


def check_sts(args: argparse.Namespace) -> None:
    from tasks.ingest.checks import check_sts_options, require_path
    from tasks.sts.data import check_holdout
    from tasks.sts.families import parse_family

    for family in args.families:
        parse_family(family)  # an unknown name or a missing model folder: one line, before Prefect starts
    for path in (args.train, args.dev, args.test):
        if path:
            require_path(path)
    if (args.train or args.dev or args.test) and len(args.lang) > 1:
        raise ValueError("--train/--dev/--test name one language's files: give one --lang")
    if args.holdout:
        check_holdout(args.holdout, "--holdout")
    if args.options:
        check_sts_options(json_option(args.options, "--options"))


def check_nightly(args: argparse.Namespace) -> None:
    from storage.layout import data_root
    from tasks.ingest.checks import require_path
    from tasks.nightly.config import CONFIG_NAME, load_nightly_config

    config = load_nightly_config(args.config or data_root(args.root) / CONFIG_NAME)
    require_path(config.corpus.path, f"{config.source}: [corpus] path")


def check_serve(args: argparse.Namespace) -> None:
    from deployments.local_server import running_server
    from tasks.ingest.checks import require_path

    if args.nightly_config:
        require_path(args.nightly_config, "--nightly-config")
    if not os.environ.get("PREFECT_API_URL") and not running_server():
        # On an ephemeral server of its own, runs triggered from elsewhere would never be seen.
        raise ValueError("gur serve needs a running Prefect server: `gur server start` first (or set PREFECT_API_URL)")


def build_pairs_params(args: argparse.Namespace) -> dict[str, Any]:
    """The `build-pairs` flow parameters that make up its stage configs (`flows.build_pairs.stage_configs`)."""
    import json

    return {
        "input_path": args.input,
        "format": args.format,
        "text_field": args.text_field,
        "title_field": args.title_field,
        "id_field": args.id_field,
        "source_name": args.source_name,
        "max_doc_bytes": args.max_doc_bytes,
        "docs_per_shard": args.docs_per_shard,
        "max_sentence_chars": args.max_sentence_chars,
        "pair_rule": args.pair_rule,
        "pair_repeat": args.pair_repeat,
        "pair_options": json.loads(args.pair_options) if args.pair_options else None,
        "seed": args.seed,
        "rows_per_shard": args.rows_per_shard,
        "memory_limit": args.memory_limit,
        "shard_compression": args.shard_compression,
        "spill_compression": args.spill_compression,
        "holdout_percent": args.holdout_percent,
    }


def add_dask_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--dask",
        nargs="?",
        const="local",
        default="",
        metavar="ADDRESS",
        help=f"run {what} as Prefect tasks on Dask: alone, a local cluster of --workers processes; "
        "tcp://host:8786, a running scheduler whose workers see the data root at the same path (default: no Dask)",
    )


def cmd_build_pairs(args: argparse.Namespace) -> int:
    from flows.build_pairs import build_pairs, stage_configs
    from storage.layout import data_root

    params = build_pairs_params(args)
    stage_configs(**params)  # a bad option is one line here, before Prefect starts a server
    start_prefect()
    result = build_pairs(**params, workers=args.workers, allow_empty=args.allow_empty, root=args.root, dask=args.dask)
    report(data_root(args.root), result)
    return 0


def report(root: Path, result: dict[str, dict[str, str]]) -> None:
    from storage.stage_output import ref_dir, ref_manifest

    print(f"\ndata root: {root}")
    for name, ref in result.items():
        manifest = ref_manifest(root, ref)
        rows = ", ".join(f"{k}={v}" for k, v in manifest["rows"].items())
        drops = ", ".join(f"{k}={v}" for k, v in manifest["drops"].items() if v) or "none"
        print(f"  {name:<10} {ref_dir(root, ref)}  rows: {rows}  drops: {drops}")
    print(f"  catalog    {root / 'catalog.duckdb'}")


def cmd_demo(args: argparse.Namespace) -> int:
    args.source_name = args.source_name or "enwiki-sample"
    cmd_build_pairs(args)
    from storage.layout import data_root

    for query in DEMO_QUERIES:
        print(f'\n$ gur sql "{query}"')
        print(run_sql(data_root(args.root), query, 20))
    print('\nTry: gur sql "SELECT reason, count(*) FROM rejects GROUP BY reason"')
    return 0


def keywords_config(args: argparse.Namespace):
    """The `KeywordsConfig` the mine-keywords flow builds from these options (built here for its checks)."""
    from tasks.keywords.filter import KeywordsConfig

    return KeywordsConfig(
        k=args.k,
        ks=tuple(args.ks or KeywordsConfig.ks),
        seeds=tuple(args.seeds or KeywordsConfig.seeds),
        seed=args.seed,
        alpha=args.alpha,
        beta=args.beta,
        n_iters=args.iters,
        threshold=args.threshold,
        t=args.t,
        tau=args.tau,
        t_min=args.t_min,
    )


def cmd_mine_keywords(args: argparse.Namespace) -> int:
    from flows.mine_keywords import mine_keywords
    from storage.layout import data_root

    root = data_root(args.root)
    start_prefect()
    ref = mine_keywords(
        input_path=args.input,
        format=args.format,
        text_field=args.text_field,
        title_field=args.title_field,
        id_field=args.id_field,
        unit=args.unit,
        k=args.k,
        ks=args.ks,
        seeds=args.seeds,
        seed=args.seed,
        alpha=args.alpha,
        beta=args.beta,
        n_iters=args.iters,
        threshold=args.threshold,
        t=args.t,
        tau=args.tau,
        t_min=args.t_min,
        allow_empty=args.allow_empty,
        root=args.root,
        dask=args.dask,
        workers=args.workers,
    )
    report(root, {"keywords": ref})
    query = "SELECT text, keywords, topic FROM keywords LIMIT 8"
    print(f'\n$ gur sql "{query}"')
    print(run_sql(root, query, 8))
    return 0


def train_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The `gur train` options that set TrainConfig fields of tfcsg / simcse (None: the preset's)."""
    return {
        "losses": args.losses,
        "negatives": args.negatives,
        "temperature": args.temperature,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "seed": args.seed,
        "text_field": args.text_field,
    }


def cmd_train(args: argparse.Namespace) -> int:
    import json

    from flows.train import train_flow
    from storage.layout import data_root
    from storage.stage_output import ref_dir

    root = data_root(args.root)
    options = json.loads(args.options) if args.options else {}  # checked by check_train
    options.update({k: v for k, v in train_flags(args).items() if v is not None})
    start_prefect()
    ref = train_flow(
        shards=None,
        root=args.root,
        method=args.method,
        variant=args.variant,
        objective=args.objective,
        preset=args.preset,
        steps=args.steps,
        pooling=args.pooling,
        init_from=str(Path(args.init_from).resolve()) if args.init_from else "",
        lr=args.lr,
        options=options or None,
        nproc=args.nproc,
        keywords=args.keywords,
        texts=str(Path(args.texts).resolve()) if args.texts else None,
    )
    out = ref_dir(root, ref)
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else {}
    print(f"\nmodel folder: {out}")
    print(f"  export     {out / 'export'}  (SentenceTransformer(path) or AutoModel.from_pretrained(path))")
    print(f"  curves     {out / 'loss_curve.png'}  metrics: {out / 'metrics.parquet'}")
    curve = summary.get("heldout_acc") or []
    if curve:
        (last_step, last), (best_step, best) = curve[-1], max(curve, key=lambda point: point[1])
        print(
            f"  held-out in-batch accuracy {last:.3f} at step {last_step} (peak {best:.3f} at step {best_step}; "
            f"chance {summary.get('chance', float('nan')):.3f})"
        )
    print(f"\nEvaluate it:  gur evaluate {out / 'export'} minilm bm25")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from flows.evaluate import evaluate
    from storage.layout import data_root

    root = data_root(args.root)
    models = [m if ":" in m or m in _baselines() else str(Path(m).resolve()) for m in args.models] or None
    absolute = lambda p: str(Path(p).resolve()) if p else p  # noqa: E731 - user paths are relative to the cwd
    so = {} if args.stackoverflow is None else {"stackoverflow": absolute(args.stackoverflow)}
    start_prefect()
    result = evaluate(
        models=models,
        **so,
        stsb=None if args.stsb is None else [absolute(p) for p in args.stsb],
        lee=not args.no_lee,
        demo_retrieval=not args.no_demo,
        beir=[absolute(p) for p in args.beir or []],
        beir_split=args.beir_split,
        question_queries=args.queries,
        limit=args.limit,
        batch_size=args.batch_size,
        device=args.device,
        root=args.root,
        dask=args.dask,
        workers=args.workers,
    )
    print(Path(result["report"]).read_text(encoding="utf-8"))
    print(f"\nreport: {result['report']}")
    query = (  # metrics_latest: `metrics` holds every evaluation ever run on this root
        "SELECT model, dataset, task, metric, k, round(value, 4) AS value FROM metrics_latest "
        "WHERE status = 'ok' LIMIT 10"
    )
    print(f'\n$ gur sql "{query}"')
    print(run_sql(root, query, 10))
    return 0


def cmd_sts(args: argparse.Namespace) -> int:
    import json

    from flows.sts import sts

    absolute = lambda p: str(Path(p).resolve()) if p else None  # noqa: E731 - user paths are relative to the cwd
    families = []
    for family in args.families:
        kind, sep, path = family.partition(":")
        families.append(f"{kind}:{Path(path).expanduser().resolve()}" if sep else family)
    start_prefect()
    result = sts(
        families=families or None,
        langs=args.lang,
        train=absolute(args.train),
        dev=absolute(args.dev),
        test=absolute(args.test),
        preset=args.preset,
        seeds=args.seeds,
        overrides=json.loads(args.options) if args.options else None,
        holdout=args.holdout,
        root=args.root,
    )
    print(Path(result["path"]).read_text(encoding="utf-8"))
    print(f"\nreport: {result['path']}")
    return 0


def _baselines() -> tuple[str, ...]:
    from tasks.evaluate.models import BASELINES

    return BASELINES


def cmd_sql(args: argparse.Namespace) -> int:
    from storage.layout import data_root

    print(run_sql(data_root(args.root), args.query, args.limit))
    return 0


def cmd_catalog(args: argparse.Namespace) -> int:
    from storage.catalog import connect_catalog, list_views, refresh_catalog
    from storage.layout import data_root

    root = data_root(args.root)
    if args.refresh:
        refresh_catalog(root)
    con = connect_catalog(root)
    try:
        rows = list_views(con)
    finally:
        con.close()
    print(f"catalog: {root / 'catalog.duckdb'}")
    print(format_table(["view", "rows", "definition"], rows, max_width=100))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from storage.layout import data_root
    from storage.stage_output import verify_outputs

    root = data_root(args.root)
    rows = verify_outputs(root, args.stage)
    if not rows:
        print(f"no complete {args.stage + ' ' if args.stage else ''}outputs under {root}")
        return 0
    shown = [(r["output"], r["files"], f"{r['bytes'] / 1e6:.1f} MB", r["status"]) for r in rows]
    print(format_table(["output", "files", "size", "status"], shown, max_width=100))
    damaged = [r for r in rows if r["status"] == "damaged"]
    for r in damaged:
        for problem in r["problems"]:
            print(f"{r['output']}: {problem}")
    unchecked = sum(r["status"] == "unchecked" for r in rows)
    if unchecked:
        print(f"{unchecked} outputs predate file inventories (no sizes or hashes to check)")
    if damaged:
        print(f"{len(damaged)} damaged outputs marked for rebuilding: the next run that needs them rebuilds them")
        return 1
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from deployments.serve import serve_all

    config = str(Path(args.nightly_config).resolve()) if args.nightly_config else None
    start_prefect()
    serve_all(cron=args.cron, timezone=args.timezone, schedules=not args.no_schedules, nightly_config=config)
    return 0


def cmd_nightly(args: argparse.Namespace) -> int:
    from flows.nightly_retrain import nightly_retrain

    start_prefect()
    row = nightly_retrain(config_path=str(Path(args.config).resolve()) if args.config else None, root=args.root)
    print(f"\n{row['decision']}: {row['reason']}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from storage.layout import data_root
    from tasks.nightly.champion import history, read_champion

    root = data_root(args.root)
    champion = read_champion(root)
    if champion is None:
        print(f"no champion yet under {root / 'models'} (run `gur nightly` or `gur promote EXPORT`)")
        return 0
    print(f"champion #{champion['number']}: {champion['export']}")
    rows = []
    for p in history(root):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(p["promoted_at"]))
        metrics = p.get("metrics") or {}
        shown = ", ".join(f"{k.split('/', 1)[-1]}={v:.3f}" for k, v in sorted(metrics.items())[:3])
        mark = "*" if p["number"] == champion["number"] else ""
        rows.append((f"{mark}{p['number']}", when, p.get("method", "manual"), p["export"], shown))
    print(format_table(["#", "promoted", "method", "export", "metrics"], rows, max_width=70))
    print('\ndecisions: gur sql "SELECT created_at, decision, reason FROM promotions ORDER BY created_at"')
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    from storage.layout import data_root
    from tasks.nightly.champion import promote_by_hand

    pointer = promote_by_hand(data_root(args.root), Path(args.export), args.reason)
    print(f"champion #{pointer['number']}: {pointer['export']}")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from storage.layout import data_root
    from tasks.nightly.champion import roll_back

    current, restored = roll_back(data_root(args.root))
    print(f"champion is #{restored['number']} again: {restored['export']} (was #{current['number']})")
    return 0


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


def nightly_example() -> str:
    from tasks.nightly import config as nightly_config

    return nightly_config.__doc__.split("\n\n", 1)[1].split("\nMetric names")[0]


def build_parser() -> argparse.ArgumentParser:
    # Option defaults are the config dataclasses' own (one place each); `%(default)s` shows them in --help.
    from deployments.serve import NIGHTLY_CRON, NIGHTLY_TZ
    from tasks.evaluate.data import DemoRetrievalConfig
    from tasks.evaluate.scoring import QuestionRetrievalConfig
    from tasks.evaluate.suite import DatasetSpec, SuiteConfig
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.readers import ReaderConfig
    from tasks.keywords.filter import KeywordsConfig
    from tasks.pair.candidates import RULES, PairConfig
    from tasks.shuffle.phases import ShuffleConfig
    from tasks.split.sentences import SplitConfig

    root_help = "data root (default: $GUR_HOME or ./data); before or after the command"
    parser = argparse.ArgumentParser(
        prog="gur",
        formatter_class=HelpFormatter,
        description="Turn raw unlabeled documents into a domain-adapted text encoder. Every stage writes Parquet "
        "under the data root (--root, else $GUR_HOME, else ./data) and `catalog.duckdb` has a view per table.",
    )
    parser.add_argument("--root", default=None, help=root_help)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=argparse.SUPPRESS, help=root_help)  # SUPPRESS: keeps a --root given before

    def add(name: str, help: str, description: str | None = None, raw: bool = False) -> argparse.ArgumentParser:
        """A subcommand: its description (default: its help line), --root, every option's default in --help."""
        return sub.add_parser(
            name,
            help=help,
            description=description or help[0].upper() + help[1:] + ".",
            parents=[common],
            formatter_class=RawHelpFormatter if raw else HelpFormatter,
        )

    def add_reader_options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--format",
            default=ReaderConfig.format,
            help="jsonl, wiki2txt, parquet, csv, tsv, textdir, mediawiki, auto (default: %(default)s)",
        )
        p.add_argument(
            "--text-field", default=ReaderConfig.text_field, help="field/column with the document text " + DEFAULT
        )
        p.add_argument(
            "--title-field", default=ReaderConfig.title_field, help="field/column with the title " + DEFAULT
        )
        p.add_argument("--id-field", default=ReaderConfig.id_field, help="field/column with the source id " + DEFAULT)

    def add_build_options(p: argparse.ArgumentParser, source: str = "the input's file name") -> None:
        p.add_argument(
            "--source-name",
            default=IngestConfig.source_name,
            help=f"name used in doc_ids (default: {source})",
        )
        p.add_argument(
            "--docs-per-shard",
            type=int,
            default=IngestConfig.docs_per_shard,
            help="documents per Parquet shard " + DEFAULT,
        )
        p.add_argument(
            "--max-sentence-chars",
            type=int,
            default=SplitConfig.max_sentence_chars,
            help="cut longer sentences into pieces at whitespace; titles are cropped " + DEFAULT,
        )
        p.add_argument("--allow-empty", action="store_true", help="an input with no documents is not an error")
        p.add_argument(
            "--max-doc-bytes", type=int, default=ReaderConfig.max_doc_bytes, help="reject larger documents " + DEFAULT
        )
        p.add_argument("--workers", type=int, default=0, help="processes for CPU-heavy stages (default: all cores)")
        add_dask_option(p, "split, pair and the shuffle's phases")
        p.add_argument(
            "--pair-rule",
            default=PairConfig.rule,
            choices=RULES,
            help="LCS rule: weighted (GUR code), letters (paper), none (GUR-LCS ablation) " + DEFAULT,
        )
        p.add_argument(
            "--pair-repeat",
            type=int,
            default=PairConfig.repeat,
            help="most pairs a content sentence takes part in, title pairs included (PairConfig.repeat, GUR's cap) "
            + DEFAULT,
        )
        p.add_argument(
            "--pair-options",
            default="",
            help='other PairConfig fields as JSON, e.g. \'{"letters_k": 10, "letters_k_by_length": false}\'',
        )
        p.add_argument(
            "--seed", type=int, default=PairConfig.seed, help="seed of partner choice and shuffle " + DEFAULT
        )
        p.add_argument(
            "--holdout-percent",
            type=int,
            default=None,
            help="documents kept out of the pairs for evaluation "
            f"(default: {DemoRetrievalConfig.held_out_percent} for the demo, else 0)",
        )
        p.add_argument(
            "--rows-per-shard",
            type=int,
            default=ShuffleConfig.rows_per_shard,
            help="rows per training shard " + DEFAULT,
        )
        p.add_argument(
            "--memory-limit",
            default=ShuffleConfig.memory_limit,
            help="memory of the dedup + shuffle stage, e.g. 512MB, 4GiB; larger input spills to disk " + DEFAULT,
        )
        p.add_argument(
            "--shard-compression",
            default=ShuffleConfig.shard_compression,
            help="Parquet codec of the training shards: snappy, zstd (~30%% smaller, slower), lz4, none " + DEFAULT,
        )
        p.add_argument(
            "--spill-compression",
            default=ShuffleConfig.spill_compression,
            help="codec of the shuffle's temporary files (~4x the pairs' size on disk): none, lz4 (half the disk, "
            "~30%% slower), zstd " + DEFAULT,
        )

    demo = add(
        "demo",
        help="run build-pairs on the bundled Wikipedia sample and show a query",
        description="Run build-pairs (ingest -> split -> pair -> shuffle) on the English Wikipedia sample that ships "
        "with gensim (a MediaWiki dump of about 200 articles), then print two queries over the catalog. "
        f"{DemoRetrievalConfig.held_out_percent}% of the articles are held out for `gur evaluate`'s demo "
        "retrieval set. The reader options are the dump's own; run build-pairs for your corpus.",
    )
    add_build_options(demo, source="enwiki-sample")
    reader = ReaderConfig()  # the MediaWiki reader of the bundled dump ignores the field names
    demo.set_defaults(
        func=cmd_demo,
        check=check_build_pairs,
        input=None,
        format=reader.format,
        text_field=reader.text_field,
        title_field=reader.title_field,
        id_field=reader.id_field,
    )

    build = add(
        "build-pairs",
        help="run the build-pairs flow on a corpus file or folder",
        description="Read a corpus, split it into sentences, pair sentences of one document that share a long "
        "common subsequence (LCS) and write deduplicated, shuffled training shards. Each stage is a Parquet "
        "folder under the data root named by its fingerprint, and a rerun reuses every finished stage. "
        "`gur catalog` lists the tables, `gur sql` queries them.",
    )
    build.add_argument("input", help="corpus: .jsonl, .parquet, .csv/.tsv, a folder of .txt files, or a .xml.bz2 dump")
    add_reader_options(build)
    add_build_options(build)
    build.set_defaults(func=cmd_build_pairs, check=check_build_pairs)

    kw = add("mine-keywords", help="GSDMM topics and topic-keyword sequences (the TFCSG recipe)")
    kw.add_argument("input", nargs="?", default=None, help="questions/sentences file (default: the demo corpus)")
    kw.add_argument("--format", default=ReaderConfig.format, help="input format, as for build-pairs " + DEFAULT)
    kw.add_argument(
        "--text-field",
        default=ReaderConfig.text_field,
        help="field/column with the text (e.g. title for StackOverflow) " + DEFAULT,
    )
    kw.add_argument("--title-field", default=ReaderConfig.title_field, help="title field ('' for none) " + DEFAULT)
    kw.add_argument("--id-field", default=ReaderConfig.id_field, help="id field " + DEFAULT)
    kw.add_argument("--allow-empty", action="store_true", help="an input with no documents is not an error")
    kw.add_argument("--unit", default="documents", choices=["documents", "sentences"], help="rows to model")
    kw.add_argument("--workers", type=int, default=0, help="workers of a local --dask cluster (default: all cores)")
    add_dask_option(kw, "the K sweep's fits")
    kw.add_argument(
        "--k",
        type=int,
        default=KeywordsConfig.k,
        help="upper bound on topics (GSDMM empties the extra ones) " + DEFAULT,
    )
    kw.add_argument(
        "--ks",
        type=int,
        nargs="*",
        default=None,
        help="sweep these K values and keep the best NPMI (default: no sweep, --k)",
    )
    seeds = " ".join(map(str, KeywordsConfig.seeds))
    kw.add_argument("--seeds", type=int, nargs="*", default=None, help=f"seeds per K in a sweep (default: {seeds})")
    kw.add_argument("--seed", type=int, default=KeywordsConfig.seed, help="seed of the final fit " + DEFAULT)
    kw.add_argument(
        "--alpha", type=float, default=KeywordsConfig.alpha, help="GSDMM alpha: prior weight of a topic " + DEFAULT
    )
    kw.add_argument(
        "--beta", type=float, default=KeywordsConfig.beta, help="GSDMM beta: prior weight of a word " + DEFAULT
    )
    kw.add_argument("--iters", type=int, default=KeywordsConfig.n_iters, help="Gibbs sweeps " + DEFAULT)
    kw.add_argument(
        "--threshold",
        default=KeywordsConfig.threshold,
        choices=["scaled", "absolute"],
        help="keyword threshold rule " + DEFAULT,
    )
    kw.add_argument("--t", type=float, default=KeywordsConfig.t, help="absolute threshold (the paper's t) " + DEFAULT)
    kw.add_argument(
        "--tau", type=float, default=KeywordsConfig.tau, help="scaled threshold: share of topic size " + DEFAULT
    )
    kw.add_argument(
        "--t-min", type=float, default=KeywordsConfig.t_min, help="scaled threshold: lower bound " + DEFAULT
    )
    kw.set_defaults(func=cmd_mine_keywords, check=check_mine_keywords)

    tr = add(
        "train",
        help="train an encoder: GUR on the newest shards, TFCSG on the newest keywords, or SimCSE",
        raw=True,
        description="""One training run. Rerunning the same command reuses a finished run and resumes an
interrupted one from its newest checkpoint (Ctrl-C or SIGTERM saves one).

methods:
  gur     T5 span-corruption LM + in-batch contrastive on the newest `build-pairs` shards
  tfcsg   fine-tune a pretrained encoder (default: the shipped all-MiniLM-L6-v2) on the newest
          `mine-keywords` output: contrastive, KL and keyword-generation losses (--losses)
  simcse  the same encoder, batch, length and epochs, unsupervised SimCSE only (losses cl);
          on a keywords output or on any text column (--texts FILE --text-field F)

presets (tfcsg / simcse; default auto: paper on a GPU, cpu otherwise, printed at the start):
  paper   the TFCSG paper: Adam lr 3e-5, batch 32, 10 epochs, max length 32, [CLS] pooling,
          losses cl+kl+s2s, every in-batch negative
  cpu     16,000 titles in under 30 minutes on 2 cores: 1 epoch, batch 64, mean pooling, losses
          kw+s2s (question vs its own keyword sequence, plus keyword generation at weight 2) with
          same-topic negatives masked; cuts the paper's 10 epochs to 1 and takes the losses that
          measured best on a dev split
  gur: tiny (CPU tests) or small (GUR-Small, the default)

examples:
  gur mine-keywords questions.tsv --text-field title --title-field ''
  gur train --method tfcsg                              # newest keywords, preset auto
  gur train --method tfcsg --preset cpu --losses cl+kl+s2s --negatives all   # the paper's losses
  gur train --method simcse --texts questions.tsv --text-field title
  gur train --preset tiny --steps 1000                  # GUR""",
    )
    tr.add_argument(
        "--method", default="gur", choices=["gur", "tfcsg", "simcse"], help="training recipe (default: gur)"
    )
    tr.add_argument(
        "--preset",
        default=None,
        choices=["tiny", "small", "paper", "cpu", "auto"],
        help="gur: tiny/small (default small); tfcsg/simcse: paper/cpu/auto (default auto)",
    )
    tr.add_argument(
        "--steps", type=int, default=None, help="optimizer steps (default: gur 10000; tfcsg/simcse: from the epochs)"
    )
    tr.add_argument("--objective", default="lm+cl", choices=["lm+cl", "cl", "lm"], help="gur: GUR-FULL, -LM, -CL")
    tr.add_argument("--variant", default="lcs", choices=["lcs", "none"], help="gur: pair rule of the shards")
    tr.add_argument(
        "--pooling", default=None, choices=["cls", "mean", "eos"], help="sentence vector pooling (default: preset's)"
    )
    tr.add_argument("--lr", type=float, default=None, help="peak learning rate (default: gur 1e-4; tfcsg/simcse 3e-5)")
    tr.add_argument(
        "--init-from", default="", help="warm-start from a local model folder (tfcsg/simcse default: MiniLM)"
    )
    tr.add_argument("--nproc", type=int, default=0, help="processes (GPUs) for torchrun; 0: one per GPU, else 1")
    tr.add_argument("--keywords", default=None, help="tfcsg/simcse: keywords fingerprint (default: the newest)")
    tr.add_argument(
        "--texts",
        default=None,
        help="simcse: a .tsv/.csv/.jsonl/.parquet file of texts instead (default: none, the newest keywords)",
    )
    tr.add_argument("--text-field", default=None, help="column with the text (default: text)")
    tr.add_argument(
        "--losses",
        default=None,
        help="tfcsg: '+'-joined cl, kl, s2s, kw (default: the preset's; paper: cl+kl+s2s, cpu: kw+s2s)",
    )
    tr.add_argument(
        "--negatives",
        default=None,
        choices=["all", "topic-masked"],
        help="tfcsg/simcse: in-batch negatives (default: the preset's; paper: all, cpu: topic-masked)",
    )
    tr.add_argument("--temperature", type=float, default=None, help="contrastive temperature (default: 0.05)")
    tr.add_argument(
        "--epochs", type=float, default=None, help="tfcsg/simcse: passes over the data (default: the preset's)"
    )
    tr.add_argument(
        "--batch-size", type=int, default=None, help="tfcsg/simcse: questions per batch (default: the preset's)"
    )
    tr.add_argument("--seed", type=int, default=None, help="seed of data order, dropout and new weights (default: 0)")
    from tasks.ingest.checks import train_option_names

    tr.add_argument(
        "--options",
        default="",
        help="any other TrainConfig field (models/train_loop.py) as JSON, e.g. "
        '\'{"kl_weight": 0.5, "kl_detach_target": false}\' (default: none, the preset\'s values); fields: '
        + ", ".join(train_option_names()),
    )
    tr.set_defaults(func=cmd_train, check=check_train)

    ev = add(
        "evaluate",
        help="evaluate models and baselines on retrieval, question retrieval, STS, zero-shot",
        description="Evaluate model folders and baselines (bm25, minilm, untrained, glove, word2vec). A dataset "
        "whose file is missing is reported as not run. Results: the metrics table, report.md and charts.",
    )
    ev.add_argument("models", nargs="*", help="model folders or baseline names (default: all baselines)")
    ev.add_argument(
        "--stackoverflow",
        default=None,
        help="titles TSV (default: ../shared/data/stackoverflow/train.tsv next to the repository; '' skips)",
    )
    ev.add_argument("--stsb", nargs="*", default=None, help="STS-B CSV files (default: en and zh dev; none: skip)")
    ev.add_argument("--no-lee", action="store_true", help="skip the Lee-50 document similarity set")
    ev.add_argument("--no-demo", action="store_true", help="skip the held-out demo retrieval set")
    ev.add_argument(
        "--beir",
        nargs="*",
        default=None,
        help="BEIR-layout folders (corpus.jsonl, queries.jsonl, qrels/) (default: none)",
    )
    ev.add_argument("--beir-split", default=SuiteConfig.beir_split, help="qrels split for BEIR folders " + DEFAULT)
    ev.add_argument(
        "--queries",
        type=int,
        default=QuestionRetrievalConfig.max_queries,
        help="question retrieval: first N titles as queries (0: all) " + DEFAULT,
    )
    ev.add_argument(
        "--limit", type=int, default=DatasetSpec.limit, help="keep the first N rows of each file (smoke test; 0: all)"
    )
    ev.add_argument("--batch-size", type=int, default=SuiteConfig.batch_size, help="encoding batch size " + DEFAULT)
    ev.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda when present)")
    ev.add_argument("--workers", type=int, default=0, help="workers of a local --dask cluster (default: all cores)")
    add_dask_option(ev, "the units (model x dataset)")
    ev.set_defaults(func=cmd_evaluate, check=check_evaluate)

    st = add(
        "sts",
        help="supervised STS-B: the survey's model families (word vectors to LLMs) trained and scored",
        description="Train and score STS model families on STS-B (MSE on score/5, Pearson, Spearman), each "
        "(family, language, seed) a cached unit; rows go to the metrics table (task sts_supervised) and a report "
        "puts the survey's published figures beside ours. Families: w2v-sg w2v-cbow glove rnn lstm gru rnn-glove "
        "lstm-glove gru-glove infersent cross-minilm cross-minilm-mlp cross-mpnet cross-mpnet-mlp sbert-minilm "
        "minilm-zeroshot llm-zeroshot llm-sft llm-lora, or KIND:DIR (cross, cross-mlp, siamese, zeroshot, "
        "llm-sft, llm-lora, llm-zeroshot) for a model folder, e.g. siamese:data/train/<fp>/export.",
    )
    st.add_argument("families", nargs="*", help="families to run (default: the preset's table)")
    st.add_argument("--lang", nargs="+", default=["en"], choices=["en", "zh"], help="languages (default: en)")
    st.add_argument("--train", default=None, help="training CSV (default: ../shared/data/stsb/stsb-LANG-train.csv)")
    st.add_argument("--dev", default=None, help="dev CSV (default: ../shared/data/stsb/stsb-LANG-dev.csv)")
    st.add_argument("--test", default=None, help="test CSV, scored too when given (default: none)")
    st.add_argument(
        "--preset",
        default="cpu",
        choices=["cpu", "paper"],
        help="cpu: the English table in under 90 min on 2 cores; paper: the survey's settings (GPU) " + DEFAULT,
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
        help="StsTrainConfig fields (models/sts_train.py) as JSON for every trained family, e.g. "
        "'{\"max_steps\": 20}' (default: none, the preset's values)",
    )
    st.set_defaults(func=cmd_sts, check=check_sts)

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

    catalog = add(
        "catalog",
        help="list the catalog's views with row counts",
        description="List the views of <root>/catalog.duckdb with their row counts and definitions: one view per "
        "table, over the newest complete output of its stage. --refresh rebuilds them from the stage manifests "
        "(after moving the data root, or when a run could not update the catalog).",
    )
    catalog.add_argument("--refresh", action="store_true", help="rebuild the views first (e.g. after moving the root)")
    catalog.set_defaults(func=cmd_catalog)

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

    serve = add(
        "serve",
        help="serve the deployments (needs a Prefect server: `gur server start`, or PREFECT_API_URL)",
        description="Serve every deployment (build-pairs, mine-keywords, train, evaluate, nightly-retrain, sts) from "
        "this process until it is stopped; `prefect deployment run FLOW/DEPLOYMENT` starts a run, which executes "
        "here with this process's working directory and GUR_HOME. nightly-retrain runs on a cron schedule with a "
        "concurrency limit of 1. Needs a running Prefect server: `gur server start` (or PREFECT_API_URL set).",
    )
    serve.add_argument("--cron", default=NIGHTLY_CRON, help="nightly-retrain schedule (default: '%(default)s')")
    serve.add_argument("--timezone", default=NIGHTLY_TZ, help="timezone of the cron schedule " + DEFAULT)
    serve.add_argument("--no-schedules", action="store_true", help="serve nightly-retrain without its schedule")
    serve.add_argument("--nightly-config", default=None, help="nightly.toml (default: <root>/nightly.toml)")
    serve.set_defaults(func=cmd_serve, check=check_serve)

    nightly = add(
        "nightly",
        help="run nightly-retrain once now (what the schedule runs)",
        raw=True,
        description="One nightly-retrain run: data stages on the corpus, a candidate trained from the champion,\n"
        "candidate vs champion on the frozen evaluation suite, and the gate. The config file:\n\n" + nightly_example(),
    )
    nightly.add_argument("--config", default=None, help="the config file (default: <root>/nightly.toml)")
    nightly.set_defaults(func=cmd_nightly, check=check_nightly)

    models = add("models", help="the champion model and every earlier one")
    models.set_defaults(func=cmd_models)
    promote = add("promote", help="make a model folder the champion by hand (recorded)")
    promote.add_argument("export", help="a model folder, e.g. data/train/<fingerprint>/export")
    promote.add_argument("--reason", default="", help="why (goes into the promotions table)")
    promote.set_defaults(func=cmd_promote)
    rollback = add(
        "rollback",
        help="make the champion's predecessor the champion again; no night promotes the rolled-back model again "
        "(recorded)",
    )
    rollback.set_defaults(func=cmd_rollback)

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
    return parser


def error_line(exc: BaseException) -> str:
    """The one line `gur` prints for an error. Errors in the input, the options or the data root are
    raised with a message meant for the user; anything else is named by its type, with the hint."""
    package = type(exc).__module__.split(".")[0]
    if isinstance(exc, (ValueError, OSError)) or package in (
        "gur_cli",
        "tasks",
        "models",
        "storage",
        "flows",
        "duckdb",
    ):
        return one_line(exc)
    return f"{type(exc).__name__}: {one_line(exc)} (GUR_DEBUG=1 shows the traceback)"


def stop_on_sigterm() -> None:
    """SIGTERM stops a flow command the way Ctrl-C does: the running task is interrupted (the trainer finishes
    its step and saves a checkpoint), Prefect marks the runs Crashed, the ephemeral server is stopped at exit.
    While a flow runs Prefect's own handler is in front of this one, and hands the signal on to it."""
    import signal

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, handler)


PREFECT_COMMANDS = (
    cmd_demo, cmd_build_pairs, cmd_mine_keywords, cmd_train, cmd_evaluate, cmd_sts, cmd_serve, cmd_nightly,
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "check", None):
            args.check(args)
        if args.func in PREFECT_COMMANDS:
            use_running_server()
            if args.func is not cmd_serve:  # serve keeps Prefect's own SIGTERM handling
                stop_on_sigterm()  # before Prefect is imported: a wrong path or column is one line in a second
        return args.func(args)
    except KeyboardInterrupt as exc:
        print(
            "gur: stopped; rerun the same command to resume (finished stages and the last checkpoint are kept)",
            file=sys.stderr,
        )
        return 143 if "SIGTERM" in exc.args else 130
    except Exception as exc:
        if os.environ.get("GUR_DEBUG") == "1":
            raise
        print(f"gur: error: {error_line(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
