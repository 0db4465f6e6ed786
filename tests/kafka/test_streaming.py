"""The streaming pipeline on the real broker: publish -> Faust worker -> projector -> DuckDB.

The key property: the findings the stream produces equal the findings ``dealtrail audit``
produces from the same file (stream = replay), also when workers stop, crash and rebalance.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from tests.kafka.conftest import (
    Cluster,
    assert_stream_equals_replay,
    consume_all,
    count_rows,
    project_all,
    publish_lines,
    stop,
    stream_file,
)

pytestmark = pytest.mark.kafka


def test_stream_findings_equal_the_replay_of_the_same_file(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, replay = shift
    stream_file(cluster, events, tmp_path)
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    assert_stream_equals_replay(db, replay)
    # re-running the projector on the same topics adds nothing
    before = {t: count_rows(db, t) for t in ("events", "findings", "rounds")}
    project_all(cluster, db)
    assert before == {t: count_rows(db, t) for t in ("events", "findings", "rounds")}


def test_changelog_records_land_in_the_partition_of_their_key(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    from kafka import KafkaConsumer, TopicPartition

    events, _ = shift
    stream_file(cluster, events, tmp_path)
    s = cluster.settings()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        source = {}
        parts = [TopicPartition(s.topics.events.name, p) for p in range(cluster.partitions)]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        for rec in consumer:
            source[rec.key] = rec.partition
        changelog = f"{s.topics.app_id}-table-states-changelog"
        cparts = [TopicPartition(changelog, p) for p in sorted(consumer.partitions_for_topic(changelog) or ())]
        assert len(cparts) == cluster.partitions
        consumer.assign(cparts)
        consumer.seek_to_beginning()
        seen = 0
        for rec in consumer:
            seen += 1
            assert source[rec.key] == rec.partition, f"{rec.key!r} in changelog partition {rec.partition}"
        assert seen >= len(source) == 6
    finally:
        consumer.close()


def test_two_workers_share_partitions_and_one_takes_over_when_the_other_stops(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, replay = shift
    lines = events.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    publish_lines(cluster, lines[:half], tmp_path / "first.jsonl")
    a = cluster.start_worker(tmp_path / "a.log")
    b = cluster.start_worker(tmp_path / "b.log")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and cluster.members() < 2:
            time.sleep(1)
        assert cluster.members() == 2, "both workers should hold partitions"
        cluster.wait_consumed(at_least=0.95)
        assert stop(b) == 0, (tmp_path / "b.log").read_text()
        publish_lines(cluster, lines[half:], tmp_path / "second.jsonl")
        try:
            cluster.wait_consumed(timeout=240)
        except AssertionError as exc:  # what the survivor said (a stalled state recovery names itself)
            said = (tmp_path / "a.log").read_text(errors="replace").splitlines()
            raise AssertionError(f"{exc}\n--- a.log, last 30 lines ---\n" + "\n".join(said[-30:])) from None
    finally:
        stop(b)
        assert stop(a) == 0, (tmp_path / "a.log").read_text()
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    assert_stream_equals_replay(db, replay)


def test_a_worker_killed_mid_stream_and_restarted_loses_no_finding(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, replay = shift
    lines = events.read_bytes().splitlines(keepends=True)
    cut = len(lines) // 3
    publish_lines(cluster, lines[:cut], tmp_path / "first.jsonl")
    first = cluster.start_worker(tmp_path / "w1.log")
    rest = tmp_path / "rest.jsonl"
    rest.write_bytes(b"".join(lines[cut:]))
    try:
        cluster.wait_consumed()
        # the rest arrives while the worker is busy with it: kill it in the middle
        publisher = subprocess.Popen([sys.executable, "-m", "dealtrail.cli", "publish", str(rest)], env=cluster.env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(1.5)
    finally:
        stop(first, signal.SIGKILL)
    assert publisher.wait(timeout=120) == 0
    done, end = cluster.consumed()
    assert done < end, "the kill should land mid-stream"
    second = cluster.start_worker(tmp_path / "w2.log")
    try:
        cluster.wait_consumed(timeout=240)
    finally:
        assert stop(second) == 0, (tmp_path / "w2.log").read_text()
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    assert_stream_equals_replay(db, replay)


def test_invalid_messages_go_to_the_dead_letter_topic_and_the_worker_goes_on(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    from kafka import KafkaProducer

    events, _ = shift
    good = events.read_bytes().splitlines()[:400]
    s = cluster.settings()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    first = json.loads(good[0])
    bad = [
        b'{"type": "CardDealt", "event_id": ',
        json.dumps({**first, "type": "CardTeleported"}).encode(),
        json.dumps({k: v for k, v in first.items() if k not in ("seq", "occurred_at")}).encode(),
    ]
    for raw in [*bad, *good]:
        key = json.loads(raw)["table_id"].encode() if raw.startswith(b'{"') and b"table_id" in raw else b"X"
        producer.send(s.topics.events.name, key=key, value=raw)
    producer.flush()
    producer.close()
    worker = cluster.start_worker(tmp_path / "worker.log")
    try:
        cluster.wait_consumed()
        assert worker.poll() is None, "the worker must survive bad input"
    finally:
        stop(worker)
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    con = duckdb.connect(str(db), read_only=True)
    reasons = sorted(r[0] for r in con.execute("SELECT reason FROM dead_letters").fetchall())
    stored = con.execute("SELECT count(*) FROM events").fetchone()[0]
    con.close()
    assert reasons == ["malformed_json", "schema_error", "unknown_event_type"]
    assert stored == len(set(good))


def test_publish_rejects_invalid_lines_to_the_dead_letter_topic(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = shift
    good = events.read_bytes().splitlines(keepends=True)[:50]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"".join([*good[:10], b"{not json\n", b'{"type": "Nope"}\n', *good[10:]]))
    out = cluster.cli("publish", str(path)).stdout
    assert "published 50 events" in out and "rejected: 2 lines" in out
    db = tmp_path / "p.duckdb"
    project_all(cluster, db)
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT position, reason FROM dead_letters ORDER BY position").fetchall()
    con.close()
    assert rows == [("line 11", "malformed_json"), ("line 12", "unknown_event_type")]


def test_replay_reads_a_table_from_the_events_topic_and_matches_the_store(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, replay_db = shift
    cluster.cli("publish", str(events))
    out = cluster.cli("replay", "--source", "kafka", "--table", "PGP-01", "--db", str(replay_db),
                      "--html", str(tmp_path / "incident.html")).stdout  # fmt: skip
    assert "replay matches the stored findings" in out
    assert (tmp_path / "incident.html").exists()


def test_the_projector_writes_scheduled_reports_from_its_own_connection(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = shift
    stream_file(cluster, events, tmp_path)
    reports = tmp_path / "periods"
    cluster.cli("project", "--db", str(tmp_path / "s.duckdb"), "--once", "--timeout", "120",
                "--report-every", "0 * * * *", "--reports", str(reports))  # fmt: skip
    periods = sorted(p.name for p in reports.iterdir())
    assert periods == ["2026-11-27T1800+0000_UTC"]
    summary = json.loads((reports / periods[0] / "rev-0001" / "summary.json").read_text())
    assert summary["findings"]["total"] > 0


def test_a_worker_stopped_while_it_holds_events_writes_their_states_and_exits_cleanly(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    """The states of held events are written at a clean stop, not only by the worker's timer
    (which a stopping worker ends first): the stop does not hang, and nothing is lost."""
    from kafka import KafkaConsumer, TopicPartition

    events, replay = shift
    cluster.cli("publish", str(events))
    log = tmp_path / "held.log"
    # the timer would write the states after a minute: every event applied is still held at the stop
    worker = cluster.start_worker(log, DEALTRAIL_WORKER__STATE_INTERVAL="60")
    rounds = cluster.settings().topics.rounds.name
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 120
        out = 0
        while time.monotonic() < deadline and out < 20 and worker.poll() is None:
            out = sum(consumer.end_offsets([TopicPartition(rounds, p) for p in range(cluster.partitions)]).values())
            time.sleep(0.5)
        assert out >= 20, f"the worker should have completed rounds:\n{log.read_text()}"
        assert cluster.consumed()[0] == 0, "nothing should be committed or in the changelog yet"
        started = time.monotonic()
        assert stop(worker, timeout=45) == 0, log.read_text()
        assert time.monotonic() - started < 30, "a clean stop should not wait for the state timer"
    finally:
        consumer.close()
        stop(worker)
    assert cluster.consumed()[0] > 0, "the stop should have written the held events' states"
    consume_all(cluster, tmp_path / "rest.log")
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    assert_stream_equals_replay(db, replay)
