"""One clock decides, once (issue 46 item 2): the worker's judge and the projector judge
``recorded_in_future`` against the Kafka record's timestamp, never their own host clocks, so
with either clock a day ahead or an hour behind each event near the skew limit ends in the
store's events or its dead letters, exactly once."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dealtrail.ingest.projector import Heads, ProjectSummary, _write
from dealtrail.settings import Settings
from dealtrail.simulator.run import write_simulation
from projections.store.store import BatchCounts, Store
from schemas.codec import decode
from streams.clock import FixedClock
from streams.judge import DEAD_LETTER, Judge
from tests.unit.test_projector_isolation import NAMES, TP, Consumer, Rec

BROKER = datetime(2026, 11, 27, 20, 0, tzinfo=UTC)
"""The time the broker appended every record (its timestamp)."""

NEAR = {"IN-57M": (57, True), "IN-30M": (30, True), "OUT-63M": (63, False), "OUT-2H": (120, False)}
"""Copies recorded this many minutes after the records' timestamp, and whether they are within
the skew limit (1 hour)."""


def _records(tmp_path: Path) -> list[bytes]:
    path = tmp_path / "events.jsonl"
    write_simulation(path, tables=1, hours=0.1, seed=4, error_rate=0.0)
    lines = path.read_bytes().splitlines()
    out = list(lines)
    for n, (event_id, (minutes, _)) in enumerate(NEAR.items()):
        doc = json.loads(lines[10 + 5 * n])
        when = (BROKER + timedelta(minutes=minutes)).isoformat()
        doc.update(event_id=event_id, occurred_at=when, recorded_at=when, prev_hash=None, hash=None)
        out.insert(out.index(lines[10 + 5 * n]) + 1, json.dumps(doc).encode())  # after the event of its seq
    return out


@pytest.mark.parametrize(
    ("worker_off", "projector_off"),
    [
        (timedelta(days=1), timedelta(0)),
        (-timedelta(hours=1), timedelta(0)),
        (timedelta(0), timedelta(days=1)),
        (timedelta(0), -timedelta(hours=1)),
    ],
    ids=["worker-a-day-ahead", "worker-an-hour-behind", "projector-a-day-ahead", "projector-an-hour-behind"],
)
def test_each_event_near_the_skew_limit_is_stored_or_dead_lettered_exactly_once_whatever_either_clock_says(
    tmp_path: Path, worker_off: timedelta, projector_off: timedelta
) -> None:
    records = _records(tmp_path)
    table = decode(records[0]).table_id.encode()
    stamp = int(BROKER.timestamp() * 1000)
    settings = Settings(namespace="nsclock")
    judge = Judge(settings, FixedClock(BROKER + worker_off), tmp_path)
    judge.begin(0, -1)
    out = judge.batch([(0, i, table, r, stamp) for i, r in enumerate(records)], {table: None}, True)
    dead = [value for kind, _, value in out.actions if kind == DEAD_LETTER]
    heads = Heads(settings.plausibility, FixedClock(BROKER + projector_off))
    polled = {
        TP(NAMES[0], 0): [Rec(i, r, table, stamp) for i, r in enumerate(records)],
        TP(NAMES[3], 0): [Rec(i, value, table, stamp) for i, value in enumerate(dead)],
    }
    with Store(tmp_path / "s.duckdb") as store:
        _write(store, Consumer(), "g", polled, NAMES, ProjectSummary(BatchCounts()), None, heads)
        stored = [r[0] for r in store.con.execute("SELECT event_id FROM events").fetchall()]
        refused = store.con.execute("SELECT reason, raw FROM dead_letters").fetchall()
    refused_ids = [json.loads(raw)["event_id"] for _, raw in refused]
    assert {reason for reason, _ in refused} == {"recorded_in_future"}
    for event_id, (_, within) in NEAR.items():
        assert (stored.count(event_id), refused_ids.count(event_id)) == ((1, 0) if within else (0, 1)), event_id
    assert len(stored) + len(refused_ids) == len(records)  # nothing lost, nothing twice
