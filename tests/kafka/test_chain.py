"""The publisher stamps the per-table hash chain on unchained events and carries it across
publish runs (also when a run died before it wrote its chain heads); exact re-sent copies keep
their stamp; the stream stores the same chained trail the audit stamps from the same file."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest

from dealtrail.ingest.audit import audit_file
from dealtrail.ingest.verify import check_chain
from projections.store.store import Store
from streams.publish import Publisher, publish_file
from tests.helpers import unchained_lines
from tests.kafka.conftest import Cluster, consume_all, findings_of, project_all

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def plain(shift: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The first 1,500 lines of the shift without their chain fields."""
    events, _ = shift
    return unchained_lines(events.read_bytes().splitlines()[:1500])


def _topic_chains(cluster: Cluster) -> dict[str, list[tuple[str, str]]]:
    """Each table's distinct events on the events topic, in offset order."""
    from kafka import KafkaConsumer, TopicPartition

    topic = cluster.settings().topics.events.name
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    seen: set[tuple[str, bytes]] = set()
    chains: dict[str, list[tuple[str, str]]] = defaultdict(list)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(cluster.partitions)])
        consumer.seek_to_beginning()
        for rec in sorted(consumer, key=lambda r: (r.partition, r.offset)):
            doc = json.loads(rec.value)
            if (doc["event_id"], rec.value) not in seen:
                seen.add((doc["event_id"], rec.value))
                chains[doc["table_id"]].append((doc["event_id"], rec.value.decode()))
    finally:
        consumer.close()
    return chains


def _publish(cluster: Cluster, lines: list[bytes], path: Path, write_heads: bool = True) -> None:
    path.write_bytes(b"".join(lines))
    s = cluster.settings()
    publisher = Publisher(s.kafka, s.topics)
    assert publisher.keeper is not None
    if not write_heads:  # as if the run died after its events were acknowledged
        publisher.keeper.write_heads = lambda: None  # type: ignore[method-assign]
    try:
        publish_file(path, publisher, max_record_bytes=s.max_record_bytes)
    finally:
        publisher.close()


def test_chains_go_on_across_runs_and_a_run_that_died_before_its_heads(
    cluster: Cluster, plain: list[bytes], tmp_path: Path
) -> None:
    junk = b'{"type": "Nope", "table_id": "JUNK-1"}\n'  # rejected: it must leave no chain head behind
    _publish(cluster, [*plain[:400], junk], tmp_path / "a.jsonl")
    _publish(cluster, plain[400:900], tmp_path / "b.jsonl", write_heads=False)
    _publish(cluster, plain[800:], tmp_path / "c.jsonl")  # 100 lines sent again, exactly
    chains = _topic_chains(cluster)
    assert sum(len(c) for c in chains.values()) == len({json.loads(x)["event_id"] for x in plain})
    for table, trail in chains.items():
        report = check_chain(table, trail)
        assert report.first_break is None, report.first_break
        assert report.chained == report.events
    assert set(_heads(cluster)) == set(chains)


def _heads(cluster: Cluster) -> dict[str, dict[str, object]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        consumer.assign([TopicPartition(cluster.settings().topics.chain_heads.name, 0)])
        consumer.seek_to_beginning()
        return {rec.key.decode(): json.loads(rec.value) for rec in consumer}
    finally:
        consumer.close()


def test_the_stream_stores_the_trail_the_audit_stamps_from_the_same_file(
    cluster: Cluster, plain: list[bytes], tmp_path: Path
) -> None:
    _publish(cluster, plain[:700], tmp_path / "a.jsonl")
    _publish(cluster, plain[600:], tmp_path / "b.jsonl")
    consume_all(cluster, tmp_path / "worker.log")
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(b"".join(plain))
    audited = tmp_path / "audit.duckdb"
    with Store(audited) as store:
        audit_file(whole, store, workers=1)

    def payloads(path: Path) -> list[tuple[str, str]]:
        con = duckdb.connect(str(path), read_only=True)
        try:
            return con.execute("SELECT event_id, payload::VARCHAR FROM events ORDER BY ALL").fetchall()
        finally:
            con.close()

    assert payloads(db) == payloads(audited)
    assert findings_of(db) == findings_of(audited)


def test_publishing_a_file_again_sends_no_event_twice(cluster: Cluster, plain: list[bytes], tmp_path: Path) -> None:
    path = tmp_path / "shift.jsonl"
    path.write_bytes(b"".join(plain))
    cluster.cli("publish", str(path))
    again = " ".join(cluster.cli("publish", str(path)).stdout.split())
    distinct = len({json.loads(x)["event_id"] for x in plain})
    assert "published 0 events" in again and "already on the topic, not sent again" in again, again
    chains = _topic_chains(cluster)
    assert sum(len(c) for c in chains.values()) == distinct
    for table, trail in chains.items():
        assert check_chain(table, trail).first_break is None
    consume_all(cluster, tmp_path / "worker.log")
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    whole = tmp_path / "audit.duckdb"
    with Store(whole) as store:
        audit_file(path, store, workers=1)
    assert findings_of(db) == findings_of(whole), "no finding from the second run"
    con = duckdb.connect(str(db), read_only=True)
    try:
        reasons = {r for (r,) in con.execute("SELECT DISTINCT reason FROM dead_letters").fetchall()}
        stored = con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
    finally:
        con.close()
    assert reasons <= {"already_published"} and stored == distinct


def test_publish_reads_events_from_a_pipe(cluster: Cluster, plain: list[bytes], tmp_path: Path) -> None:
    import os
    import threading

    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with fifo.open("wb") as fh:
            fh.write(b"".join(plain[:300]))

    writer = threading.Thread(target=feed)
    writer.start()
    out = " ".join(cluster.cli("publish", str(fifo)).stdout.split())
    writer.join(timeout=60)
    assert "published 300 events" in out, out
    chains = _topic_chains(cluster)
    assert sum(len(c) for c in chains.values()) == 300
    assert all(check_chain(t, trail).first_break is None for t, trail in chains.items())
