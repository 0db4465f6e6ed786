"""Writes a simulated floor to JSON Lines (events, and the truth file of expected findings)."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from dealtrail.simulator.floor import FloorSpec, Truth, simulate
from projections.store.private import make_private_dirs, open_private
from schemas.codec import encode


def write_simulation(
    out: Path,
    tables: int,
    hours: float,
    seed: int,
    error_rate: float,
    duplicate_rate: float = 0.0,
    truth_path: Path | None = None,
    console: Console | None = None,
    remedy_window: timedelta = timedelta(hours=24),
    start: datetime | None = None,
) -> tuple[int, int]:
    """Simulate and write ``out`` (one event per line) and, if asked, the truth file.

    ``remedy_window`` is the engine's (the setting): a table that closes owing a remedy stays
    closed longer than it (:attr:`FloorSpec.remedy_window`).

    Both files are owner-only (0600), and folders made for them 0700.

    The truth file holds one JSON object per expected finding (``rule_id``, ``table_id``,
    ``round_id``, ``injected``), sorted by table, round and rule. Same arguments, same bytes.

    ``start`` is the shift's start (timezone-aware; None: the simulator's fixed
    ``DEFAULT_START``, 2026-11-27 18:00 UTC).

    Returns:
        ``(events written, expected findings)``.
    """
    spec = FloorSpec(
        tables=tables,
        hours=hours,
        seed=seed,
        error_rate=error_rate,
        duplicate_rate=duplicate_rate,
        remedy_window=remedy_window,
    )
    if start is not None:
        spec = dataclasses.replace(spec, start=start)
    truth: list[Truth] = []
    make_private_dirs(out.parent)
    n = 0
    progress = Progress(
        TextColumn("simulating"),
        BarColumn(),
        TextColumn("{task.completed:,.0f} events"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=console is None,
    )
    with open_private(out, binary=True) as fh, progress:
        task = progress.add_task("simulating", total=None)
        for event in simulate(spec, truth):
            fh.write(encode(event))
            fh.write(b"\n")
            n += 1
            if n % 20_000 == 0:
                progress.update(task, completed=n)
    if truth_path is not None:
        make_private_dirs(truth_path.parent)
        rows = sorted(truth, key=lambda t: (t.table_id, t.round_id or "", t.rule_id, t.injected))
        with open_private(truth_path) as fh:
            for t in rows:
                fh.write(json.dumps(t.as_dict()) + "\n")
    return n, len(truth)
