"""The `gur` commands: each runs one flow (Prefect started only then) or reads the data root."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from cli.checks import train_flags
from cli.output import format_table, report, run_sql
from cli.runtime import start_prefect

DEMO_QUERIES = (
    "SELECT bucket, count(*) AS pairs, round(avg(lcs_len), 1) AS avg_lcs_len FROM shards GROUP BY bucket",
    "SELECT a, b, lcs FROM shards WHERE bucket = 'short' LIMIT 5",
)


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


def build_pairs_params(args: argparse.Namespace) -> dict[str, Any]:
    """The `build-pairs` flow's parameters from its options (`--pair-options` is JSON text there)."""
    import json

    from flows.parameters import BuildPairsParams
    from tasks.runtime.parameters import params_from

    params = params_from(args, BuildPairsParams)
    params["pair_options"] = json.loads(args.pair_options) if args.pair_options else None  # checked before
    return params


def cmd_build_pairs(args: argparse.Namespace) -> int:
    from flows.build_pairs import build_pairs, stage_configs
    from storage.layout import data_root

    params = build_pairs_params(args)
    stage_configs(**params)  # a bad option is one line here, before Prefect starts a server
    start_prefect()
    result = build_pairs(**params)
    report(data_root(args.root), result)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    args.source_name = args.source_name or "enwiki-sample"
    cmd_build_pairs(args)
    from storage.layout import data_root

    for query in DEMO_QUERIES:
        print(f'\n$ gur sql "{query}"')
        print(run_sql(data_root(args.root), query, 20))
    print('\nTry: gur sql "SELECT reason, count(*) FROM rejects GROUP BY reason"')
    return 0


