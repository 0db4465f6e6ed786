"""The worker's consumer passes over a record batch it cannot read and queues it (no broker)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from streams.batches import UNREADABLE, UnreadableBatch, _GuardedRecords, guard_aiokafka


class _Batch:
    def __init__(self, base: int, after: int, records: list[int] | None, crc: bool = True) -> None:
        self.base_offset, self.next_offset, self._records, self._crc = base, after, records, crc
        self.is_control_batch = False

    def validate_crc(self) -> bool:
        return self._crc

    def __iter__(self) -> Any:
        if self._records is None:
            raise ValueError("incomplete frame")
        return iter(self._records)


class _Records:
    def __init__(self, batches: list[_Batch]) -> None:
        self._batches = batches

    def has_next(self) -> bool:
        return bool(self._batches)

    def next_batch(self) -> _Batch | None:
        return self._batches.pop(0) if self._batches else None


def test_a_batch_that_fails_to_decompress_yields_nothing_moves_the_offset_past_it_and_is_queued() -> None:
    UNREADABLE.clear()
    owner = SimpleNamespace(_tp=SimpleNamespace(topic="ns.dealing-events.v1", partition=2), next_fetch_offset=10)
    guarded = _GuardedRecords(_Records([_Batch(10, 50, None), _Batch(50, 52, [50, 51])]), owner)
    bad = guarded.next_batch()
    assert bad.validate_crc() and list(bad) == []
    assert owner.next_fetch_offset == 50
    assert list(guarded.next_batch()) == [50, 51]
    assert list(UNREADABLE) == [UnreadableBatch("ns.dealing-events.v1", 2, 10, 49, "ValueError: incomplete frame")]
    assert UNREADABLE[0].position == "ns.dealing-events.v1[2]@10..49"
    UNREADABLE.clear()


def test_a_batch_that_fails_its_crc_is_passed_over_too() -> None:
    UNREADABLE.clear()
    owner = SimpleNamespace(_tp=SimpleNamespace(topic="t", partition=0), next_fetch_offset=7)
    batch = _GuardedRecords(_Records([_Batch(7, 8, [7], crc=False)]), owner).next_batch()
    assert batch.validate_crc() and list(batch) == []
    assert owner.next_fetch_offset == 8 and UNREADABLE.popleft().position == "t[0]@7"


def test_guarding_aiokafka_twice_wraps_its_records_once() -> None:
    from aiokafka.consumer import fetcher

    guard_aiokafka()
    init = fetcher.PartitionRecords.__init__
    guard_aiokafka()
    assert fetcher.PartitionRecords.__init__ is init
