"""Publishing an event older than its table's last 256 compares it with the topic in bounded
memory (issue 37 item 4): the partition is read in chunks and only the records at the old
events' places are kept, however long the table's trail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import streams.publish as publish_module
from streams.kafka import read_range
from streams.publish import Publisher, PublishSummary, publish_file
from tests.kafka.conftest import Cluster

pytestmark = pytest.mark.kafka


def test_an_old_event_after_a_long_table_trail_is_compared_keeping_only_the_records_at_its_seq(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dealtrail.simulator.run import write_simulation

    trail = tmp_path / "trail.jsonl"
    write_simulation(trail, tables=1, hours=1.5, seed=5, error_rate=0.0, duplicate_rate=0.0)
    lines = [line for line in trail.read_bytes().splitlines() if line.strip()]
    assert len(lines) > 2_000, "a long trail of one table"
    s = cluster.settings()

    def publish(path: Path) -> PublishSummary:
        publisher = Publisher(s.kafka, s.topics)
        try:
            return publish_file(path, publisher, max_record_bytes=1024 * 1024)
        finally:
            publisher.close()

    assert publish(trail).sent == len(lines)
    digested: list[int] = []
    digest = publish_module._content_digest

    def counted(event):  # type: ignore[no-untyped-def]
        digested.append(event.seq)
        return digest(event)

    monkeypatch.setattr(publish_module, "_content_digest", counted)
    monkeypatch.setattr("streams.kafka.CHUNK_RECORDS", 100)  # many chunks over the trail
    old = json.loads(lines[10])
    changed = {**old, "occurred_at": old["occurred_at"][:19] + ".123456Z"}  # same seq and ID, other content
    again = tmp_path / "old.jsonl"
    again.write_bytes(lines[10] + b"\n" + lines[20] + b"\n" + json.dumps(changed).encode() + b"\n")

    summary = publish(again)

    assert summary.sent == 0 and summary.already_published == 2, summary
    assert dict(summary.rejected) == {"conflicts_with_published": 1}, summary
    # the old events themselves and the records at their seqs, not every record of the partition
    assert sorted(set(digested)) == sorted({old["seq"], json.loads(lines[20])["seq"]}), digested
    assert len(digested) <= 6, len(digested)
    dead = [
        json.loads(r.value)
        for p in range(s.topics.dead_letter.partitions)
        for r in read_range(s.kafka, s.topics.dead_letter.name, p, 0, None, None)
    ]
    assert [d["reason"] for d in dead] == ["conflicts_with_published"], dead
