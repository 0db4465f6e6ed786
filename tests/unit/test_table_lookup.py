"""Lookups by table on the events topic assume no partitioner, and a chain read from the topic
takes a producer's exact redeliveries as copies, not breaks (no broker)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from dealtrail.ingest.verify import check_chain
from streams.kafka import likely_partitions, partition_for


@pytest.mark.parametrize("partitions", [1, 4, 6, 12])
@pytest.mark.parametrize("table", ["C691-01", "BJ-02", "TCP-01", "ü-05"])
def test_every_partition_is_searched_once_murmur2_first_then_crc32(table: str, partitions: int) -> None:
    key = table.encode()
    order = likely_partitions(key, partitions)
    assert sorted(order) == list(range(partitions))
    assert order[0] == partition_for(key, partitions)
    assert order.index(zlib.crc32(key) % partitions) <= 1  # librdkafka's default partitioner


def test_the_third_candidate_is_saramas_fnv1a_partition() -> None:
    # FNV-1a 32 of "a" is 0xe40c292c (the published test vector): negative as Go's int32, so
    # Sarama's partition is |int32 % 7| = 6
    assert likely_partitions(b"a", 7)[:3] == [partition_for(b"a", 7), zlib.crc32(b"a") % 7, 6]


def test_librdkafkas_partition_of_c691_01_is_read_second_not_missed() -> None:
    # issue 37: on 6 partitions murmur2 expects C691-01 on 4, librdkafka put it on 3
    assert likely_partitions(b"C691-01", 6)[:2] == [4, 3]


def _trail(tmp_path: Path) -> list[tuple[str, str]]:
    from dealtrail.simulator.run import write_simulation

    path = tmp_path / "one.jsonl"
    write_simulation(path, tables=1, hours=0.3, seed=3, error_rate=0.0, duplicate_rate=0.0)
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return [(json.loads(line)["event_id"], line) for line in lines]


def test_an_exact_copy_on_the_topic_is_a_redelivery_not_a_chain_break(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    clean = check_chain("T", trail)
    assert clean.intact and clean.copies == 0
    again = [*trail[:20], trail[12], trail[19], *trail[20:]]
    report = check_chain("T", again)
    assert report.intact, report.first_break
    assert (report.copies, report.events, report.chained, report.head_hash) == (
        2,
        clean.events,
        clean.chained,
        clean.head_hash,
    )


def test_a_copy_with_other_content_still_breaks_the_chain(tmp_path: Path) -> None:
    trail = _trail(tmp_path)
    doc = json.loads(trail[12][1])
    doc["dealer_id"] = "D-OTHER" if doc.get("dealer_id") != "D-OTHER" else "D-X"
    forged = (trail[12][0], json.dumps(doc))
    report = check_chain("T", [*trail[:20], forged, *trail[20:]])
    assert not report.intact
