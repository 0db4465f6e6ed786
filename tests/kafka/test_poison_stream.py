"""No poison record through the stream (issue 19 item 3): the bad-record kinds of the issue
mixed into a simulated shift go through ``publish``, the worker and the projector, each process
started once and never restarted. Each bad record is dead-lettered with its own reason (by the
publisher, and by the worker for a copy sent straight to the events topic), every other event
is stored, and the findings equal the embedded audit of the shift alone."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.kafka.conftest import Cluster, count_rows, describe_findings, findings_of, stop

pytestmark = pytest.mark.kafka


def _unchained(doc: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = {k: v for k, v in doc.items() if k not in ("prev_hash", "hash")}
    out.update(changes)
    return out


def bad_records(lines: list[bytes]) -> list[tuple[int, bytes, str]]:
    """The issue's kinds of bad record, each made from a real line of the shift: (index of the
    line it goes before, record, expected reason)."""
    docs = [json.loads(line) for line in lines]

    def first(kind: str, after: int) -> int:
        return next(i for i, d in enumerate(docs) if d["type"] == kind and i > after)

    third = len(docs) // 3
    out: list[tuple[int, bytes, str]] = []
    i = first("RoundStarted", third)
    out.append((i, json.dumps(_unchained(docs[i], event_id="BAD-ROUND", round_no=2**31)).encode(), "out_of_bounds"))
    i = third + 7
    out.append((i, json.dumps(_unchained(docs[i], event_id="BAD-SEQ", seq=2**62)).encode(), "implausible_seq_jump"))
    i = third + 21
    year = _unchained(docs[i], event_id="BAD-YEAR", occurred_at="0001-01-01T00:00:00Z")
    out.append((i, json.dumps(year).encode(), "out_of_bounds"))
    i = third + 40
    text = json.dumps(_unchained(docs[i], event_id="BAD-DUP"))
    out.append((i, (text[:-1] + f', "seq": {docs[i]["seq"] + 1}}}').encode(), "malformed_json"))
    i = third + 55
    text = json.dumps(_unchained(docs[i], event_id="BAD-DEEP"))
    out.append((i, (text[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}").encode(), "malformed_json"))
    i = first("WagerPlaced", third)
    out.append((i, json.dumps(_unchained(docs[i], event_id="BAD-AMOUNT", amount=10**15)).encode(), "out_of_bounds"))
    i = third + 80
    skew = _unchained(docs[i], event_id="BAD-SKEW", recorded_at="2026-11-27T01:00:00Z")
    out.append((i, json.dumps(skew).encode(), "implausible_clock_skew"))
    return out


def _group_done(cluster: Cluster, group: str, topics: list[str]) -> bool:
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="dealtrail-test")
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    try:
        committed = admin.list_group_offsets(group).get(group, {})
        tps = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        ends = consumer.end_offsets(tps)
        return all((committed[tp].offset if tp in committed else 0) >= ends[tp] for tp in tps)
    finally:
        consumer.close()
        admin.close()


def test_the_issues_bad_records_through_publish_worker_and_projector_with_no_restart(
    cluster: Cluster, tmp_path: Path
) -> None:
    from kafka import KafkaProducer

    from dealtrail.ingest.audit import audit_file
    from dealtrail.simulator.run import write_simulation
    from projections.store.store import Store

    shift = tmp_path / "shift.jsonl"
    write_simulation(shift, tables=3, hours=0.3, seed=17, error_rate=0.25, duplicate_rate=0.0)
    lines = shift.read_bytes().splitlines()
    alone = tmp_path / "alone.duckdb"
    with Store(alone) as store:
        audit_file(shift, store, workers=1, limits=cluster.settings().plausibility)
    bad = bad_records(lines)
    mixed: list[bytes] = []
    at = {i: [b for b in bad if b[0] == i] for i in {b[0] for b in bad}}
    for i, line in enumerate(lines):
        mixed += [b[1] for b in at.get(i, [])]
        mixed.append(line)
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(mixed) + b"\n")

    db = tmp_path / "stream.duckdb"
    worker = cluster.start_worker(tmp_path / "worker.log")
    projector = cluster.start(tmp_path / "projector.log", "project", "--db", str(db))
    try:
        cluster.cli("publish", str(path))
        # the same records straight onto the events topic, as a producer without dealtrail's checks would
        s = cluster.settings()
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        table = {b[1]: json.loads(lines[b[0]])["table_id"].encode() for b in bad}
        for _, record, _ in bad:
            producer.send(s.topics.events.name, key=table[record], value=record)
        producer.flush()
        producer.close()
        cluster.wait_consumed(timeout=240)
        topics = [s.topics.events.name, s.topics.findings.name, s.topics.rounds.name, s.topics.dead_letter.name]
        deadline = time.monotonic() + 120
        while not _group_done(cluster, s.topics.projector_group, topics):
            assert time.monotonic() < deadline, (tmp_path / "projector.log").read_text()
            time.sleep(1)
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()
        assert projector.poll() is None, (tmp_path / "projector.log").read_text()
    finally:
        stop(projector, signal.SIGINT)
        assert stop(worker) == 0, (tmp_path / "worker.log").read_text()

    con = duckdb.connect(str(db), read_only=True)
    try:
        dead = con.execute("SELECT source, reason, raw FROM dead_letters").fetchall()
    finally:
        con.close()
    by_publisher = sorted(r for src, r, _ in dead if src == str(path))
    by_worker = sorted(r for src, r, _ in dead if src == s.topics.events.name)
    assert by_publisher == sorted(b[2] for b in bad)
    assert by_worker == sorted(b[2] for b in bad)
    stream, expected = findings_of(db), findings_of(alone)
    assert stream == expected, (describe_findings(alone, expected - stream), describe_findings(db, stream - expected))
    assert count_rows(db, "events") == count_rows(alone, "events")
    assert count_rows(db, "rounds") == count_rows(alone, "rounds")
