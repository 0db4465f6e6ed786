"""Control charts of dealers and tables (issue 50) checked against an independent implementation.

The oracle below is written from the formulas alone, in plain Python over the generator's rows
(it buckets rounds into shifts, days and weeks with ``zoneinfo`` itself and runs the CUSUM as the
recursion it is), sharing no code with ``rpt_control_chart.sql``. A textbook table (Montgomery's
u-chart of dyed cloth) pins the u-chart limits by hand.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest

from dealtrail.simulator.month import MonthSpec, Raise, rows, write_rows
from projections.models.control import DEALER_SLOT, ChartSpec, chart
from projections.store.store import connect_read_only

TOL = 1e-6


# -- the oracle ---------------------------------------------------------------------------------


def _slot(local: datetime, slot: str) -> datetime:
    """The local start of the slot holding ``local`` (a naive wall-clock time)."""
    if slot == "day":
        return local.replace(hour=0, minute=0, second=0, microsecond=0)
    if slot == "week":
        day = local.replace(hour=0, minute=0, second=0, microsecond=0)
        return day - timedelta(days=day.weekday())
    shifted = local - timedelta(hours=6)
    base = shifted.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(hours=6)
    return base + timedelta(hours=8 * (shifted.hour // 8))


def oracle(
    rounds: list[dict[str, Any]],
    findings: list[dict[str, Any]],
    kind: str,
    slot: str,
    tz: str,
    min_rounds: int,
    k: float,
    h: float,
    category: str = "all",
    u_bar: float | None = None,
    sigma_z: float | None = None,
) -> dict[tuple[str, datetime], dict[str, Any]]:
    """Every point of every subject's chart, from the formulas."""
    zone = ZoneInfo(tz)
    where: dict[tuple[str, str], tuple[str, datetime]] = {}  # each round's subject and slot
    n_rounds: dict[tuple[str, datetime], int] = defaultdict(int)
    for r in rounds:
        local = r["completed_at"].astimezone(zone).replace(tzinfo=None)
        key = (r["dealer_id"] if kind == "dealer" else r["table_id"], _slot(local, slot))
        where[(r["table_id"], r["round_id"])] = key
        n_rounds[key] += 1
    errors: dict[tuple[str, datetime], int] = defaultdict(int)
    for f in findings:  # in the slot it was detected in, for the subject of its round
        if category in ("all", f["severity"]):
            subject = where[(f["table_id"], f["round_id"])][0]
            local = f["observed_at"].astimezone(zone).replace(tzinfo=None)
            errors[(subject, _slot(local, slot))] += 1
    solid = {key for key, n in n_rounds.items() if n >= min_rounds}
    if u_bar is None:
        u_bar = sum(errors[key] for key in solid) / sum(n_rounds[key] / 1000 for key in solid)
    points: dict[tuple[str, datetime], dict[str, Any]] = {}
    for key, n in n_rounds.items():
        u = errors[key] / (n / 1000)
        points[key] = {"u": u, "n": n / 1000, "c": errors[key], "z": (u - u_bar) / math.sqrt(u_bar / (n / 1000))}
    by_subject: dict[str, list[tuple[str, datetime]]] = defaultdict(list)
    for key in sorted(solid):
        by_subject[key[0]].append(key)
    ranges = [abs(points[b]["z"] - points[a]["z"]) for keys in by_subject.values() for a, b in itertools.pairwise(keys)]
    if sigma_z is None:
        sigma_z = sum(ranges) / len(ranges) / 1.128
    for key, p in points.items():
        half = math.sqrt(u_bar / p["n"])
        p.update(
            u_bar=u_bar,
            sigma_z=sigma_z,
            ucl_u=u_bar + 3 * half,
            lcl_u=max(0.0, u_bar - 3 * half),
            ucl=u_bar + 3 * sigma_z * half,
            lcl=max(0.0, u_bar - 3 * sigma_z * half),
            solid=key in solid,
            beyond=False,
            run8=False,
            rising6=False,
            cusum_signal=False,
            cusum=None,
        )
    for keys in by_subject.values():
        s = 0.0
        for i, key in enumerate(keys):
            p = points[key]
            p["beyond"] = p["u"] > p["ucl"]
            last8 = keys[max(0, i - 7) : i + 1]
            p["run8"] = len(last8) == 8 and all(points[x]["u"] > u_bar for x in last8)
            last6 = keys[max(0, i - 5) : i + 1]
            p["rising6"] = len(last6) == 6 and all(
                points[b]["u"] > points[a]["u"] for a, b in itertools.pairwise(last6)
            )
            before = s
            s = max(0.0, s + p["c"] - k * u_bar * p["n"])
            p["cusum"] = s
            p["cusum_signal"] = s > h >= before
    for p in points.values():
        p["signal"] = p["solid"] and (p["beyond"] or p["run8"] or p["rising6"] or p["cusum_signal"])
    return points


