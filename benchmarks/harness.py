"""What every script under benchmarks/ shares: the path, the offline environment, the shared data, a work
folder and its entry in the results log (docs/results/index.md).

    import harness                                    # first: the repository on the path, offline variables
    args = harness.parser(__doc__).parse_args()       # with --workdir (default: a temporary folder) and --record
    work, show = harness.workdir(args), harness.Lines()
    show("| rows | s |", "|---|---|", f"| {rows:,} | {seconds:.1f} |")   # printed, and kept for the entry
    harness.record(args, "Ingest speed on the demo corpus", show.lines, {"rows": rows, "s": seconds})

Importing it puts the repository and benchmarks/ on `sys.path` and sets HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE
and DO_NOT_TRACK (where unset) before torch or transformers load. `record` writes nothing without `--record`; with
it, `docs/results/<date>-<name>.md` (the next free `-2`, `-3` where the name is taken that day) with the date,
the commit, the machine and the command filled in, `## Figures` from the lines, `## What was learnt` left to
the person who ran it, and `<same stem>.json` with the figures' dict; then the index's table of entries is
regenerated from every entry's H1 (also `python benchmarks/harness.py index`).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for _path in (str(REPO / "benchmarks"), str(REPO)):
    if _path not in sys.path:
        sys.path.insert(0, _path)
for _name in ("DO_NOT_TRACK", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_name, "1")

from storage.shared_data import shared_data  # noqa: E402 - after the path

# The scripts' interface; the GPU suite writes its entry with the last four.
__all__ = ["REPO", "RESULTS", "Lines", "parser", "workdir", "record", "shared_data"]
__all__ += ["command", "new_entry", "write_entry", "regenerate_index"]

RESULTS = REPO / "docs" / "results"
ENTRY = re.compile(r"^(\d{4}-\d{2}-\d{2})-(.+)\.md$")
H1 = re.compile(r"^# (\d{4}-\d{2}-\d{2}) · (.+)$")
LEARNT = (
    "(To be written by whoever ran it: what the figures decide, what changed because of them, what is still "
    "open. The harness leaves this line for that person.)"
)


class Lines:
    """What a script prints as its figures: each call prints its lines (flushed) and keeps them for `record`."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, *lines: Any) -> None:
        for line in lines or ("",):
            print(line, flush=True)
            self.lines.extend(str(line).splitlines() or [""])


def script_name() -> str:
    """The running script's name as an entry names it: `gate_power.py` -> `gate-power`."""
    path = Path(sys.argv[0])
    return (path.parent.name if path.name == "__main__.py" else path.stem).replace("_", "-")


def parser(doc: str, workdir: str | None = "temp", workdir_help: str = "") -> argparse.ArgumentParser:
    """The script's options: its description (the docstring's first paragraph), `--record`, and `--workdir`
    (`workdir="temp"`: a temporary folder by default; `"required"`: the script needs one; a path: that folder,
    kept between runs, for a script whose reruns build on it; None: no option)."""
    p = argparse.ArgumentParser(description=" ".join(doc.split("\n\n")[0].split()))
    p.add_argument(
        "--record",
        action="store_true",
        help="write the figures as a dated entry of docs/results/ (the results log); without it nothing is written",
    )
    if workdir is not None:
        default = {"temp": "", "required": None}.get(workdir, workdir)
        after = {"temp": " (default: a temporary folder, removed at the end)", "required": ""}
        help_text = (workdir_help or "the work folder") + after.get(workdir, " (default: %(default)s, kept)")
        p.add_argument("--workdir", required=workdir == "required", default=default, help=help_text)
    return p


