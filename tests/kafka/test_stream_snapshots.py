"""Snapshots from the worker: it emits a table's engine state every ``DEALTRAIL_SNAPSHOT_EVERY``
seqs to the snapshots topic, the projector stores them in ``table_snapshots``, and a replay on
the projected store starts from them (checked) with the same result as from the first event."""

from __future__ import annotations

import json
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
from streams.engine.state import load_state
from tests.kafka.conftest import Cluster, assert_stream_equals_replay, project_all, stop
from tests.reorder_trails import chained, shuffled

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


def _assert_same(part: ReplayResult, whole: ReplayResult, stored_match: bool = True) -> None:
    assert [s.event.event_id for s in part.steps] == [s.event.event_id for s in whole.steps]
    for x, y in zip(part.steps, whole.steps, strict=True):
        assert x.findings == y.findings, x.event.event_id
        assert x.state == y.state, x.event.event_id
    assert part.replayed == whole.replayed
    assert part.differences == whole.differences
    assert part.matches == whole.matches
    assert whole.matches or not stored_match


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


def _publish_as_a_floor_system(cluster: Cluster, trail: Path) -> None:
    """Every line of ``trail`` in file order through one idempotent librdkafka producer
    (``confluent-kafka``, its default partitioner, zstd), keyed by table ID."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "compression.type": "zstd",
            "linger.ms": 20,
        }
    )
    topic = cluster.settings().topics.events.name
    failed: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    for line in trail.read_bytes().splitlines():
        if not line.strip():
            continue
        table = json.loads(line)["table_id"]
        while True:
            try:
                producer.produce(topic, key=table.encode(), value=line, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let it drain
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failed, failed[:3]


@pytest.fixture
def streamed_out_of_order(cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path) -> Path:
    """The shift chained in seq order, then merged out of order (swaps within the reorder window
    and events moved far beyond it: late arrivals), published by librdkafka, audited by a worker
    with snapshots every EVERY seqs, projected once everything is on the topic (so a snapshot and
    the late events after it are stored in the same batch)."""
    events, _ = shift
    trail = shuffled(chained(events, tmp_path / "chained.jsonl"), tmp_path / "late.jsonl", far=8, far_by=600)
    _publish_as_a_floor_system(cluster, trail)
    log = tmp_path / "worker.log"
    worker = cluster.start_worker(
        log, DEALTRAIL_SNAPSHOT_EVERY=str(EVERY), DEALTRAIL_REORDER__EVENTS="50", DEALTRAIL_REORDER__SECONDS="30"
    )
    try:
        cluster.wait_consumed(timeout=240)
    finally:
        assert stop(worker) == 0, log.read_text()
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    return db


def _next_round(con: duckdb.DuckDBPyConnection, table: str, seq: int) -> str | None:
    """The round whose first event comes first after ``seq`` (None: no round starts after it)."""
    row = con.execute(
        """SELECT round_id FROM events WHERE table_id = ? AND round_id IS NOT NULL
           GROUP BY round_id HAVING min(seq) > ? ORDER BY min(seq) LIMIT 1""",
        [table, seq],
    ).fetchone()
    return None if row is None else str(row[0])


def test_a_replay_from_every_streamed_snapshot_equals_a_replay_from_the_first_event_with_late_arrivals(
    streamed_out_of_order: Path,
) -> None:
    con = duckdb.connect(str(streamed_out_of_order), read_only=True)
    try:
        late = con.execute("SELECT count(*) FROM sum_late_events").fetchone()
        assert late is not None and late[0] > 0, "the trail should hold late arrivals"
        snaps = con.execute(
            "SELECT table_id, last_seq, last_event_id, state::VARCHAR FROM table_snapshots ORDER BY 1, 2"
        ).fetchall()
        assert len(snaps) >= 20, len(snaps)
        used, refused = [], []
        for table, seq, event_id, text in snaps:
            # the replay from the first event, as of the snapshot's last event: what the snapshot must state
            upto = replay(table, stored_events(con, table), None, Window(), at=str(event_id))
            reproducible = upto.state_at == load_state(str(text))
            round_id = _next_round(con, table, int(seq))
            if round_id is None:
                continue
            start, part, whole = _replays(con, table, Window(round_id=round_id))
            said = [s for s in start.skipped if f"at seq {seq} " in s]
            if start.last_seq == seq and start.state is not None:
                assert reproducible, f"snapshot of {table} at seq {seq} offered, but a replay reaches another state"
                _assert_same(part, whole, stored_match=False)  # a late arrival's findings are the stream's
                used.append((table, seq))
            else:
                assert said, (table, seq, start.last_seq, start.skipped)
                # refused only when it cannot be reproduced: a snapshot released from the reorder
                # window by a later message states that message's offset, so it is kept
                assert not reproducible, f"snapshot of {table} at seq {seq} refused, but a replay reaches its state"
                _assert_same(part, whole, stored_match=False)  # from the earlier one it fell back on
                refused.append((table, seq))
        assert refused, "a late arrival should follow a snapshot of its table"
        assert len(used) >= 20 and len(used) > 5 * len(refused), (used, refused)
    finally:
        con.close()
