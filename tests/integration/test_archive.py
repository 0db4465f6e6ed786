"""Cold months in Parquet (``dealtrail archive``): a store whose trail spans two months has its
oldest month moved out, and replay, verify and reaudit of that month give what they gave before;
bad input is one line and deletes nothing."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.ingest.audit import audit_file
from dealtrail.reporting.schedule import Schedule, run_due
from dealtrail.simulator.floor import FloorSpec, simulate
from projections.store.archive import reads_archive
from projections.store.store import Store, connect_read_only
from schemas.codec import encode

BOUNDARY = "2026-11"
OCTOBER = ("--from", "2026-10-31T00:00:00+00:00", "--to", "2026-11-01T00:00:00+00:00")


@pytest.fixture(scope="module")
def two_months(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 tables dealt from 23:00 on 31 October to 01:00 on 1 November 2026 (UTC), audited with
    snapshots: about 11,000 events in each month, one chain per table across the boundary."""
    folder = tmp_path_factory.mktemp("two-months")
    events, db = folder / "events.jsonl", folder / "store.duckdb"
    spec = FloorSpec(tables=3, hours=2, seed=5, error_rate=0.1, start=datetime(2026, 10, 31, 23, tzinfo=UTC))
    with events.open("wb") as fh:
        for e in simulate(spec, []):
            fh.write(encode(e) + b"\n")
    with Store(db) as store:
        audit_file(events, store, snapshot_every=1000)
    return db


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.output


def _without_notes(text: str) -> str:
    kept = [
        ln for ln in text.splitlines() if not ln.startswith(("reading store", "reading archived", "reading replica"))
    ]
    return " ".join(" ".join(kept).split())


def _copy(db: Path, tmp_path: Path, name: str = "live.duckdb") -> Path:
    out = tmp_path / name
    shutil.copyfile(db, out)
    return out


def _october_round(db: Path) -> tuple[str, str]:
    """A table and round of October that raised findings."""
    con = connect_read_only(db)
    try:
        row = con.execute(
            """SELECT f.table_id, f.round_id FROM findings f JOIN rounds r USING (table_id, round_id)
               WHERE r.completed_at < '2026-11-01' ORDER BY r.completed_at LIMIT 1"""
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    return str(row[0]), str(row[1])


def _count(db: Path, sql: str) -> int:
    con = connect_read_only(db)
    try:
        return int(con.execute(sql).fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def test_archiving_the_oldest_month_keeps_replay_verify_and_reaudit_of_it_the_same(
    two_months: Path, tmp_path: Path
) -> None:
    before, live, folder = _copy(two_months, tmp_path, "before.duckdb"), _copy(two_months, tmp_path), tmp_path / "cold"
    table, round_id = _october_round(before)
    results = {}
    for name, db in (("before", before), ("live", live)):
        if name == "live":
            code, out = _run("archive", "--db", str(db), "--before", BOUNDARY, "--to", str(folder))
            assert code == 0, out
            assert "archived 2026-10" in out and "archive s: copy" in out
        results[name] = [
            _run("replay", "--db", str(db), "--table", table, "--round", round_id),
            _run("verify", "--db", str(db)),
            _run("reaudit", "--db", str(db), *OCTOBER, "--workers", "1"),
        ]
    for (code_before, out_before), (code_live, out_live) in zip(results["before"], results["live"], strict=True):
        assert code_before == code_live
        assert _without_notes(out_before) == _without_notes(out_live)
    assert "replay matches the stored findings" in results["live"][0][1]
    assert "reading archived months from" in results["live"][1][1]
    assert live.stat().st_size < before.stat().st_size
    assert _count(live, "SELECT count(*) FROM events WHERE occurred_at < '2026-11-01'") == 0
    assert _count(live, "SELECT count(*) FROM findings WHERE observed_at < '2026-11-01'") > 0  # findings stay
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [r["months"] for r in manifest["runs"]] == [["2026-10"]]
    assert {p["kind"] for p in manifest["runs"][0]["parts"]} == {"events", "table_snapshots"}
    assert (folder / "manifest.json").stat().st_mode & 0o077 == 0


def test_the_chain_check_runs_across_the_boundary_between_archive_and_store(two_months: Path, tmp_path: Path) -> None:
    live, folder = _copy(two_months, tmp_path), tmp_path / "cold"
    assert _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(folder))[0] == 0
    intact = [
        t for t in ("C691-01", "PGP-01", "TCP-01") if "intact" in _run("verify", "--db", str(live), "--table", t)[1]
    ]
    assert intact, "the fixture has no intact table"
    table = intact[0]
    con = connect_read_only(live)
    try:
        rel = con.execute(
            "SELECT path FROM archive_manifest WHERE kind = 'events' AND table_id = ? ORDER BY month DESC LIMIT 1",
            [table],
        ).fetchone()[0]  # type: ignore[index]
        first_live = con.execute("SELECT min(seq) FROM events WHERE table_id = ?", [table]).fetchone()[0]  # type: ignore[index]
    finally:
        con.close()
    # the last archived event of the table goes missing: the first live event no longer links to the archive
    part = folder / rel
    shortened = tmp_path / "short.parquet"
    with duckdb.connect() as c:
        c.execute(
            f"""COPY (SELECT * FROM read_parquet('{part}') ORDER BY seq, arrival
                      LIMIT (SELECT count(*) - 1 FROM read_parquet('{part}'))) TO '{shortened}' (FORMAT PARQUET)"""
        )
    shutil.move(shortened, part)
    code, out = _run("verify", "--db", str(live), "--table", table)
    assert code == 4, out
    flat = " ".join(out.split())
    assert f"chain broken at seq {first_live}" in flat and "prev_hash is not the previous event's hash" in flat


def test_archiving_again_adds_to_the_manifest(two_months: Path, tmp_path: Path) -> None:
    live, folder = _copy(two_months, tmp_path), tmp_path / "cold"
    con = duckdb.connect(str(live))
    try:  # a third month: the first half hour's rows moved back into September (columns only)
        con.execute("SET TimeZone = 'UTC'")
        con.execute(
            "UPDATE events SET occurred_at = occurred_at - INTERVAL 1 MONTH WHERE occurred_at < '2026-10-31T23:30:00Z'"
        )
        con.execute(
            """UPDATE table_snapshots SET last_occurred_at = last_occurred_at - INTERVAL 1 MONTH
               WHERE last_occurred_at < '2026-10-31T23:30:00Z'"""
        )
    finally:
        con.close()
    september = _count(live, "SELECT count(*) FROM events WHERE occurred_at < '2026-10-01'")
    assert _run("archive", "--db", str(live), "--before", "2026-10", "--to", str(folder))[0] == 0
    code, out = _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(folder))
    assert code == 0, out
    runs = json.loads((folder / "manifest.json").read_text())["runs"]
    assert [r["months"] for r in runs] == [["2026-09"], ["2026-10"]]
    assert runs[0]["events"] == september
    assert _count(live, "SELECT count(DISTINCT archived_at) FROM archive_manifest") == 2
    assert _count(live, "SELECT count(*) FROM archive_manifest WHERE month = '2026-09'") > 0
    code, out = _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(folder))
    assert code == 2 and "holds no event before 2026-11" in " ".join(out.split())  # nothing left: nothing written
    assert len(json.loads((folder / "manifest.json").read_text())["runs"]) == 2


