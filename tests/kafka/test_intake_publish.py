"""Bounded intake through ``dealtrail publish``: a line over the record limit goes to the
dead-letter topic with its beginning, length and SHA-256; byte-order marks at the start of any
line and lone CR line ends lose no event."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import pytest

from streams.publish import Publisher, PublishSummary, publish_file
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


def _dead_letters(cluster: Cluster) -> list[dict[str, object]]:
    from kafka import KafkaConsumer, TopicPartition

    name = cluster.settings().topics.dead_letter.name
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    try:
        parts = [TopicPartition(name, p) for p in consumer.partitions_for_topic(name) or ()]
        ends = consumer.end_offsets(parts)
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        records: list[dict[str, object]] = []
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            records += [json.loads(r.value) for batch in consumer.poll(timeout_ms=2_000).values() for r in batch]
    finally:
        consumer.close()
    return records


def test_publishing_a_file_again_is_quiet_and_a_conflicting_old_event_is_still_dead_lettered(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = shift
    lines = [line for line in events.read_bytes().splitlines() if line.strip()]
    by_table: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        by_table.setdefault(json.loads(line)["table_id"], []).append(i)
    table, rows = max(by_table.items(), key=lambda kv: len(kv[1]))
    assert len(rows) > 300, "the table needs events older than its last 256"
    changed, held_back = lines[rows[10]], lines[rows[20]]
    first = tmp_path / "first.jsonl"
    first.write_bytes(b"\n".join(line for line in lines if line is not held_back) + b"\n")
    s = cluster.settings().with_bootstrap(cluster.bootstrap)

    def publish(path: Path) -> PublishSummary:
        publisher = Publisher(s.kafka, s.topics)
        try:
            return publish_file(path, publisher, max_record_bytes=1024 * 1024)
        finally:
            publisher.close()

    once = publish(first)
    assert not once.rejected and once.sent > 0
    before = _dead_letters(cluster)  # redeliveries the simulation put far apart are copies, not dead letters
    assert before == []
    again = publish(first)
    assert again.sent == 0 and not again.rejected, again
    assert again.already_published > 0 and again.copies > 0
    assert again.copies + again.already_published == len(lines) - 1
    assert _dead_letters(cluster) == [], "a second publish adds nothing to the dead-letter topic"
    # an old event with other content (same event ID and seq), and one the topic never had
    event = json.loads(changed)
    event["occurred_at"] = event["occurred_at"][:19] + ".123456Z"  # a microsecond edit, same seq and ID
    odd = tmp_path / "odd.jsonl"
    odd.write_bytes(json.dumps(event).encode() + b"\n" + held_back + b"\n")
    third = publish(odd)
    assert third.sent == 0 and dict(third.rejected) == {"conflicts_with_published": 1, "behind_published_head": 1}
    dead = _dead_letters(cluster)
    assert sorted(str(d["reason"]) for d in dead) == ["behind_published_head", "conflicts_with_published"]
    assert all(table in str(d["detail"]) for d in dead)
