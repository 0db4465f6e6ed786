"""The reorder window is released on the consumer's position, not on wall clock alone (issue 37
item 4): on a loaded worker, a table's event queued behind other tables' messages of its
partition is waited for, as the audit waits for it, so the stream gives the audit's findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dealtrail.ingest.audit import audit_file
from projections.store.store import Store
from streams.engine.reorder import ReorderLimits
from tests.kafka.conftest import Cluster, describe_findings, findings_of, project_all, stop
from tests.reorder_trails import chained

pytestmark = pytest.mark.kafka

WINDOW = ReorderLimits(events=5_000, seconds=86_400)
"""A window wide enough that neither the audit nor the worker gives up on the delayed event."""


def gaps(db: Path, table: str) -> int:
    """The table's DT-sequence-gap findings in a store."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        sql = "SELECT count(*) FROM findings WHERE rule_id = 'DT-sequence-gap' AND table_id = ?"
        return int(con.execute(sql, [table]).fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def test_an_event_queued_behind_other_tables_on_a_loaded_worker_gives_the_audit_findings(
    cluster: Cluster, tmp_path: Path
) -> None:
    from confluent_kafka import Producer

    from dealtrail.simulator.run import write_simulation

    events = tmp_path / "shift.jsonl"
    write_simulation(events, tables=12, hours=0.5, seed=37, error_rate=0.2, duplicate_rate=0.0)
    lines = [line for line in chained(events, tmp_path / "chained.jsonl").read_bytes().splitlines() if line]
    # one event of one table moved to the end: behind every other message of its partition
    tables = sorted({json.loads(line)["table_id"] for line in lines})
    table = tables[0]
    mine = [i for i, line in enumerate(lines) if json.loads(line)["table_id"] == table]
    late = lines.pop(mine[30])
    lines.append(late)
    trail = tmp_path / "delayed.jsonl"
    trail.write_bytes(b"\n".join(lines) + b"\n")
    in_order = tmp_path / "in-order.duckdb"
    with Store(in_order) as store:
        audit_file(tmp_path / "chained.jsonl", store, workers=1, reorder=WINDOW)

    audited = tmp_path / "audit.duckdb"
    with Store(audited) as store:
        audit_file(trail, store, workers=1, reorder=WINDOW)
    expected = findings_of(audited)
    assert expected and gaps(audited, table) == gaps(in_order, table), "the audit waits for the delayed event"

    # the whole shift is queued before the worker starts (a worker catching up is a loaded
    # worker), published by a producer that keeps file order (key = table, any partitioner)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "linger.ms": 20})
    topic = cluster.settings().topics.events.name
    for line in lines:
        while True:
            try:
                producer.produce(topic, key=json.loads(line)["table_id"].encode(), value=line)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0

    log = tmp_path / "worker.log"
    worker = cluster.start_worker(
        log,
        DEALTRAIL_REORDER__EVENTS=str(WINDOW.events),
        DEALTRAIL_REORDER__SECONDS=str(int(WINDOW.seconds)),
        DEALTRAIL_REORDER__IDLE="0.05",  # wall clock alone would apply the held events at once
        DEALTRAIL_WORKER__STATE_INTERVAL="0.2",
    )
    try:
        cluster.wait_consumed(timeout=240)
    finally:
        assert stop(worker) == 0, log.read_text()
    streamed = tmp_path / "stream.duckdb"
    project_all(cluster, streamed)
    assert gaps(streamed, table) == gaps(in_order, table), describe_findings(streamed, findings_of(streamed) - expected)
    got = findings_of(streamed)
    if got != expected:
        missing, extra = describe_findings(audited, expected - got), describe_findings(streamed, got - expected)
        pytest.fail(f"missing {missing}\nextra {extra}")