def test_archived_snapshots_with_and_without_the_late_count_are_read_together(two_months: Path, tmp_path: Path) -> None:
    """Archive runs of two versions: files whose snapshots have no ``late_through`` (written before
    the column) and files that have it are one view, in either order of the manifest, and a
    replay of the archived month starts from a snapshot (the older ones' late count is NULL: the
    history is counted for them)."""
    live, folder = _copy(two_months, tmp_path), tmp_path / "cold"
    con = duckdb.connect(str(live))
    try:
        con.execute("SET TimeZone = 'UTC'")
        for table in ("events", "table_snapshots"):
            col = "occurred_at" if table == "events" else "last_occurred_at"
            con.execute(f"UPDATE {table} SET {col} = {col} - INTERVAL 1 MONTH WHERE {col} < '2026-10-31T23:30:00Z'")
    finally:
        con.close()
    ro = connect_read_only(live)
    try:  # the last round of October: the replay starts from a snapshot of October
        table, round_id = ro.execute(
            "SELECT table_id, round_id FROM rounds WHERE completed_at < '2026-11-01' ORDER BY completed_at DESC LIMIT 1"
        ).fetchone()  # type: ignore[misc]
    finally:
        ro.close()
    expected = _run("replay", "--db", str(live), "--table", table, "--round", round_id)
    assert expected[0] == 0 and "from the snapshot after seq" in expected[1], expected[1]
    assert _run("archive", "--db", str(live), "--before", "2026-10", "--to", str(folder))[0] == 0
    assert _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(folder))[0] == 0
    # the second run's snapshot files as a version before the late count wrote them
    october = sorted((folder / "table_snapshots").rglob("*.parquet"))
    october = [f for f in october if "2026-10" in str(f)]
    assert october
    con = duckdb.connect()
    try:
        for f in october:
            con.execute(
                f"COPY (SELECT * EXCLUDE (late_through) FROM read_parquet('{f}')) TO '{f}.old' (FORMAT parquet)"
            )
            Path(f"{f}.old").replace(f)
    finally:
        con.close()
    code, out = _run("replay", "--db", str(live), "--table", table, "--round", round_id)
    assert code == 0, out
    assert _without_notes(out) == _without_notes(expected[1])
    from projections.store import summaries

    con = connect_read_only(live)
    try:  # the archive kept the late record trusted: its archived events' late events stay recorded
        assert summaries.late_record_current(con)
    finally:
        con.close()
    # a writer reading the archive through its views (the re-audit's) marks the store's own events
    from projections.store.archive import attach_archive

    with Store(live) as store:
        assert attach_archive(store.con, folder, snapshots=False) is not None
        summaries.mark_late_record(store.con)
        assert summaries.late_record_current(store.con)


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        ("2026-10", "holds no event before 2026-10"),
        ("2026-12", "would archive every stored month, 2026-11 included"),
        ("2026-13", "--before must be a month YYYY-MM"),
        ("October", "--before must be a month YYYY-MM"),
    ],
)
def test_archive_refuses_a_month_that_is_not_in_the_store_in_one_line(
    two_months: Path, tmp_path: Path, before: str, expected: str
) -> None:
    live = _copy(two_months, tmp_path)
    events = _count(live, "SELECT count(*) FROM events")
    code, out = _run("archive", "--db", str(live), "--before", before, "--to", str(tmp_path / "cold"))
    assert code == 2
    assert expected in " ".join(out.split())
    assert len(out.strip().splitlines()) <= 2  # one message (wrapped at most once by the terminal width)
    assert _count(live, "SELECT count(*) FROM events") == events