def cmd_mine_keywords(args: argparse.Namespace) -> int:
    from flows.mine_keywords import mine_keywords
    from flows.parameters import MineKeywordsParams
    from storage.layout import data_root
    from tasks.runtime.parameters import params_from

    root = data_root(args.root)
    start_prefect()
    ref = mine_keywords(**params_from(args, MineKeywordsParams))
    report(root, {"keywords": ref})
    query = "SELECT text, keywords, topic FROM keywords LIMIT 8"
    print(f'\n$ gur sql "{query}"')
    print(run_sql(root, query, 8))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    import json

    from flows.train import train_flow
    from storage.layout import data_root
    from storage.stage_output import ref_dir, ref_manifest
    from tasks.runtime.artifacts import trained_dir

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
    out, trained = ref_dir(root, ref), trained_dir(root, ref)
    summary_path = trained / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else {}
    print(f"\nmodel folder: {out}")
    print(f"  export     {out / 'export'}  (SentenceTransformer(path) or AutoModel.from_pretrained(path))")
    if trained != out:
        weight = ref_manifest(root, ref).get("config", {}).get("interpolate")
        print(f"  mixed      the trained weights at {weight}, the start's at {1 - weight:g}; trained in {trained}")
    print(f"  curves     {trained / 'loss_curve.png'}  metrics: {trained / 'metrics.parquet'}")
    curve = summary.get("heldout_acc") or []
    mixed_note = " of the trained weights, before the mix" if trained != out else ""
    if curve:
        (last_step, last), (best_step, best) = curve[-1], max(curve, key=lambda point: point[1])
        print(
            f"  held-out in-batch accuracy {last:.3f} at step {last_step} (peak {best:.3f} at step {best_step}; "
            f"chance {summary.get('chance', float('nan')):.3f}){mixed_note}"
        )
    print(f"\nEvaluate it:  gur evaluate {out / 'export'} minilm bm25")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from flows.parameters import EvaluateParams, evaluation_sets
    from storage.layout import data_root
    from tasks.runtime.parameters import params_from

    root = data_root(args.root)
    absolute = lambda p: str(Path(p).resolve()) if p else p  # noqa: E731 - user paths are relative to the cwd
    params = params_from(args, EvaluateParams)
    params.update(
        models=[m if ":" in m or m in _baselines() else str(Path(m).resolve()) for m in args.models] or None,
        stsb=None if args.stsb is None else [absolute(p) for p in args.stsb],
        lee=not args.no_lee,
        demo_retrieval=not args.no_demo,
        beir=[absolute(p) for p in args.beir or []],
    )
    if args.stackoverflow is None:
        del params["stackoverflow"]  # not given: the flow's default
    else:
        params["stackoverflow"] = absolute(args.stackoverflow)
    sets, notes = evaluation_sets(EvaluateParams(**params))  # before Prefect: the notes, or no set left
    for note in notes:
        print(f"gur: {note}")
    params.update(stackoverflow=sets.stackoverflow, stsb=sets.stsb)  # the flow skips nothing a second time

    from flows.evaluate import evaluate  # imports Prefect: after the notes and a no-set error

    start_prefect()
    result = evaluate(**params)
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
    from storage.champion import history, read_champion
    from storage.layout import data_root
    from tasks.embed.model_choice import model_in_use

    root = data_root(args.root)
    champion = read_champion(root)
    if champion is None:
        model, what = model_in_use(root)
        print(f"no champion yet under {root / 'models'}: in use is {what}: {model}")
        print("(embed, search and the search page use it; a night promotes a candidate only past its gate)")
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
    from storage.champion import promote_by_hand
    from storage.layout import data_root
    from tasks.embed.outputs import follow_champion

    pointer = promote_by_hand(
        data_root(args.root), Path(args.export), args.reason, then=lambda r: follow_champion(r, args.embed)
    )
    print(f"champion #{pointer['number']}: {pointer['export']}")
    if pointer["search"]:
        print(pointer["search"])
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from storage.champion import roll_back
    from storage.layout import data_root
    from tasks.embed.outputs import follow_champion

    current, restored = roll_back(data_root(args.root), then=lambda r: follow_champion(r, args.embed))
    print(f"champion is #{restored['number']} again: {restored['export']} (was #{current['number']})")
    if restored["search"]:
        print(restored["search"])
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from cli.runtime import stop_on_sigterm, use_running_server

    use_running_server()  # before Prefect is imported, as gur_cli does for the other flow commands
    stop_on_sigterm()
    from flows.embed import embed_flow
    from storage.layout import data_root
    from storage.stage_output import ref_dir

    start_prefect()
    result = embed_flow(
        model=args.model if args.model in (None, "minilm") else str(Path(args.model).resolve()),
        documents=args.documents,
        unit="sentences" if args.sentences else "documents",
        batch_size=args.batch_size,
        precision=args.precision,
        workers=args.workers,
        dask=args.dask,
        root=args.root,
    )
    root = data_root(args.root)
    print(f"\n{result['note']}")
    print(f"  model   {result['model']} ({result['why']})")
    print(f"  output  {ref_dir(root, result['embeddings'])}")
    if not args.sentences:
        from tasks.embed.outputs import documents_of
        from tasks.embed.search import documents_glob

        # the documents these vectors were made from (on a nightly root the whole corpus, while the catalog's
        # `documents` view shows the training side of the night's build)
        docs = documents_glob(root, documents_of(root, result["embeddings"]))
        query = (
            "SELECT doc_id, title, len(embedding) AS dim, model FROM embeddings "
            f"JOIN read_parquet('{docs}') USING (doc_id)"
        )
        print(f'\n$ gur sql "{query}"')
        print(run_sql(root, query, 3))
        print('\nSearch it: gur search "your query"   (or gur search-page)')
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    import json

    from storage.layout import data_root
    from tasks.embed.search import run_search

    result = run_search(data_root(args.root), args.query, model=args.model, k=args.k, mode=args.mode)
    if args.json:
        print(json.dumps({**result, "hits": [h.as_dict() for h in result["hits"]]}, ensure_ascii=False))
        return 0
    dense = f"{result['index']} search over {result['embeddings']} ({result['model']})"
    what = {"dense": dense, "bm25": f"BM25 over {result['documents']}", "hybrid": f"RRF of BM25 and {dense}"}
    print(what[result["mode"]])
    rows = [(h.rank, h.doc_id, h.title or "", h.snippet, f"{h.score:.4f}") for h in result["hits"]]
    print(format_table(["rank", "doc_id", "title", "snippet", "score"], rows, max_width=70))
    return 0


def cmd_search_page(args: argparse.Namespace) -> int:
    from storage.layout import data_root
    from tasks.embed.page import SearchPage, make_server, talk

    with talk():  # what it prepares, and how far (embedding a start model can take minutes)
        page = SearchPage.open(data_root(args.root), k=args.k)
    server = make_server(page, args.port)
    host, port = server.server_address[:2]
    columns = ", ".join(label for label, *_ in page.columns)
    print(f"search page: http://{host}:{port}/  ({columns}; Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