def compare(got: list[dict[str, Any]], want: dict[tuple[str, datetime], dict[str, Any]]) -> int:
    """Assert the SQL's chart equals the oracle's; return how many points signalled."""
    assert len(got) == len(want)
    signals = 0
    for g in got:
        w = want[(g["subject_id"], g["slot_start"])]
        assert g["rounds"] / 1000 == pytest.approx(w["n"], abs=TOL)
        for col in ("u", "u_bar", "sigma_z", "ucl_u", "lcl_u", "ucl", "lcl"):
            assert g[col] == pytest.approx(w[col], abs=TOL), (col, g["subject_id"], g["slot_start"])
        if w["solid"]:
            assert g["cusum"] == pytest.approx(w["cusum"], abs=TOL), (g["subject_id"], g["slot_start"])
        for col in ("solid", "beyond", "run8", "rising6", "cusum_signal", "signal"):
            assert bool(g[col]) == w[col], (col, g["subject_id"], g["slot_start"])
        signals += bool(g["signal"])
    return signals


# -- fixtures -----------------------------------------------------------------------------------

START = datetime(2026, 10, 26, tzinfo=ZoneInfo("America/New_York"))  # the month crosses the end of DST
SHIFTED = Raise("D-TCP-02-1", START + timedelta(days=7), START + timedelta(days=14), 4.0)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, MonthSpec, pa.Table, pa.Table]:
    """Two weeks of 6 tables in New York: varying exposure (short shifts), overdispersion 0.5
    between shifts, one dealer's rate raised fourfold in the second week."""
    spec = MonthSpec(
        tables=6,
        days=14,
        start=START,
        tz="America/New_York",
        seed=5,
        rounds_per_shift=300,
        short_every=8,
        overdispersion=0.5,
        raises=(SHIFTED,),
    )
    rounds, findings = rows(spec)
    db = tmp_path_factory.mktemp("control") / "synthetic.duckdb"
    write_rows(str(db), rounds, findings)
    return db, spec, rounds, findings


# -- tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "slot", "category"),
    [("dealer", "shift", "all"), ("table", "day", "all"), ("table", "week", "all"), ("dealer", "shift", "procedural")],
)
def test_limits_and_signals_match_an_independent_implementation(
    synthetic: tuple[Path, MonthSpec, pa.Table, pa.Table], kind: str, slot: str, category: str
) -> None:
    db, spec, rounds, findings = synthetic
    con = connect_read_only(db)
    try:
        got = chart(
            con, ChartSpec(kind, slot, category, min_rounds=100, cusum_k=1.4427, cusum_h=4.0, tz=spec.tz), None, None
        )  # type: ignore[arg-type]
    finally:
        con.close()
    want = oracle(rounds.to_pylist(), findings.to_pylist(), kind, slot, spec.tz, 100, 1.4427, 4.0, category)
    assert any(not p["solid"] for p in want.values()) or slot == "week"  # short shifts are hollow
    signals = compare(got, want)
    if (kind, category) == ("dealer", "all"):
        assert signals > 0  # the raised dealer


