"""What a worker needs to hold a reorder window again after a restart or a rebalance (issue 37
item 4): the table entry goes to the changelog partition of the table's events, an entry that
holds events is known without decoding its state, and a stalled process waits before it trusts
the high watermarks it saw before the stall (no broker, no Faust run)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from schemas.codec import decode
from streams.engine import apply
from streams.judge import STORED, Stored
from streams.worker import stalled, stored_holds, write_state
from tests.fuzz.test_hostile_input import CONFIG


def _state():  # type: ignore[no-untyped-def]
    state, _ = apply(None, decode(json.dumps(CONFIG).encode()))
    return state


class _Changelog:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, **kwargs: Any) -> None:
        self.sent.append(kwargs)


class _Table:
    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.changelog_topic = _Changelog()


def test_a_table_entry_goes_to_the_changelog_partition_of_its_events_partition() -> None:
    # librdkafka's CRC32 put the table's events in partition 3; murmur2 of the key says another:
    # Faust restores the entry on the worker that owns changelog partition 3, the events' owner
    table = _Table()
    asyncio.run(write_state(table, b"C691-01", b"{}", 3))
    assert table.data[b"C691-01"] == b"{}"
    assert table.changelog_topic.sent[0]["partition"] == 3
    asyncio.run(write_state(table, b"C691-01", b"{}", None))
    assert table.changelog_topic.sent[1]["partition"] is None, "no partition known: the key's"


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
