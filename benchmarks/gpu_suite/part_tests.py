"""Part 1, `tests`: the `gpu`-marked tests in a pytest subprocess, counted from its junit XML."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpu_suite import REPO
from gpu_suite.harness import Clock, Ctx, Part


def junit_counts(path: Path) -> dict[str, Any]:
    """tests, failures, errors and skipped summed over a junit XML file's suites, and the failing test names."""
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    failing = [
        f"{case.get('classname')}::{case.get('name')}"
        for case in root.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    return {**counts, "failing": failing}


def part_tests(ctx: Ctx, clock: Clock, part: Part) -> None:
    files = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "tests").rglob("test_*.py")
        if "pytest.mark.gpu" in p.read_text(encoding="utf-8")
    )
    junit = ctx.work / "gpu-tests.xml"
    junit.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:xdist", "-q", f"--junitxml={junit}", *files]
    shown = shlex.join(["python", "-m", "pytest", "-m", "gpu", "-p", "no:xdist", *files])
    try:
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=max(1.0, clock.left()))
    except subprocess.TimeoutExpired:
        part.skip_row("pytest -m gpu", f"stopped after {clock.left():.0f} s: over the part's budget", shown, "error")
        part.check("the gpu tests finished", False, "timed out")
        return
    tail = (proc.stdout.strip().splitlines() or [""])[-1]  # pytest's summary line
    if not junit.exists():
        part.skip_row("pytest -m gpu", f"no junit XML (exit {proc.returncode}): {tail}", shown, "error")
        part.check("the gpu tests ran", False, proc.stderr.strip()[-500:])
        return
    c = junit_counts(junit)
    failed = c["failures"] + c["errors"]
    part.row(
        "pytest -m gpu",
        shown,
        note=tail,
        passed=c["tests"] - failed - c["skipped"],
        failed=c["failures"],
        errors=c["errors"],
        skipped=c["skipped"],
    )
    part.check(
        "no gpu test failed",
        proc.returncode in (0, 5) and failed == 0,
        f"exit {proc.returncode}; failing: {c['failing']}" if failed else f"exit {proc.returncode}; {tail}",
    )
    if ctx.cuda:
        part.check(
            "every gpu test ran (none skipped)", c["skipped"] == 0 and c["tests"] > 0, f"{c['skipped']} skipped"
        )
    else:
        part.notes.append("no GPU: the gpu tests skip by design")


# (attention, packing, fused head, compiled, why), in order of value