def test_archive_refuses_a_folder_it_cannot_write_and_deletes_nothing(two_months: Path, tmp_path: Path) -> None:
    live = _copy(two_months, tmp_path)
    events = _count(live, "SELECT count(*) FROM events")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code, out = _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(locked / "cold"))
    finally:
        locked.chmod(0o700)
    if code == 0:  # running as root: permissions do not bind
        pytest.skip("permissions are not enforced for this user (see the test with os.access denied)")
    assert code == 2 and "is not writable; nothing archived" in " ".join(out.split())
    assert _count(live, "SELECT count(*) FROM events") == events


def test_archive_refuses_a_folder_that_the_process_may_not_write_even_as_root(
    two_months: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import projections.store.archive

    live = _copy(two_months, tmp_path)
    events = _count(live, "SELECT count(*) FROM events")
    real = projections.store.archive.os.access
    monkeypatch.setattr(projections.store.archive.os, "access", lambda p, mode: Path(p) != tmp_path and real(p, mode))
    code, out = _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(tmp_path / "cold"))
    assert code == 2 and f"the folder {tmp_path} is not writable; nothing archived" in " ".join(out.split())
    assert _count(live, "SELECT count(*) FROM events") == events
    assert not (tmp_path / "cold").exists()


def test_archive_refuses_a_folder_path_that_is_a_file_and_deletes_nothing(two_months: Path, tmp_path: Path) -> None:
    live = _copy(two_months, tmp_path)
    events = _count(live, "SELECT count(*) FROM events")
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, out = _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(afile / "cold"))
    assert code == 2 and "is a file, not a folder; nothing archived" in " ".join(out.split())
    assert _count(live, "SELECT count(*) FROM events") == events


def test_an_archive_folder_missing_a_file_is_one_clear_line(two_months: Path, tmp_path: Path) -> None:
    live, folder = _copy(two_months, tmp_path), tmp_path / "cold"
    assert _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(folder))[0] == 0
    victim = sorted(folder.rglob("*.parquet"))[0]
    victim.unlink()
    table, round_id = _october_round(two_months)
    for args in (
        ("verify", "--db", str(live)),
        ("replay", "--db", str(live), "--table", table, "--round", round_id),
        ("reaudit", "--db", str(live), *OCTOBER),
        ("report", "--db", str(live), "--out", str(tmp_path / "report"), *OCTOBER),
    ):
        code, out = _run(*args)
        assert code == 2, (args, out)
        flat = " ".join(out.split())
        assert "lacks 1 file(s) its manifest lists" in flat and "the archived trail is incomplete" in flat
    assert _count(live, "SELECT count(*) FROM generations") == 0  # the re-audit wrote nothing


def test_the_archive_folder_setting_and_option_name_where_the_files_are(
    two_months: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, folder = _copy(two_months, tmp_path), tmp_path / "cold"
    assert _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(folder))[0] == 0
    moved = tmp_path / "elsewhere"
    shutil.move(folder, moved)
    code, out = _run("verify", "--db", str(live))
    assert code == 2 and "no archive folder" in " ".join(out.split())
    code, out = _run("verify", "--db", str(live), "--archive", str(moved))
    assert code in (0, 4) and f"reading archived months from {moved}" in " ".join(out.split())
    monkeypatch.setenv("DEALTRAIL_ARCHIVE__DIR", str(moved))
    code, out = _run("verify", "--db", str(live))
    assert code in (0, 4) and f"reading archived months from {moved}" in " ".join(out.split())


