"""Time that cannot be true is refused at the edge, through the stream (issue 32 item 2): one
event stamped 2099-12-31 (both times) in the middle of a 2026 shift is dead-lettered as
``recorded_in_future`` by ``publish``, and by the worker for a copy sent straight to the events
topic; the projector does not store it, and the period still being dealt stays provisional.
Each process runs with its own (system) clock, as deployed."""

from __future__ import annotations

import json
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from tests.kafka.conftest import Cluster, count_rows, findings_of, stop
from tests.kafka.test_poison_stream import _group_done

pytestmark = pytest.mark.kafka


def test_an_event_stamped_2099_is_dead_lettered_by_publish_and_worker_and_the_period_stays_provisional(
    cluster: Cluster, tmp_path: Path
) -> None:
    from kafka import KafkaProducer

    from dealtrail.ingest.audit import audit_file
    from dealtrail.simulator.run import write_simulation
    from projections.reports.report import judge_status
    from projections.store.store import Store

    shift = tmp_path / "shift.jsonl"
    write_simulation(shift, tables=3, hours=0.3, seed=17, error_rate=0.25, duplicate_rate=0.0)
    lines = shift.read_bytes().splitlines()
    alone = tmp_path / "alone.duckdb"
    with Store(alone) as store:
        audit_file(shift, store, workers=1, limits=cluster.settings().plausibility)
    at = len(lines) // 2
    doc = {k: v for k, v in json.loads(lines[at]).items() if k not in ("prev_hash", "hash")}
    doc.update(event_id="FUTURE-1", occurred_at="2099-12-31T12:00:00Z", recorded_at="2099-12-31T12:00:00Z")
    future = json.dumps(doc).encode()
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join([*lines[:at], future, *lines[at:]]) + b"\n")

    db = tmp_path / "stream.duckdb"
    worker = cluster.start_worker(tmp_path / "worker.log")
    projector = cluster.start(tmp_path / "projector.log", "project", "--db", str(db))
    try:
        published = cluster.cli("publish", str(path))
        assert "recorded_in_future 1" in published.stdout, published.stdout
        s = cluster.settings()
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        producer.send(s.topics.events.name, key=str(doc["table_id"]).encode(), value=future)
        producer.flush()
        producer.close()
        cluster.wait_consumed(timeout=240)
        topics = [s.topics.events.name, s.topics.findings.name, s.topics.rounds.name, s.topics.dead_letter.name]
        deadline = time.monotonic() + 120
        while not _group_done(cluster, s.topics.projector_group, topics):
            assert time.monotonic() < deadline, (tmp_path / "projector.log").read_text()
            time.sleep(1)
    finally:
        stop(projector, signal.SIGINT)
        assert stop(worker) == 0, (tmp_path / "worker.log").read_text()

    con = duckdb.connect(str(db), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        dead = sorted(
            (str(src), str(reason)) for src, reason in con.execute("SELECT source, reason FROM dead_letters").fetchall()
        )
        stored = con.execute("SELECT count(*) FROM events WHERE event_id = 'FUTURE-1'").fetchone()
        start = datetime(2026, 11, 27, 18, tzinfo=UTC)
        hour = judge_status(con, start, start + timedelta(hours=1), timedelta(minutes=15))
    finally:
        con.close()
    assert dead == sorted([(str(path), "recorded_in_future"), (s.topics.events.name, "recorded_in_future")])
    assert stored == (0,)
    assert hour is not None and hour["status"] == "provisional" and hour["final_on"] == [], hour
    assert findings_of(db) == findings_of(alone)
    assert count_rows(db, "events") == count_rows(alone, "events")
