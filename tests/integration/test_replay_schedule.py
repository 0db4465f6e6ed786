"""Incident replay, scheduled reports and the report's figures."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.investigate.replay import Window, replay, stored_events, stored_findings
from dealtrail.reporting.schedule import Schedule, run_due, run_forever

START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def store(audited_shift: Path) -> Path:
    return audited_shift


def _tables(db: Path) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT DISTINCT table_id FROM events ORDER BY 1").fetchall()]
    finally:
        con.close()


def test_replay_of_every_table_reproduces_the_stored_findings(store: Path) -> None:
    con = duckdb.connect(str(store), read_only=True)
    try:
        for table in _tables(store):
            result = replay(table, stored_events(con, table), stored_findings(con, table))
            assert result.matches, (table, result.differences[:3])
            assert result.stored, f"{table} should have stored findings"
            assert len(result.replayed) == len(result.stored)
    finally:
        con.close()


def test_replay_reports_an_altered_stored_event_at_that_event(store: Path, tmp_path: Path) -> None:
    altered = tmp_path / "altered.duckdb"
    altered.write_bytes(store.read_bytes())
    con = duckdb.connect(str(altered))
    event_id, payload = con.execute(
        "SELECT event_id, payload::VARCHAR FROM events WHERE table_id = 'TCP-01' AND type = 'CardDealt' "
        "ORDER BY seq LIMIT 1 OFFSET 40"
    ).fetchone()
    doc = json.loads(payload)
    doc["face"] = "UP"  # someone "corrects" history in place
    con.execute("UPDATE events SET payload = ? WHERE event_id = ?", [json.dumps(doc), event_id])
    con.close()
    result = CliRunner().invoke(app, ["replay", "--db", str(altered), "--table", "TCP-01"])
    assert result.exit_code == 3, result.output
    assert "REPLAY DIFFERS" in result.output
    assert f"first difference at event {event_id}" in result.output.replace("\n", "")
    con = duckdb.connect(str(altered), read_only=True)
    try:
        found = replay("TCP-01", stored_events(con, "TCP-01"), stored_findings(con, "TCP-01"))
    finally:
        con.close()
    assert [(d.side, d.rule_id, d.trigger_event_id) for d in found.differences] == [
        ("replay only", "TCP-679a.9-b-face-down", event_id)
    ]


def test_replay_of_a_round_window_shows_only_that_round_and_still_matches(store: Path) -> None:
    con = duckdb.connect(str(store), read_only=True)
    try:
        rid = con.execute(
            "SELECT round_id FROM fct_detections WHERE table_id = 'PGP-01' AND round_id IS NOT NULL LIMIT 1"
        ).fetchone()[0]
        result = replay("PGP-01", stored_events(con, "PGP-01"), stored_findings(con, "PGP-01"), Window(round_id=rid))
    finally:
        con.close()
    assert result.steps and {s.event.round_id for s in result.steps} == {rid}
    assert result.replayed and result.matches


def test_replay_cli_writes_an_incident_page(store: Path, tmp_path: Path) -> None:
    page = tmp_path / "incident.html"
    result = CliRunner().invoke(
        app,
        ["replay", "--db", str(store), "--table", "C691-01", "--from", START.isoformat(),
         "--to", (START + timedelta(minutes=20)).isoformat(), "--html", str(page)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "replay matches the stored findings" in result.output
    said = re.search(r"\((\d[\d,]*) finding revision(s?)\)", result.output)  # "1 finding revision", "2 ... revisions"
    assert said is not None and (said[2] == "s") == (said[1] != "1"), result.output
    assert "Replay matches the stored findings" in html and "Timeline" in html
    assert "Content-Security-Policy" in html


def test_schedule_writes_each_closed_period_once_and_a_forced_rerun_adds_revisions_beside_them(
    store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "periods"
    hourly = Schedule("0 * * * *")
    assert run_due(store, out, hourly, START + timedelta(minutes=59)) == []
    first = run_due(store, out, hourly, START + timedelta(hours=1, minutes=1))
    assert [f"{p.parent.name}/{p.name}" for p in first] == ["2026-11-27T1800+0000_UTC/rev-0001"]
    assert run_due(store, out, hourly, START + timedelta(hours=1, minutes=30)) == []
    second = run_due(store, out, hourly, START + timedelta(hours=3))
    # the shift ends at about 19:30: the 20:00 period holds no event and is not reported
    assert [f"{p.parent.name}/{p.name}" for p in second] == ["2026-11-27T1900+0000_UTC/rev-0001"]
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != "manifest.json"}
    assert {p.name for p in files} == {"report.html", "findings.csv", "findings.parquet", "summary.json"} | {
        "manifest-sha256.txt",  # each revision's seal (issue 35), unsigned here: no key set
        "UNSIGNED.txt",
    }
    # nothing changed in the store: a later look writes nothing
    assert run_due(store, out, hourly, START + timedelta(hours=5)) == []
    again = run_due(store, out, hourly, START + timedelta(hours=3), force=True)
    assert [p.name for p in again] == ["rev-0002", "rev-0002"]
    assert {p: p.read_bytes() for p in files} == files  # the first revisions are untouched


def test_run_forever_writes_periods_as_the_clock_passes_them(store: Path, tmp_path: Path) -> None:
    minutes = [30, 65, 90, 125]
    ticks = iter(START + timedelta(minutes=m) for m in minutes)
    sleeps: list[float] = []
    written: list[list[Path]] = []
    run_forever(store, tmp_path, Schedule("0 * * * *"), clock=lambda: next(ticks), sleep=sleeps.append,
                poll_seconds=7.0, on_written=written.append, iterations=4)  # fmt: skip
    rev = "rev-0001"
    assert written == [[tmp_path / "2026-11-27T1800+0000_UTC" / rev], [tmp_path / "2026-11-27T1900+0000_UTC" / rev]]
    assert sleeps == [7.0, 7.0, 7.0]


def test_schedule_rejects_a_bad_expression() -> None:
    result = CliRunner().invoke(app, ["schedule", "--every", "fortnightly", "--db", "x.duckdb", "--once"])
    assert result.exit_code == 2 and "cron expression" in result.output


def test_summary_figures_match_the_injected_errors(small_shift: tuple[Path, Path], store: Path, tmp_path: Path) -> None:
    from projections.reports.report import write_report

    _, truth_path = small_shift
    truth = [json.loads(line) for line in truth_path.read_text().splitlines()]
    files = write_report(store, tmp_path / "r")
    summary = json.loads(files.summary.read_text())
    assert summary["findings"]["records"] == len(truth)
    # every skipped remedy and every chain break the simulator caused has its cause: counted once
    consequences = ("DT-remedy-overdue", "DT-chain-broken")
    incidents = [t for t in truth if t["rule_id"] not in consequences]
    assert summary["findings"]["consequences"] == {r: sum(t["rule_id"] == r for t in truth) for r in consequences}
    assert summary["findings"]["total"] == len(incidents)
    assert summary["findings"]["by_rule"] == dict(Counter(t["rule_id"] for t in incidents))
    assert summary["findings"]["by_table"] == dict(Counter(t["table_id"] for t in incidents))
    gaps = sum(1 for t in truth if t["rule_id"] == "DT-sequence-gap")
    assert summary["data_quality"]["sequence_gaps"] == gaps
    overdue = sum(1 for t in truth if t["rule_id"] == "DT-remedy-overdue")
    assert summary["remedies"]["overdue"] == overdue
    # the one remedy the simulator makes late: a jammed Pai Gow deck dealt before its reshuffle
    # (the reshuffle § 645a.14(l) requires comes with the next round's shuffle, rulebook 10.4.1)
    dealt_on_a_jam = sum(
        1 for t in truth if t["injected"] == "jam-dealt-unshuffled" and t["rule_id"] == "PGP-645a.14-l-shuffler-fault"
    )
    assert summary["remedies"]["done_late"] == dealt_on_a_jam
    con = duckdb.connect(str(store), read_only=True)
    rounds = con.execute("SELECT count(*) FROM rounds").fetchone()[0]
    faults = con.execute("SELECT count(*) FROM events WHERE type IN ('ShufflerFaulted', 'AutoShoeFaulted')").fetchone()[
        0
    ]
    con.close()
    assert summary["rounds"]["total"] == rounds
    assert len(summary["device_faults"]) == faults
    assert sum(d["rounds"] for d in summary["dealers"]) == rounds
    worst = {s["table_id"]: s["longest_run_without_count"] for s in summary["stub_compliance"]}
    due = {t["table_id"] for t in truth if "stub-count" in t["rule_id"]}
    assert all(worst[t] >= 5 for t in due)
    assert all(run < 5 for t, run in worst.items() if t not in due)


def test_the_incident_page_of_a_round_shows_a_remedy_skipped_there_as_overdue(store: Path, tmp_path: Path) -> None:
    # a voiding finding turns overdue when the next round starts, after the replayed round: the
    # page must show the status the store holds, not the one the round ended with
    con = duckdb.connect(str(store), read_only=True)
    try:
        row = con.execute(
            """SELECT table_id, round_id FROM dim_findings
               WHERE status = 'overdue' AND round_id IS NOT NULL AND rule_id <> 'DT-remedy-overdue'
               ORDER BY finding_id LIMIT 1"""
        ).fetchone()
    finally:
        con.close()
    assert row is not None, "the fixture shift has an overdue remedy"
    table_id, round_id = row
    page = tmp_path / "round.html"
    result = CliRunner().invoke(
        app, ["replay", "--db", str(store), "--table", table_id, "--round", round_id, "--html", str(page)]
    )
    assert result.exit_code == 0, result.output
    html = page.read_text()
    summary = html[html.index("Remedy status") :]
    assert "overdue" in summary.split("Timeline")[0]


def test_the_incident_page_lays_cards_out_as_cards_and_folds_ids_and_hashes_away(store: Path, tmp_path: Path) -> None:
    page = tmp_path / "cards.html"
    result = CliRunner().invoke(
        app,
        ["replay", "--db", str(store), "--table", "TCP-01", "--from", START.isoformat(),
         "--to", (START + timedelta(minutes=20)).isoformat(), "--html", str(page)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert 'class="card down"' in html  # dealt face down: shown as a back
    assert any(suit in html for suit in "♥♦") and 'class="red"' in html
    assert "Seat " in html and "SEAT_" not in html.split("<h2>Timeline</h2>")[1].split("<th>Seq</th>")[0]
    assert "hash=" not in html and "prev_hash=" not in html  # not in the details column
    assert html.count("<details") > 10 and "ID and hashes" in html


def test_scheduled_reports_name_the_property_and_judge_review_lateness_from_the_settings(
    store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "periods"
    env = {"DEALTRAIL_PROPERTY": "Riverfront Downs", "DEALTRAIL_REVIEW__DUE_HOURS_PROCEDURAL": "0.01"}
    now = (START + timedelta(hours=3)).isoformat()
    args = ["schedule", "--every", "0 * * * *", "--db", str(store), "--out", str(out), "--now", now]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    folder = out / "2026-11-27T1800+0000_UTC" / "rev-0001"
    assert "Riverfront Downs" in (folder / "report.html").read_text()
    assert json.loads((folder / "summary.json").read_text())["reviews"]["late"] > 0
    ticks = iter([START + timedelta(hours=3)])
    again = tmp_path / "forever"
    run_forever(store, again, Schedule("0 * * * *"), clock=lambda: next(ticks), sleep=lambda s: None,
                iterations=1, property_name="Keystone Park")  # fmt: skip
    assert "Keystone Park" in (again / "2026-11-27T1800+0000_UTC" / "rev-0001" / "report.html").read_text()
