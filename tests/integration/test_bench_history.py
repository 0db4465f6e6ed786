"""`make bench-history` in its smoke mode: every figure line is printed, each with a number (no
timing is asserted: the figures depend on the machine)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FIGURES = [
    "store events",
    "store bytes/event",
    "report s (whole store)",
    "report MB",
    "page p95 ms floor",
    "page p95 ms findings",
    "page p95 ms finding",
    "page p95 ms dealer",
    "page p95 ms table",
    "api p95 ms findings",
    "replica s",
    "archive s (one month)",
]
SUFFIXED = ["page p95 ms floor (rows fragment)", "page p95 ms findings (page 1)", "page p95 ms findings (deep page",
            "page p95 ms findings (table", "page p95 ms findings (rule"]  # fmt: skip


def test_bench_history_quick_prints_every_figure_with_a_number(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_history.py"), "--quick", "--cache", str(cache)],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines and all(line.startswith("1 hour ") for line in lines), lines
    figures = {}
    for line in lines:
        name, _, value = line.removeprefix("1 hour ").rpartition(": ")
        assert re.fullmatch(r"[0-9][0-9,]*(\.[0-9]+)?", value), line
        figures[name] = value
    for name in FIGURES:
        assert name in figures, f"no line {name!r} in:\n{run.stdout}"
    for prefix in SUFFIXED:
        assert any(name.startswith(prefix) for name in figures), f"no line {prefix!r} in:\n{run.stdout}"
    # the store is kept in the cache; the copy the replica and the archive worked on is not
    stores = list(cache.glob("*/store.duckdb"))
    assert len(stores) == 1 and not list(cache.glob("*/archive"))
    assert not list(cache.glob("*/events.jsonl"))
