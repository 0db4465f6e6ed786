"""Snapshots from the worker: it emits a table's engine state every ``DEALTRAIL_SNAPSHOT_EVERY``
seqs to the snapshots topic, the projector stores them in ``table_snapshots``, and a replay on
the projected store starts from them (checked) with the same result as from the first event."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from dealtrail.investigate.replay import (
    ReplayResult,
    SnapshotStart,
    Window,
    replay,
    snapshot_start,
    stored_events,
    stored_findings,
)
from tests.kafka.conftest import Cluster, assert_stream_equals_replay, project_all, stop

pytestmark = pytest.mark.kafka

EVERY = 100
"""Seqs of a table between two snapshots (the setting's floor): many snapshots in a shift."""


def _replays(
    con: duckdb.DuckDBPyConnection, table: str, window: Window
) -> tuple[SnapshotStart, ReplayResult, ReplayResult]:
    start = snapshot_start(con, table, window)
    whole = replay(table, stored_events(con, table), stored_findings(con, table), window)
    part = replay(
        table,
        stored_events(con, table, start.last_seq),
        stored_findings(con, table, start.last_seq),
        window,
        start=start if start.state is not None else None,
    )
    return start, part, whole


def _assert_same(part: ReplayResult, whole: ReplayResult) -> None:
    assert [s.event.event_id for s in part.steps] == [s.event.event_id for s in whole.steps]
    for x, y in zip(part.steps, whole.steps, strict=True):
        assert x.findings == y.findings, x.event.event_id
        assert x.state == y.state, x.event.event_id
    assert part.replayed == whole.replayed
    assert part.differences == whole.differences
    assert part.matches and whole.matches


@pytest.fixture
def streamed(cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path) -> Path:
    """The shift published, audited by a worker with snapshots every EVERY seqs, projected."""
    events, expected = shift
    cluster.cli("publish", str(events))
    worker = cluster.start_worker(tmp_path / "worker.log", DEALTRAIL_SNAPSHOT_EVERY=str(EVERY))
    try:
        cluster.wait_consumed(timeout=240)
    finally:
        assert stop(worker) == 0, (tmp_path / "worker.log").read_text()
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    assert_stream_equals_replay(db, expected)
    return db


def test_a_replay_from_the_workers_snapshots_equals_a_replay_from_the_first_event(streamed: Path) -> None:
    con = duckdb.connect(str(streamed), read_only=True)
    try:
        snaps = con.execute("SELECT count(*), count(DISTINCT table_id) FROM table_snapshots").fetchone()
        assert snaps is not None and snaps[0] >= 20 and snaps[1] >= 5, snaps
        # each stored after the events it covers: events_through is the count a replay checks
        bad = con.execute(
            """SELECT count(*) FROM table_snapshots s WHERE events_through <>
               (SELECT count(*) FROM events e WHERE e.table_id = s.table_id AND e.seq <= s.last_seq)"""
        ).fetchone()
        assert bad == (0,)
        used = tried = 0
        for (table,) in con.execute("SELECT DISTINCT table_id FROM events ORDER BY 1").fetchall():
            rounds = con.execute(
                "SELECT round_id FROM rounds WHERE table_id = ? ORDER BY started_at", [table]
            ).fetchall()
            for (round_id,) in rounds[10::25]:
                start, part, whole = _replays(con, table, Window(round_id=round_id))
                assert not start.skipped, start.skipped
                _assert_same(part, whole)
                tried += 1
                used += start.state is not None
        assert tried >= 10 and used > tried * 2 // 3, (used, tried)
    finally:
        con.close()


def test_a_tampered_streamed_snapshot_is_skipped_and_said(streamed: Path, tmp_path: Path) -> None:
    db = tmp_path / "tampered.duckdb"
    shutil.copy(streamed, db)
    con = duckdb.connect(str(db))
    table, seq = con.execute(
        "SELECT table_id, max(last_seq) FROM table_snapshots GROUP BY 1 ORDER BY 1 LIMIT 1"
    ).fetchone()  # type: ignore[misc]
    round_id = con.execute(
        "SELECT round_id FROM events WHERE table_id = ? AND seq > ? AND round_id IS NOT NULL ORDER BY seq DESC LIMIT 1",
        [table, seq],
    ).fetchone()[0]  # type: ignore[index]
    con.execute(
        """UPDATE table_snapshots SET state = replace(state::VARCHAR, '"rounds_completed":', '"rounds_completed":1')
           WHERE table_id = ? AND last_seq = ?""",
        [table, seq],
    )
    con.close()
    con = duckdb.connect(str(db), read_only=True)
    try:
        start, part, whole = _replays(con, table, Window(round_id=round_id))
        assert len(start.skipped) == 1 and "SHA-256" in start.skipped[0] and f"seq {seq}" in start.skipped[0]
        assert start.state is not None and start.last_seq < seq  # the one before it
        _assert_same(part, whole)
    finally:
        con.close()
