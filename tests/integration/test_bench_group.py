"""`make bench-group` in its smoke mode: every store whole, every figure line printed with a number
(no timing is asserted: the figures depend on the machine)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIGURES = [
    "group export s per property-day (mean)",
    "group export s per property-day (max)",
    "group report s (3 properties)",
    "group report s (1 property)",
    "group report / one property",
    "group pages (cached) / one property",
    "group pages (reading beside) / one property",
    "group view reading s (3 properties)",
    "group view reading s (1 property)",
]
PAGES = [
    f"group pages p95 ms ({how}, {n})" for how in ("cached", "reading beside") for n in ("3 properties", "1 property")
]


def test_bench_group_quick_prints_every_figure_for_three_whole_properties(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_group.py"), "--quick", "--cache", str(tmp_path / "cache")],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    figures = dict(line.rpartition(": ")[::2] for line in run.stdout.splitlines())
    for k in (1, 2, 3):
        assert re.fullmatch(r"[0-9][0-9,]*", figures[f"group property-{k} events simulated = events stored"]), (
            run.stdout
        )
    for name in FIGURES:
        assert re.fullmatch(r"[0-9]+\.[0-9]+", figures[name]), f"no figure {name!r} in:\n{run.stdout}"
    for name in PAGES:
        assert re.fullmatch(r"[0-9]+", figures[name]), f"no figure {name!r} in:\n{run.stdout}"
    assert len(list((tmp_path / "cache").glob("*/store.duckdb"))) == 3  # a store per property (seed)