def test_a_frozen_baseline_judges_with_its_own_figures(synthetic: tuple[Path, MonthSpec, pa.Table, pa.Table]) -> None:
    db, spec, rounds, findings = synthetic
    con = connect_read_only(db)
    try:
        spec_ = ChartSpec("dealer", "shift", tz=spec.tz, cusum_h=4.0)
        got = chart(con, spec_, None, None, baseline=_baseline(2.5, 1.3))
    finally:
        con.close()
    want = oracle(rounds.to_pylist(), findings.to_pylist(), "dealer", "shift", spec.tz, 100, 1.4427, 4.0,
                  u_bar=2.5, sigma_z=1.3)  # fmt: skip
    compare(got, want)


def _baseline(u_bar: float, sigma_z: float) -> Any:
    from projections.models.control import Baseline

    at = datetime(2026, 10, 1, tzinfo=UTC)
    return Baseline("B-test", "dealer", "shift", "all", at, at, u_bar, sigma_z, 10, "manager", at, "test")


MONTGOMERY = [(10.0, 14), (8.0, 12), (13.0, 20), (10.0, 11), (9.5, 7), (10.0, 10), (12.0, 21), (10.5, 16), (12.0, 19),
              (12.5, 23)]  # fmt: skip
"""Montgomery, Introduction to Statistical Quality Control, the u-chart of dyed cloth (Example 7.7 in
the 6th edition): ten rolls, the inspection units (50 m2) in each and the nonconformities found.
Here a unit is 1,000 rounds: a roll is a week of one table."""


def test_u_chart_limits_equal_montgomerys_dyed_cloth_example(tmp_path: Path) -> None:
    monday = datetime(2026, 1, 5, tzinfo=UTC)
    rounds, findings = [], []
    for week, (units, defects) in enumerate(MONTGOMERY):
        n = round(units * 1000)
        for i in range(n):
            at = monday + timedelta(weeks=week, seconds=i * 5)
            rid = f"R{week:02d}-{i:05d}"
            rounds.append(_round_row("CLOTH-01", rid, at))
            if i < defects:
                findings.append(_finding_row(f"F{week:02d}-{i:02d}", "CLOTH-01", rid, at))
    db = tmp_path / "cloth.duckdb"
    write_rows(str(db), pa.Table.from_pylist(rounds), pa.Table.from_pylist(findings))
    con = connect_read_only(db)
    try:
        got = chart(con, ChartSpec("table", "week", min_rounds=1), None, None)
    finally:
        con.close()
    u_bar = 153 / 107.5  # the book: 1.42
    assert [p["errors"] for p in got] == [d for _, d in MONTGOMERY]
    for p, (units, _) in zip(got, MONTGOMERY, strict=True):
        assert p["u_bar"] == pytest.approx(u_bar, abs=TOL)
        assert p["ucl_u"] == pytest.approx(u_bar + 3 * math.sqrt(u_bar / units), abs=TOL)
        assert p["lcl_u"] == pytest.approx(u_bar - 3 * math.sqrt(u_bar / units), abs=TOL)
    # the book's printed limits for the rolls of 10 units: UCL 2.55, LCL 0.29
    ten = got[0]
    assert abs(ten["ucl_u"] - 2.55) < 0.01 and abs(ten["lcl_u"] - 0.29) < 0.01
    assert not any(p["beyond"] for p in got)  # the book: the process is in control


def _round_row(table_id: str, round_id: str, at: datetime) -> dict[str, Any]:
    from dealtrail.simulator.month import _round

    return _round(table_id, round_id, "TCP", 1, "D-1", at - timedelta(seconds=1), at)


def _finding_row(finding_id: str, table_id: str, round_id: str, at: datetime) -> dict[str, Any]:
    from dealtrail.simulator.month import _finding

    return _finding(finding_id, "TCP-679a.7-a-instrument", "TCP", "procedural", table_id, round_id, at)


