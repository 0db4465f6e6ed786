"""Record batches the worker's consumer cannot read: found per batch, passed, and reported.

aiokafka (inside Faust) decompresses a record batch when its records are iterated; a batch that
fails there (corrupt, a codec the process cannot decompress) or fails its CRC raises out of the
fetcher, and Faust's consumer then stops for good. :func:`guard_aiokafka` makes such a batch a
skipped batch instead: the partition's position moves past it (its header, read without
decompressing, gives its offsets) and an :class:`UnreadableBatch` is queued for the worker to
dead-letter. Consumption of the partition goes on from the next batch.
"""

from __future__ import annotations

import collections
from typing import Any, NamedTuple


class UnreadableBatch(NamedTuple):
    """A record batch that could not be read.

    Attributes:
        topic: its topic.
        partition: its partition.
        first: its first offset.
        last: its last offset.
        error: the error, as ``Type: message``.
    """

    topic: str
    partition: int
    first: int
    last: int
    error: str

    @property
    def position(self) -> str:
        """``topic[partition]@first..last`` (``@first`` for a batch of one offset)."""
        span = f"{self.first}..{self.last}" if self.last > self.first else f"{self.first}"
        return f"{self.topic}[{self.partition}]@{span}"


UNREADABLE: collections.deque[UnreadableBatch] = collections.deque()
"""Batches passed over by the guarded consumer, oldest first (appended by the consumer's thread,
taken by the worker's; a deque's append and popleft are thread-safe)."""


class _GuardedBatch:
    """A record batch whose records are read (decompressed) at once: on failure it yields none,
    moves its partition's fetch offset past it and queues an :class:`UnreadableBatch`."""

    def __init__(self, batch: Any, owner: Any) -> None:
        self._batch, self._owner = batch, owner
        self._skipped = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._batch, name)

    def _skip(self, exc: BaseException) -> None:
        self._skipped = True
        tp = self._owner._tp
        first, after = int(self._batch.base_offset), int(self._batch.next_offset)
        self._owner.next_fetch_offset = max(self._owner.next_fetch_offset, after)
        error = f"{type(exc).__name__}: {exc}"[:500]
        UNREADABLE.append(UnreadableBatch(tp.topic, tp.partition, first, after - 1, error))

    def validate_crc(self) -> bool:
        if not self._batch.validate_crc():
            self._skip(ValueError("the record batch fails its CRC check"))
        return True

    def __iter__(self) -> Any:
        if self._skipped:
            return iter(())
        try:
            records = list(self._batch)
        except Exception as exc:  # a codec library raises its own kinds
            self._skip(exc)
            return iter(())
        return iter(records)


class _GuardedRecords:
    def __init__(self, records: Any, owner: Any) -> None:
        self._records, self._owner = records, owner

    def has_next(self) -> bool:
        return bool(self._records.has_next())

    def next_batch(self) -> Any:
        batch = self._records.next_batch()
        return None if batch is None else _GuardedBatch(batch, self._owner)


def guard_aiokafka() -> collections.deque[UnreadableBatch]:
    """Make aiokafka's consumer pass over a record batch it cannot read instead of raising
    (idempotent; patches ``aiokafka.consumer.fetcher.PartitionRecords`` of this process).

    Returns:
        The queue of the batches passed over (:data:`UNREADABLE`).
    """
    from aiokafka.consumer import fetcher

    cls: Any = fetcher.PartitionRecords
    if getattr(cls, "_dealtrail_guarded", False):
        return UNREADABLE
    original = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._records = _GuardedRecords(self._records, self)  # read by the generator's first step

    cls.__init__ = __init__
    cls._dealtrail_guarded = True
    return UNREADABLE
