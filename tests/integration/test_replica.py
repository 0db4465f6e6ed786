"""The read replica: a copy of the store that readers open while the writer holds the store,
replaced atomically, owner-only, saying when it was copied."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from projections.store.replica import ReplicaInfo, describe_copy, parse_every, replica_info, write_replica
from projections.store.store import Store, connect_read_only


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, " ".join(r.output.split())


def _locked(db: Path) -> bool:
    """True if another process cannot open ``db`` (a writer holds its lock)."""
    other = subprocess.run(
        [sys.executable, "-c", f"import duckdb; duckdb.connect({str(db)!r}, read_only=True)"],
        check=False,
        capture_output=True,
        text=True,
    )
    return other.returncode != 0 and "lock" in other.stderr.lower()


def _writer(audited_shift: Path, tmp_path: Path) -> Store:
    db = tmp_path / "store.duckdb"
    shutil.copyfile(audited_shift, db)
    return Store(db)


def test_readers_open_the_replica_while_the_writer_holds_the_store(audited_shift: Path, tmp_path: Path) -> None:
    replica = tmp_path / "replica" / "store.replica.duckdb"
    with _writer(audited_shift, tmp_path) as store:
        assert _locked(store.path)  # the store itself: no other process may open it, not even to read
        copy = write_replica(store.con, store.path, replica, threading.Lock())
        assert _locked(store.path)  # the copy left the writer's lock in place
        assert copy.locked_seconds <= copy.total_seconds
        code, out = _run("verify", "--db", str(replica))
        assert f"reading replica {replica}, copied " in out and "s ago at" in out
        code_live, out_live = _run("verify", "--db", str(audited_shift))  # the same trail (chain breaks injected)
        assert (
            code == code_live and out.split(f"from {store.path.resolve()} ")[1] == out_live.split("(the live file) ")[1]
        )
        code, out = _run("report", "--db", str(replica), "--out", str(tmp_path / "report"))
        assert code == 0, out
        assert "reading replica" in out and (tmp_path / "report" / "report.html").exists()
        events = store.con.execute("SELECT count(*) FROM events").fetchone()
    con = connect_read_only(replica)
    try:
        assert con.execute("SELECT count(*) FROM events").fetchone() == events
        info = replica_info(con)
    finally:
        con.close()
    assert info is not None and info.source == str((tmp_path / "store.duckdb").resolve())
    assert replica.stat().st_mode & 0o077 == 0 and replica.parent.stat().st_mode & 0o077 == 0
    assert not list(replica.parent.glob(".*.tmp*"))  # no temporary file left


def test_a_reader_that_holds_the_old_replica_keeps_reading_it(audited_shift: Path, tmp_path: Path) -> None:
    replica = tmp_path / "store.replica.duckdb"
    with _writer(audited_shift, tmp_path) as store:
        write_replica(store.con, store.path, replica)
        old = connect_read_only(replica)
        before = old.execute("SELECT count(*) FROM findings").fetchone()
        store.con.execute("DELETE FROM dead_letters")  # any change the next copy carries
        store.con.execute("INSERT INTO findings SELECT * FROM findings LIMIT 1")
        write_replica(store.con, store.path, replica)
        assert old.execute("SELECT count(*) FROM findings").fetchone() == before  # the old file, still open
        old.close()
        new = connect_read_only(replica)
        try:
            assert new.execute("SELECT count(*) FROM findings").fetchone() == (before[0] + 1,)  # type: ignore[index]
        finally:
            new.close()


def test_the_store_itself_is_said_to_be_the_live_file(audited_shift: Path) -> None:
    code, out = _run("verify", "--db", str(audited_shift))
    assert code in (0, 4) and f"reading store {audited_shift} (the live file)" in out


def test_the_age_of_a_replica_reads_in_seconds_minutes_or_hours() -> None:
    at = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
    info = ReplicaInfo(at, "/data/dealtrail.duckdb")
    p = Path("/data/r.duckdb")
    assert "copied 30 s ago at 2026-11-27T18:00:00Z" in describe_copy(p, info, at + timedelta(seconds=30))
    assert "copied 4 min ago" in describe_copy(p, info, at + timedelta(minutes=4))
    assert "copied 3.0 h ago" in describe_copy(p, info, at + timedelta(hours=3))
    assert describe_copy(p, None, at) == "reading store /data/r.duckdb (the live file)"


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("30s", 30.0), ("5m", 300.0), ("1h", 3600.0)])
def test_replica_every_reads_seconds_minutes_and_hours(text: str, seconds: float) -> None:
    assert parse_every(text) == seconds


def test_bad_replica_options_are_one_line_before_any_work(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, _ = small_shift
    db = tmp_path / "s.duckdb"
    code, out = _run("audit", str(events), "--db", str(db), "--replica", str(db))
    assert code == 2 and "is the store itself" in out
    code, out = _run(
        "audit", str(events), "--db", str(db), "--replica", str(tmp_path / "r.duckdb"), "--replica-every", "often"
    )
    assert code == 2 and "--replica-every must be a duration such as 30s, 5m or 1h" in out
    code, out = _run("audit", str(events), "--db", str(db), "--replica-every", "5m")
    assert code == 2 and "--replica-every needs --replica" in out
    assert not db.exists()


def test_an_audit_leaves_a_replica_of_what_it_stored(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, _ = small_shift
    db, replica = tmp_path / "s.duckdb", tmp_path / "r.duckdb"
    code, out = _run("audit", str(events), "--db", str(db), "--replica", str(replica), "--replica-every", "1h")
    assert code == 0, out
    assert f"replica {replica} copied at" in out and "writer held" in out
    counts = []
    for path in (replica, db):
        con = connect_read_only(path)
        try:
            counts.append(con.execute("SELECT count(*), max(arrival) FROM events").fetchone())
            assert (replica_info(con) is not None) == (path == replica)
        finally:
            con.close()
    assert counts[0] == counts[1]
