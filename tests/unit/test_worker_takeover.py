"""What a worker needs to hold a reorder window again after a restart or a rebalance (issue 37
item 4): the table entry goes to the changelog partition of the table's events, an entry that
holds events is known without decoding its state, and a stalled process waits before it trusts
the high watermarks it saw before the stall (no broker, no Faust run)."""

from __future__ import annotations

import asyncio
import json

from schemas.codec import decode
from streams.engine import apply
from streams.judge import STORED, Stored
from streams.worker import stalled, stored_holds, write_state
from tests.fuzz.test_hostile_input import CONFIG


def _state():  # type: ignore[no-untyped-def]
    state, _ = apply(None, decode(json.dumps(CONFIG).encode()))
    return state


class _Changelog:
    def get_topic_name(self) -> str:
        return "dealtrail-worker-table-states-changelog"


class _Table:
    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.changelog_topic = _Changelog()


class _Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes, int | None]] = []

    async def send_state(self, topic: str, key: bytes, value: bytes, partition: int | None) -> None:
        self.sent.append((topic, key, value, partition))


def test_a_table_entry_goes_to_the_changelog_partition_of_its_events_partition() -> None:
    # librdkafka's CRC32 put the table's events in partition 3; murmur2 of the key says another:
    # Faust restores the entry on the worker that owns changelog partition 3, the events' owner
    table, producer = _Table(), _Producer()
    asyncio.run(write_state(table, producer, b"C691-01", b"{}", 3))
    assert table.data[b"C691-01"] == b"{}"
    assert producer.sent[0] == ("dealtrail-worker-table-states-changelog", b"C691-01", b"{}", 3)
    asyncio.run(write_state(table, producer, b"C691-01", b"{}", None))
    assert producer.sent[1][3] is None, "no partition known: the key's"


def test_an_entry_that_holds_events_is_known_from_its_bytes_and_from_its_recovered_json() -> None:
    state = _state()
    empty = STORED.dump_json(Stored(7, state, partition=1))
    holding = STORED.dump_json(Stored(7, state, partition=1, held=((1, 9, b'{"seq": 12}'),)))
    assert not stored_holds(empty) and stored_holds(holding)
    assert not stored_holds(json.loads(empty)) and stored_holds(json.loads(holding))
    assert not stored_holds(None)


def test_a_timer_later_than_its_interval_plus_the_idle_time_means_the_process_stalled() -> None:
    assert not stalled(100.0, 101.0, 1.0, 5.0)
    assert not stalled(100.0, 106.0, 1.0, 5.0), "a loop held 6 s by a long batch is within bounds"
    assert stalled(100.0, 111.0, 1.0, 5.0), "SIGSTOP for 10 s"
