"""Snapshots: a replay from the latest snapshot before its window equals a replay from the
table's first event, and a snapshot that does not check out is skipped and said."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.ingest.audit import audit_file
from dealtrail.investigate.replay import (
    ReplayResult,
    SnapshotStart,
    Window,
    replay,
    snapshot_start,
    stored_events,
    stored_findings,
)
from dealtrail.simulator.run import write_simulation
from projections.store.store import Store
from schemas.findings import Finding

EVERY = 50
"""Events per table between snapshots: small, so that the trail has many of them."""


def _inject(lines: list[bytes]) -> list[bytes]:
    """Errors around snapshot points: conflicting copies, exact copies, lost events, and one old
    seq re-sent late (out of seq order) for the first table."""
    out: list[bytes] = []
    seen: dict[str, int] = {}
    late: bytes | None = None
    for line in lines:
        rec = json.loads(line)
        table = rec["table_id"]
        n = seen[table] = seen.get(table, 0) + 1
        if n % (3 * EVERY) == 7:
            continue  # lost before it reached us: a gap
        out.append(line)
        if n % EVERY in (0, 1) and n % (2 * EVERY) == 0:
            out.append(line)  # an exact copy right at a snapshot point
        if n % (2 * EVERY) in (EVERY, EVERY + 1):
            other = dict(rec, event_id=rec["event_id"] + "-other")
            out.append(json.dumps(other).encode() + b"\n")  # another event with the same seq
        if table.startswith("TCP") and n == 8 * EVERY + 3:
            late = json.dumps(dict(rec, event_id=rec["event_id"] + "-late")).encode() + b"\n"
    assert late is not None
    out.insert(len(out) * 3 // 4, late)  # an old seq much later: snapshots past it must not be used
    return out


@pytest.fixture(scope="module")
def snapshot_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("snapshots")
    events = folder / "events.jsonl"
    write_simulation(events, tables=3, hours=1.0, seed=5, error_rate=0.2, duplicate_rate=0.01)
    events.write_bytes(b"".join(_inject(events.read_bytes().splitlines(keepends=True))))
    db = folder / "store.duckdb"
    with Store(db) as store:
        audit_file(events, store, batch_lines=400, snapshot_every=EVERY)
    return db


def _key(f: Finding) -> tuple[str, int]:
    return (f.finding_id, f.revision)


def _same(a: ReplayResult, b: ReplayResult, whole: bool) -> None:
    """``a`` (from a snapshot) shows what ``b`` (from the first event) shows; with no window
    (``whole`` False: ``--at`` alone), ``a`` shows the events after its snapshot only."""
    if not whole:
        b.steps = b.steps[len(b.steps) - len(a.steps) :]
        kept = {s.event.event_id for s in b.steps}
        b.replayed = [f for f in b.replayed if f.trigger_event_id in kept]
        b.stored = [f for f in b.stored if f.trigger_event_id in kept]
        b.differences = [d for d in b.differences if d.trigger_event_id in kept]
    assert [s.event.event_id for s in a.steps] == [s.event.event_id for s in b.steps]
    for x, y in zip(a.steps, b.steps, strict=True):
        assert x.findings == y.findings, x.event.event_id
        assert x.state == y.state, x.event.event_id
    assert a.replayed == b.replayed
    assert sorted(a.stored, key=_key) == sorted(b.stored, key=_key)
    assert a.differences == b.differences
    assert (a.at_event.event_id if a.at_event else None) == (b.at_event.event_id if b.at_event else None)
    assert a.state_at == b.state_at


def _both(con: duckdb.DuckDBPyConnection, table: str, window: Window, at: str | None = None) -> SnapshotStart:
    start = snapshot_start(con, table, window, at)
    from_start = replay(table, stored_events(con, table), stored_findings(con, table), window, at)
    from_snapshot = replay(
        table,
        stored_events(con, table, start.last_seq),
        stored_findings(con, table, start.last_seq),
        window,
        at,
        start if start.state is not None else None,
    )
    _same(from_snapshot, from_start, whole=start.state is None or window != Window())
    return start


def test_replay_from_a_snapshot_equals_replay_from_the_first_event_for_many_windows(snapshot_store: Path) -> None:
    con = duckdb.connect(str(snapshot_store), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT DISTINCT table_id FROM events ORDER BY 1").fetchall()]
        assert con.execute("SELECT count(*) FROM table_snapshots").fetchone()[0] > 50  # type: ignore[index]
        used = tried = 0
        for table in tables:
            rounds = [
                r[0]
                for r in con.execute(
                    "SELECT round_id FROM rounds WHERE table_id = ? ORDER BY started_at", [table]
                ).fetchall()
            ]
            for round_id in rounds[5::40]:
                tried += 1
                used += _both(con, table, Window(round_id=round_id)).state is not None
            times = con.execute(
                "SELECT occurred_at, event_id FROM events WHERE table_id = ? ORDER BY seq", [table]
            ).fetchall()
            for k in range(len(times) // 3, len(times), len(times) // 3):
                at_time, at_id = times[k]
                tried += 3
                used += _both(con, table, Window(start=at_time, end=at_time + timedelta(minutes=5))).state is not None
                used += _both(con, table, Window(), at=at_id).state is not None
                used += _both(con, table, Window(), at=at_time.isoformat()).state is not None
        assert used > tried * 2 // 3, (used, tried)  # most windows start from a snapshot
    finally:
        con.close()


def test_a_snapshot_with_events_of_its_seqs_stored_after_it_is_skipped(snapshot_store: Path) -> None:
    con = duckdb.connect(str(snapshot_store), read_only=True)
    try:
        _late_copy_skips(con)
    finally:
        con.close()


def _late_copy_skips(con: duckdb.DuckDBPyConnection) -> None:
    """The snapshots written before the late copy of an old seq came are skipped (said), so a
    replay at the table's last event starts before that seq."""
    late = con.execute("SELECT seq FROM events WHERE event_id LIKE '%-late'").fetchone()
    assert late is not None
    table, last = con.execute("SELECT table_id, max(seq) FROM events WHERE table_id LIKE 'TCP%' GROUP BY 1").fetchone()  # type: ignore[misc]
    start = _both(con, table, Window(), at=str(con.execute(
        "SELECT event_id FROM events WHERE table_id = ? AND seq = ?", [table, last]
    ).fetchone()[0]))  # type: ignore[index]  # fmt: skip
    # written before the late copy came: it holds one event too few up to its seq
    assert any("events up to its seq" in s for s in start.skipped), start.skipped
    assert start.state is None or start.last_seq < late[0]


