"""Hostile input through ``dealtrail publish`` and the Faust worker (the same strategies as the
audit's fuzz test): nothing crashes or hangs, every line the publisher rejects is on the
dead-letter topic with its reason, and every record on the events topic is either stored as an
event or dead-lettered by the worker with its position and reason."""

from __future__ import annotations

import json
import re
import uuid

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.codec import TABLE_ID_IN_LINE, DecodeError, decode
from tests.fuzz.test_hostile_input import CONFIG, hostile_line
from tests.kafka.conftest import Cluster, project_all, stop

pytestmark = pytest.mark.kafka
RUNS: list[int] = []


@given(lines=st.lists(hostile_line(), min_size=120, max_size=120))
@settings(
    max_examples=2,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
def test_hostile_lines_through_publish_and_the_worker_are_all_accounted_for(
    lines: list[bytes], kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    folder = tmp_path_factory.mktemp("fuzz-stream")
    cluster = Cluster(kafka_bootstrap, f"f{uuid.uuid4().hex[:10]}", 2)
    cluster.cli("topics", "create", timeout=120)
    try:
        body = [json.dumps(CONFIG).encode(), *lines]
        path = folder / "hostile.jsonl"
        path.write_bytes(b"\n".join(body) + b"\n")
        nonblank = sum(1 for line in body if line.strip())
        # 1. through the publisher: valid events to the events topic, the rest to the dead letters
        out = " ".join(cluster.cli("publish", str(path)).stdout.split())
        match = re.search(
            r"published ([\d,]+) events .*already on the topic, not sent again: ([\d,]+) .*; ([\d,]+) "
            r"already_published.*rejected: ([\d,]+) lines",
            out,
        )
        assert match, out
        sent, skipped, _already, rejected = (int(g.replace(",", "")) for g in match.groups())
        assert sent + rejected + skipped == nonblank
        # 2. straight onto the events topic, as a misbehaving producer would: the worker's edge
        topic = cluster.settings().topics.events.name
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
        for line in body:  # keyed by the table ID in the line, as the worker expects (else key_mismatch)
            found = TABLE_ID_IN_LINE.search(line)
            producer.send(topic, key=found.group(1) if found else b"fuzz", value=line)
        producer.flush()
        producer.close()
        worker = cluster.start_worker(folder / "worker.log")
        try:
            cluster.wait_consumed(timeout=240)
            assert worker.poll() is None, "the worker must survive hostile input"
        finally:
            assert stop(worker) == 0, (folder / "worker.log").read_text()
        db = folder / "stream.duckdb"
        project_all(cluster, db)
        con = duckdb.connect(str(db), read_only=True)
        try:
            dead = con.execute("SELECT source, position, reason, detail FROM dead_letters").fetchall()
            stored = {r[0] for r in con.execute("SELECT event_id FROM events").fetchall()}
        finally:
            con.close()
        assert all(reason and detail for _, _, reason, detail in dead)
        assert sum(1 for source, *_ in dead if source == str(path)) == rejected  # already_published: none
        worker_dead = {position for source, position, *_ in dead if source == topic}
        consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
        records = 0
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(cluster.partitions)])
            consumer.seek_to_beginning()
            for rec in consumer:
                records += 1
                position = f"{topic}[{rec.partition}]@{rec.offset}"
                try:
                    event = decode(rec.value)
                except DecodeError:
                    assert position in worker_dead, "an undecodable record was not dead-lettered"
                    continue
                # stored, or refused by the worker as implausible (rulebook 10.3.4: the projector skips it too)
                assert event.event_id in stored or position in worker_dead, f"event {event.event_id!r} is lost"
                if event.table_id != CONFIG["table_id"]:  # the engine refuses an unconfigured table
                    assert position in worker_dead, f"event of unconfigured {event.table_id!r} not dead-lettered"
        finally:
            consumer.close()
        assert records == sent + len(body)
        RUNS.append(len(body) + nonblank)
    finally:
        cluster.delete_topics()


def test_the_stream_fuzzer_ran_its_cases() -> None:
    # runs after the property test in this module (pytest keeps file order)
    print(f"hostile lines through publish and the worker: {sum(RUNS)} in {len(RUNS)} runs")
    assert len(RUNS) == 2 and sum(RUNS) >= 400
