"""What a worker needs to hold a table's state again after a restart or a rebalance (issue 37
item 4): the table entry goes to the changelog partition of the table's events (no broker, no
Faust run)."""

from __future__ import annotations

import asyncio
from typing import Any

from streams.worker import write_state


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
