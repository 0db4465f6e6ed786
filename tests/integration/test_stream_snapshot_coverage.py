"""What a worker's snapshot covers in the store: the events of its partition up to its offset
with a seq up to its own (issue 37 item 4). A snapshot stored in the same batch as a late event
of its table no longer counts that event, so a replay does not start from a state that lacks it."""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from dealtrail.investigate.replay import Window, replay, snapshot_start, stored_events
from dealtrail.simulator.run import write_simulation
from projections.store.store import Store
from schemas import events as ev
from schemas.codec import decode
from schemas.snapshots import TableSnapshot
from streams.engine import fold
from streams.engine.catalog import ENGINE_VERSION, RULEBOOK_REVISION
from streams.engine.state import dump_state

S = 40
"""The seq of the snapshot's last event."""


@pytest.fixture(scope="module")
def trail(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[ev.DealingEvent, bytes]]:
    """One table's simulated events in seq order, with the bytes published for each."""
    path = tmp_path_factory.mktemp("cover") / "events.jsonl"
    write_simulation(path, tables=1, hours=0.2, seed=5, error_rate=0.0)
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    events = [(decode(line), line) for line in lines]
    assert len(events) > 3 * S and [e.seq for e, _ in events] == list(range(1, len(events) + 1))
    return events


def _snapshot(applied: list[ev.DealingEvent], offset: int) -> dict[str, object]:
    """The ``table_snapshots`` row of the worker's snapshot after ``applied`` (in that order),
    made when it had taken the partition up to ``offset``."""
    state, _ = fold(applied)
    assert state is not None
    text = dump_state(state)
    at: datetime = applied[-1].occurred_at
    return TableSnapshot(
        table_id=state.table_id, last_seq=state.last_seq, last_event_id=state.last_event_id or "",
        last_hash=state.last_hash, last_occurred_at=at, engine_version=ENGINE_VERSION,
        rulebook_revision=RULEBOOK_REVISION, state_sha256=hashlib.sha256(text.encode()).hexdigest(),
        state=text, partition=2, offset=offset,
    ).row()  # fmt: skip


def _stored(
    db: Path, order: list[int], snapshot: dict[str, object], trail: list[tuple[ev.DealingEvent, bytes]]
) -> None:
    """The events of seqs ``order`` at offsets 0, 1, ... and the snapshot, in one batch."""
    with Store(db) as store:
        store.write_batch(raw_events=[(n, trail[seq - 1][1]) for n, seq in enumerate(order)], snapshots=[snapshot])


