"""A record batch that cannot be read (its compressed payload corrupted on the broker's disk, its
CRC made to match, so that only decompression fails) is a dead letter with its partition and
offsets, not an outage: the projector stores it, reads on past it and ``/readyz`` counts it
apart from the connection; the worker sends it to the dead-letter topic and consumes on."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import pytest

from tests.kafka.conftest import Cluster, stop

pytestmark = pytest.mark.kafka

HEADER = 61
"""Bytes of a v2 record batch's header: the records (compressed as one) follow it."""


def broker_data() -> Path:
    """The test broker's data folder (ops/kafka/broker: ``$DEALTRAIL_KAFKA_STATE/data``)."""
    home = Path(os.environ.get("DEALTRAIL_KAFKA_HOME", Path.home() / ".cache" / "dealtrail" / "kafka"))
    return Path(os.environ.get("DEALTRAIL_KAFKA_STATE", home / "run")) / "data"


def corrupt_batch(topic: str, partition: int, base_offset: int) -> int:
    """Overwrite the compressed records of the batch at ``base_offset`` in the partition's log with
    other bytes and give it the CRC-32C of its new content; returns its last offset."""
    from kafka.record._crc32c import crc as crc32c

    folder = broker_data() / f"{topic}-{partition}"
    for log in sorted(folder.glob("*.log")):
        data = bytearray(log.read_bytes())
        at = 0
        while at + HEADER <= len(data):
            base, length = struct.unpack_from(">qi", data, at)
            end = at + 12 + length
            if base == base_offset:
                (delta,) = struct.unpack_from(">i", data, at + 23)
                body = range(at + HEADER + 8, end)  # keep the codec's frame magic: fail inside it
                for i in body:
                    data[i] = (data[i] * 7 + 13) % 256
                struct.pack_into(">I", data, at + 17, crc32c(bytes(data[at + 21 : end])))
                with log.open("r+b") as fh:
                    fh.seek(at)
                    fh.write(bytes(data[at:end]))
                return base + delta
            at = end
    raise AssertionError(f"no batch at offset {base_offset} in {folder}")


def vendor_batch(cluster: Cluster) -> tuple[int, int]:
    """Put a zstd batch of 40 records on partition 0 of the events topic (librdkafka) and corrupt
    it on the broker's disk; returns its first and last offsets."""
    from confluent_kafka import Producer

    topic = cluster.settings().topics.events.name
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "compression.type": "zstd", "linger.ms": 200})
    offsets: list[int] = []
    for n in range(40):
        value = b'{"note": "a vendor record that will not decompress", "n": %d, "pad": "%s"}' % (n, b"x" * 200)
        producer.produce(topic, key=b"VENDOR-1", value=value, partition=0,
                         on_delivery=lambda err, msg: offsets.append(msg.offset()))  # fmt: skip
    assert producer.flush(30) == 0
    first, last = min(offsets), max(offsets)
    assert corrupt_batch(topic, 0, first) == last, "the 40 records should form one batch"
    return first, last


def inject_unreadable_batch(cluster: Cluster, tmp_path: Path) -> tuple[int, int, Path]:
    """Put a zstd batch of 40 records on partition 0 of the events topic (librdkafka) and corrupt
    it on the broker's disk, then publish good events of 4 tables after it.

    Returns:
        The batch's first and last offsets, and the file of the good events.
    """
    from dealtrail.simulator.run import write_simulation

    first, last = vendor_batch(cluster)
    events = tmp_path / "after.jsonl"  # good events after it, in every partition
    write_simulation(events, tables=4, hours=0.05, seed=8, error_rate=0.0, duplicate_rate=0.0)
    cluster.cli("publish", str(events))
    return first, last, events


