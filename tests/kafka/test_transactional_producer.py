"""Transactional producers that are not dealtrail's: Kafka's Java client (from the broker's own
jars, compiled here with ``javac``) with zstd and with lz4, and librdkafka through
``confluent-kafka``; each commits every 2,000 lines, aborts one transaction of 300 altered copies
in the middle, and is fenced once as a zombie by a newer producer with its ``transactional.id``
(its open transaction of 300 more altered copies aborted).

The stream must hold the committed lines only: the worker and the projector store exactly the
embedded audit's findings, events and rounds, no aborted record is in any table of the store,
and ``verify --source kafka`` reads every table as the audit stored it. A transaction left open
holds back no reader (each reads to the last stable offset) and none of its records is read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.kafka.conftest import Cluster, _unavailable, assert_stream_equals_replay, project_all, stop

pytestmark = pytest.mark.kafka

JAVA_SOURCE = Path(__file__).parent / "java" / "TransactionalShift.java"
COMMIT_EVERY = 2_000
ALTERED = 300
ID = re.compile(r'"event_id"\s*:\s*"([0-9A-Z]{26})"')


def _kafka_libs() -> Path:
    home = Path(os.environ.get("DEALTRAIL_KAFKA_HOME", Path.home() / ".cache" / "dealtrail" / "kafka"))
    return home / f"libs-{os.environ.get('DEALTRAIL_KAFKA_VERSION', '4.1.0')}"


@pytest.fixture(scope="module")
def java_producer(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> list[str]:
    """The command that runs ``TransactionalShift`` (compiled here against the broker's
    kafka-clients, zstd-jni and lz4-java jars); missing ``javac`` or jars skip, or fail under
    ``DEALTRAIL_REQUIRE_KAFKA=1``."""
    libs = _kafka_libs()
    jars = sorted(libs.glob("kafka-clients-*.jar")) + sorted(libs.glob("zstd-jni-*.jar"))
    jars += sorted(libs.glob("lz4-java-*.jar")) + sorted(libs.glob("snappy-java-*.jar"))
    jars += sorted(libs.glob("slf4j-api-*.jar"))
    if shutil.which("javac") is None or shutil.which("java") is None:
        _unavailable("javac not found: install OpenJDK 17 (apt-get install openjdk-17-jdk-headless)")
    if len(jars) < 5:
        _unavailable(f"the broker's client jars are not in {libs} (ops/kafka/broker fetch)")
    out = tmp_path_factory.mktemp("java")
    classpath = os.pathsep.join(str(j) for j in jars)
    made = subprocess.run(
        ["javac", "-d", str(out), "-cp", classpath, str(JAVA_SOURCE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    return ["java", "-cp", os.pathsep.join([str(out), classpath]), "TransactionalShift"]


def altered_id(event_id: str) -> str:
    """The event ID of an altered copy (as ``TransactionalShift.altered`` and
    :func:`publish_with_librdkafka_transactions` make it)."""
    return event_id[:22] + "ZZZZ"


def altered(line: bytes) -> bytes:
    """The line with the event ID of an altered copy: a new event, never committed."""
    text = line.decode()
    m = ID.search(text)
    assert m is not None, text[:200]
    return (text[: m.start(1)] + altered_id(m.group(1)) + text[m.end(1) :]).encode()


def publish_with_librdkafka_transactions(bootstrap: str, topic: str, lines: list[bytes], tid: str) -> None:
    """The Java program's scheme through librdkafka: commits every :data:`COMMIT_EVERY` lines, an
    aborted transaction of :data:`ALTERED` altered copies after a third of the lines, a zombie
    fenced by a newer producer with the same ``transactional.id`` after two thirds."""
    from confluent_kafka import KafkaException, Producer

    def producer() -> Any:
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": tid,
                "enable.idempotence": True,
                "acks": "all",
                "compression.type": "zstd",
                "linger.ms": 20,
            }
        )
        p.init_transactions(60)
        return p

    def send(p: Any, line: bytes) -> None:
        key = json.loads(line)["table_id"].encode()
        while True:
            try:
                p.produce(topic, key=key, value=line)
                return
            except BufferError:
                p.poll(0.1)

    abort_after, zombie_after = len(lines) // 3, 2 * len(lines) // 3
    p = producer()
    p.begin_transaction()
    pending = 0
    fenced = False
    for n, line in enumerate(lines, start=1):
        send(p, line)
        pending += 1
        if pending < COMMIT_EVERY and n not in (abort_after, zombie_after, len(lines)):
            continue
        p.commit_transaction(60)
        pending = 0
        if n == abort_after:
            p.begin_transaction()
            for j in range(ALTERED):
                send(p, altered(lines[j % n]))
            p.flush(60)
            p.abort_transaction(60)
        if n == zombie_after:
            p.begin_transaction()
            for j in range(ALTERED):
                send(p, altered(lines[n - 1 - j % n]))
            p.flush(60)
            newer = producer()  # fences the zombie and aborts its open transaction
            try:
                p.commit_transaction(30)
            except KafkaException as exc:
                error = exc.args[0]
                fenced = error.fatal() or "FENCED" in error.name() or "fenced" in error.str().lower()
                if not fenced:
                    raise
            p = newer
        if n < len(lines):
            p.begin_transaction()
    p.flush(60)
    assert fenced, "the zombie librdkafka producer committed: it was not fenced"


def committed_ends(cluster: Cluster) -> dict[int, int]:
    """Per partition of the events topic, one past the offset of its last committed record."""
    from streams.kafka import iter_range

    s = cluster.settings()
    ends: dict[int, int] = {}
    for p in range(cluster.partitions):
        for rec in iter_range(s.kafka, s.topics.events.name, p, 0, None, None):
            ends[p] = rec.offset + 1
    return ends


def count_records(cluster: Cluster, isolation_level: str) -> tuple[int, dict[int, int]]:
    """(records a consumer with ``isolation_level`` reads in the events topic, its end offsets)."""
    from kafka import KafkaConsumer, TopicPartition

    s = cluster.settings()
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap,
        isolation_level=isolation_level,
        enable_auto_commit=False,
        consumer_timeout_ms=1500,
    )
    try:
        tps = [TopicPartition(s.topics.events.name, p) for p in range(cluster.partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        n = sum(1 for _ in consumer)
        return n, {tp.partition: int(end) for tp, end in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


def wait_worker_done(cluster: Cluster, ends: dict[int, int], timeout: float = 180) -> None:
    """Wait until the worker group committed, on every partition, the offset after its last
    committed record (the transaction markers after it are never delivered, so the group's
    offset stays below the high watermark)."""
    from kafka import KafkaAdminClient

    s = cluster.settings()
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="dealtrail-test")
    deadline = time.monotonic() + timeout
    try:
        while True:
            got = admin.list_group_offsets(s.topics.app_id).get(s.topics.app_id, {})
            at = {tp.partition: meta.offset for tp, meta in got.items() if tp.topic == s.topics.events.name}
            if all(at.get(p, -1) >= end for p, end in ends.items()):
                return
            assert time.monotonic() < deadline, f"the worker group reached {at}, not {ends}"
            time.sleep(0.5)
    finally:
        admin.close()


def stored_ids_matching(db: Path, wanted: set[str]) -> dict[str, set[str]]:
    """Per table of the store, the IDs of ``wanted`` found anywhere in its rows (every column)."""
    found: dict[str, set[str]] = {}
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        pattern = re.compile(r"[0-9A-Z]{22}ZZZZ")
        for table in tables:
            for row in con.execute(f'SELECT * FROM "{table}"').fetchall():
                hits = {m for m in pattern.findall(str(row)) if m in wanted}
                if hits:
                    found.setdefault(table, set()).update(hits)
    finally:
        con.close()
    return found


def test_transactional_producers_aborts_and_a_fenced_zombie_give_the_audit_of_the_committed_lines(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path, java_producer: list[str]
) -> None:
    events, replay = shift
    lines = [line for line in events.read_bytes().splitlines() if line.strip()]
    tables = sorted({json.loads(line)["table_id"] for line in lines})
    topic = cluster.settings().topics.events.name
    producers = ("java-zstd", "java-lz4", "librdkafka")
    mine = {name: [line for line in lines if tables.index(json.loads(line)["table_id"]) % 3 == i]
            for i, name in enumerate(producers)}  # fmt: skip
    originals = {m.group(1) for line in lines if (m := ID.search(line.decode()))}
    aborted = {altered_id(i) for i in originals} - originals

    runs = []
    for name in producers[:2]:
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(b"\n".join(mine[name]) + b"\n")
        n = len(mine[name])
        codec = name.split("-")[1]
        args = [cluster.bootstrap, topic, str(path), codec, f"{cluster.namespace}-{name}"]
        args += [str(COMMIT_EVERY), str(n // 3), str(ALTERED), str(2 * n // 3)]
        runs.append(
            subprocess.Popen([*java_producer, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    publish_with_librdkafka_transactions(cluster.bootstrap, topic, mine["librdkafka"], f"{cluster.namespace}-rdk")
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, out + err  # 3: the zombie was not fenced
        assert "fenced the zombie" in out and "aborted a transaction of 300" in out, out

    # the topic holds the aborted records and the markers: a consumer that reads uncommitted
    # data (as every consumer of dealtrail did) gets 1,800 records that were never published
    committed, ends = count_records(cluster, "read_committed")
    uncommitted, _ = count_records(cluster, "read_uncommitted")
    assert committed == len(lines)
    assert uncommitted == len(lines) + 2 * ALTERED * len(producers)
    last = committed_ends(cluster)
    assert all(ends[p] > last[p] for p in last), "every partition ends with a transaction marker"

    worker = cluster.start_worker(tmp_path / "worker.log")
    try:
        wait_worker_done(cluster, last)
    finally:
        assert stop(worker) == 0, (tmp_path / "worker.log").read_text()
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    assert_stream_equals_replay(db, replay)
    assert stored_ids_matching(db, aborted) == {}, "an aborted record was stored"

    for table in tables[: len(producers)]:  # one table of each producer (table i: producer i % 3)
        from_topic = _cli(cluster, "verify", "--source", "kafka", "--table", table)
        from_audit = _cli(cluster, "verify", "--db", str(replay), "--table", table)
        assert from_topic.returncode == from_audit.returncode, from_topic.stdout + from_topic.stderr
        assert " ".join(from_topic.stdout.split()) == " ".join(from_audit.stdout.split())


def _cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dealtrail.cli", *args],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_a_transaction_left_open_holds_back_no_reader_and_none_of_its_records_is_read(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    # a consumer's end of a partition is its last stable offset: a reader that waited for the high
    # watermark behind a transaction still open (a vendor's producer hung mid-transaction) would
    # wait until the broker aborts it, minutes later
    from confluent_kafka import Producer

    from streams.kafka import read_table

    events, _ = shift
    lines = [line for line in events.read_bytes().splitlines() if line.strip()][:3_000]
    cluster.cli("publish", str(_write(tmp_path / "head.jsonl", lines)))
    topic = cluster.settings().topics.events.name
    hung = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": f"{cluster.namespace}-hung",
            "transaction.timeout.ms": 300_000,
        }
    )
    hung.init_transactions(60)
    hung.begin_transaction()
    for line in lines[:ALTERED]:
        hung.produce(topic, key=json.loads(line)["table_id"].encode(), value=altered(line))
    hung.flush(60)
    try:
        uncommitted, _ = count_records(cluster, "read_uncommitted")
        committed, _ = count_records(cluster, "read_committed")
        started = time.monotonic()
        db = tmp_path / "stream.duckdb"
        project_all(cluster, db)  # --once: ends once it has read every committed record
        took = time.monotonic() - started
        table = json.loads(lines[0])["table_id"]
        found = read_table(cluster.settings().kafka, topic, cluster.partitions, table.encode(), one_shot=True)
    finally:
        hung.abort_transaction(60)
    assert took < 60, f"the projector waited {took:.0f} s behind the open transaction"
    published = {m.group(1) for line in lines if (m := ID.search(line.decode()))}
    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = {r[0] for r in con.execute("SELECT event_id FROM events").fetchall()}
    finally:
        con.close()
    assert stored == published, "the committed events, none of the open transaction's"
    assert found.records, table
    read = {m.group(1) for r in found.records if (m := ID.search(r.value.decode()))}
    assert read <= published
    assert uncommitted == committed + ALTERED, "the open transaction's records are on the topic"


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path
