"""Control-chart baselines as records (issue 50, item 2): frozen once, never overwritten, and a
chart judged against one is the same chart after more data arrives."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.compute as pc
import pytest

from dealtrail.simulator.month import MonthSpec, Raise, rows, write_rows
from projections.models.control import ChartSpec, chart
from projections.records import access_log, baselines
from projections.store.store import Store, connect_read_only

START = datetime(2026, 11, 2, tzinfo=UTC)
SPEC = ChartSpec("dealer", "shift", min_rounds=100)


def _first_fortnight(db: Path) -> None:
    r, f = rows(MonthSpec(tables=3, days=14, start=START, seed=8))
    write_rows(str(db), r, f)


def test_a_frozen_baseline_reproduces_the_same_chart_after_more_data_arrives(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    _first_fortnight(db)
    with Store(db) as store:
        b = baselines.freeze(store.con, SPEC, START, START + timedelta(days=7), "rita", START + timedelta(days=14))
    period = (START + timedelta(days=7), START + timedelta(days=14))
    con = connect_read_only(db)
    try:
        assert baselines.in_force(con, SPEC) == b
        judged = chart(con, SPEC, *period, baseline=b)
        own = chart(con, SPEC, *period)
    finally:
        con.close()
    assert {p["u_bar"] for p in judged} == {b.u_bar} and {p["sigma_z"] for p in judged} == {b.sigma_z}
    # more data: three more tables in the same weeks (one dealer far worse) and a third week
    more_r, more_f = rows(
        MonthSpec(
            tables=6, days=21, start=START, seed=9, raises=(Raise("D-C691-02-1", START, START + timedelta(days=21), 6),)
        )
    )
    keep = pc.or_(
        pc.invert(pc.is_in(more_r["table_id"], rows_tables(3))), pc.greater_equal(more_r["completed_at"], period[1])
    )
    more_r = more_r.filter(keep)
    kept_rounds = set(more_r["round_id"].to_pylist())
    more_f = more_f.filter(pc.is_in(more_f["round_id"], value_set=pa_array(kept_rounds)))
    write_rows(str(db), more_r, more_f)
    con = connect_read_only(db)
    try:
        again = chart(con, SPEC, *period, baseline=baselines.in_force(con, SPEC))
        own_again = chart(con, SPEC, *period)
    finally:
        con.close()
    old = {p["subject_id"] for p in judged}
    assert [p for p in again if p["subject_id"] in old] == judged  # the same chart, point for point
    # without the baseline the floor's centre line moved with the new tables: the test can fail
    assert own_again[0]["u_bar"] != pytest.approx(own[0]["u_bar"], abs=1e-6)


def rows_tables(n: int) -> object:
    import pyarrow as pa

    from dealtrail.simulator.month import _table_ids

    return pa.array([t for t, _ in _table_ids(n)])


def pa_array(values: set[str]) -> object:
    import pyarrow as pa

    return pa.array(sorted(values))


def test_freezing_again_adds_a_record_and_the_latest_is_in_force(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    _first_fortnight(db)
    with Store(db) as store:
        first = baselines.freeze(store.con, SPEC, START, START + timedelta(days=7), "rita", START + timedelta(days=8))
        second = baselines.freeze(
            store.con, SPEC, START + timedelta(days=7), START + timedelta(days=14), "sam", START + timedelta(days=15),
            "after the new shuffler",
        )  # fmt: skip
        with pytest.raises(baselines.BaselineError):
            baselines.freeze(store.con, SPEC, START + timedelta(days=40), START + timedelta(days=41), "sam", START)
    con = connect_read_only(db)
    try:
        assert baselines.history(con) == [second, first]  # both kept, newest first
        assert baselines.in_force(con, SPEC) == second
        assert baselines.in_force(con, SPEC, as_of=START + timedelta(days=10)) == first  # a report as of then
        assert baselines.in_force(con, ChartSpec("table", "day")) is None
    finally:
        con.close()


def test_the_baseline_command_freezes_lists_and_logs(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    _first_fortnight(db)
    env = {**os.environ, "DEALTRAIL_DB": str(db), "DEALTRAIL_CONTROL__MIN_ROUNDS": "50", "TZ": "Asia/Kolkata"}
    cli = [sys.executable, "-m", "dealtrail.cli"]
    # one week holds one weekly point a dealer, no spread: its shifts are frozen
    week1 = ["--from", "2026-11-02T00:00:00Z", "--to", "2026-11-09T00:00:00Z", "--slot", "shift", "--note", "week 1"]
    done = subprocess.run(
        [*cli, "baseline", "freeze", *week1],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "froze baseline" in done.stdout
    bad = subprocess.run(
        [*cli, "baseline", "freeze", "--from", "2027-01-01T00:00:00Z", "--to", "2027-01-02T00:00:00Z"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert bad.returncode == 1 and "error:" in bad.stderr and "Traceback" not in bad.stderr
    listed = subprocess.run([*cli, "baseline", "list"], env=env, capture_output=True, text=True, check=True)
    assert "dealer/shift/all" in listed.stdout and "week 1" in listed.stdout
    con = connect_read_only(db)
    try:
        entries, _ = access_log.entries(con, access_log.LogFilter(kind="baseline_frozen"), limit=None)
    finally:
        con.close()
    assert [e["outcome"] for e in entries] == ["refused", "ok"]  # newest first


def test_the_chart_command_draws_a_png_with_the_settings_minimum(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dealtrail.cli import app

    db = tmp_path / "store.duckdb"
    _first_fortnight(db)
    env = {"DEALTRAIL_DB": str(db), "DEALTRAIL_CONTROL__MIN_ROUNDS": "100000"}
    cli = ["chart", "D-TCP-01-1"]
    done = CliRunner().invoke(app, [*cli, "--out", str(tmp_path / "c.png")], env=env)
    assert done.exit_code == 0, done.output
    assert (tmp_path / "c.png").read_bytes().startswith(b"\x89PNG")
    # every point hollow under the setting's minimum: none judged
    assert re.search(r"\((\d+) points, \1 hollow, 0 signals\)", done.stdout), done.stdout
    usual = {**env, "DEALTRAIL_CONTROL__MIN_ROUNDS": "100"}
    weekly = CliRunner().invoke(app, [*cli, "--out", str(tmp_path / "w.png")], env=usual)
    assert re.search(r"\(2 points, 0 hollow", weekly.stdout), weekly.output  # a dealer by week unless set
    by_shift = CliRunner().invoke(
        app, [*cli, "--out", str(tmp_path / "u.png")], env={**usual, "DEALTRAIL_CONTROL__DEALER_SLOT": "shift"}
    )
    assert re.search(r"\(14 points, [0-2] hollow", by_shift.stdout), by_shift.output
    bad = CliRunner().invoke(app, [*cli, "--out", str(tmp_path / "c.txt")], env=env)
    assert bad.exit_code == 2 and "error:" in bad.output
    unknown = CliRunner().invoke(app, [*cli, "--out", str(tmp_path / "d.png"), "--slot", "month"], env=env)
    assert unknown.exit_code == 2 and "--slot" in unknown.output
