"""`gur`: run the pipeline's flows, query its tables, serve its deployments (its parts: `cli/`)."""

from __future__ import annotations

import os
import sys

from cli.checks import json_option  # noqa: F401 - part of `gur_cli`'s interface
from cli.commands import (
    build_pairs_params,
    cmd_build_pairs,
    cmd_demo,
    cmd_evaluate,
    cmd_mine_keywords,
    cmd_nightly,
    cmd_serve,
    cmd_sts,
    cmd_train,
)
from cli.output import format_table, one_line, run_sql  # noqa: F401 - part of `gur_cli`'s interface
from cli.parser import build_parser
from cli.runtime import stop_on_sigterm, use_running_server

__all__ = ["build_pairs_params", "build_parser", "error_line", "format_table", "main", "one_line", "run_sql"]


def error_line(exc: BaseException) -> str:
    """The one line `gur` prints for an error. Errors in the input, the options or the data root are
    raised with a message meant for the user; anything else is named by its type, with the hint."""
    package = type(exc).__module__.split(".")[0]
    if isinstance(exc, (ValueError, OSError)) or package in (
        "gur_cli",
        "cli",
        "tasks",
        "models",
        "storage",
        "flows",
        "duckdb",
    ):
        return one_line(exc)
    return f"{type(exc).__name__}: {one_line(exc)} (GUR_DEBUG=1 shows the traceback)"


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
        print(f"gur: error: {error_line(exc)}{disk_full_hint(exc, args)}", file=sys.stderr)
        return 1


def disk_full_hint(exc: BaseException, args) -> str:
    """For an error a full disk caused (ENOSPC anywhere in its chain, as a library words it): which disk, how
    full, what to do. Libraries name neither the file's disk nor the fix."""
    import errno

    seen, chain = set(), exc
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        if getattr(chain, "errno", None) == errno.ENOSPC or "No space left on device" in str(chain):
            break
        chain = chain.__cause__ or chain.__context__
    if chain is None or "no space left on the disk holding" in str(exc):  # none, or the message says it already
        return ""
    from storage.disk_space import full_disk
    from storage.layout import data_root

    note = full_disk(data_root(getattr(args, "root", None)))
    return f"; {note}; then rerun the same command: finished stages and the last checkpoint are kept"


if __name__ == "__main__":
    sys.exit(main())
