"""Control-chart baselines (issue 50): a manager freezes the centre line and Laney's sigma_z of a
period as a record (``control_baselines``), never overwritten; the charts drawn afterwards are
judged against the latest baseline of their kind, slot and category, and name it. A chart judged
against a baseline is the same chart however much data arrives later: its centre and spread are
the record's, and its points are its own period's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb
from ulid import ULID

from projections.models.control import CATEGORIES, KINDS, SLOTS, Baseline, ChartSpec, chart

MAX_NOTE = 2000
"""The longest note a baseline carries (characters)."""
FREEZER_ROLES = frozenset({"manager", "admin"})
"""The console roles that freeze a baseline."""


class BaselineError(ValueError):
    """A baseline that cannot be frozen (no solid point in the period, a bad period or note)."""


def _has_table(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'control_baselines' AND schema_name = 'main'"
    ).fetchall()
    return bool(rows[0][0])


def _row(r: dict[str, Any]) -> Baseline:
    return Baseline(**r)


def history(
    con: duckdb.DuckDBPyConnection, kind: str | None = None, slot: str | None = None, category: str | None = None
) -> list[Baseline]:
    """Every baseline frozen (of one kind, slot and category when given), newest first; [] in a
    store written before baselines existed."""
    if not _has_table(con):
        return []
    cur = con.execute(
        """SELECT * FROM control_baselines
           WHERE ($kind IS NULL OR kind = $kind) AND ($slot IS NULL OR slot = $slot)
             AND ($category IS NULL OR category = $category)
           ORDER BY frozen_at DESC, rowid DESC""",
        {"kind": kind, "slot": slot, "category": category},
    )
    cols = [d[0] for d in cur.description]
    return [_row(dict(zip(cols, r, strict=True))) for r in cur.fetchall()]


def in_force(con: duckdb.DuckDBPyConnection, spec: ChartSpec, as_of: datetime | None = None) -> Baseline | None:
    """The baseline a chart of ``spec`` is judged against: the latest frozen for its kind, slot and
    category (at or before ``as_of`` when given, so a report as of a time names the baseline in
    force then); None: the chart's own period gives its centre and spread."""
    for b in history(con, spec.kind, spec.slot, spec.category):
        if as_of is None or b.frozen_at <= as_of:
            return b
    return None


def freeze(
    con: duckdb.DuckDBPyConnection,
    spec: ChartSpec,
    start: datetime,
    end: datetime,
    by: str,
    at: datetime,
    note: str = "",
) -> Baseline:
    """Compute the centre line and sigma_z of ``[start, end)`` and record them as a new baseline.

    Args:
        con: the store's writer connection.
        spec: the charts the baseline judges (kind, slot, category, the minimum rounds of a point).
        start: the period's start (timezone-aware).
        end: the period's end, exclusive (timezone-aware).
        by: who froze it (a console user, or the operating-system user of the CLI).
        at: when (timezone-aware).
        note: why (at most :data:`MAX_NOTE` characters).

    Returns:
        The baseline recorded.

    Raises:
        BaselineError: an empty or reversed period, a long note, an unknown chart, or a period
            with fewer than two solid points of a subject (no moving range: no sigma_z) or no
            incident at all (no centre line to judge against).
    """
    if spec.kind not in KINDS or spec.slot not in SLOTS or spec.category not in CATEGORIES:
        raise BaselineError(f"unknown chart {spec.kind}/{spec.slot}/{spec.category}")
    if start.tzinfo is None or end.tzinfo is None or not start < end:
        raise BaselineError("a baseline's period needs a start before its end, both with a time zone")
    if len(note) > MAX_NOTE or not note.replace("\n", " ").isprintable():
        raise BaselineError(f"a baseline's note is at most {MAX_NOTE} printable characters")
    points = chart(con, spec, start, end)
    solid = [p for p in points if p["solid"]]
    if not solid or not solid[0]["u_bar"]:
        raise BaselineError(
            f"no {spec.kind} {spec.slot} with {spec.min_rounds} rounds or more and an incident in the period"
        )
    sigma_z = solid[0]["sigma_z"]
    if sigma_z is None:
        raise BaselineError("the period has no two solid points of one subject in a row: no spread to freeze")
    baseline = Baseline(
        baseline_id=str(ULID()),
        kind=spec.kind,
        slot=spec.slot,
        category=spec.category,
        period_start=start,
        period_end=end,
        u_bar=float(solid[0]["u_bar"]),
        sigma_z=float(sigma_z),
        points=len(solid),
        frozen_by=by,
        frozen_at=at,
        note=note,
    )
    con.execute(
        "INSERT INTO control_baselines VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        [
            baseline.baseline_id,
            baseline.kind,
            baseline.slot,
            baseline.category,
            start,
            end,
            baseline.u_bar,
            baseline.sigma_z,
            baseline.points,
            by,
            at,
            note,
        ],
    ).fetchall()
    return baseline


def label(b: Baseline | None) -> str:
    """How a page or report names the baseline a chart used."""
    if b is None:
        return "no baseline frozen: centre line and limits from the period shown"
    return (
        f"baseline {b.baseline_id} frozen by {b.frozen_by} on {b.frozen_at:%Y-%m-%d %H:%M} UTC from "
        f"{b.period_start:%Y-%m-%d} to {b.period_end:%Y-%m-%d} (u-bar {b.u_bar:.3f} per 1,000 rounds, "
        f"sigma_z {b.sigma_z:.3f})"
    )
