"""Riding out a broker outage, without a broker: what the operator sees (one line lost, one back),
what ``/readyz`` says, and the worker's filter over the client's per-retry log lines."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from streams.link import Backoff, KafkaLink, quiet_clients
from streams.worker import QUIET_AFTER_ERROR, LinkWatch


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _link() -> tuple[KafkaLink, list[str], Clock]:
    lines: list[str] = []
    clock = Clock()
    return KafkaLink("k:9092", lines.append, clock), lines, clock


def test_a_lost_connection_is_one_line_and_its_return_one_more_however_many_retries_fail() -> None:
    link, lines, clock = _link()
    link.up()
    assert lines == [], "a first connection without waiting says nothing"
    for _ in range(50):
        clock.now += 1
        link.down(ConnectionRefusedError(111, "refused"))
    clock.now += 10
    link.up()
    link.up()
    assert len(lines) == 2, lines
    assert lines[0].startswith("lost the connection to Kafka at k:9092 (ConnectionRefusedError")
    assert lines[1] == "Kafka at k:9092 is back after 59 s; carrying on where it stopped"


def test_a_first_start_without_a_broker_says_once_that_it_waits_and_once_that_it_is_connected() -> None:
    link, lines, clock = _link()
    link.down("no broker answered")
    link.down("no broker answered")
    clock.now += 12
    link.up()
    assert lines[0].startswith("waiting for Kafka at k:9092 (no broker answered)")
    assert lines[1] == "connected to Kafka at k:9092 after waiting 12 s"
    assert len(lines) == 2


def test_readiness_needs_the_connection_and_a_lag_within_the_bound() -> None:
    link, _, clock = _link()
    assert not link.status().ready(60), "not ready before the lag is measured"
    link.up()
    link.lag(0, 0.0)
    assert link.status().ready(60)
    link.lag(500, 30.0)
    assert link.status().ready(60), "behind by 30 s, within the 60 s bound"
    clock.now += 31
    assert not link.status().ready(60), "the measure grows older: 61 s behind"
    link.lag(0, 0.0)
    link.down("gone")
    body = link.status().as_json(60)
    assert body["ready"] is False
    assert body["kafka"] == "disconnected"
    assert set(body) == {
        "ready", "kafka", "lag_messages", "lag_seconds", "max_lag_seconds", "down_seconds",
        "consumption_errors", "last_consumption_error", "host_clock",
    }  # fmt: skip


def test_the_backoff_doubles_up_to_its_cap_and_starts_again_after_a_success() -> None:
    b = Backoff(first=0.5, cap=5.0)
    assert [b.next() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    b.reset()
    assert b.next() == 0.5


def test_the_client_libraries_lines_are_held_back_only_inside_the_block() -> None:
    kafka_log = logging.getLogger("kafka.conn")
    with quiet_clients():
        assert not kafka_log.isEnabledFor(logging.ERROR)
    assert kafka_log.isEnabledFor(logging.ERROR)


def _record(message: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("aiokafka.client", level, __file__, 1, message, (), None)


def test_the_worker_drops_the_clients_retry_lines_and_says_once_that_kafka_is_away() -> None:
    link, lines, clock = _link()
    link.up()
    watch = LinkWatch(link, clock)
    assert watch.filter(_record("some other aiokafka warning", logging.WARNING)), "kept while connected"
    kept = [
        watch.filter(_record("Unable connect to node with id 1: [Errno 111] Connect call failed")) for _ in range(1000)
    ]
    assert not any(kept)
    assert not watch.filter(_record("Unable to update metadata from [1]"))
    assert not watch.filter(_record("anything else", logging.WARNING)), "all dropped while away"
    assert watch.filter(_record("fatal", logging.CRITICAL))
    assert len(lines) == 1 and lines[0].startswith("lost the connection to Kafka at k:9092 (Unable connect")
    assert not link.connected


def test_the_worker_says_kafka_is_back_once_it_accepts_connections_and_the_client_is_quiet() -> None:
    link, lines, clock = _link()
    link.up()
    watch = LinkWatch(link, clock)
    watch.filter(_record("Unable connect to node with id 1"))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    address = f"127.0.0.1:{server.getsockname()[1]}"
    try:
        asyncio.run(watch.probe(address))
        assert not link.connected, "the client logged an error just now: not yet"
        clock.now += QUIET_AFTER_ERROR
        asyncio.run(watch.probe(address))
        assert link.connected
    finally:
        server.close()
    assert len(lines) == 2 and lines[1].startswith("Kafka at k:9092 is back")
    asyncio.run(watch.probe(address))  # nothing listens now
    assert not link.connected


@pytest.mark.parametrize("message", ["Heartbeat failed for group g because it is rebalancing", "Joined group"])
def test_an_ordinary_client_warning_is_not_taken_for_an_outage(message: str) -> None:
    link, lines, clock = _link()
    link.up()
    assert LinkWatch(link, clock).filter(_record(message, logging.WARNING))
    assert link.connected and lines == []


def test_a_consumption_error_is_counted_apart_from_the_connection_and_says_no_line() -> None:
    said: list[str] = []
    link = KafkaLink("k:1", said.append)
    link.up()
    link.lag(0, 0.0)
    link.consumption_error("ns.dealing-events.v1[0]@5..44: CorruptRecordError")
    body = link.status().as_json(30.0)
    assert body["kafka"] == "connected" and body["ready"] is True
    assert body["consumption_errors"] == 1
    assert body["last_consumption_error"] == "ns.dealing-events.v1[0]@5..44: CorruptRecordError"
    assert said == [], "a batch that cannot be read is not an outage"


def test_a_batch_error_is_told_from_a_connection_error() -> None:
    from kafka.errors import CorruptRecordError, KafkaConnectionError, NodeNotReadyError, UnsupportedCodecError

    from streams.batches import unreadable_error

    assert unreadable_error(CorruptRecordError("crc")) and unreadable_error(UnsupportedCodecError("zstd"))
    assert unreadable_error(IndexError("bytearray index out of range"))  # a codec library's own
    assert not unreadable_error(KafkaConnectionError("refused")) and not unreadable_error(NodeNotReadyError())
