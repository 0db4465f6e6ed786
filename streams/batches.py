"""Record batches the worker's consumer cannot read: found per batch, passed, and reported.

aiokafka (inside Faust) decompresses a record batch when its records are iterated; a batch that
fails there (corrupt, a codec the process cannot decompress) or fails its CRC raises out of the
fetcher, and Faust's consumer then stops for good. :func:`guard_aiokafka` makes such a batch a
skipped batch instead: the partition's position moves past it (its header, read without
decompressing, gives its offsets) and an :class:`UnreadableBatch` is queued for the worker to
dead-letter. Consumption of the partition goes on from the next batch.

kafka-python's consumers (the projector, and the one-shot readers of :mod:`streams.kafka`) raise
from ``poll`` at such a batch instead: :func:`unreadable_error` tells that error from an outage,
and :func:`find_unreadable` finds the batch's offsets with a :class:`Probe`, so that the reader
can seek past it. One definition for every reader.
"""

from __future__ import annotations

import collections
import contextlib
import time
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings


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

    def __next__(self) -> Any:
        # aiokafka reads a control batch's one record (a transaction's commit or abort marker)
        # with next() when it reads committed records only (_contains_abort_marker)
        if self._skipped:
            raise StopIteration
        return next(self._batch)

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


def unreadable_error(exc: BaseException) -> bool:
    """True if ``exc``, raised by a kafka-python poll, may come from a record batch the client
    cannot read (a CRC mismatch, a codec it lacks, a decompression or parse failure) rather than
    from the connection: kafka-python's ``CorruptRecordError`` and ``UnsupportedCodecError``, or
    an error of no Kafka kind (the codec libraries raise their own)."""
    from kafka.errors import CorruptRecordError, KafkaError, UnsupportedCodecError

    if isinstance(exc, CorruptRecordError | UnsupportedCodecError):
        return True
    return isinstance(exc, Exception) and not isinstance(exc, KafkaError)


PROBE_CLOSE_MS = 1_000
"""How long closing a probe's consumer may take (milliseconds)."""


class Probe:
    """A kafka-python consumer without a group that tells whether a partition reads from an offset.

    Args:
        kafka: the cluster settings.
    """

    def __init__(self, kafka: KafkaSettings) -> None:
        from kafka import KafkaConsumer

        from streams.kafka import consumer_config

        self.consumer = KafkaConsumer(
            **consumer_config(kafka, "dealtrail-batch-probe", one_shot=True), enable_auto_commit=False
        )

    def reads(self, tp: Any, offset: int, within: float = 5.0) -> bool:
        """True if a fetch of ``tp`` from ``offset`` returns records (or none within ``within``
        seconds); False if it fails as an unreadable batch does (:func:`unreadable_error`).

        Raises:
            kafka.errors.KafkaError: the fetch failed otherwise (the connection).
        """
        self.consumer.assign([tp])
        self.consumer.seek(tp, offset)
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                if self.consumer.poll(timeout_ms=500, max_records=1):
                    return True
            except Exception as exc:
                if unreadable_error(exc):
                    return False
                raise
        return True

    def close(self) -> None:
        """Close the probe's consumer."""
        with contextlib.suppress(Exception):
            self.consumer.close(autocommit=False, timeout_ms=PROBE_CLOSE_MS)


def find_unreadable(probe: Probe, tp: Any, start: int, end: int, exc: BaseException) -> UnreadableBatch | None:
    """The unreadable batch a kafka-python poll of ``tp`` from offset ``start`` failed on (``exc``).

    The batch's end is the first offset after ``start`` that reads (a binary search over
    ``start + 1 .. end``, a few fetches).

    Args:
        probe: the probe consumer that reads.
        tp: kafka-python ``TopicPartition``.
        start: the offset the failed poll read from (the consumer's position).
        end: the partition's end offset (exclusive).
        exc: the poll's error (its ``Type: message`` is the batch's error).

    Returns:
        The batch (``first`` = ``start``; read on from ``last + 1``), or None if the partition
        reads from ``start`` (the error was not a batch's).
    """
    if start >= end or probe.reads(tp, start):
        return None
    low, high = start + 1, end
    while low < high:
        mid = (low + high) // 2
        if probe.reads(tp, mid):
            high = mid
        else:
            low = mid + 1
    return UnreadableBatch(tp.topic, tp.partition, start, low - 1, f"{type(exc).__name__}: {exc}"[:500])