ARCHIVED_HOUR = ("--from", "2026-10-31T23:00:00+00:00", "--to", "2026-11-01T00:00:00+00:00")
"""A period wholly archived by ``--before 2026-11``."""
ACROSS = ("--from", "2026-10-31T23:30:00+00:00", "--to", "2026-11-01T00:30:00+00:00")
"""A period half archived, half live."""


def _report(db: Path, out: Path, period: tuple[str, ...]) -> tuple[dict[str, object], bytes]:
    code, text = _run("report", "--db", str(db), "--out", str(out), *period, "--as-of", "2026-11-05T00:00:00Z")
    assert code == 0, text
    return json.loads((out / "summary.json").read_text()), (out / "findings.csv").read_bytes()


@pytest.mark.parametrize("period", [ARCHIVED_HOUR, ACROSS], ids=["archived-period", "across-the-boundary"])
def test_a_report_says_the_same_figures_before_and_after_its_months_are_archived(
    two_months: Path, tmp_path: Path, period: tuple[str, ...]
) -> None:
    live, folder = _copy(two_months, tmp_path), tmp_path / "cold"
    before, before_csv = _report(live, tmp_path / "before", period)
    assert _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(folder))[0] == 0
    after, after_csv = _report(live, tmp_path / "after", period)
    assert before["period"]["events"] > 0 and not after["period"]["no_events"]  # type: ignore[index]
    assert after == before  # every figure, the coverage, the status and the digest (same as-of time)
    assert after_csv == before_csv
    assert before["device_faults"] or before["rounds"]["total"]  # type: ignore[index]


def test_scheduled_period_reports_read_the_archived_months_also_through_the_writers_connection(
    two_months: Path, tmp_path: Path
) -> None:
    """The projector writes scheduled reports through its own writer connection: they read the
    archive too, and the writer still stores into its ``events`` table afterwards."""
    live, folder = _copy(two_months, tmp_path), tmp_path / "cold"
    hourly, now = Schedule("0 * * * *"), datetime(2026, 11, 5, tzinfo=UTC)
    before = run_due(live, tmp_path / "before", hourly, now)
    assert _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(folder))[0] == 0
    with Store(live) as store:
        after = run_due(store.con, tmp_path / "after", hourly, now)
        assert not reads_archive(store.con)
        assert store.con.execute("SELECT count(*) FROM events WHERE occurred_at < '2026-11-01'").fetchall() == [(0,)]
    assert [p.relative_to(tmp_path / "before") for p in before] == [p.relative_to(tmp_path / "after") for p in after]
    assert len(before) == 2  # 23:00 (archived) and 00:00 (live)
    for b, a in zip(before, after, strict=True):
        figures = [json.loads((p / "summary.json").read_text()) for p in (b, a)]
        assert figures[0]["period"]["events"] > 0
        assert figures[1] == figures[0]


def test_the_consoles_report_of_an_archived_period_is_the_same_page_before_and_after_the_archive(
    two_months: Path, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from dealtrail.console import auth
    from dealtrail.console.app import ConsoleConfig, create_app
    from projections.models.reviews import ReviewDue

    live, folder = _copy(two_months, tmp_path), tmp_path / "cold"
    period = {"from": ARCHIVED_HOUR[1], "to": ARCHIVED_HOUR[3]}
    with Store(live) as store:
        auth.add_user(store.con, "vic", "viewer", "vic-viewer-pass", datetime(2026, 11, 1, tzinfo=UTC))

    def pages(archive: Path | None = None) -> tuple[str, int, str]:
        with Store(live) as store:
            config = ConsoleConfig(
                ReviewDue(24, 24, 72), "s" * 48, clock=lambda: datetime(2026, 11, 5, tzinfo=UTC), archive=archive
            )
            client = TestClient(create_app(store, config))
            login = client.get("/login").text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            client.post("/login", data={"username": "vic", "password": "vic-viewer-pass", "csrf": login, "next": "/"})
            view = client.get("/reports/view", params=period)
            listing = re.sub(r'name="csrf" value="[^"]+"', "", client.get("/reports").text)
            return view.text, view.status_code, listing

    before, code, listing_before = pages()
    assert code == 200 and "No dealing event in this period" not in before
    assert _run("archive", "--db", str(live), "--before", BOUNDARY, "--to", str(folder))[0] == 0
    after, code, listing_after = pages()
    assert code == 200 and after == before
    assert listing_after == listing_before and "2026-10-31" in listing_after  # the archived months' span
    shutil.move(folder, tmp_path / "elsewhere")
    text, code, _ = pages()
    assert code == 503 and "no archive folder" in text
    assert pages(tmp_path / "elsewhere")[0] == before  # the folder the settings name (DEALTRAIL_ARCHIVE__DIR)
