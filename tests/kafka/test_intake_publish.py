"""Bounded intake through ``dealtrail publish``: a line over the record limit goes to the
dead-letter topic with its beginning, length and SHA-256; byte-order marks at the start of any
line and lone CR line ends lose no event."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import pytest

from streams.publish import Publisher, publish_file
from tests.kafka.conftest import Cluster, project_all

pytestmark = pytest.mark.kafka


def test_publish_dead_letters_a_too_large_line_and_reads_marks_and_cr_line_ends(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = shift
    good = events.read_bytes().splitlines()[:40]
    huge = json.dumps({**json.loads(good[0]), "event_id": "E-HUGE", "padding": "x" * 300_000}).encode()
    body = (
        b"\n".join(good[:5])
        + b"\n\xef\xbb\xbf"  # day 2 of a cat, saved by an editor that writes a mark
        + b"\r\n".join(good[5:10])
        + b"\r\n"
        + huge
        + b"\n"
        + b"\r".join(good[10:])  # classic Mac line ends, and no line end at the end
    )
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(body)
    # Cluster.settings() passes the address by field name, which the settings ignore: apply it as --bootstrap would
    s = cluster.settings().with_bootstrap(cluster.bootstrap)
    publisher = Publisher(s.kafka, s.topics)
    try:
        summary = publish_file(path, publisher, max_record_bytes=64 * 1024)
    finally:
        publisher.close()
    assert summary.sent == len(good) and dict(summary.rejected) == {"too_large": 1}
    db = tmp_path / "p.duckdb"
    project_all(cluster, db)
    with duckdb.connect(str(db), read_only=True) as con:
        dead = con.execute("SELECT position, reason, detail, length(raw) FROM dead_letters").fetchall()
        stored = con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
    assert stored == len(good)
    ((position, reason, detail, kept),) = dead
    assert (position, reason) == ("line 11", "too_large") and str(len(huge)) in detail.replace(",", "")
    assert kept == 256 * 1024
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    try:
        parts = [
            TopicPartition(s.topics.dead_letter.name, p)
            for p in consumer.partitions_for_topic(s.topics.dead_letter.name) or ()
        ]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        records = [r for batch in consumer.poll(timeout_ms=10_000).values() for r in batch]
    finally:
        consumer.close()
    (rec,) = [json.loads(r.value) for r in records]
    assert rec["raw_bytes"] == len(huge) and rec["raw_sha256"] == hashlib.sha256(huge).hexdigest()


def test_the_worker_dead_letters_a_record_over_the_record_limit_and_goes_on(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    from kafka import KafkaProducer

    from tests.kafka.conftest import stop

    events, _ = shift
    good = events.read_bytes().splitlines()[:100]
    first = json.loads(good[0])
    big = json.dumps({**first, "event_id": "E-BIG", "padding": "x" * 300_000}).encode()
    s = cluster.settings()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for raw in [good[0], big, *good[1:]]:
        producer.send(s.topics.events.name, key=json.loads(raw)["table_id"].encode(), value=raw)
    producer.flush()
    producer.close()
    worker = cluster.start_worker(tmp_path / "worker.log", DEALTRAIL_MAX_RECORD_BYTES=str(64 * 1024))
    try:
        cluster.wait_consumed()
        assert worker.poll() is None
    finally:
        stop(worker)
    db = tmp_path / "w.duckdb"
    project_all(cluster, db)
    with duckdb.connect(str(db), read_only=True) as con:
        dead = con.execute("SELECT reason, detail, length(raw) FROM dead_letters").fetchall()
        stored = con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
    assert stored == len(set(good))
    ((reason, detail, kept),) = dead
    assert reason == "too_large" and str(len(big)) in detail.replace(",", "") and kept < len(big)
