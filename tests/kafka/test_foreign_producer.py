"""A producer that is not dealtrail's: librdkafka through ``confluent-kafka``, with its default
partitioner (CRC32, not murmur2), every codec Kafka defines and headers dealtrail does not know.

The stream must give exactly the embedded audit's findings, and the Kafka-side lookups by table
(``verify``/``replay --source kafka``) must find every table where that producer put it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from streams.kafka import partition_for
from tests.kafka.conftest import Cluster, assert_stream_equals_replay, consume_all, project_all

pytestmark = pytest.mark.kafka

CODECS = ("gzip", "snappy", "lz4", "zstd")


def publish_with_librdkafka(cluster: Cluster, events: Path) -> dict[str, tuple[str, int]]:
    """Publish every line of ``events`` as a floor system would: keyed by table ID, one
    confluent-kafka producer per codec (table ``i`` of the sorted table IDs through codec
    ``i % 4``), default partitioner, idempotent, with headers.

    Returns:
        table ID -> (codec, partition librdkafka chose).
    """
    from confluent_kafka import Producer

    lines = [line for line in events.read_bytes().splitlines() if line.strip()]
    tables = sorted({json.loads(line)["table_id"] for line in lines})
    codec_of = {t: CODECS[i % len(CODECS)] for i, t in enumerate(tables)}
    producers = {
        codec: Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "compression.type": codec,
                "enable.idempotence": True,
                "linger.ms": 20,
            }
        )
        for codec in CODECS
    }
    topic = cluster.settings().topics.events.name
    placed: dict[str, tuple[str, int]] = {}
    failed: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            failed.append(str(err))
            return
        table = msg.key().decode()  # type: ignore[attr-defined]
        placed[table] = (codec_of[table], msg.partition())  # type: ignore[attr-defined]

    for n, line in enumerate(lines):
        table = json.loads(line)["table_id"]
        producer = producers[codec_of[table]]
        headers = [("vendor", b"shoe-firmware 4.2"), ("traceparent", f"00-{n:032x}-{n:016x}-01".encode())]
        while True:
            try:
                producer.produce(topic, key=table.encode(), value=line, headers=headers, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let it drain
                producer.poll(0.1)
        producer.poll(0)
    for producer in producers.values():
        assert producer.flush(60) == 0
    assert not failed, failed[:3]
    return placed


def test_a_shift_published_by_librdkafka_with_every_codec_and_headers_equals_the_audit(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, replay = shift
    placed = publish_with_librdkafka(cluster, events)
    assert {codec for codec, _ in placed.values()} == set(CODECS)
    # librdkafka's default partitioner is CRC32 of the key, and it differs from dealtrail's
    # murmur2 for some tables here: a lookup that assumed murmur2 would miss them
    for table, (_, partition) in placed.items():
        assert partition == zlib.crc32(table.encode()) % cluster.partitions, table
    elsewhere = [t for t, (_, p) in placed.items() if p != partition_for(t.encode(), cluster.partitions)]
    assert elsewhere, "the test needs a table that murmur2 would look for in another partition"

    consume_all(cluster, tmp_path / "worker.log")
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    assert_stream_equals_replay(db, replay)

    for table, (_, partition) in sorted(placed.items()):
        proc = _cli(cluster, "replay", "--table", table, "--db", str(db), "--source", "kafka")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "replay matches the stored findings" in " ".join(proc.stdout.split()), proc.stdout
        said = " ".join(proc.stderr.split())
        assert f"read {cluster.settings().topics.events.name}[{partition}]" in said, said
        from_topic = _cli(cluster, "verify", "--source", "kafka", "--table", table)
        from_audit = _cli(cluster, "verify", "--db", str(replay), "--table", table)
        assert from_topic.returncode == from_audit.returncode, from_topic.stdout + from_topic.stderr
        assert " ".join(from_topic.stdout.split()) == " ".join(from_audit.stdout.split())
        assert f"[{partition}]" in from_topic.stderr, from_topic.stderr


def _cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dealtrail.cli", *args],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