def test_the_writer_records_each_late_event_and_every_snapshot_the_late_count_up_to_it(
    snapshot_store: Path,
) -> None:
    """A late event (a seq at or below one an earlier batch stored) is recorded as it is stored,
    and each snapshot keeps how many late events up to its seq there were when it was written."""
    con = duckdb.connect(str(snapshot_store), read_only=True)
    try:
        late = con.execute("SELECT table_id, seq, event_id FROM events WHERE event_id LIKE '%-late'").fetchone()
        recorded = con.execute("SELECT table_id, seq, event_id FROM sum_late_events").fetchall()
        assert late in recorded
        # exactly the events stored after an event of their table with the same or a higher seq
        # (in the store's order: batches in turn, each by table, seq and arrival)
        expected = con.execute(
            """SELECT e.table_id, e.seq, e.event_id FROM events e
               WHERE EXISTS (SELECT 1 FROM events o WHERE o.table_id = e.table_id AND o.seq >= e.seq
                             AND o.rowid < e.rowid)"""
        ).fetchall()
        assert sorted(recorded) == sorted(expected)
        # for every snapshot: the events with its seqs stored since it are the late events since it
        # (those of the late copy's table written before it came have a late event more now)
        rows = con.execute(
            """SELECT s.table_id = $t AND s.last_seq >= $seq, s.late_through,
                      (SELECT count(*) FROM sum_late_events l WHERE l.table_id = s.table_id AND l.seq <= s.last_seq),
                      s.events_through,
                      (SELECT count(*) FROM events e WHERE e.table_id = s.table_id AND e.seq <= s.last_seq)
               FROM table_snapshots s""",
            {"t": late[0], "seq": late[1]},
        ).fetchall()
        assert len(rows) > 50 and all(lt is not None for _, lt, _, _, _ in rows)
        assert all(now - lt == total - through for _, lt, now, through, total in rows)
        assert any(now > lt for past, lt, now, _, _ in rows if past)
        assert sum(now == lt for _, lt, now, _, _ in rows) > len(rows) // 2
    finally:
        con.close()


