"""Snapshots from the worker: when it takes one, its record format (the embedded audit's row),
and the projector's gate that stores one only after the events it covers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dealtrail.ingest.projector import SnapshotGate
from dealtrail.simulator.run import write_simulation
from projections.store.store import snapshot_row
from schemas.codec import decode
from schemas.snapshots import TableSnapshot
from streams.engine import TableState, apply
from streams.judge import snapshot_due, snapshot_value


def _states(tmp_path: Path, n: int) -> list[TableState]:
    """The states of one table after each of its first ``n`` events."""
    path = tmp_path / "events.jsonl"
    write_simulation(path, tables=1, hours=0.5, seed=3, error_rate=0.0)
    out: list[TableState] = []
    state: TableState | None = None
    for line in path.read_bytes().splitlines()[:n]:
        state, _ = apply(state, decode(line), line)
        out.append(state)
    return out


def test_a_snapshot_is_due_each_time_the_seq_crosses_a_multiple_of_the_interval(tmp_path: Path) -> None:
    states = _states(tmp_path, 250)
    due = [b.last_seq for a, b in zip([None, *states], states, strict=False) if snapshot_due(a, b, 100)]
    assert due == [100, 200]
    assert not snapshot_due(states[99], states[99], 100)  # a redelivered copy the engine ignored


def test_the_snapshot_record_holds_the_row_the_embedded_audit_writes(tmp_path: Path) -> None:
    state = _states(tmp_path, 120)[-1]
    at = datetime(2026, 11, 30, 22, 5, tzinfo=UTC)
    record = TableSnapshot.model_validate_json(snapshot_value(state, at, 3, 4567))
    assert (record.partition, record.offset) == (3, 4567)
    row = record.row()
    # and what it covers: the events of partition 3 up to offset 4567 (the audit's rows state none)
    assert (row.pop("events_partition"), row.pop("events_offset")) == (3, 4567)
    assert row == snapshot_row(state, at, record.engine_version, record.rulebook_revision)


@dataclass
class Rec:
    """The fields of a consumer record the gate reads."""

    partition: int
    offset: int
    value: bytes


def _snap(tmp_path: Path, event_partition: int, event_offset: int) -> bytes:
    state = _states(tmp_path, 5)[-1]
    return snapshot_value(state, datetime(2026, 11, 30, tzinfo=UTC), event_partition, event_offset)


def test_the_projector_stores_a_snapshot_only_after_the_events_it_covers(tmp_path: Path) -> None:
    gate = SnapshotGate("ns.snapshots.v1")
    gate.partitions.update({0, 1})
    gate.projected[0] = 50  # events 0..49 of partition 0 stored by earlier batches
    recs = [Rec(2, 10, _snap(tmp_path, 0, 49)), Rec(2, 11, _snap(tmp_path, 1, 7)), Rec(2, 12, _snap(tmp_path, 0, 20))]
    dead: list[dict[str, object]] = []
    rows, resume = gate.admit(recs, {}, dead)
    assert len(rows) == 1 and resume == 11  # partition 1 has nothing stored yet: read 11 again later
    rows, resume = gate.admit(recs[1:], {1: 8}, dead)  # this batch stores partition 1 up to offset 7
    assert len(rows) == 2 and resume == 13 and not dead


def test_an_unreadable_snapshot_record_becomes_a_dead_letter_and_the_rest_go_on(tmp_path: Path) -> None:
    gate = SnapshotGate("ns.snapshots.v1")
    gate.partitions.add(0)
    gate.projected[0] = 100
    tampered = json.loads(_snap(tmp_path, 0, 5))
    tampered["state_sha256"] = "not a hash"
    recs = [Rec(0, 1, b"{not json"), Rec(0, 2, json.dumps(tampered).encode()), Rec(0, 3, _snap(tmp_path, 9, 5)),
            Rec(0, 4, _snap(tmp_path, 0, 5))]  # fmt: skip
    dead: list[dict[str, object]] = []
    rows, resume = gate.admit(recs, {}, dead)
    assert len(rows) == 1 and resume == 5
    assert [d["position"] for d in dead] == ["ns.snapshots.v1[0]@1", "ns.snapshots.v1[0]@2", "ns.snapshots.v1[0]@3"]
    assert all(d["reason"] == "unreadable_record" for d in dead)
    assert "no partition 9" in str(dead[2]["detail"])
