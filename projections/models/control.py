"""Control charts of dealers and tables (issue 50): incidents per 1,000 rounds against the floor's
centre line, with u-chart and Laney u' limits, run rules and a Poisson CUSUM, computed in the
store's SQL (``rpt_control_chart.sql``), and the baselines a manager freezes to judge later charts
against (``projections.records.baselines``).

A signal asks for a look at a dealer's or a table's rate, not for discipline: it is a review item
(acknowledged, noted, closed; ``projections.records.signal_reviews``), never a finding.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import duckdb

from projections.store.sql_files import read_sql

Kind = Literal["dealer", "table", "property"]
"""What a chart follows: a dealer (the dealer of each round), a table, or a property of a group
(the group view's charts, from the properties' exports: :func:`chart_of`)."""
Slot = Literal["shift", "day", "week"]
"""A chart's point: a shift (8 hours from :data:`SHIFT_HOUR` local time), a day or an ISO week."""
Category = Literal["all", "voiding", "procedural", "integrity"]
"""Which incidents a chart counts: all, or one severity (the read side's categories of findings)."""

KINDS: tuple[Kind, ...] = ("dealer", "table")
"""The kinds a store's own charts follow (a property's chart is drawn from exports only)."""
SLOTS: tuple[Slot, ...] = ("shift", "day", "week")
CATEGORIES: tuple[Category, ...] = ("all", "voiding", "procedural", "integrity")
SHIFT_HOUR = 6
"""The local hour the first of the day's three 8-hour shifts starts (as the scheduled reports' shifts:
``dealtrail.reporting.schedule.SHIFT_STARTS``)."""

DEALER_SLOT: Slot = "week"
"""The slot a dealer's chart is judged by unless ``DEALTRAIL_CONTROL__DEALER_SLOT`` says otherwise: a
week, because a shift's few incidents make its 3-sigma limits and run rules fire by chance on about
0.7 % of in-control shift points (a sixth of dealers in a month), a week's on far fewer (measured in
docs/compliance-guide.md)."""
ControlArgs = tuple[int, float, float, Slot]
"""The control charts' settings a report needs: minimum rounds of a point, CUSUM k, CUSUM h and the
dealers' slot (``DEALTRAIL_CONTROL__*``, :meth:`dealtrail.settings.ControlSettings.report_args`)."""


def slots_for(kind: Kind, dealer_slot: Slot = DEALER_SLOT) -> tuple[Slot, ...]:
    """The slots a chart of ``kind`` is drawn by, its default first: a dealer's by ``dealer_slot``
    first, then the others (shift, day, week); a table's by day, then week."""
    if kind == "table":
        return ("day", "week")
    return (dealer_slot, *(s for s in SLOTS if s != dealer_slot))


RULES = {
    "beyond": "above the upper limit",
    "run8": "8 points in a row above the centre line",
    "rising6": "6 points in a row rising",
    "cusum_signal": "CUSUM above its decision interval",
}
"""Each signalling rule's column in ``rpt_control_chart.sql`` and how a page names it."""


@dataclass(frozen=True)
class ChartSpec:
    """What a chart shows and how it judges (the settings ``DEALTRAIL_CONTROL__*`` resolve the numbers).

    Attributes:
        kind: dealer or table.
        slot: shift, day or week (a dealer's chart by any of them, a table's by day or week).
        category: all incidents or one severity.
        min_rounds: a point with fewer rounds is hollow and never signals (rounds).
        cusum_k: the CUSUM's reference value, a multiple of the expected incidents of a point.
        cusum_h: the CUSUM's decision interval (incidents).
        tz: the IANA zone whose wall clock bounds shifts, days and weeks.
    """

    kind: Kind
    slot: Slot
    category: Category = "all"
    min_rounds: int = 100
    cusum_k: float = 1.4427
    cusum_h: float = 8.0
    tz: str = "UTC"


@dataclass(frozen=True)
class Baseline:
    """A frozen centre line and spread (a record, never overwritten; ``projections.records.baselines``).

    Attributes:
        baseline_id: its ID.
        kind: the charts it judges (dealer or table) ...
        slot: ... by this slot ...
        category: ... counting these incidents.
        period_start: the start of the period it was computed from (UTC).
        period_end: the end of that period (exclusive, UTC).
        u_bar: the centre line (incidents per 1,000 rounds).
        sigma_z: Laney's sigma_z of that period.
        points: the solid points it was computed from.
        frozen_by: the user who froze it.
        frozen_at: when (UTC).
        note: why, in the manager's words.
    """

    baseline_id: str
    kind: Kind
    slot: Slot
    category: Category
    period_start: datetime
    period_end: datetime
    u_bar: float
    sigma_z: float
    points: int
    frozen_by: str
    frozen_at: datetime
    note: str


