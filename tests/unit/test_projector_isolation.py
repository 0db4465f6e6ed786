"""The streaming projector isolates a record the store refuses (issue 19 item 3): it becomes a
dead letter with the error, the batch is stored without it, the offsets are committed, and the
projector goes on (no crash loop on one record)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from dealtrail.ingest.audit import Auditor
from dealtrail.ingest.projector import ProjectSummary, _write
from dealtrail.simulator.run import write_simulation
from projections.store.store import BatchCounts, Store
from schemas.codec import decode
from streams.judge import round_json

NAMES = ["ns.events.v1", "ns.findings.v1", "ns.rounds.v1", "ns.dead-letter.v1", "ns.reviews.v1"]


@dataclass(frozen=True)
class TP:
    topic: str
    partition: int


@dataclass
class Rec:
    offset: int
    value: bytes
    key: bytes | None = None
    timestamp: int | None = None  # ms, as kafka-python gives it; None: the projector's clock decides


@dataclass
class Consumer:
    committed: list[dict[Any, Any]] = field(default_factory=list)

    def commit(self, offsets: dict[Any, Any], timeout_ms: int | None = None) -> None:
        self.committed.append(offsets)

    def seek(self, tp: Any, offset: int) -> None:
        raise AssertionError("no snapshot gate here")

    def highwater(self, tp: Any) -> int | None:
        return None  # not known: no record counts as fresh


def test_a_round_the_store_cannot_hold_is_a_dead_letter_and_the_rest_of_the_batch_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_simulation(path, tables=1, hours=0.3, seed=4, error_rate=0.0)
    lines = path.read_bytes().splitlines()
    auditor = Auditor()
    for line in lines:
        auditor.apply(decode(line), line)
    rounds = [round_json(r) for r in auditor.rounds[:3]]
    bad = round_json({**auditor.rounds[1], "round_no": 2**31})  # schema-valid JSON, too large for INTEGER
    table = decode(lines[0]).table_id.encode()
    polled = {
        TP(NAMES[0], 0): [Rec(i, line, table) for i, line in enumerate(lines)],
        TP(NAMES[2], 0): [Rec(0, rounds[0]), Rec(1, bad), Rec(2, rounds[2])],
    }
    consumer = Consumer()
    summary = ProjectSummary(BatchCounts())
    with Store(tmp_path / "s.duckdb") as store:
        _write(store, consumer, "g", polled, NAMES, summary)
        con = store.con
        stored_rounds = {r[0] for r in con.execute("SELECT round_id FROM rounds").fetchall()}
        events = con.execute("SELECT count(*) FROM events").fetchone()
        dead = con.execute("SELECT reason, detail, raw FROM dead_letters").fetchall()
        offsets = con.execute("SELECT topic, next_offset FROM offsets ORDER BY topic").fetchall()
    assert stored_rounds == {auditor.rounds[0]["round_id"], auditor.rounds[2]["round_id"]}
    assert events == (len(set(lines)),)
    assert len(dead) == 1 and dead[0][0] == "store_error" and "2147483648" in dead[0][2]
    assert offsets == [(NAMES[0], len(lines)), (NAMES[2], 3)]
    assert len(consumer.committed) == 1 and summary.bad_records == 1


def test_an_error_of_the_store_itself_is_still_raised(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        store.con.execute("DROP TABLE rounds")  # not about one row: the whole store is wrong
        try:
            store.write_batch_isolating(raw_events=(), rounds=[{"round_id": "x"}])
        except duckdb.CatalogException:
            pass
        else:
            raise AssertionError("a missing table must not be taken for a refused row")


def test_the_projector_does_not_store_an_event_the_worker_refuses_as_implausible(tmp_path: Path) -> None:
    import json
    from datetime import timedelta

    from dealtrail.ingest.projector import Heads
    from streams.engine import Plausibility

    path = tmp_path / "events.jsonl"
    write_simulation(path, tables=1, hours=0.1, seed=4, error_rate=0.0)
    lines = path.read_bytes().splitlines()
    table = decode(lines[0]).table_id.encode()
    far = json.loads(lines[20])
    far.update(event_id="FAR", seq=2**62, prev_hash=None, hash=None)
    skewed = json.loads(lines[20])
    skewed.update(event_id="SKEW", recorded_at="2026-11-27T01:00:00Z", prev_hash=None, hash=None)
    records = [*lines[:20], json.dumps(far).encode(), json.dumps(skewed).encode(), *lines[20:]]
    half = len(records) // 2
    heads = Heads(Plausibility(100_000, timedelta(hours=1)))
    summary = ProjectSummary(BatchCounts())
    with Store(tmp_path / "s.duckdb") as store:
        for lo, hi in ((0, 15), (15, half), (half, len(records))):  # the head is read back from the store
            fresh = Heads(heads.limits) if lo == 15 else heads
            polled = {TP(NAMES[0], 0): [Rec(i, records[i], table) for i in range(lo, hi)]}
            _write(store, Consumer(), "g", polled, NAMES, summary, None, fresh)
        ids = {r[0] for r in store.con.execute("SELECT event_id FROM events").fetchall()}
    assert "FAR" not in ids and "SKEW" not in ids
    assert ids == {decode(line).event_id for line in lines}
    assert summary.skipped_events == 2
