"""Period reports that are final or say they are not, as of a time, revised beside the old ones."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.reporting.schedule import ReportWatch, Schedule, run_due
from projections.models.reviews import append_review
from projections.records.report_revisions import history, latest
from projections.reports.report import judge_status, write_report
from projections.store.store import Store
from schemas.reviews import FindingAcknowledged, FindingDisposed

START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
HOURLY = Schedule("0 * * * *")
LABEL = "2026-11-27T1800+0000_UTC"
GRACE = timedelta(minutes=15)


@pytest.fixture
def store(audited_shift: Path, tmp_path: Path) -> Path:
    """A copy of the audited small shift (18:00 to about 19:30), to add reviews to."""
    db = tmp_path / "s.duckdb"
    shutil.copy(audited_shift, db)
    return db


def _figures(summary: Path) -> dict[str, Any]:
    figures: dict[str, Any] = json.loads(summary.read_text())
    figures.pop("report")
    return figures


def _review(db: Path, kind: type[FindingAcknowledged] | type[FindingDisposed], at: datetime, n: int = 1) -> str:
    """Store a review of the first finding detected in the 18:00 hour, made at ``at``."""
    with Store(db) as s:
        row = s.con.execute(
            "SELECT finding_id FROM fct_detections WHERE observed_at < $1 ORDER BY observed_at, finding_id LIMIT 1",
            [START + timedelta(hours=1)],
        ).fetchall()
        fid = str(row[0][0])
        extra = {"cause": "DEALER_ERROR"} if kind is FindingDisposed else {}
        append_review(s.con, kind(review_id=f"R{n}", finding_id=fid, user="ann", reviewed_at=at, **extra))
    return fid


def _events(rows: list[tuple[str, str]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    # the columns of the store's events table that judge_status reads (a final status names each
    # table's last event: seq and event ID)
    con.execute("CREATE SEQUENCE seqs START 1")
    con.execute(
        "CREATE TABLE events (table_id VARCHAR, occurred_at TIMESTAMPTZ, seq BIGINT DEFAULT nextval('seqs'),"
        " event_id VARCHAR DEFAULT 'E-' || currval('seqs'))"
    )
    for table, at in rows:
        con.execute(
            "INSERT INTO events (table_id, occurred_at) VALUES (?, ?)",
            [table, datetime.fromisoformat(f"2026-11-27T{at}+00:00")],
        )
    return con


def test_a_period_is_provisional_until_every_table_that_dealt_in_it_has_an_event_past_its_end() -> None:
    end = START + timedelta(hours=1)
    con = _events([("A", "18:10"), ("B", "18:50"), ("A", "19:02")])
    judged = judge_status(con, START, end, GRACE)
    assert judged is not None and judged["status"] == "provisional" and judged["waiting_for"] == ["B"]
    con.execute("INSERT INTO events (table_id, occurred_at) VALUES ('B', TIMESTAMPTZ '2026-11-27 19:00:00+00')")
    judged = judge_status(con, START, end, GRACE)
    assert judged is not None and judged["status"] == "final" and judged["waiting_for"] == []
    assert judge_status(con, START, None, GRACE) is None  # an open-ended report is not judged


def test_a_period_is_final_once_the_newest_event_is_the_grace_time_past_its_end_in_event_time() -> None:
    end = START + timedelta(hours=1)
    con = _events([("A", "18:10"), ("B", "18:50"), ("A", "19:14:59")])
    judged = judge_status(con, START, end, GRACE)
    assert judged is not None and judged["status"] == "provisional"  # B stopped; 14:59 of grace so far
    con.execute("INSERT INTO events (table_id, occurred_at) VALUES ('A', TIMESTAMPTZ '2026-11-27 19:15:00+00')")
    judged = judge_status(con, START, end, GRACE)
    assert judged is not None and judged["status"] == "final" and judged["waiting_for"] == ["B"]
    assert "past the period's end + 15 min" in judged["reason"]
    empty = judge_status(_events([("A", "17:00")]), START, end, GRACE)
    assert empty is not None and empty["status"] == "provisional"  # no event in it, none after it


def test_the_same_store_and_as_of_give_the_same_bytes_and_later_reviews_are_not_counted(
    store: Path, tmp_path: Path
) -> None:
    made = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    fid = _review(store, FindingDisposed, made)
    before, after = made - timedelta(seconds=1), made

    def write(name: str, as_of: datetime) -> dict[str, bytes]:
        out = tmp_path / name
        write_report(store, out, START, START + timedelta(hours=1), as_of=as_of, grace=GRACE)
        return {p.name: p.read_bytes() for p in out.iterdir()}

    one, two = write("one", before), write("two", before)
    assert set(one) == {"report.html", "findings.csv", "findings.parquet", "summary.json"}
    assert one == two  # byte for byte, HTML, CSV, Parquet and JSON
    early, late = json.loads(one["summary.json"]), json.loads(write("late", after)["summary.json"])
    assert early["reviews"]["by_review_status"]["disposed"] == 0  # made after the as-of time
    assert late["reviews"]["by_review_status"]["disposed"] == 1
    assert early["report"]["coverage"]["reviews"]["count"] == 0
    assert late["report"]["coverage"]["reviews"] == {
        "count": 1,
        "last_review_id": "R1",
        "last_reviewed_at": "2026-11-28T12:00:00+00:00",
    }
    assert early["report"]["as_of"] == "2026-11-28T11:59:59+00:00" and early["report"]["status"] == "final"
    assert early["report"]["digest"] != late["report"]["digest"]
    assert fid in one["findings.csv"].decode()
    html = one["report.html"].decode()
    assert "2026-11-28 11:59:59+00:00 UTC" in html and "FINAL" in html and "Reviews made after this time" in html


def test_a_review_made_after_a_report_adds_a_revision_and_the_old_one_stays_marked_superseded(
    store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "periods"
    first = run_due(store, out, HOURLY, START + timedelta(hours=3))
    assert [p.name for p in first] == ["rev-0001", "rev-0001"]
    old = {p: p.read_bytes() for p in (out / LABEL / "rev-0001").iterdir()}
    _review(store, FindingAcknowledged, START + timedelta(hours=4))
    assert run_due(store, out, HOURLY, START + timedelta(hours=3, minutes=30)) == []  # as of before the review
    second = run_due(store, out, HOURLY, START + timedelta(hours=5))
    assert second == [out / LABEL / "rev-0002"]  # the other hour's findings were not reviewed
    assert {p: p.read_bytes() for p in old} == old  # never overwritten
    revisions = history(out / LABEL)
    assert [(r["revision"], r["status"], r["superseded_by"]) for r in revisions] == [
        (1, "final", 2),
        (2, "final", None),
    ]
    assert revisions[0]["digest"] != revisions[1]["digest"]
    manifest = json.loads((out / LABEL / "manifest.json").read_text())
    assert manifest["latest"] == 2 and manifest["revisions"][0]["superseded_by"] == 2
    assert manifest["start"] == START.isoformat() and manifest["label"] == LABEL
    summary = json.loads((out / LABEL / "rev-0002" / "summary.json").read_text())
    assert summary["reviews"]["by_review_status"]["acknowledged"] == 1 and summary["report"]["revision"] == 2
    assert "revision 2 (supersedes revision 1" in (out / LABEL / "rev-0002" / "report.html").read_text()
    assert run_due(store, out, HOURLY, START + timedelta(hours=6)) == []  # nothing new since


def test_a_trail_that_arrives_in_two_halves_ends_with_a_final_revision_equal_to_the_report_of_the_period(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    lines = events.read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["occurred_at"] >= "2026-11-27T18:40")
    halves = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    halves[0].write_bytes(b"".join(lines[:cut]))
    halves[1].write_bytes(b"".join(lines[cut:]))
    db, out = tmp_path / "s.duckdb", tmp_path / "periods"
    from dealtrail.ingest.audit import audit_file

    with Store(db) as s:
        audit_file(halves[0], s)
    now = START + timedelta(hours=3)  # every period closed by the clock: the trail decides
    run_due(db, out, HOURLY, now)
    assert latest(out / LABEL)["status"] == "provisional"  # type: ignore[index]
    assert "PROVISIONAL" in (out / LABEL / "rev-0001" / "report.html").read_text()
    with Store(db) as s:
        audit_file(halves[1], s)
    assert run_due(db, out, HOURLY, now) == [out / LABEL / "rev-0002", out / "2026-11-27T1900+0000_UTC" / "rev-0001"]
    final = latest(out / LABEL)
    assert final is not None and final["status"] == "final"
    whole = write_report(db, tmp_path / "whole", START, START + timedelta(hours=1), generated_at=now)
    assert _figures(out / LABEL / "rev-0002" / "summary.json") == _figures(whole.summary)
    assert json.loads((out / LABEL / "rev-0001" / "summary.json").read_text())["report"]["status"] == "provisional"


def test_schedule_once_rewrites_a_stale_report_and_says_so(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "periods"
    args = ["schedule", "--every", "0 * * * *", "--db", str(store), "--out", str(out), "--once"]
    first = CliRunner().invoke(app, [*args, "--now", (START + timedelta(hours=3)).isoformat()])
    assert first.exit_code == 0 and "wrote 2 period report revisions" in first.output, first.output
    _review(store, FindingDisposed, START + timedelta(hours=4))
    again = CliRunner().invoke(app, [*args, "--now", (START + timedelta(hours=5)).isoformat()])
    assert again.exit_code == 0 and "wrote 1 period report revisions" in again.output, again.output
    assert f"{LABEL}/rev-0002" in again.output
    quiet = CliRunner().invoke(app, [*args, "--now", (START + timedelta(hours=6)).isoformat()])
    assert quiet.exit_code == 0 and "wrote 0 period report revisions" in quiet.output


def test_a_report_written_before_revisions_is_kept_as_revision_0_and_superseded(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "periods"
    legacy = out / LABEL
    write_report(store, legacy, START, START + timedelta(hours=1), generated_at=START + timedelta(hours=1))
    old = (legacy / "summary.json").read_bytes()
    written = run_due(store, out, HOURLY, START + timedelta(hours=3))
    assert legacy / "rev-0001" in written and (legacy / "summary.json").read_bytes() == old
    assert [(r["revision"], r["folder"], r["superseded_by"]) for r in history(legacy)] == [
        (0, ".", 1),
        (1, "rev-0001", None),
    ]


def test_the_reports_page_shows_each_periods_latest_revision_its_status_and_its_superseded_history(
    store: Path, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from dealtrail.console import auth
    from dealtrail.console.app import ConsoleConfig, create_app
    from projections.models.reviews import ReviewDue
    from tests.integration.test_console import PASSWORDS, Clock, login

    out = tmp_path / "periods"
    run_due(store, out, HOURLY, START + timedelta(hours=3))
    _review(store, FindingDisposed, START + timedelta(hours=4))
    run_due(store, out, HOURLY, START + timedelta(hours=5))
    with Store(store) as s:
        auth.add_user(s.con, "vic", "viewer", PASSWORDS["vic"], START)
        config = ConsoleConfig(
            ReviewDue(24, 24, 72), "s" * 48, reports_dir=out, clock=Clock(START + timedelta(hours=6))
        )
        client = TestClient(create_app(s, config))
        login(client, "vic")
        page = client.get("/reports").text
        rows = page.split("<tr>")
        hour18 = next(r for r in rows if LABEL in r)
        hour19 = next(r for r in rows if "2026-11-27T1900+0000_UTC" in r)
        assert "2026-11-27 18:00+00:00 to 19:00+00:00 UTC" in hour18  # each end with its offset, the zone named
        assert "st-final" in hour18 and "revision 2" in hour18 and "1 superseded" in hour18
        assert "revision 1, final, as of 2026-11-27 21:00:00+00:00: superseded by revision 2" in hour18
        assert "st-provisional" in hour19 and "revision 1" in hour19 and "superseded" not in hour19
        base = f"/reports/scheduled/{LABEL.replace('+', '%2B')}"
        assert f'href="{base}/rev-0002/report.html"' in hour18 and f'href="{base}/rev-0001/summary.json"' in hour18
        old = client.get(f"{base}/rev-0001/summary.json")
        assert old.status_code == 200 and old.json()["report"]["revision"] == 1
        html = client.get(f"{base}/rev-0002/report.html")
        assert html.status_code == 200 and "style-src 'unsafe-inline'" in html.headers["content-security-policy"]
        bad = [f"{base}/rev-1/report.html", f"{base}/..%2F..%2Frev-0001/report.html", f"{base}/rev-0001/x.txt"]
        bad += ["/reports/scheduled/../rev-0001/summary.json", "/reports/scheduled/%2e%2e/rev-0001/summary.json"]
        for path in bad:
            assert client.get(path).status_code == 404, path


def test_a_watching_caller_looks_again_only_at_the_periods_that_rows_added_since_can_change(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dealtrail.reporting.schedule as sched

    looked: list[datetime] = []
    real = sched.coverage

    def spy(con: duckdb.DuckDBPyConnection, start: datetime, end: datetime, as_of: datetime) -> dict[str, Any]:
        looked.append(start)
        return real(con, start, end, as_of)

    monkeypatch.setattr(sched, "coverage", spy)
    out, watch, now = tmp_path / "periods", sched.ReportWatch(), START + timedelta(hours=3)
    assert len(run_due(store, out, HOURLY, now, watch=watch)) == 2 and len(looked) == 2
    looked.clear()
    assert run_due(store, out, HOURLY, now, watch=watch) == [] and looked == []  # nothing added: nothing read
    _review(store, FindingAcknowledged, START + timedelta(hours=2))  # of a finding of the 18:00 hour
    written = run_due(store, out, HOURLY, now, watch=watch)
    assert written == [out / LABEL / "rev-0002"]
    # the 18:00 hour for the review; the 19:00 hour because it is not final and something was added
    assert looked == [START, START + timedelta(hours=1)]
    looked.clear()
    assert run_due(store, out, HOURLY, now, watch=watch) == [] and looked == []


def test_a_reaudit_generation_is_looked_at_but_adds_no_revision_when_it_changes_no_figure(
    store: Path, tmp_path: Path
) -> None:
    out, watch, now = tmp_path / "periods", ReportWatch(), START + timedelta(hours=3)
    assert len(run_due(store, out, HOURLY, now, watch=watch)) == 2
    result = CliRunner().invoke(app, ["reaudit", "--db", str(store), "--workers", "1"])
    assert result.exit_code == 0, result.output
    # the generation is part of what a report covers, so both periods are written again, and
    # their digests are compared: the same engine found the same findings, so nothing is kept
    assert run_due(store, out, HOURLY, now, watch=watch) == []
    assert set(watch.unchanged) == {LABEL, "2026-11-27T1900+0000_UTC"}
    assert [r["revision"] for r in history(out / LABEL)] == [1]
    fresh = tmp_path / "fresh"
    run_due(store, fresh, HOURLY, now)
    summary = json.loads((fresh / LABEL / "rev-0001" / "summary.json").read_text())
    assert summary["report"]["coverage"]["generation"] == 2
    assert summary["report"]["digest"] == history(out / LABEL)[0]["digest"]