def chart(
    con: duckdb.DuckDBPyConnection,
    spec: ChartSpec,
    start: datetime | None,
    end: datetime | None,
    subject: str | None = None,
    baseline: Baseline | None = None,
) -> list[dict[str, Any]]:
    """The chart's points: ``rpt_control_chart.sql`` for every subject of ``spec.kind`` (or one).

    The centre line and sigma_z are the baseline's when given, else pooled over every subject's
    solid points in ``[start, end)``.

    Args:
        con: a connection to the store (read-only is enough); its ``sum_findings`` summary is read.
        spec: the chart.
        start: the first instant of the period (None: open).
        end: the end of the period, exclusive (None: open).
        subject: one dealer or table ID (None: all).
        baseline: a frozen baseline to judge against (None: the period's own figures).

    Returns:
        One dict per point, by subject then slot: the columns of ``rpt_control_chart.sql`` (``u``,
        ``u_bar``, ``sigma_z``, ``ucl``, ``lcl``, ``ucl_u``, ``lcl_u``, ``cusum``, ``solid``, the rule
        flags and ``signal``). Rates are incidents per 1,000 rounds.

    Raises:
        ValueError: an unknown kind, slot or category.
    """
    if spec.kind not in KINDS or spec.slot not in SLOTS or spec.category not in CATEGORIES:
        raise ValueError(f"unknown chart {spec.kind}/{spec.slot}/{spec.category}")
    params = {"kind": spec.kind, "slot": spec.slot, "tz": spec.tz, "shift_hour": SHIFT_HOUR, "start": start, "end": end}
    return _judged(con, "rpt_control_chart.sql", {**params, **_judge_params(spec, subject, baseline)})


def _judge_params(spec: ChartSpec, subject: str | None, baseline: Baseline | None) -> dict[str, Any]:
    """The parameters of ``rpt_control_judge.sql``."""
    return {
        "category": spec.category,
        "subject": subject,
        "min_rounds": spec.min_rounds,
        "u_bar": baseline.u_bar if baseline else None,
        "sigma_z": baseline.sigma_z if baseline else None,
        "cusum_k": spec.cusum_k,
        "cusum_h": spec.cusum_h,
    }


def _judged(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the chart file ``sql`` as dicts."""
    cur = con.execute(read_sql(sql), params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


GIVEN_COLUMNS = ("subject_id", "slot_start", "slot_start_utc", "rounds", "voiding", "procedural", "integrity")
"""The columns of a point :func:`chart_of` judges (those of ``rpt_control_points.sql``)."""


def chart_of(points: list[dict[str, Any]], spec: ChartSpec, baseline: Baseline | None = None) -> list[dict[str, Any]]:
    """A chart over points the caller counted (a group's properties by gaming day or week), judged
    by the same SQL, formulas and rules as a store's charts (``rpt_control_given.sql`` includes
    ``rpt_control_judge.sql``, which ``rpt_control_chart.sql`` includes too), in a DuckDB of its own.

    Args:
        points: one dict per subject and slot with :data:`GIVEN_COLUMNS`: ``slot_start`` the slot's
            local start (naive datetime), ``slot_start_utc`` its instant (aware), counts as ints.
        spec: the chart (its kind, slot and category name the points; its numbers judge them).
        baseline: a frozen centre line and spread (None: pooled over the points).

    Returns:
        The points judged, by subject then slot, with the columns :func:`chart` returns.

    Raises:
        ValueError: an unknown category or a point without one of :data:`GIVEN_COLUMNS`.
    """
    import pyarrow as pa

    if spec.category not in CATEGORIES:
        raise ValueError(f"unknown category {spec.category}")
    for point in points:
        if missing := [c for c in GIVEN_COLUMNS if c not in point]:
            raise ValueError(f"a point lacks {missing}")
    schema = pa.schema(
        [("subject_id", pa.string()), ("slot_start", pa.timestamp("us")), ("slot_start_utc", pa.timestamp("us", "UTC")),
         ("rounds", pa.int64()), ("voiding", pa.int64()), ("procedural", pa.int64()), ("integrity", pa.int64())]
    )  # fmt: skip
    given = pa.Table.from_pylist([{c: p[c] for c in GIVEN_COLUMNS} for p in points], schema=schema)
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.register("given_points", given)
        return _judged(con, "rpt_control_given.sql", _judge_params(spec, None, baseline))
    finally:
        con.close()


def rules_of(point: dict[str, Any]) -> list[str]:
    """The names (:data:`RULES`) of the rules a point's signal comes from (empty: no signal)."""
    return [RULES[col] for col in RULES if point.get(col)]


def signal_id(spec: ChartSpec, point: dict[str, Any]) -> str:
    """A signal's ID: the chart and the point, so the same point of the same chart is one review item
    however often the chart is drawn (``dealer:D-7:shift:all:2026-11-02T14:00:00+00:00``)."""
    at = point["slot_start_utc"].isoformat()
    return f"{spec.kind}:{point['subject_id']}:{spec.slot}:{spec.category}:{at}"