def _edited_start(db: Path, table: str, round_id: str, sql: str, params: list[Any] | None = None) -> SnapshotStart:
    """Run ``sql`` on the store ``db``, then the snapshot start of a replay of ``round_id``
    (checked against a replay from the table's first event, :func:`_both`)."""
    con = duckdb.connect(str(db))
    con.execute(sql, params)
    con.close()
    con = duckdb.connect(str(db), read_only=True)
    try:
        return _both(con, table, Window(round_id=round_id))
    finally:
        con.close()


def _copy_of(snapshot_store: Path, tmp_path: Path, name: str) -> tuple[Path, str, str]:
    """A copy of the store, and the table and round of its latest snapshot (:func:`_latest_snapshot`)."""
    db = tmp_path / name
    shutil.copy(snapshot_store, db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        table, _, round_id = _latest_snapshot(con)
    finally:
        con.close()
    return db, table, round_id


def test_the_snapshot_check_trusts_an_unchanged_late_count_and_counts_the_history_otherwise(
    snapshot_store: Path, tmp_path: Path
) -> None:
    db, table, round_id = _copy_of(snapshot_store, tmp_path, "counts.duckdb")
    # a wrong history count with an unchanged late count: the check does not count the history
    wrong = "UPDATE table_snapshots SET events_through = events_through + 1 WHERE table_id = ?"
    start = _edited_start(db, table, round_id, wrong, [table])
    assert start.state is not None and not start.skipped
    # a late count that differs: the history is counted (and, off by one here, the snapshot skipped)
    changed = "UPDATE table_snapshots SET late_through = late_through - 1 WHERE table_id = ?"
    start = _edited_start(db, table, round_id, changed, [table])
    assert start.skipped and all("events up to its seq" in s for s in start.skipped)
    # a snapshot written before the late count was kept (NULL): the history is counted, as before
    older = "UPDATE table_snapshots SET late_through = NULL, events_through = events_through - 1"
    start = _edited_start(db, table, round_id, older)
    assert start.state is not None and not start.skipped


@contextlib.contextmanager
def _read_only(db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The store ``db`` opened read-only (closed after)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        yield con
    finally:
        con.close()


def test_a_store_written_before_the_late_record_gets_it_built_once_from_its_events(
    snapshot_store: Path, tmp_path: Path
) -> None:
    """The first writer of this version builds the record from the store's order: the very record
    the writer keeps batch by batch, and the late event is still caught."""
    db = tmp_path / "older.duckdb"
    shutil.copy(snapshot_store, db)
    con = duckdb.connect(str(db))
    recorded = set(con.execute("SELECT table_id, seq, event_id FROM sum_late_events").fetchall())
    con.execute("DROP TABLE sum_late_events")
    con.execute("DELETE FROM summary_builds WHERE name = 'sum_late_events'")
    con.execute("ALTER TABLE table_snapshots DROP COLUMN late_through")
    con.close()
    with _read_only(db) as con:  # a reader of the older store counts the history
        _late_copy_skips(con)
    with Store(db):  # its next writer builds the record
        pass
    with _read_only(db) as con:
        built = set(con.execute("SELECT table_id, seq, event_id FROM sum_late_events").fetchall())
        assert recorded == built and recorded
        assert con.execute("SELECT count(*) FROM table_snapshots WHERE late_through IS NOT NULL").fetchone()[0] == 0  # type: ignore[index]
        _late_copy_skips(con)


def test_events_an_older_writer_stored_without_recording_them_turn_the_late_record_off_until_it_is_built(
    snapshot_store: Path, tmp_path: Path
) -> None:
    """A writer of an older version (a rollback) stores a late copy and records nothing: readers no
    longer trust the late record (they count the history and skip the snapshots it makes stale),
    and the next writer of this version builds the record again, with the copy in it."""
    from projections.store import summaries

    db, table, round_id = _copy_of(snapshot_store, tmp_path, "rollback.duckdb")
    con = duckdb.connect(str(db))
    # what the older writer stores: another event with a seq just before the snapshot a replay of
    # the round starts from
    seq = con.execute(
        """SELECT max(last_seq) - 5 FROM table_snapshots WHERE table_id = $t
           AND last_seq < (SELECT min(seq) FROM events WHERE table_id = $t AND round_id = $r)""",
        {"t": table, "r": round_id},
    ).fetchone()[0]  # type: ignore[index]
    con.execute(
        """INSERT INTO events SELECT * REPLACE (event_id || '-older-writer' AS event_id, md5(event_id) AS payload_hash,
                                               arrival + 1000000 AS arrival)
           FROM events WHERE table_id = ? AND seq = ? LIMIT 1""",
        [table, seq],
    )
    con.close()
    with _read_only(db) as con:
        assert not summaries.late_record_current(con)
        start = _both(con, table, Window(round_id=round_id))
        assert start.skipped and all("events up to its seq" in s for s in start.skipped)
        assert start.state is None or start.last_seq < seq
    with Store(db):  # its next writer builds the record again
        pass
    with _read_only(db) as con:
        assert summaries.late_record_current(con)
        late = [r[0] for r in con.execute("SELECT event_id FROM sum_late_events").fetchall()]
        assert any(e.endswith("-older-writer") for e in late)
        start = _both(con, table, Window(round_id=round_id))
        assert start.state is None or start.last_seq < seq


def _latest_snapshot(con: duckdb.DuckDBPyConnection) -> tuple[str, int, str]:
    row = con.execute(
        """SELECT table_id, last_seq, (SELECT max(round_id) FROM events e WHERE e.table_id = s.table_id)
           FROM table_snapshots s WHERE table_id LIKE 'PGP%' ORDER BY last_seq DESC LIMIT 1"""
    ).fetchone()
    assert row is not None
    return str(row[0]), int(row[1]), str(row[2])


def test_a_tampered_snapshot_is_skipped_and_said(snapshot_store: Path, tmp_path: Path) -> None:
    db = tmp_path / "tampered.duckdb"
    shutil.copy(snapshot_store, db)
    con = duckdb.connect(str(db))
    table, _, round_id = _latest_snapshot(con)
    need = con.execute("SELECT min(seq) FROM events WHERE table_id = ? AND round_id = ?", [table, round_id]).fetchone()[
        0
    ]  # type: ignore[index]
    seqs = [
        r[0]
        for r in con.execute(
            "SELECT last_seq FROM table_snapshots WHERE table_id = ? AND last_seq < ? ORDER BY last_seq DESC LIMIT 2",
            [table, need],
        ).fetchall()
    ]
    # the latest: its state altered (one more round counted) without its hash; the one before:
    # a last event the trail does not have
    con.execute(
        """UPDATE table_snapshots SET state = replace(state::VARCHAR, '"rounds_completed":', '"rounds_completed":1')
           WHERE table_id = ? AND last_seq = ?""",
        [table, seqs[0]],
    )
    con.execute(
        "UPDATE table_snapshots SET last_event_id = 'not-an-event' WHERE table_id = ? AND last_seq = ?",
        [table, seqs[1]],
    )
    con.close()
    con = duckdb.connect(str(db), read_only=True)
    try:
        start = _both(con, table, Window(round_id=round_id))
        assert len(start.skipped) == 2, start.skipped
        assert "SHA-256" in start.skipped[0] and f"seq {seqs[0]}" in start.skipped[0]
        assert "no such last event" in start.skipped[1]
        assert start.state is not None and start.last_seq < seqs[1]
    finally:
        con.close()
    result = CliRunner().invoke(app, ["replay", "--db", str(db), "--table", table, "--round", round_id])
    assert result.exit_code == 0, result.output
    assert f"snapshot of {table} at seq {seqs[0]}" in result.output
    assert "does not match its SHA-256" in result.output
    assert "from the snapshot after seq" in result.output
    assert "replay matches the stored findings" in result.output


def test_snapshots_of_another_engine_version_are_not_used(snapshot_store: Path, tmp_path: Path) -> None:
    db, table, round_id = _copy_of(snapshot_store, tmp_path, "other.duckdb")
    start = _edited_start(db, table, round_id, "UPDATE table_snapshots SET engine_version = 'an older engine'")
    assert start.state is None and not start.skipped


def test_audit_keeps_a_snapshot_at_each_utc_day_boundary(tmp_path: Path) -> None:
    from dealtrail.simulator.floor import FloorSpec, simulate
    from schemas.codec import encode

    midnight = datetime(2026, 11, 28, tzinfo=UTC)
    events = tmp_path / "events.jsonl"
    spec = FloorSpec(tables=1, hours=2.0, seed=3, error_rate=0.0, start=midnight - timedelta(hours=1))
    events.write_bytes(b"".join(encode(e) + b"\n" for e in simulate(spec)))
    with Store(tmp_path / "s.duckdb") as store:
        audit_file(events, store, snapshot_every=10**9)
        rows = store.con.execute("SELECT last_occurred_at, last_seq FROM table_snapshots").fetchall()
        first_after = store.con.execute("SELECT min(seq) FROM events WHERE occurred_at >= ?", [midnight]).fetchone()
    assert len(rows) == 1  # N is never reached: the day boundary's only
    assert rows[0][0] < midnight
    assert rows[0][1] == first_after[0] - 1  # type: ignore[index]


def test_the_day_boundary_is_utcs_when_events_carry_another_offset(tmp_path: Path) -> None:
    """Events stamped in New York time (-05:00) cross their local midnight at 05:00 UTC, and UTC
    midnight at 19:00 local: the snapshot is kept at UTC midnight only."""
    from zoneinfo import ZoneInfo

    from dealtrail.simulator.floor import FloorSpec, simulate
    from schemas.codec import encode

    local = ZoneInfo("America/New_York")
    midnight = datetime(2026, 11, 28, tzinfo=UTC)
    events = tmp_path / "events.jsonl"
    spec = FloorSpec(tables=1, hours=2.0, seed=3, error_rate=0.0, start=midnight - timedelta(hours=1))
    with events.open("wb") as fh:
        for e in simulate(spec):
            moved = e.model_copy(update={"occurred_at": e.occurred_at.astimezone(local)})
            fh.write(encode(moved) + b"\n")
    assert b"-05:00" in events.read_bytes()[:2000]
    with Store(tmp_path / "s.duckdb") as store:
        audit_file(events, store, snapshot_every=10**9)
        rows = store.con.execute("SELECT last_occurred_at, last_seq FROM table_snapshots").fetchall()
        first_after = store.con.execute("SELECT min(seq) FROM events WHERE occurred_at >= ?", [midnight]).fetchone()
    assert len(rows) == 1
    assert rows[0][0] < midnight
    assert rows[0][1] == first_after[0] - 1  # type: ignore[index]


def test_dealtrail_audit_takes_snapshots_every_dealtrail_snapshot_every_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = tmp_path / "events.jsonl"
    write_simulation(events, tables=1, hours=0.5, seed=9, error_rate=0.0)
    db = tmp_path / "s.duckdb"
    monkeypatch.setenv("DEALTRAIL_SNAPSHOT_EVERY", "50")  # below the floor of 100
    bad = CliRunner().invoke(app, ["audit", str(events), "--db", str(db)])
    assert bad.exit_code == 2 and "DEALTRAIL_SNAPSHOT_EVERY" in bad.output
    monkeypatch.setenv("DEALTRAIL_SNAPSHOT_EVERY", "300")
    result = CliRunner().invoke(app, ["audit", str(events), "--db", str(db)])
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(db), read_only=True)
    try:
        n = con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
        seqs = [r[0] for r in con.execute("SELECT last_seq FROM table_snapshots ORDER BY 1").fetchall()]
    finally:
        con.close()
    assert seqs == list(range(300, n + 1, 300))


def test_a_snapshots_last_event_is_found_by_its_time_first_and_anywhere_in_the_trail_else(
    snapshot_store: Path, tmp_path: Path
) -> None:
    """The check looks for a snapshot's last event at the snapshot's time first; a snapshot whose
    time is not its last event's (written by another path, edited) is still checked against the
    whole trail, not skipped."""
    db, table, round_id = _copy_of(snapshot_store, tmp_path, "times.duckdb")
    later = "UPDATE table_snapshots SET last_occurred_at = last_occurred_at + INTERVAL 1 SECOND"
    start = _edited_start(db, table, round_id, later)
    assert start.state is not None and not start.skipped