def _start_after_snapshot(db: Path, table: str) -> tuple[int | None, list[str], bool]:
    """The snapshot start of a replay of the round after seq S: its seq (None: from the first
    event), what was skipped, and whether the replay from it equals the one from the first event."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        (round_id,) = con.execute(  # type: ignore[misc]
            """SELECT round_id FROM events WHERE table_id = ? AND round_id IS NOT NULL
               GROUP BY round_id HAVING min(seq) > ? ORDER BY min(seq) LIMIT 1""",
            [table, S],
        ).fetchone()
        window = Window(round_id=str(round_id))
        start = snapshot_start(con, table, window)
        whole = replay(table, stored_events(con, table), None, window)
        part = replay(table, stored_events(con, table, start.last_seq), None, window, start=start)
        same = [(s.findings, s.state) for s in part.steps] == [(s.findings, s.state) for s in whole.steps]
        return (start.last_seq if start.state is not None else None), start.skipped, same
    finally:
        con.close()


def test_a_streamed_snapshot_stored_with_a_late_event_of_its_table_does_not_count_it_and_is_skipped(
    trail: list[tuple[ev.DealingEvent, bytes]], tmp_path: Path
) -> None:
    # the topic holds seq 10 after seq S (a late arrival); the worker's state at S lacks it
    order = [*range(1, 10), *range(11, S + 1), 10, *range(S + 1, len(trail) + 1)]
    applied = [trail[seq - 1][0] for seq in order[: S - 1]]
    snap = _snapshot(applied, offset=order.index(S))
    db = tmp_path / "late.duckdb"
    _stored(db, order, snap, trail)
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(
            "SELECT events_through, late_through, events_partition, events_offset FROM table_snapshots"
        ).fetchone()
    finally:
        con.close()
    assert row == (S - 1, None, 2, order.index(S))  # its events, not the late one stored with it
    seq, skipped, same = _start_after_snapshot(db, applied[0].table_id)
    assert seq is None and len(skipped) == 1, skipped
    assert f"at seq {S} " in skipped[0] and f"has {S} events up to its seq, it was made after {S - 1}" in skipped[0]
    assert same


def test_a_streamed_snapshot_released_by_a_later_message_counts_the_events_up_to_that_message(
    trail: list[tuple[ev.DealingEvent, bytes]], tmp_path: Path
) -> None:
    # seq S-1 comes after S (within the reorder window): the worker applies S-1 then S when it
    # takes S-1, so its snapshot at S states S-1's offset, and holds every event up to S
    order = [*range(1, S - 1), S, S - 1, *range(S + 1, len(trail) + 1)]
    applied = [trail[seq - 1][0] for seq in range(1, S + 1)]
    db = tmp_path / "released.duckdb"
    _stored(db, order, _snapshot(applied, offset=order.index(S - 1)), trail)
    seq, skipped, same = _start_after_snapshot(db, applied[0].table_id)
    assert (seq, skipped, same) == (S, [], True)
    # stating the offset of its own last event instead, it would not count S-1, and be skipped
    db = tmp_path / "own.duckdb"
    _stored(db, order, _snapshot(applied, offset=order.index(S)), trail)
    seq, skipped, same = _start_after_snapshot(db, applied[0].table_id)
    assert seq is None and len(skipped) == 1 and same


def test_a_streamed_snapshot_of_a_trail_in_order_is_used_and_an_audited_one_counts_every_event(
    trail: list[tuple[ev.DealingEvent, bytes]], tmp_path: Path
) -> None:
    order = list(range(1, len(trail) + 1))
    applied = [trail[seq - 1][0] for seq in range(1, S + 1)]
    db = tmp_path / "in-order.duckdb"
    _stored(db, order, _snapshot(applied, offset=S - 1), trail)
    assert _start_after_snapshot(db, applied[0].table_id) == (S, [], True)
    # the audit's snapshots state no offset: they count every stored event up to their seq
    snap = _snapshot(applied, offset=0)
    del snap["events_partition"], snap["events_offset"]
    db = tmp_path / "audited.duckdb"
    _stored(db, order, snap, trail)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT events_through, late_through, events_offset FROM table_snapshots").fetchone() == (
            S, 0, None,
        )  # fmt: skip
    finally:
        con.close()


def test_reaudit_from_a_period_does_not_start_from_a_streamed_snapshot_a_late_arrival_came_after(
    trail: list[tuple[ev.DealingEvent, bytes]], tmp_path: Path
) -> None:
    from dealtrail.ingest.reaudit import reaudit

    after = next(e for e, _ in trail if e.seq > S + 5 and isinstance(e, ev.RoundStarted))
    late = [*range(1, 10), *range(11, S + 1), 10, *range(S + 1, len(trail) + 1)]
    for name, order, applied, starts_at in (
        ("in-order", list(range(1, len(trail) + 1)), list(range(1, S + 1)), S),
        ("late", late, late[: S - 1], 0),  # the snapshot lacks seq 10: from the first event
    ):
        db = tmp_path / f"{name}.duckdb"
        _stored(db, order, _snapshot([trail[seq - 1][0] for seq in applied], offset=order.index(S)), trail)
        with Store(db) as store:
            result = reaudit(store, start=after.occurred_at, workers=1)
        assert result.events == len(trail) - starts_at, name
