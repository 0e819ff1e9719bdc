"""`gur gc` and `gur du`: retention on a data root (tasks/retention/)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from tasks.retention.plan import RetentionConfig

Add = Callable[..., argparse.ArgumentParser]


def retention_options(parser: argparse.ArgumentParser) -> None:
    d = RetentionConfig()
    parser.add_argument("--keep-builds", type=int, default=d.keep_builds, help="newest builds kept per corpus")
    parser.add_argument(
        "--keep-champions",
        type=int,
        default=d.keep_champions,
        help="predecessors of the champion kept, each `gur rollback` going one back (default %(default)s)",
    )
    parser.add_argument(
        "--keep-refused", type=int, default=d.keep_refused, help="newest refused candidates whose weights stay"
    )


def parse_gc(add: Add) -> None:
    gc = add(
        "gc",
        help="delete what no one can need: old builds, refused candidates' weights, finished checkpoints",
        description="Delete what nothing kept can reach, and nothing else. Kept: the newest --keep-builds builds of\n"
        "each corpus and every output they were made from; the champion, the --keep-champions predecessors\n"
        "its history records and the newest --keep-champions history entries (gur rollback keeps working\n"
        "that many times in a row); every run in progress; every training run the\n"
        "nightly never judged; evaluation and STS outputs. Deleted: older data-stage outputs, the weights and\n"
        "checkpoints of refused candidates and of champions past the window (their manifests, metrics and\n"
        "promotions rows stay), finished runs' checkpoints. A dry run by default: it prints what it would\n"
        "free per stage (hard links counted once); --apply deletes. It holds the root: no night, build,\n"
        "training or evaluation runs meanwhile (it waits --wait seconds for those running). A kill at any\n"
        "moment leaves a root that gur verify passes; rerun to finish. `gur du` shows what is kept and why.",
        raw=True,
    )
    gc.add_argument("--apply", action="store_true", help="delete (default: a dry run that only reports)")
    gc.add_argument(
        "--wait", type=float, default=0.0, help="seconds to wait for running builds (default: fail at once)"
    )
    retention_options(gc)
    gc.set_defaults(func=cmd_gc)


def parse_du(add: Add) -> None:
    du = add(
        "du",
        help="what the data root holds per stage, what is kept and why, what gc would free",
    )
    retention_options(du)
    du.set_defaults(func=cmd_du)


def config_of(args: argparse.Namespace) -> RetentionConfig:
    return RetentionConfig(args.keep_builds, args.keep_champions, args.keep_refused)


def cmd_gc(args: argparse.Namespace) -> int:
    from storage.layout import data_root
    from tasks.retention.collect import collect, gc_report

    root = data_root(args.root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no data root here (--root, $GUR_HOME)")
    result = collect(root, config_of(args), args.apply, wait_s=args.wait)
    print(gc_report(result))
    return 0


def cmd_du(args: argparse.Namespace) -> int:
    from storage.layout import data_root
    from tasks.retention.collect import du_report

    root = data_root(args.root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no data root here (--root, $GUR_HOME)")
    print(du_report(root, config_of(args)))
    return 0
