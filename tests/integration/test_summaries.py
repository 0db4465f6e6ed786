"""The summaries the console reads instead of the events (issue 23, item 2): the floor's
per-table last state equals the query over the events, after replayed and late batches and
after the one-time build in a store written before it; a report's page lists a bounded number
of findings and says where the rest are."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from projections.records import staff
from projections.reports.report import write_report
from projections.store import summaries
from projections.store.sql_files import read_sql
from projections.store.store import ROUNDS_SCHEMA, Store, connect_read_only


def _rows(con: duckdb.DuckDBPyConnection, sql_name: str) -> list[tuple[Any, ...]]:
    """The floor's rows by ``sql_name`` (sum_floor.sql or con_floor.sql), without the supervisor."""
    cur = con.execute(read_sql(sql_name))
    cols = [d[0] for d in cur.description]
    keep = [i for i, c in enumerate(cols) if c != "supervisor_id"]
    return [tuple(r[i] for i in keep) for r in cur.fetchall()]


def _assert_summary_is_the_query(con: duckdb.DuckDBPyConnection) -> None:
    assert summaries.has_summary(con, "sum_floor")
    from_events = _rows(con, "con_floor.sql")
    assert from_events, "the store has tables"
    assert _rows(con, "sum_floor.sql") == from_events
    supervisors = dict(con.execute("SELECT table_id, supervisor_id FROM sum_floor").fetchall())
    expected = staff.supervisors_by_table(con)
    assert {t: s for t, s in supervisors.items() if s is not None} == expected


def test_floor_summary_kept_by_the_audit_equals_the_floor_query_over_the_events(audited_shift: Path) -> None:
    con = connect_read_only(audited_shift)
    try:
        _assert_summary_is_the_query(con)
    finally:
        con.close()