MONTH_START = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
RAISED = Raise("D-C691-02-2", MONTH_START + timedelta(days=14), MONTH_START + timedelta(days=21), 4.0)


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four weeks of 8 tables (24 dealers, a shift each a day), one dealer's rate fourfold in the third week."""
    db = tmp_path_factory.mktemp("month") / "month.duckdb"
    rounds, findings = rows(MonthSpec(days=28, start=MONTH_START, raises=(RAISED,)))
    write_rows(str(db), rounds, findings)
    return db


def test_a_dealer_raised_fourfold_for_a_week_signals_in_that_week_and_no_other_dealer_does(month: Path) -> None:
    con = connect_read_only(month)
    try:
        weekly = chart(con, ChartSpec("dealer", DEALER_SLOT), None, None)  # a dealer's chart unless set
        shifts = chart(con, ChartSpec("dealer", "shift"), None, None)
    finally:
        con.close()
    # by week (a dealer's default): the raised dealer's week signals, and nothing else on the floor does
    assert DEALER_SLOT == "week"
    assert [(p["subject_id"], p["slot_start"]) for p in weekly if p["signal"]] == [
        (RAISED.dealer_id, datetime(2026, 11, 16))
    ]
    # by shift: the raised dealer's chart signals on most of that week's shifts, never before it
    raised = [p for p in shifts if p["subject_id"] == RAISED.dealer_id and p["signal"]]
    in_week = [p for p in raised if datetime(2026, 11, 16) <= p["slot_start"] < datetime(2026, 11, 23)]
    assert len(in_week) >= 4
    assert all(p["slot_start"] >= datetime(2026, 11, 16) for p in raised)
    # the other 23 dealers' shift points (3-sigma limits and run rules on 644 points of a Poisson
    # process with 3 incidents a shift): a few false alarms are the price of the formulas, at most 1 %
    others = [p for p in shifts if p["subject_id"] != RAISED.dealer_id]
    assert sum(p["signal"] for p in others) <= 0.01 * len(others)


def test_the_false_alarm_script_counts_chance_signals_by_rule() -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "ops" / "control_false_alarms.py"
    done = subprocess.run(
        [sys.executable, str(script), "--slot", "week", "--seeds", "61", "--days", "14"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    # 24 dealers for two weeks (the night shifts of the last Sunday end in a third week)
    assert re.fullmatch(r"seed 61: 56 points, \d+ signalled, \d+ of 24 dealers, sigma_z [0-9.]+", lines[0])
    assert re.fullmatch(r"by week: 56 points, \d+ signalled \([0-9.]+%\); above the upper limit \d+, .*; "
                        r"dealer-months with a signal: \d+ of 24", lines[-1]), lines[-1]  # fmt: skip


def test_points_given_by_a_caller_are_judged_as_the_store_judges_its_own(month: Path) -> None:
    from projections.models.control import GIVEN_COLUMNS, chart_of
    from projections.store.sql_files import read_sql

    spec = ChartSpec("dealer", "week")
    con = connect_read_only(month)
    try:
        stored = chart(con, spec, None, None)
        params = {"kind": "dealer", "slot": "week", "tz": "UTC", "shift_hour": 6, "start": None, "end": None}
        cur = con.execute(read_sql("rpt_control_points.sql"), params)
        cols = [d[0] for d in cur.description]
        points = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
    finally:
        con.close()
    assert set(GIVEN_COLUMNS) <= set(cols)
    given = chart_of(list(reversed(points)), spec)  # in any order
    assert [(p["subject_id"], p["slot_start"], p["signal"]) for p in given] == [
        (p["subject_id"], p["slot_start"], p["signal"]) for p in stored
    ]
    for a, b in zip(given, stored, strict=True):
        for col in ("u", "u_bar", "sigma_z", "ucl", "lcl", "cusum"):
            assert a[col] == pytest.approx(b[col], abs=TOL) or (a[col] is None and b[col] is None)
    with pytest.raises(ValueError, match="lacks"):
        chart_of([{"subject_id": "x"}], spec)