def test_a_batch_that_does_not_decompress_is_a_dead_letter_and_the_projector_reads_on(
    cluster: Cluster, tmp_path: Path
) -> None:
    import duckdb
    import httpx

    topic = cluster.settings().topics.events.name
    first, last, events = inject_unreadable_batch(cluster, tmp_path)

    db, log = tmp_path / "stream.duckdb", tmp_path / "projector.log"
    port = 18000 + os.getpid() % 1000
    projector = cluster.start(log, "project", "--db", str(db), "--serve", f"127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 120
        ready = None
        while time.monotonic() < deadline:
            time.sleep(2)
            assert projector.poll() is None, log.read_text()
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).json()
            except httpx.HTTPError:
                continue
            if ready.get("consumption_errors") and ready.get("lag_messages") == 0:
                break
        assert ready is not None and ready["consumption_errors"] == 1, (ready, log.read_text())
        assert ready["kafka"] == "connected" and ready["ready"], ready
        assert f"{topic}[0]@{first}..{last}" in ready["last_consumption_error"], ready
    finally:
        assert stop(projector) == 0, log.read_text()
    said = log.read_text()
    assert "lost the connection" not in said, said
    assert f"{topic}[0]@{first}..{last} cannot be read" in said, said
    con = duckdb.connect(str(db), read_only=True)
    try:
        dead = con.execute(
            "SELECT position, reason, detail FROM dead_letters WHERE reason = 'unreadable_batch'"
        ).fetchall()
        stored = con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
    finally:
        con.close()
    assert [(p, r) for p, r, _ in dead] == [(f"{topic}[0]@{first}..{last}", "unreadable_batch")], dead
    published = sum(1 for line in events.read_bytes().splitlines() if line.strip())
    assert stored == published, "every event after the batch is stored"


def test_the_worker_dead_letters_a_batch_it_cannot_read_and_consumes_on(cluster: Cluster, tmp_path: Path) -> None:
    import json

    from streams.kafka import read_range

    s = cluster.settings()
    topic = s.topics.events.name
    first, last, _ = inject_unreadable_batch(cluster, tmp_path)
    log = tmp_path / "worker.log"
    worker = cluster.start_worker(log)
    try:
        cluster.wait_consumed(timeout=120)  # every offset, the batch's included: committed past it
        assert worker.poll() is None, log.read_text()
    finally:
        assert stop(worker) == 0, log.read_text()
    said = log.read_text()
    assert f"{topic}[0]@{first}..{last} cannot be read" in said, said
    dead = [
        json.loads(r.value)
        for p in range(s.topics.dead_letter.partitions)
        for r in read_range(s.kafka, s.topics.dead_letter.name, p, 0, None, None)
    ]
    batches = [d for d in dead if d["reason"] == "unreadable_batch"]
    assert [d["position"] for d in batches] == [f"{topic}[0]@{first}..{last}"], dead
    assert "DecompressionError" in batches[0]["detail"], batches


def test_one_shot_readers_pass_over_a_batch_they_cannot_read_and_read_the_rest(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import json

    from dealtrail.simulator.run import write_simulation
    from streams.batches import UnreadableBatch
    from streams.kafka import read_range

    s = cluster.settings()
    topic = s.topics.events.name
    events = tmp_path / "shift.jsonl"
    write_simulation(events, tables=4, hours=0.05, seed=8, error_rate=0.0, duplicate_rate=0.0)
    cluster.cli("publish", str(events))
    before = read_range(s.kafka, topic, 0, 0, None, None)
    assert before, "partition 0 holds some tables' events"
    table = json.loads(before[0].value)["table_id"]
    first, last = vendor_batch(cluster)  # after those events, inside the tables' chain windows
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap})  # and readable records after it
    for n in range(5):
        producer.produce(topic, key=b"VENDOR-2", value=b'{"n": %d}' % n, partition=0)
    assert producer.flush(30) == 0
    where = f"{topic}[0]@{first}..{last}"

    # the worker's re-reads and the publisher's chain reads: every readable record, the batch named
    passed: list[UnreadableBatch] = []
    after = read_range(s.kafka, topic, 0, 0, None, None, unreadable=passed)
    assert [b.position for b in passed] == [where], passed
    assert [r.offset for r in after if first <= r.offset <= last] == []
    assert [r.offset for r in after[: len(before)]] == [r.offset for r in before]
    assert [r.key for r in after[len(before) :]] == [b"VENDOR-2"] * 5
    with caplog.at_level("WARNING", logger="dealtrail.kafka"):
        assert len(read_range(s.kafka, topic, 0, first - 1, None, None)) == 6
    said = [r.getMessage() for r in caplog.records if r.name == "dealtrail.kafka"]
    assert len(said) == 1 and said[0].startswith(f"{where} cannot be read"), said

    # verify and replay --source kafka: one line, and the table read whole
    for command in ("verify", "replay"):
        done = cluster.cli(command, "--source", "kafka", "--table", table)
        lines_said = [line for line in done.stderr.splitlines() if "cannot be read" in line]
        assert len(lines_said) == 1 and where in lines_said[0], done.stderr
    # the publisher's chain-head read crosses it: the file again is all copies
    again = cluster.cli("publish", str(events))
    assert "rejected: 0 lines" in again.stdout, again.stdout
    assert sum(where in line for line in again.stderr.splitlines()) == 1, again.stderr
