"""Transport metadata on the real broker: record keys against their events, the worker's data
folder, and what a second publish of the same file reports."""

from __future__ import annotations

import json
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from schemas.codec import decode
from streams.kafka import partition_for
from tests.kafka.conftest import Cluster, assert_stream_equals_replay, project_all, stop

pytestmark = pytest.mark.kafka


def _records(cluster: Cluster, partition: int) -> list[object]:
    from streams.kafka import read_range

    s = cluster.settings()
    return read_range(s.kafka, s.topics.events.name, partition, 0, None, None)


def _ends(cluster: Cluster) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    s = cluster.settings()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(s.topics.events.name, p) for p in range(cluster.partitions)]
        return {tp.partition: int(end) for tp, end in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


def test_a_record_keyed_otherwise_is_dead_lettered_as_key_mismatch_and_no_trail_breaks(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    from kafka import KafkaProducer

    events, replay = shift
    lines = [line for line in events.read_bytes().splitlines(keepends=True) if line.strip()]
    cut = len(lines) * 4 // 5
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(b"".join(lines[:cut]))
    second.write_bytes(b"".join(lines[cut:]))
    cluster.cli("publish", str(first))

    # table T, in partition p; a copy of its last event on the topic, keyed as another table and
    # put into another partition at an offset beyond every offset T's partition will reach: a
    # worker that compared offsets across partitions took it as T's position and skipped the rest
    # of T's trail as "redeliveries" (false DT-sequence-gap, findings the replay does not have)
    tables = sorted({decode(line).table_id for line in lines})
    table = tables[0]
    key = table.encode()
    p = partition_for(key, cluster.partitions)
    other_p = (p + 1) % cluster.partitions
    copy = [r for r in _records(cluster, p) if r.key == key][-1].value  # type: ignore[attr-defined]
    ends = _ends(cluster)
    copies = max(1, ends[p] + len(lines) - cut + 1 - ends[other_p])
    # and another table's event keyed as T (so in T's partition): not part of T's trail either
    stranger = next(line for line in lines[:cut] if decode(line).table_id != table)
    topic = cluster.settings().topics.events.name
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    try:
        for _ in range(copies):
            producer.send(topic, key=b"not-" + key, value=copy, partition=other_p)
        producer.send(topic, key=key, value=stranger.rstrip(b"\n"))
        producer.flush()
    finally:
        producer.close()

    worker = cluster.start_worker(tmp_path / "worker.log")
    try:
        cluster.wait_consumed(timeout=180)
        cluster.cli("publish", str(second))
        cluster.wait_consumed(timeout=180)
    finally:
        assert stop(worker) == 0, (tmp_path / "worker.log").read_text()
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)

    con = duckdb.connect(str(db), read_only=True)
    try:
        mismatched = con.execute(
            "SELECT position, detail FROM dead_letters WHERE reason = 'key_mismatch' ORDER BY position"
        ).fetchall()
    finally:
        con.close()
    assert len(mismatched) == copies + 1, mismatched[:3]
    assert all("not its event's table_id" in detail for _, detail in mismatched), mismatched[:3]
    assert sum(f"[{other_p}]@" in position for position, _ in mismatched) == copies
    # the stream's findings, events and rounds are the embedded audit's: no false gap or chain break
    assert_stream_equals_replay(db, replay)
    # and `dealtrail replay` agrees with the stored findings, from the store and from the topic
    for source in ("db", "kafka"):
        out = cluster.cli("replay", "--table", table, "--db", str(db), "--source", source).stdout
        assert "replay matches the stored findings" in " ".join(out.split()), out
    # and the chain read from the topic is the audit's (the simulator's lost events break some
    # chains: then both break at the same event)
    from_topic = _verify(cluster, "--source", "kafka", "--table", table)
    assert from_topic == _verify(cluster, "--db", str(replay), "--table", table), from_topic


def _verify(cluster: Cluster, *args: str) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "dealtrail.cli", "verify", *args],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode in (0, 4), proc.stderr
    return proc.returncode, " ".join(proc.stdout.split())


def test_the_workers_data_folder_is_owner_only_and_removed_after_a_clean_stop(cluster: Cluster, tmp_path: Path) -> None:
    home = tmp_path / "state" / "faust"
    log = tmp_path / "worker.log"
    with log.open("ab") as fh:
        worker = subprocess.Popen(
            [sys.executable, "-m", "dealtrail.cli", "worker"],
            env={**cluster.env, "DEALTRAIL_WORKER__DATADIR": str(home)},
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            umask=0,
        )
    mine = home / f"{cluster.settings().topics.app_id}-{worker.pid}"
    try:
        deadline = time.monotonic() + 60
        while not mine.exists() and time.monotonic() < deadline and worker.poll() is None:
            time.sleep(0.2)
        assert mine.is_dir(), log.read_text()
        cluster.cli("publish", str(_one_table(tmp_path)))
        cluster.wait_consumed(timeout=120)
        for folder in (home, mine, *(p for p in mine.rglob("*") if p.is_dir())):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
        assert list(home.iterdir()) == [mine]
    finally:
        assert stop(worker, signal.SIGTERM) == 0, log.read_text()
    assert not mine.exists(), "the worker's data folder is removed after a clean stop"
    assert home.is_dir() and stat.S_IMODE(home.stat().st_mode) == 0o700


def _one_table(tmp_path: Path) -> Path:
    from dealtrail.simulator.run import write_simulation

    path = tmp_path / "one.jsonl"
    write_simulation(path, tables=1, hours=0.1, seed=5, error_rate=0.0, duplicate_rate=0.0)
    return path


def test_a_second_publish_of_the_same_file_counts_what_is_already_on_the_topic(
    cluster: Cluster, shift: tuple[Path, Path]
) -> None:
    events, _ = shift
    lines = [line for line in events.read_bytes().splitlines() if line.strip()]
    distinct = len({json.loads(line)["event_id"] for line in lines})
    first = " ".join(cluster.cli("publish", str(events)).stdout.split())
    sent = int(re.search(r"published ([\d,]+) events", first).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert sent == distinct, first
    again = " ".join(cluster.cli("publish", str(events)).stdout.split())
    found = re.search(
        r"published 0 events to \S+ already on the topic, not sent again: ([\d,]+) \(([\d,]+) exact copies of "
        r"recent events; ([\d,]+) already_published, .*\) rejected: 0 lines",
        again,
    )
    assert found, again
    total, copies, already = (int(g.replace(",", "")) for g in found.groups())
    assert total == copies + already == len(lines), again
    assert already > 0 and copies > 0, "the shift has more than 256 events per table: both kinds occur"
