"""`gur gc` and `gur du`: retention on a data root (tasks/retention/)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from tasks.retention.plan import RetentionConfig

Add = Callable[..., argparse.ArgumentParser]


def retention_options(parser: argparse.ArgumentParser) -> None:
    d = RetentionConfig()
    parser.add_argument(
        "--config",
        default=None,
        help="the nightly.toml whose [retention] gives the defaults below (default: <root>/nightly.toml when there "
        "is one, the one a night reads without --config)",
    )
    parser.add_argument(
        "--keep-builds",
        type=int,
        default=None,
        help=f"newest builds kept per corpus (default: [retention], {d.keep_builds})",
    )
    parser.add_argument(
        "--keep-champions",
        type=int,
        default=None,
        help="predecessors of the champion kept, each `gur rollback` going one back "
        f"(default: [retention], {d.keep_champions})",
    )
    parser.add_argument(
        "--keep-refused",
        type=int,
        default=None,
        help=f"newest refused candidates whose weights stay (default: [retention], {d.keep_refused})",
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
        "moment leaves a root that gur verify passes; rerun to finish. `gur du` shows what is kept and why.\n"
        "The settings: [retention] of <root>/nightly.toml (or --config), so a gc by hand keeps what the\n"
        "nights keep; each --keep-* flag overrides its setting.",
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


def config_of(args: argparse.Namespace, root) -> tuple[RetentionConfig, str]:
    """The settings (the nightly.toml's [retention], what a night keeps, then the flags) and where they came
    from: a `gur gc` after a night must keep what the night's own gc would."""
    from pathlib import Path

    from tasks.nightly.config import CONFIG_NAME, RetentionSection, retention_settings

    path = Path(args.config) if args.config else Path(root) / CONFIG_NAME
    if args.config and not path.is_file():
        raise FileNotFoundError(f"{path}: no such nightly.toml (--config)")
    section = retention_settings(path) if path.is_file() else RetentionSection()
    flags = {"keep_builds": args.keep_builds, "keep_champions": args.keep_champions, "keep_refused": args.keep_refused}
    values = {name: getattr(section, name) if flag is None else flag for name, flag in flags.items()}
    source = f"[retention] of {path}" if path.is_file() else "the defaults"
    given = [f"--{name.replace('_', '-')}" for name, flag in flags.items() if flag is not None]
    shown = ", ".join(f"{name} = {value}" for name, value in values.items())
    return RetentionConfig(**values), f"{shown} ({source}{', ' + ', '.join(given) if given else ''})"


def cmd_gc(args: argparse.Namespace) -> int:
    from storage.layout import data_root
    from tasks.retention.collect import collect, gc_report

    root = data_root(args.root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no data root here (--root, $GUR_HOME)")
    config, source = config_of(args, root)
    print(f"keeping: {source}")
    result = collect(root, config, args.apply, wait_s=args.wait)
    print(gc_report(result))
    return 0


def cmd_du(args: argparse.Namespace) -> int:
    from storage.layout import data_root
    from tasks.retention.collect import du_report

    root = data_root(args.root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no data root here (--root, $GUR_HOME)")
    config, source = config_of(args, root)
    print(f"keeping: {source}")
    print(du_report(root, config))
    return 0