def _batches(db: Path, parts: int) -> list[tuple[list[tuple[int, bytes]], list[dict[str, Any]]]]:
    """The stored events (as raw JSON with their arrival) and rounds of ``db``, in ``parts``
    batches by arrival."""
    con = connect_read_only(db)
    try:
        events = con.execute("SELECT arrival, payload::VARCHAR FROM events ORDER BY arrival").fetchall()
        rounds = (
            con.sql(f"SELECT {', '.join(ROUNDS_SCHEMA.names)} FROM rounds ORDER BY completed_at")
            .to_arrow_table()
            .to_pylist()
        )
    finally:
        con.close()
    n, m = -(-len(events) // parts), -(-len(rounds) // parts)
    return [
        ([(int(a), p.encode()) for a, p in events[i * n : (i + 1) * n]], rounds[i * m : (i + 1) * m])
        for i in range(parts)
    ]


def test_floor_summary_stays_equal_after_late_batches_and_a_replayed_batch(audited_shift: Path, tmp_path: Path) -> None:
    batches = _batches(audited_shift, 5)
    with Store(tmp_path / "s.duckdb") as store:
        for i in (0, 2, 1, 4, 3):  # batches 1 and 3 arrive late: their events are older than stored ones
            events, rounds = batches[i]
            store.write_batch(events, rounds=rounds)
        _assert_summary_is_the_query(store.con)
        before = store.con.execute("SELECT * FROM sum_floor ORDER BY table_id").fetchall()
        events, rounds = batches[2]  # redelivered (at-least-once): nothing is added, nothing counted twice
        counts = store.write_batch(events, rounds=rounds)
        assert (counts.events, counts.rounds) == (0, 0)
        assert store.con.execute("SELECT * FROM sum_floor ORDER BY table_id").fetchall() == before
        _assert_summary_is_the_query(store.con)


def _event(seq: int, type_: str, minute: int, **payload: Any) -> tuple[int, bytes]:
    body = {
        "event_id": f"e{seq}",
        "table_id": "T1",
        "game": "BLACKJACK",
        "seq": seq,
        "type": type_,
        "occurred_at": f"2026-11-27T10:{minute:02d}:00+00:00",
        "recorded_at": f"2026-11-27T10:{minute:02d}:00+00:00",
        "actor": {"role": "FLOOR" if type_.startswith("Device") else "DEALER", "id": f"P{seq}"},
        **payload,
    }
    return seq, json.dumps(body).encode()


def test_a_late_event_with_an_older_seq_does_not_undo_the_later_supervisor_or_last_event(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        store.write_batch([_event(1, "DeviceRegistered", 0), _event(2, "RoundStarted", 1)])
        assert store.con.execute("SELECT last_seq, supervisor_id FROM sum_floor").fetchone() == (2, "P1")
        store.write_batch([_event(5, "DeviceTakenOutOfService", 6)])
        store.write_batch([_event(3, "DeviceReturnedToService", 3)])  # late: before seq 5
        store.write_batch([_event(5, "DeviceTakenOutOfService", 6)])  # redelivered
        _assert_summary_is_the_query(store.con)
        assert store.con.execute("SELECT last_seq, supervisor_id FROM sum_floor").fetchone() == (5, "P5")
        cols = [d[0] for d in store.con.execute(read_sql("sum_floor.sql")).description]
        assert not any(c.startswith("device") for c in cols)  # devices: the engine's state, never SQL


def test_a_store_written_before_the_summaries_gets_them_once_when_a_writer_opens_it(
    audited_shift: Path, tmp_path: Path
) -> None:
    db = tmp_path / "old.duckdb"
    shutil.copy(audited_shift, db)
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE sum_floor")
    con.execute("DROP TABLE summary_builds")
    con.close()
    reader = connect_read_only(db)
    try:  # a reader of the old store falls back to the query over the events
        assert not summaries.has_summary(reader, "sum_floor")
        assert summaries.floor_query(reader) == read_sql("con_floor.sql")
    finally:
        reader.close()
    with Store(db) as store:
        _assert_summary_is_the_query(store.con)
        assert summaries.floor_query(store.con) == read_sql("sum_floor.sql")
        assert summaries.ensure(store.con) == []  # built once


def _listed(html: str) -> int:
    section = html.split('<h2 id="findings">', 1)[1].split("<h3>Procedural", 1)[0]
    return len(re.findall(r"<details><summary>", section))


def _remedies(html: str) -> int:
    section = html.split("<h2>Open and overdue remedies</h2>", 1)[1].split("</table>", 1)[0]
    return len(re.findall(r"<tr(?: class=\"overdue\")?>\s*<td class=\"t\">", section))


@pytest.mark.parametrize("cap", [1])  # below what the small shift lists and owes (2 or more remedies)
def test_report_lists_at_most_max_listed_findings_and_says_how_many_more_and_where(
    audited_shift: Path, tmp_path: Path, cap: int
) -> None:
    every = write_report(audited_shift, tmp_path / "all").html.read_text()
    total = _listed(every)
    assert total > cap, "the small shift has more voiding and integrity incidents than the cap"
    assert 'id="unlisted"' not in every
    files = write_report(audited_shift, tmp_path / "cap", max_listed=cap, console_url="https://console.example")
    html = files.html.read_text()
    assert _listed(html) == cap
    assert f"{total - cap} more voiding and integrity incident(s) are not listed here" in html
    assert '<a href="findings.csv">findings.csv</a>' in html and '<a href="findings.parquet">' in html
    assert "https://console.example/findings?severity=voiding" in html.replace("&amp;", "&") or (
        "https://console.example/findings?" in html and "severity=voiding" in html
    )
    assert files.csv.exists() and files.parquet.exists()
    assert len(html) < len(every)
    assert _remedies(every) > cap, "the small shift owes more remedies than the cap"
    assert _remedies(html) == cap
    assert f"{_remedies(every) - cap} more open or overdue remedies are not listed here" in html
    first = re.findall(r"<code>([0-9a-f]+)</code></details>", every)[:cap]
    assert re.findall(r"<code>([0-9a-f]+)</code></details>", html) == first  # the most serious first, kept in order


def test_a_report_the_console_serves_names_the_exports_without_linking_files_it_does_not_serve(
    audited_shift: Path, tmp_path: Path
) -> None:
    html = write_report(audited_shift, tmp_path / "console", max_listed=1, console_url="").html.read_text()
    assert _listed(html) == 1
    assert 'href="findings.csv"' not in html and "that <code>dealtrail report</code> writes" in html
    assert 'href="/findings?severity=voiding"' in html


# -- the finding half of the incidents read model (sum_findings) -------------------------------------


def _model(con: duckdb.DuckDBPyConnection, live: bool) -> list[tuple[Any, ...]]:
    """Every row of the incidents read model, from the summary or computed live from the findings."""
    from datetime import UTC, datetime

    from projections.models import incidents
    from projections.models.reviews import FindingFilter, ReviewDue

    params = incidents._params(FindingFilter(), ReviewDue(24, 24, 72), datetime(2026, 11, 30, tzinfo=UTC), None)
    rows = con.execute(f"SELECT * FROM ({incidents.model_sql(con, live)}) ORDER BY finding_id", params).fetchall()
    return [tuple(r) for r in rows]


def test_findings_summary_equals_the_live_model_whatever_order_the_batches_come_in(
    audited_shift: Path, tmp_path: Path
) -> None:
    from schemas.findings import Finding

    con = connect_read_only(audited_shift)
    try:
        stored = con.sql("SELECT * EXCLUDE (generation) FROM findings ORDER BY observed_at, revision").to_arrow_table()
        findings = [Finding.model_validate(r) for r in stored.to_pylist()]
        rounds = (
            con.sql(f"SELECT {', '.join(ROUNDS_SCHEMA.names)} FROM rounds ORDER BY completed_at")
            .to_arrow_table()
            .to_pylist()
        )
        expected = _model(con, live=True)
    finally:
        con.close()
    consequences = [f for f in findings if f.rule_id in ("DT-remedy-overdue", "DT-chain-broken")]
    assert consequences and any(r[-1] for r in expected), "the shift has a consequence with its cause"
    rest = [f for f in findings if f not in consequences]
    parts = 4
    chunks = [rest[i::parts] for i in range(parts)]  # every part holds revisions of many findings, late ones too
    round_chunks = [rounds[i::parts] for i in range(parts)]
    with Store(tmp_path / "s.duckdb") as store:
        store.write_batch([], findings=consequences)  # consequences before their causes
        assert _model(store.con, live=False) == _model(store.con, live=True)
        for i in range(parts):
            # each batch's rounds come one batch after the findings raised in them
            store.write_batch([], findings=chunks[i], rounds=round_chunks[i - 1] if i else [])
            assert _model(store.con, live=False) == _model(store.con, live=True)
        store.write_batch([], rounds=round_chunks[-1])
        store.write_batch([], findings=chunks[1], rounds=round_chunks[1])  # redelivered: nothing changes
        assert store.con.execute("SELECT count(*) FROM sum_findings").fetchone() == (
            len({f.finding_id for f in findings}),
        )
        assert _model(store.con, live=False) == _model(store.con, live=True) == expected


def test_findings_summary_is_rebuilt_once_for_an_older_store_and_kept_per_generation(
    audited_shift: Path, tmp_path: Path
) -> None:
    db = tmp_path / "old.duckdb"
    shutil.copy(audited_shift, db)
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE sum_findings")
    con.execute("DELETE FROM summary_builds WHERE name = 'sum_findings'")
    con.close()
    reader = connect_read_only(db)
    try:  # a reader of the old store computes the model live
        assert not summaries.has_summary(reader, "sum_findings")
        expected = _model(reader, live=True)
    finally:
        reader.close()
    with Store(db) as store:
        assert summaries.has_summary(store.con, "sum_findings")
        assert _model(store.con, live=False) == expected
    from typer.testing import CliRunner

    from dealtrail.cli import app as cli

    result = CliRunner().invoke(cli, ["reaudit", "--db", str(db), "--workers", "1"])
    assert result.exit_code == 0, result.output
    with Store(db) as store:
        generations = store.con.execute("SELECT DISTINCT generation FROM sum_findings ORDER BY 1").fetchall()
        assert generations == [(1,), (2,)]
        assert _model(store.con, live=False) == _model(store.con, live=True)
        store.con.execute("SET VARIABLE dealtrail_generation = 1")  # a report of the generation before
        assert _model(store.con, live=False) == _model(store.con, live=True) == expected


def test_each_device_fault_names_the_findings_that_cite_it(audited_shift: Path) -> None:
    from projections.reports.report import query

    con = connect_read_only(audited_shift)
    try:
        faults = con.execute(
            """SELECT event_id, occurred_at, table_id, type FROM events
               WHERE type IN ('ShufflerFaulted', 'AutoShoeFaulted')"""
        ).fetchall()
        cites = con.execute("SELECT rule_id, current_status, evidence_event_ids FROM fct_detections").fetchall()
        rows = query(con, "rpt_device_faults").to_pylist()
    finally:
        con.close()
    assert faults, "the shift has device faults"
    expected = {}
    for event_id, at, table, type_ in faults:
        named = sorted({f"{rule} ({status})" for rule, status, ids in cites if event_id in ids})
        expected[(at, table, type_)] = ", ".join(named) or None
    got = {(r["occurred_at"], r["table_id"], r["type"]): r["followed_by"] for r in rows}
    assert got == expected and any(expected.values())