def workdir(args: argparse.Namespace) -> Path:
    """`--workdir` (made when missing, kept), else a new temporary folder removed when the script exits."""
    if getattr(args, "workdir", None):
        path = Path(args.workdir)
        path.mkdir(parents=True, exist_ok=True)
        return path
    path = Path(tempfile.mkdtemp(prefix=f"gur-{script_name()}-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def record(
    args: argparse.Namespace,
    title: str,
    figures: str | Iterable[str],
    data: dict[str, Any] | None = None,
    name: str = "",
    results: Path | None = None,
) -> Path | None:
    """With `--record`: the script's entry `<results>/<today>-<name>.md` (name: the script's, by default) and
    its `.json` of `data`; returns its path. Without: nothing written, None."""
    if not getattr(args, "record", False):
        return None
    path = new_entry(name or script_name(), results=results)
    write_entry(path, title, figures, data, command(args))
    print(f"recorded: {path}", flush=True)
    return path


def new_entry(name: str, day: date | None = None, results: Path | None = None) -> Path:
    """`<results>/<day>-<name>.md`, or `-2`, `-3`, ... where that day has the name already: claimed (created
    empty) so that two scripts writing at once never take the same one."""
    folder = results or RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    stem, n = f"{(day or date.today()).isoformat()}-{name}", 1
    while True:
        path = folder / (f"{stem}.md" if n == 1 else f"{stem}-{n}.md")
        if not path.with_suffix(".json").exists():
            try:
                path.open("x").close()
                return path
            except FileExistsError:
                pass
        n += 1


def write_entry(
    path: Path, title: str, figures: str | Iterable[str], data: dict[str, Any] | None, command_line: str
) -> Path:
    """The entry at `path` (its date from its name) in the results log's form, its `.json` where `data` is
    given, then the index regenerated. Writing it again (the GPU suite, after each part) replaces it."""
    day = path.name[:10]
    header = [
        "| | |",
        "|---|---|",
        f"| date | {day} |",
        f"| commit | {commit()} |",
        f"| machine | {cell(machine())} |",
        f"| command | `{cell(command_line)}` |",
    ]
    lines = [f"# {day} · {title}", "", *header, "", "## Figures", "", figures_markdown(figures)]
    lines += ["", "## What was learnt", "", LEARNT, ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    if data is not None:
        path.with_suffix(".json").write_text(json.dumps(data, indent=1, default=plain) + "\n", encoding="utf-8")
    regenerate_index(path.parent)
    return path


def plain(value: Any) -> Any:
    """A figure JSON cannot hold as it is: a numpy scalar or array as its Python value, anything else as text."""
    return value.tolist() if hasattr(value, "tolist") else str(value)


def figures_markdown(figures: str | Iterable[str]) -> str:
    """Printed lines as markdown: a run of table rows stays one table, a fenced block stays as it is, every other
    line is a paragraph."""
    lines = figures.splitlines() if isinstance(figures, str) else [str(x) for x in figures]
    blocks: list[list[str]] = []
    fenced = False
    for line in (x.rstrip() for x in lines):
        if fenced or line.startswith("```"):
            if not fenced:
                blocks.append([])
            blocks[-1].append(line)
            fenced = fenced != line.startswith("```")
            continue
        if not line.strip():
            continue
        heading = re.match(r"^(#+) ", line)  # the script's own headings sit below `## Figures`
        if heading:
            line = "#" * max(3, len(heading.group(1)) + 1) + line[len(heading.group(1)) :]
        if line.lstrip().startswith("|") and blocks and blocks[-1][-1].lstrip().startswith("|"):
            blocks[-1].append(line)
        else:
            blocks.append([line])
    return "\n\n".join("\n".join(block) for block in blocks) or "(the script printed no figures)"


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def output(*cmd: str) -> str | None:
    """A command's stripped stdout, None where it is missing or fails."""
    try:
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit() -> str:
    """`git rev-parse --short HEAD`, with `+dirty` when tracked files have changes (entries are new files)."""
    head = output("git", "rev-parse", "--short", "HEAD")
    if head is None:
        return "unknown (no git checkout)"
    return head + ("+dirty" if output("git", "status", "--porcelain", "--untracked-files=no") else "")


def machine() -> str:
    """Cores, memory, the CPU's model and the GPU (`nvidia-smi`'s names) or `no GPU`."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        found = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(encoding="utf-8", errors="replace"), re.M)
        model = found.group(1).strip() if found else model
    gpus = output("nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader") or ""
    gpu = "; ".join(", ".join(x.strip() for x in line.split(",")) for line in gpus.splitlines()) or "no GPU"
    return f"{os.cpu_count()} cores, {memory:.1f} GiB, {model}, {gpu}"


def command(
    args: argparse.Namespace | None = None, argv: list[str] | None = None, placeholders: dict[str, str] | None = None
) -> str:
    """The script and its argv as run, with the interpreter as a reader types it (`.venv/bin/python` when it is
    the repository's) and the folders of `placeholders` (option -> name; default: the work folder and the data
    root, WORK and ROOT) by their names: the folders a run used say nothing to a reader."""
    argv = sys.argv if argv is None else argv
    python = Path(sys.executable)
    inside = python.is_relative_to(REPO) if python.is_absolute() else False
    words = [str(python.relative_to(REPO)) if inside else "python", display_path(argv[0]), *argv[1:]]
    for option, placeholder in (placeholders or {"workdir": "WORK", "root": "ROOT"}).items():
        value = str(getattr(args, option, "") or "")
        if value:
            words = [named(word, value, placeholder) for word in words]
    return shlex.join(words)


def display_path(script: str) -> str:
    path = Path(script).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else script


def named(word: str, value: str, placeholder: str) -> str:
    """`word` with the folder `value` (whole, or as its start, or after `--option=`) as `placeholder`."""
    option, eq, rest = word.partition("=") if word.startswith("--") else ("", "", word)
    for folder in {value.rstrip("/"), str(Path(value).resolve())}:
        if rest == folder or rest.startswith(folder + "/"):
            return option + eq + placeholder + rest[len(folder) :]
    return word


def regenerate_index(results: Path | None = None) -> Path | None:
    """The `## Entries` table of `<results>/index.md` from every entry's H1 (date | entry | title), newest
    first; None where the folder has no index (a `--out` folder of the GPU suite)."""
    folder = results or RESULTS
    index = folder / "index.md"
    if not index.is_file():
        return None
    rows = []
    for path in folder.glob("*.md"):
        found = ENTRY.match(path.name)
        if not found:
            continue
        first = (path.read_text(encoding="utf-8").splitlines() or [""])[0]
        h1 = H1.match(first)
        day, title = (h1.group(1), h1.group(2)) if h1 else (found.group(1), first.lstrip("# ").strip())
        link = f"[{found.group(2)}]({path.name})"
        rows.append(((day, natural(path.stem)), f"| {day} | {link} | {cell(title or found.group(2))} |"))
    table = ["| date | entry | what it measured |", "|---|---|---|", *(row for _, row in sorted(rows, reverse=True))]
    text = index.read_text(encoding="utf-8")
    entries = re.search(r"^## Entries$", text, re.M)
    head = text[: entries.start()] if entries else text.rstrip("\n") + "\n\n"
    later = re.search(r"^## ", text[entries.end() :], re.M) if entries else None
    tail = "\n" + text[entries.end() + later.start() :] if later else ""
    new = head + "## Entries\n\n" + "\n".join(table) + "\n" + tail
    scratch = index.with_name(f".index.md.{os.getpid()}")
    scratch.write_text(new, encoding="utf-8")
    scratch.replace(index)  # atomic: other scripts regenerate it at the same time
    return index


def natural(text: str) -> list:
    """A sort key where `-10` comes after `-9`."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="The results log's tools.")
    p.add_argument("action", choices=["index"], help="index: regenerate docs/results/index.md's table of entries")
    p.parse_args(argv)
    index = regenerate_index()
    if index is None:
        print(f"no {RESULTS / 'index.md'}", file=sys.stderr)
        return 1
    print(f"{index}: {sum(bool(ENTRY.match(p.name)) for p in RESULTS.glob('*.md'))} entries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
