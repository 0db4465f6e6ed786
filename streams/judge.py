"""The worker's judging: each table's reorder window, duplicate index and engine state, in a
process of its own.

The Faust worker (:mod:`streams.worker`) keeps the Kafka side: the consumer, the producer, the
table of states and its changelog, the rebalance hooks and the acknowledgements. Everything it
does per event that needs no Kafka client of Faust's (decode, the key check, the reorder window,
the duplicate index, the engine, snapshots, the outbox of a state loaded again) is done here, by
one :class:`Judge` in one child process fed with batches of raw records
(:class:`JudgeProcess`). The worker's event loop then does little more than a bare agent does,
while the child judges the batch before: measured with ``make bench-stream`` (issue 37), the
judging took about half of the worker's time per event when it ran on the agent's loop.

A :class:`Judge` is called in the order the worker calls it (one child process, one queue), so
it sees the batches, the timer's ticks and the rebalance hooks in the order they happened. What
it decides comes back as an :class:`Outcome`: the records to send (in order), the table entries
to write, and whether the events handed over so far may be acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import json
import logging
import pickle
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import TypeAdapter

from schemas import events as ev
from schemas.codec import DecodeError, decode, encode
from schemas.snapshots import TableSnapshot
from streams.clock import HostClockCheck, IntakeClock, record_time
from streams.engine import EventRejected, TableState, apply, check_plausible
from streams.engine.catalog import ENGINE_VERSION, RULEBOOK_REVISION
from streams.engine.reorder import TableWindow
from streams.engine.round_rows import round_row
from streams.engine.state import dump_state
from streams.kafka import key_mismatch, read_range, unreachable_errors
from streams.link import Backoff
from streams.publish import dead_letter_value
from streams.seen import SeenIndex

if TYPE_CHECKING:
    from dealtrail.settings import Settings

FINDING, ROUND, SNAPSHOT, DEAD_LETTER, FORGET = "finding", "round", "snapshot", "dead_letter", "forget"
"""The kinds of :attr:`Outcome.actions`: a record for the findings, rounds, snapshots or
dead-letter topic, or ``forget``: drop what the outbox tracks for the table (its entry was just
loaded again, and its undelivered findings and rounds follow as sends)."""


class Taken(NamedTuple):
    """A message taken into a table's reorder window (the fields of a Kafka record the worker
    reads when it applies it)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp: int | None = None
    """The record's timestamp (ms since the epoch; None if not known): what ``recorded_in_future``
    is judged against (:meth:`streams.clock.IntakeClock.check`)."""


@dataclass(frozen=True)
class Stored:
    """A Faust table entry: a table's engine state, the offset of the last message applied,
    and the outbox: the findings and rounds of this table not yet known to be delivered.

    Messages of a table in ``partition`` at or below ``offset`` are redeliveries and are
    skipped, so at-least-once delivery never applies an event twice; offsets of other partitions
    are never compared with it (see :class:`Applied`). An entry written before the partition was
    kept (``partition`` None) is taken to be of the partition of the message it is compared
    with. Because a skipped message does not produce its findings again, the entry keeps every
    finding and round row whose delivery was not confirmed when the entry was written: a
    worker that loads an entry from the table (after a restart or a rebalance) sends its outbox
    again, so a crash between writing the state and delivering the findings loses nothing; the
    copies are absorbed downstream (deterministic finding IDs, rounds deduplicated on the
    completing event). ``unfit`` is set once an event of the table came out of seq order: its
    state may then differ from a replay's (which applies the trail in seq order), so the table
    gets no more snapshots (``streams.worker.snapshot_value``).

    ``held`` is what the table's reorder window holds (:mod:`streams.engine.reorder`): the
    ``(partition, offset, value)`` of each message taken and not applied yet, in the order the
    window releases them. ``offset`` is that of the last message *taken* (applied or held), so
    a held message is never redelivered into the window twice, and it is kept here, with the
    state, until it is applied: the offset the worker commits never passes a message that is
    neither applied in ``state`` nor held here (a crash loses none: the next message of the
    table, after a restart or on the worker that takes the partition over, finds them here).
    A clean stop and a rebalance write the states with what the windows hold and apply none
    of it (a stream has no end of file): the worker that owns the partition next (this one
    after a restart) holds them again as soon as its table entries are restored, and applies
    them as the audit would, when the missing events arrive or the partition is read to its
    end and idle.
    """

    offset: int
    state: TableState
    findings: tuple[bytes, ...] = ()
    rounds: tuple[bytes, ...] = ()
    partition: int | None = None
    unfit: bool = False
    held: tuple[tuple[int, int, bytes], ...] = ()


STORED = TypeAdapter(Stored)
_STATE = TypeAdapter(TableState)
_VALUES = TypeAdapter(tuple[bytes, ...])
_HELD = TypeAdapter(tuple[tuple[int, int, bytes], ...])
_PARTITION = TypeAdapter(int | None)


def stored_json(
    offset: int,
    state_json: bytes,
    findings: tuple[bytes, ...],
    rounds: tuple[bytes, ...],
    partition: int | None,
    unfit: bool,
    held: tuple[tuple[int, int, bytes], ...],
) -> bytes:
    """The JSON of a :class:`Stored` entry from its parts, the state already JSON
    (``state_json``, as :data:`STORED` writes a state): byte for byte what
    ``STORED.dump_json(Stored(...))`` gives, without the state crossing from the judge process
    to the worker's as an object."""
    return b"".join(
        (
            b'{"offset":',
            str(int(offset)).encode(),
            b',"state":',
            state_json,
            b',"findings":',
            _VALUES.dump_json(findings),
            b',"rounds":',
            _VALUES.dump_json(rounds),
            b',"partition":',
            _PARTITION.dump_json(partition),
            b',"unfit":',
            b"true" if unfit else b"false",
            b',"held":',
            _HELD.dump_json(held),
            b"}",
        )
    )


class Applied(NamedTuple):
    """Where a table stands in the worker: the partition and offset of the last message applied
    (``partition`` None for an entry stored before partitions were kept), the engine state, and
    whether the table is unfit for snapshots (see :class:`Stored`)."""

    partition: int | None
    offset: int
    state: TableState
    unfit: bool = False

    def same_partition(self, partition: int) -> bool:
        """True if ``offset`` is an offset of ``partition`` (an entry without one is assumed to be)."""
        return self.partition is None or self.partition == partition

    def holds(self, partition: int, offset: int) -> bool:
        """True if the message at ``offset`` of ``partition`` is a redelivery of one already applied:
        only an offset of the same partition is compared (a table's messages can sit in another
        partition after the topic grew, or when a producer chose the partition itself)."""
        return self.same_partition(partition) and offset <= self.offset


class DeliveredRuns:
    """Per partition, the run of consecutive offsets a consumer delivered last.

    A consumer can pass over messages around a rebalance (Faust can drop the messages it
    prefetched and go on fetching past them, and a batch taken before the rebalance may still be
    applied after it), and not necessarily at the first message of a table after the
    assignment. Inside a run every offset was delivered, so a seq jump of a table whose last
    taken offset lies inside the run is the trail's own (the engine reports the gap); one whose
    last taken offset lies before the run may have lost messages in between, and the worker
    reads that range again before it judges the jump.
    """

    def __init__(self) -> None:
        self._runs: dict[int, tuple[int, int]] = {}

    def note(self, partition: int, offset: int) -> int:
        """Note that ``offset`` of ``partition`` was delivered; returns the first offset of the
        run of consecutive offsets it belongs to (a new run starts at any jump, back or forward)."""
        run = self._runs.get(partition)
        start = run[0] if run is not None and offset == run[1] + 1 else offset
        self._runs[partition] = (start, offset)
        return start

    def clear(self) -> None:
        """Forget every run (a rebalance: the consumer may resume anywhere)."""
        self._runs.clear()


@dataclass
class Outcome:
    """What one call of a :class:`Judge` decided, for the worker to carry out in order.

    Attributes:
        actions: ``(kind, key, value)`` in the order they were decided: ``kind`` one of
            :data:`FINDING`, :data:`ROUND`, :data:`SNAPSHOT`, :data:`DEAD_LETTER` (``key`` the
            record's Kafka key, ``value`` its bytes) or :data:`FORGET` (``value`` empty).
        writes: the table entries to write, each ``(key, partition, offset, state_json, unfit,
            held)`` (see :func:`stored_json`; the worker adds its outbox).
        wrote: True if every event handed over so far is in a written entry (once ``writes``
            are written, they may be acknowledged).
        loaded: the tables whose table value, handed over with this call, the judge now holds
            (decoded, or known to be absent).
        applied: events applied by the engine in this call.
        findings: findings sent in this call.
        dead_letters: records dead-lettered in this call.
        lines: ``(level, message, lifecycle)`` log lines for the worker's log (``lifecycle``:
            one of the lines shown at every log level, ``streams.worker.says``).
        held: events the reorder windows of every table hold after this call (the worker's
            ``dealtrail_reorder_window_events`` metric).
    """

    actions: list[tuple[str, bytes | None, bytes]] = field(default_factory=list)
    writes: list[tuple[bytes, int | None, int, bytes, bool, tuple[tuple[int, int, bytes], ...]]] = field(
        default_factory=list
    )
    wrote: bool = False
    loaded: list[bytes] = field(default_factory=list)
    applied: int = 0
    findings: int = 0
    dead_letters: int = 0
    lines: list[tuple[int, str, bool]] = field(default_factory=list)
    held: int = 0


def snapshot_due(before: TableState | None, after: TableState, every: int) -> bool:
    """True if the table's seq crossed a multiple of ``every`` with this event: the worker
    keeps a snapshot of a table every ``every`` seqs (``settings.snapshot_every``), at the
    same points whichever worker applies the event and however often it is redelivered."""
    return after.last_seq // every > (before.last_seq if before is not None else 0) // every


UNREACHED_QUIET_S = 30.0
"""Seconds a table's partition must stay quiet for its reorder window to be applied although the
agent has not taken every offset up to the consumer's high watermark: offsets no message is
delivered for (a transactional producer's commit markers, a compacted record) never count as
taken, so without this bound such a partition's window would wait for the next stop or rebalance.
A worker queue stalled this long is not "loaded" but stopped."""


def read_up_to(taken_next: int | None, highwater: int | None, passed: Iterable[tuple[int, int]]) -> bool:
    """Whether a worker has taken every message of a partition that its consumer knows of.

    Args:
        taken_next: the offset after the last message the agent took on the partition (None:
            none taken yet).
        highwater: the partition's high watermark as the consumer last saw it (the offset after
            its last record; None: not known yet, e.g. before the first fetch).
        passed: ``(first, last)`` offsets of the record batches passed over there as unreadable
            (never taken by the agent, but read past).

    Returns:
        True if nothing more is queued for the agent on the partition (or the mark is not known:
        the wall-clock rule alone then decides), False while messages up to the mark wait.
    """
    if highwater is None:
        return True
    position = taken_next or 0
    for first, last in sorted(passed):
        if first <= position:
            position = max(position, last + 1)
    return position >= highwater


def window_due(quiet: float, idle: float, reached: Callable[[int], bool], partition: int) -> bool:
    """Whether the state-write timer applies a table's reorder window (rulebook 10.1.2).

    Args:
        quiet: seconds since a message of the table or of its partition was last taken.
        idle: ``reorder.idle``, seconds.
        reached: :func:`read_up_to` of a partition, as the worker knows it (asked only when
            ``quiet`` is between ``idle`` and :data:`UNREACHED_QUIET_S`).
        partition: the table's partition.

    Returns:
        True once the table has been quiet ``idle`` s and its partition is read up to the
        consumer's high watermark, or quiet :data:`UNREACHED_QUIET_S` s whatever the mark.
    """
    if quiet < idle:
        return False
    return quiet >= UNREACHED_QUIET_S or reached(partition)


def round_json(row: dict[str, Any]) -> bytes:
    """A ``rounds`` row as JSON bytes (timestamps in ISO 8601)."""
    return json.dumps({k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}).encode()


def snapshot_value(state: TableState, occurred_at: datetime, partition: int, offset: int) -> bytes:
    """The snapshots-topic record (JSON :class:`~schemas.snapshots.TableSnapshot`) of ``state``,
    the state after its last event, which happened at ``occurred_at``, made when the worker had
    taken the table's messages of ``partition`` of the events topic up to ``offset`` (the event's
    own, or a later one whose arrival released it from the reorder window): the state holds
    exactly the table's events of that partition at or below ``offset`` with a seq at or below
    its ``last_seq``. The same state JSON, SHA-256 and engine tags as the embedded audit's
    ``table_snapshots`` rows (``projections.store.store.snapshot_row``)."""
    text = dump_state(state)
    return (
        TableSnapshot(
            table_id=state.table_id,
            last_seq=state.last_seq,
            last_event_id=state.last_event_id or "",
            last_hash=state.last_hash,
            last_occurred_at=occurred_at,
            engine_version=ENGINE_VERSION,
            rulebook_revision=RULEBOOK_REVISION,
            state_sha256=hashlib.sha256(text.encode()).hexdigest(),
            state=text,
            partition=partition,
            offset=offset,
        )
        .model_dump_json()
        .encode()
    )


GC_FIRST_GENERATION = 10_000
"""Allocations (less deallocations) of container objects between two collections of the
youngest generation by Python's cyclic garbage collector in the worker (Python's default: 700)."""


def settle_heap() -> None:
    """Take every object made so far (the modules imported, the settings, the Faust app) out of
    the cyclic garbage collector's generations (:func:`gc.freeze`) and collect the youngest
    generation every :data:`GC_FIRST_GENERATION` allocations instead of 700
    (:func:`gc.set_threshold`; the older generations' thresholds are kept).

    Measured in the worker over 100,000 events (``gc.callbacks``, 2026-12-04): the collector
    took 0.80 to 1.04 s with Python's defaults (861 collections, 7 of them full, each full one
    walking the 110,000 objects of the imports and the app) and 0.18 to 0.20 s after this call,
    about 7 us of the worker's 150 us per event. Objects made later are still collected, in fewer
    and larger passes; a cycle among the frozen objects is never collected (they are the
    modules and the app, which live as long as the process).
    """
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_FIRST_GENERATION, older, oldest)


_ABSENT = object()
"""A table whose value was not handed over (the judge's own entry for it stands)."""


class Judge:
    """The per-table work of one worker (the rulebook's reorder window, 10.1.2; the duplicate
    index; the engine; plausibility on arrival, 10.3.4), without Kafka's consumer or producer.

    Calls come in the order the worker makes them; each returns an :class:`Outcome`. Reading a
    partition again (a seq jump after the consumer passed over messages, a duplicate of an event
    judged by another worker) is done here with a Kafka client of its own (blocking, waiting out
    an outage with a capped backoff).

    Args:
        settings: the resolved settings (topics, plausibility and reorder limits, Kafka,
            ``snapshot_every``, ``max_record_bytes``, ``reorder.idle``).
        clock: the intake's clock (picklable; see :class:`streams.clock.IntakeClock`).
        datadir: the worker's private data folder (the duplicate index spills there).
    """

    def __init__(
        self,
        settings: Settings,
        clock: Callable[[], datetime],
        datadir: Path,
    ) -> None:
        self.settings = settings
        self.source = settings.topics.events.name
        self.limits = settings.plausibility
        self.intake = IntakeClock(self.limits, clock)
        self.clock = clock
        self.host_clock = HostClockCheck(self.limits.max_clock_skew)
        self.clock_last: dict[int, tuple[int, datetime, datetime]] = {}  # partition -> last record taken
        self.window_limits = settings.reorder.limits
        self.windows: dict[bytes, TableWindow[tuple[Taken, ev.DealingEvent]]] = {}
        self.entries: dict[bytes, Stored] = {}  # the entry last loaded or written, by table
        self.live: dict[bytes, Applied | None] = {}  # tables changed since their entries were written
        self.last_taken: dict[bytes, float] = {}
        self.partition_taken: dict[int, float] = {}
        self.table_partition: dict[bytes, int] = {}
        self.partition_next: dict[int, int] = {}
        self.passed: dict[int, list[tuple[int, int]]] = {}
        self.runs = DeliveredRuns()
        self.unverified: dict[bytes, tuple[int, int]] = {}
        self.seen = SeenIndex(datadir)
        self.read_back: set[bytes] = set()
        self.duplicates = 0
        self.reported = 0
        self.running_since = time.monotonic()
        self.marks: dict[int, tuple[int | None, int | None]] = {}
        self.given: dict[bytes, bytes | dict[str, Any] | None] = {}
        self.out = Outcome()
        self.number, self.carried = 0, -1
        self.written_at: dict[bytes, int] = {}  # table -> the call that last handed its entry over

    # -- calls from the worker ------------------------------------------------------------
    def begin(self, number: int, carried: int) -> None:
        """Called before each call: ``number`` is the call's (the worker numbers its calls from
        0), ``carried`` that of the last call whose outcome the worker had carried out when it
        made this one. A table value handed over with this call is older than an entry this
        judge handed over in a call after ``carried`` (the worker had not written it yet), and is
        not loaded then."""
        self.number, self.carried = number, carried

    def batch(
        self,
        records: list[tuple[int, int, bytes | None, bytes, int | None]],
        given: dict[bytes, bytes | dict[str, Any] | None],
        write: bool,
    ) -> Outcome:
        """Take a batch of the events topic's messages, ``(partition, offset, key, value,
        timestamp)`` (the record's timestamp in ms, None if unknown) in the order the consumer
        delivered them; ``given``: the Faust table's current value of
        each table of the batch that the judge may not hold (see :meth:`load`); ``write``: write
        the states changed (the worker's ``state_interval`` is over, or it is draining)."""
        self.out, self.given = Outcome(), given
        for partition, offset, key, value, timestamp in records:
            self._watch_clock(partition, offset, timestamp)
            self._take_message(Taken(self.source, partition, offset, key, value, timestamp))
        if write:
            self._write_states()
        return self._done()

    def tick(
        self,
        marks: dict[int, tuple[int | None, int | None]],
        passed: list[tuple[int, int, int]],
        running_since: float,
        release: bool,
    ) -> Outcome:
        """The worker's state timer: apply the windows due (``release``: not while draining) and
        write the states changed.

        Args:
            marks: per events partition assigned, ``(high watermark, committed offset)`` as the
                consumer knows them (either None if not known).
            passed: ``(partition, first, last)`` of the record batches passed over as unreadable
                since the last tick.
            running_since: monotonic seconds since which the process has run without a stall.
            release: False while a stop or a rebalance drains (the windows are stored, not applied).
        """
        self.out, self.given = Outcome(), {}
        self.marks, self.running_since = marks, running_since
        for partition, (offset, stamped, host) in list(self.clock_last.items()):
            mark = marks.get(partition, (None, None))[0]
            if mark is not None and offset + 1 >= mark:  # it was the partition's newest record
                del self.clock_last[partition]
                self._clock_line(self.host_clock.observe(host, stamped, True))
        for partition, first, last in passed:
            self.passed.setdefault(partition, []).append((first, last))
        if release and self.windows:
            self._release_idle(time.monotonic())
        self._write_states()
        return self._done()

    def due(self) -> list[bytes]:
        """The tables whose windows hold events (the worker hands their table values with the
        next :meth:`tick`)."""
        return [k for k, w in self.windows.items() if len(w)]

    def write(self) -> Outcome:
        """Write the states changed (a stop or a rebalance drains)."""
        self.out, self.given = Outcome(), {}
        self._write_states()
        return self._done()

    def reset(self) -> Outcome:
        """The consumer was assigned partitions: forget the windows and positions (they are
        rebuilt from the stored entries; this worker may have lost some partitions, or got back
        one whose tables another worker moved on)."""
        self.out, self.given = Outcome(), {}
        self.windows.clear()
        self.last_taken.clear()
        self.partition_taken.clear()
        self.table_partition.clear()
        self.partition_next.clear()
        self.passed.clear()
        self.runs.clear()
        self.unverified.clear()
        return self._done()

    def hold_again(self, values: dict[bytes, bytes | dict[str, Any] | None], mine: set[int]) -> Outcome:
        """Hold again what the windows of the tables taken over held when their entries were
        written (``values``: the table entries that hold events, None for one the judge holds
        already, as it wrote it; ``mine``: the events partitions assigned), so a window is
        applied when its partition is read to the end and idle, as on the worker that wrote
        it, even if no more message of its table comes."""
        self.out, self.given = Outcome(), {}
        restored = 0
        for key, value in values.items():
            if key in self.windows or key in self.live:
                continue
            if value is None:  # this judge's own entry: its outbox was sent from here
                own = self.entries.get(key)
                if own is None or own.partition not in mine:
                    continue
                self.given = {}
                held = len(own.held)
            else:
                entry = STORED.validate_python(value) if isinstance(value, dict) else STORED.validate_json(value)
                if entry.partition not in mine:
                    continue  # left over from a partition this worker had: its owner holds them
                self.given = {key: value}
                held = len(entry.held)
            self._load(key)
            restored += held
        if restored:
            self._say(
                logging.INFO,
                f"holding again {restored} event(s) stored in the reorder windows of the tables taken over",
                lifecycle=True,
            )
        return self._done()

    # -- the work ---------------------------------------------------------------------------
    def _done(self) -> Outcome:
        out, self.out, self.given = self.out, Outcome(), {}
        out.held = sum(len(w) for w in self.windows.values())
        return out

    def _watch_clock(self, partition: int, offset: int, timestamp: int | None) -> None:
        """Compare the host clock with a record's timestamp (:class:`streams.clock.HostClockCheck`):
        at once for a clock behind it; for a clock ahead, once a tick's high watermark shows that
        the partition's last record taken was its newest (the worker had caught up)."""
        stamped = record_time(timestamp)
        if stamped is None:
            return
        host = self.clock()
        self.clock_last[partition] = (offset, stamped, host)
        self._clock_line(self.host_clock.observe(host, stamped, False))

    def _clock_line(self, line: str | None) -> None:
        if line is not None:
            self._say(logging.WARNING if self.host_clock.off else logging.INFO, line, lifecycle=True)

    def _say(self, level: int, message: str, lifecycle: bool = False) -> None:
        self.out.lines.append((level, message, lifecycle))

    def _send(self, key: bytes, kind: str, value: bytes) -> None:
        self.out.actions.append((kind, key, value))

    def _dead_letter(self, topic: str, key: bytes | None, position: str, reason: str, detail: str, raw: bytes) -> None:
        self.out.dead_letters += 1
        self.out.actions.append((DEAD_LETTER, key, dead_letter_value(topic, position, reason, detail, raw)))

    def _decoded(self, msg: Taken) -> ev.DealingEvent | None:
        """The event in a message, or None after dead-lettering the message with the reason it
        does not decode (``too_large`` for a record over ``max_record_bytes``, not parsed)."""
        raw, limit = msg.value, self.settings.max_record_bytes
        position = f"{msg.topic}[{msg.partition}]@{msg.offset}"
        if len(raw) > limit:
            detail = f"the record is {len(raw):,} bytes, over the record limit of {limit:,}"
            detail += " (DEALTRAIL_MAX_RECORD_BYTES)"
            self._dead_letter(msg.topic, msg.key, position, "too_large", detail, raw)
            return None
        try:
            return decode(raw)
        except DecodeError as exc:
            self._dead_letter(msg.topic, msg.key, position, exc.reason, exc.detail, raw)
            return None

    def _mismatched(self, msg: Taken, dealing: ev.DealingEvent) -> bool:
        """True (after dead-lettering it as ``key_mismatch``) if the message's key is not its table."""
        detail = key_mismatch(msg.key, dealing)
        if detail is None:
            return False
        position = f"{msg.topic}[{msg.partition}]@{msg.offset}"
        self._dead_letter(msg.topic, msg.key, position, "key_mismatch", detail, msg.value)
        return True

    def _window_of(self, key: bytes, state: TableState | None, holding: tuple[tuple[int, int, bytes], ...]) -> None:
        window: TableWindow[tuple[Taken, ev.DealingEvent]] = TableWindow(
            state.last_seq if state is not None else None, self.window_limits
        )
        items = []
        for partition, offset, value in holding:
            dealing = decode(value)  # it decoded when it was taken
            items.append(
                (dealing.seq, dealing.occurred_at, (Taken(self.source, partition, offset, key, value), dealing))
            )
        window.restore(items)
        self.windows[key] = window
        if holding:
            self.last_taken[key] = time.monotonic()
            self.table_partition[key] = holding[0][0]

    def _load(self, key: bytes) -> Applied | None:
        """The table's stored entry: the value handed over with this call if there is one (a
        value loaded again, maybe undelivered before a crash: its outbox is sent again), else
        the one this judge last loaded or wrote."""
        given = self.given.get(key, _ABSENT)
        if given is not _ABSENT and self.written_at.get(key, -1) > self.carried:
            given = _ABSENT  # the worker has not written this judge's newer entry yet
        loaded = given is not _ABSENT
        if loaded:
            self.out.loaded.append(key)
            if given is None:
                self.entries.pop(key, None)
            else:
                value: Any = given
                entry = STORED.validate_python(value) if isinstance(value, dict) else STORED.validate_json(value)
                self.entries[key] = entry
        entry_or_none = self.entries.get(key)
        if entry_or_none is None:
            if key not in self.live:
                self.windows.pop(key, None)
            return None
        entry = entry_or_none
        if loaded:
            self.out.actions.append((FORGET, key, b""))
            for value in entry.findings:
                self._send(key, FINDING, value)
            for value in entry.rounds:
                self._send(key, ROUND, value)
        if loaded or key not in self.windows:
            self._window_of(key, entry.state, entry.held)
        return Applied(entry.partition, entry.offset, entry.state, entry.unfit)

    def _load_live(self, key: bytes) -> Applied | None:
        return self.live[key] if key in self.live else self._load(key)

    def _read(self, topic: str, partition: int, start: int, stop: int, key: bytes) -> list[Any] | None:
        """The records of table ``key`` at offsets ``[start, stop)`` of a partition, read again
        (waiting out an outage with a capped backoff); None if they cannot be read."""
        backoff = Backoff(first=0.5, cap=5.0)
        away: tuple[type[BaseException], ...] = (*unreachable_errors(), TimeoutError)
        while True:
            try:
                return read_range(self.settings.kafka, topic, partition, start, stop, {key})
            except away:  # the cluster is away: wait for it (capped backoff)
                time.sleep(backoff.next())
            except Exception as exc:
                table = key.decode(errors="replace")
                self._say(logging.ERROR, f"table {table}: could not read {topic}[{partition}] again: {exc!r}")
                return None

    def _duplicate(self, key: bytes, msg: Taken, dealing: ev.DealingEvent, data: bytes) -> bool:
        """True if ``dealing`` (at or below its table's last seq) is the same fact as an event
        of its table judged before, in this process or on the topic before ``msg``."""
        seen = self.seen
        if seen.is_copy(dealing, data):
            return True
        if key in self.read_back or seen.knows(dealing.table_id, dealing.seq):
            return False
        self.read_back.add(key)
        records = self._read(msg.topic, msg.partition, 0, msg.offset, key)
        if records is None:  # the engine judges the event as it would without the index
            return False
        for rec in records:  # the first event at a seq is the one applied there; others contradicted it
            try:
                earlier = decode(bytes(rec.value or b""))
            except DecodeError:
                continue
            if earlier.table_id.encode() != key:
                continue
            known = encode(earlier)
            if not seen.knows(earlier.table_id, earlier.seq):
                seen.note(earlier, known)
            elif not seen.is_copy(earlier, known):
                seen.note(earlier, known, applied=False)
        return seen.is_copy(dealing, data)

    def _step(
        self,
        key: bytes,
        current: Applied | None,
        msg: Taken,
        dealing: ev.DealingEvent,
        through: tuple[int, int] | None = None,
    ) -> Applied | None:
        """Apply one message of table ``key``; returns where the table stands after it.
        ``through``: the partition and offset of the last message taken from the table's
        partition (a snapshot after this event states the events up to it: every event its
        state holds was taken by then); None: ``msg``'s own."""
        position = f"{msg.topic}[{msg.partition}]@{msg.offset}"
        before = current.state if current is not None else None
        unfit = current.unfit if current is not None else False
        data = encode(dealing)  # canonical: a copy sent with other spacing or key order is the same event
        if before is not None and dealing.seq <= before.last_seq and self._duplicate(key, msg, dealing, data):
            self.duplicates += 1
            return Applied(msg.partition, msg.offset, before, unfit)
        try:
            state, found = apply(before, dealing, data, self.limits)
        except EventRejected as exc:
            self._dead_letter(msg.topic, msg.key, position, exc.reason, exc.detail, msg.value)
            return Applied(msg.partition, msg.offset, before, unfit) if before is not None else None
        except Exception as exc:
            self._say(logging.ERROR, f"engine error at {position}: {type(exc).__name__}: {exc}")
            detail = f"{type(exc).__name__}: {exc}"[:500]
            self._dead_letter(msg.topic, msg.key, position, "engine_error", detail, msg.value)
            return Applied(msg.partition, msg.offset, before, unfit) if before is not None else None
        if state is before and not found:
            self.duplicates += 1  # an exact copy the engine recognised
        else:
            self.seen.note(dealing, data, applied=before is None or dealing.seq > before.last_seq)
            self.out.applied += 1
        self.out.findings += len(found)
        for f in found:
            self._send(key, FINDING, f.model_dump_json().encode())
        if (
            isinstance(dealing, ev.RoundCompleted)
            and before is not None
            and before.round is not None
            and state.last_event_id == dealing.event_id
        ):
            self._send(key, ROUND, round_json(round_row(before.round, state, dealing)))
        if before is not None and dealing.seq < before.last_seq:
            unfit = True  # out of seq order: a replay applies it earlier, and may differ from here on
        elif not unfit and state is not before and snapshot_due(before, state, self.settings.snapshot_every):
            partition, offset = through if through is not None else (msg.partition, msg.offset)
            self._send(key, SNAPSHOT, snapshot_value(state, dealing.occurred_at, partition, offset))
        return Applied(msg.partition, msg.offset, state, unfit)

    def _take(
        self,
        key: bytes,
        current: Applied | None,
        msg: Taken,
        dealing: ev.DealingEvent,
        through: tuple[int, int] | None = None,
    ) -> Applied | None:
        """Take one message of table ``key`` into its reorder window and apply what the window
        releases (in seq order); returns where the table stands: its position is that of
        ``msg``, the last message taken, whether applied or held. ``through``: the partition and
        offset of the last message taken from the table's partition, when ``msg`` is an earlier
        one read again (:meth:`_recheck`); None: ``msg``'s own."""
        window = self.windows.get(key)
        if window is None:
            last = current.state.last_seq if current is not None else None
            window = self.windows[key] = TableWindow(last, self.window_limits)
        self.last_taken[key] = self.partition_taken[msg.partition] = time.monotonic()
        self.table_partition[key] = msg.partition
        try:  # judged on arrival (rulebook 10.3.4): a seq far ahead must not wait in the window
            self.intake.check(dealing, record_time(msg.timestamp))
            check_plausible(window.last, dealing, self.limits)
        except EventRejected as exc:
            position = f"{msg.topic}[{msg.partition}]@{msg.offset}"
            self._dead_letter(msg.topic, msg.key, position, exc.reason, exc.detail, msg.value)
            return None if current is None else Applied(msg.partition, msg.offset, current.state, current.unfit)
        for item, event in window.push(dealing.seq, dealing.occurred_at, (msg, dealing)):
            at = through if through is not None else (msg.partition, msg.offset)
            current = self._step(key, current, item, event, at)
            if current is not None:
                window.last = current.state.last_seq  # the engine's word on where the table is
        if current is None:
            return None
        return Applied(msg.partition, msg.offset, current.state, current.unfit)

    def _position(self, partition: int) -> int | None:
        """The offset after the last message taken on the events partition since the
        assignment, or (none taken yet) the committed offset the consumer resumed from: a window
        held again after a takeover is applied once that partition is idle, not after 30 s."""
        taken = self.partition_next.get(partition)
        if taken is not None:
            return taken
        return self.marks.get(partition, (None, None))[1]

    def _consumer_reached(self, partition: int) -> bool:
        """True if every message of the events partition up to the high watermark the consumer
        has seen is taken (nothing more is queued), or that mark is not known yet."""
        mark = self.marks.get(partition, (None, None))[0]
        return read_up_to(self._position(partition), mark, self.passed.get(partition, ()))

    def _release_idle(self, now: float) -> None:
        """Apply what the windows of tables idle for ``reorder.idle`` seconds hold, a table being
        idle while neither it nor its partition has had a message for that long and every
        message of its partition up to the high watermark seen is taken (the stream's end of
        input: the audit and the re-audit empty their windows at the end of theirs). Quiet time
        counts from the last stall of the process at the latest (``running_since``)."""
        for key in self.due():
            partition = self.table_partition.get(key, -1)
            quiet_since = max(
                self.last_taken.get(key, now), self.partition_taken.get(partition, 0.0), self.running_since
            )
            if not window_due(now - quiet_since, self.settings.reorder.idle, self._consumer_reached, partition):
                continue
            current = self._load_live(key)  # (re)builds the window from the stored entry if need be
            window = self.windows.get(key)
            if current is None or window is None:
                continue
            position = (current.partition, current.offset)
            taken = (position[0], position[1]) if position[0] is not None else None  # the last message taken
            for item, event in window.flush():
                current = self._step(key, current, item, event, taken)
                if current is None:
                    break
                window.last = current.state.last_seq
            if current is not None:
                self.live[key] = Applied(position[0], position[1], current.state, current.unfit)

    def _again(self, key: bytes, msg: Taken, first: int, end: int) -> list[tuple[Taken, ev.DealingEvent]] | None:
        """The messages of table ``key`` at offsets ``first`` to ``end - 1`` of ``msg``'s
        partition, read again and decoded (None if they cannot be read)."""
        records = self._read(msg.topic, msg.partition, first, end, key)
        if records is None:
            return None
        again = []
        for rec in records:
            taken = Taken(rec.topic, rec.partition, rec.offset, rec.key, bytes(rec.value or b""), rec.timestamp)
            dealing = self._decoded(taken)
            if dealing is not None and not self._mismatched(taken, dealing):
                again.append((taken, dealing))
        return again

    def _recheck(self, key: bytes, current: Applied, msg: Taken, first: int, end: int) -> Applied | None:
        """Take the messages of table ``key`` at offsets ``first`` to ``end - 1`` of ``msg``'s
        partition, read again (see ``unverified``); returns where the table stands, at the
        position of ``msg`` (the last message taken from the consumer)."""
        again = self._again(key, msg, first, end)
        if not again:  # nothing passed over (or unreadable: the window gives up on the hole as the audit would)
            return current
        self._say(
            logging.WARNING,
            f"table {key.decode(errors='replace')}: an event is held; re-read {msg.topic}[{msg.partition}] "
            f"offsets {first}..{end - 1}, passed over before: {len(again)} message(s) of the table",
        )
        state: Applied | None = current
        for taken, dealing in again:
            state = self._take(key, state, taken, dealing, (msg.partition, msg.offset))
        return None if state is None else Applied(msg.partition, msg.offset, state.state, state.unfit)

    def _catch_up(self, key: bytes, current: Applied, msg: Taken, seq: int) -> Applied | None:
        """Apply the messages of table ``key`` between its stored offset and ``msg`` (same
        partition) that the consumer passed over, read again; returns where the table stands."""
        again = self._again(key, msg, current.offset + 1, msg.offset)
        if again is None:  # the worker goes on; the engine reports the seq gap as a finding
            return current
        self._say(
            logging.WARNING,
            f"table {key.decode(errors='replace')}: seq {seq} follows {current.state.last_seq}; re-read "
            f"{msg.topic}[{msg.partition}] offsets {current.offset + 1}..{msg.offset - 1}: "
            f"{len(again)} message(s) of the table",
        )
        state: Applied | None = current
        for taken, dealing in again:
            state = self._take(key, state, taken, dealing)
        return state

    def _take_message(self, msg: Taken) -> None:
        """One message from the consumer (the agent's loop of ``streams.worker``)."""
        start = self.runs.note(msg.partition, msg.offset)
        self.partition_next[msg.partition] = max(self.partition_next.get(msg.partition, 0), msg.offset + 1)
        dealing = self._decoded(msg)
        if dealing is None or self._mismatched(msg, dealing):
            return
        key = dealing.table_id.encode()
        current = self._load_live(key)
        if current is not None and current.holds(msg.partition, msg.offset):
            return  # a redelivery of a message this state already holds
        if current is not None and current.same_partition(msg.partition) and current.offset + 1 < start:
            window = self.windows.get(key)
            top = max([current.state.last_seq, *(h[0] for h in (window.held() if window else ()))])
            skipped = dealing.seq > top + 1
            if not skipped:  # see unverified
                self.unverified[key] = (current.offset + 1, start)
        else:
            skipped = False
        if skipped and current is not None:
            # A seq jump: either the trail has a gap (the engine reports it) or the consumer
            # passed over messages of this table (a Faust rebalance can skip prefetched
            # messages and still commit past them); read them again first.
            self.unverified.pop(key, None)
            current = self._catch_up(key, current, msg, dealing.seq)
        taken = self.live[key] = self._take(key, current, msg, dealing)
        if key in self.unverified and taken is not None and len(self.windows.get(key) or ()):
            first, end = self.unverified.pop(key)
            self.live[key] = self._recheck(key, taken, msg, first, end)

    def _write_states(self) -> None:
        """Hand the worker the entry of every table changed since the last write."""
        for key, current in self.live.items():
            if current is None:
                continue
            window = self.windows.get(key)
            holding = tuple((t.partition, t.offset, t.value) for _, _, (t, _) in window.held()) if window else ()
            entry = Stored(current.offset, current.state, (), (), current.partition, current.unfit, holding)
            self.entries[key] = entry
            self.written_at[key] = self.number
            self.out.writes.append(
                (key, current.partition, current.offset, _STATE.dump_json(current.state), current.unfit, holding)
            )
        self.live.clear()
        self.out.wrote = True
        if self.duplicates != self.reported:
            self._say(
                logging.INFO, f"{self.duplicates} duplicate deliveries skipped (exact copies of events judged before)"
            )
            self.reported = self.duplicates


# -- the judge's process ----------------------------------------------------------------------
class JudgeFailed(RuntimeError):
    """The worker's judge process failed a call or ended: the worker cannot go on judging (its
    events not yet acknowledged are read again by whichever worker owns their partitions next)."""


def _frame(value: Any) -> bytes:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(8, "big") + data


def _read_frame(sock: socket.socket) -> Any:
    """The next frame from a blocking socket, unpickled; raises EOFError at its end."""
    head = _read_exactly(sock, 8)
    return pickle.loads(_read_exactly(sock, int.from_bytes(head, "big")))


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise EOFError("the other end closed the connection")
        got += n
    return bytes(buffer)


def serve(fd: int) -> None:
    """The judge process's main loop: read ``(method, args)`` frames from the socket ``fd``
    (made by :meth:`JudgeProcess.start`), call them on one :class:`Judge` in order, and answer
    each with ``("ok", result)`` or ``("error", reason)``. The first frame holds the judge's
    settings, clock and data folder. Ends when the worker closes its end (or dies).

    The process ignores SIGINT and SIGTERM: a Ctrl-C to the terminal's process group or a stop
    reaches the worker, which drains through this process and then closes it.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with socket.socket(fileno=fd) as sock:
        try:
            settings, clock, datadir = _read_frame(sock)
            judge = Judge(settings, clock, datadir)
        except EOFError:
            return
        except Exception as exc:
            with contextlib.suppress(OSError):
                sock.sendall(_frame(("error", f"{type(exc).__name__}: {exc}")))
            return
        # the worker gone (it exited on a failure, or was killed): its end of the socket closed,
        # and this process ends without a word; the worker said why it stopped
        with contextlib.suppress(OSError):
            sock.sendall(_frame(("ok", None)))
        settle_heap()
        while True:
            try:
                method, number, carried, args = _read_frame(sock)
            except (EOFError, OSError):
                return
            try:
                judge.begin(number, carried)
                answer: tuple[str, Any] = ("ok", getattr(judge, method)(*args))
            except Exception as exc:
                traceback.print_exc()
                answer = ("error", f"{method}: {type(exc).__name__}: {exc}")
            try:
                sock.sendall(_frame(answer))
            except OSError:
                return


class JudgeProcess:
    """One child process holding a :class:`Judge`, called in order from the worker's event loop.

    The calls and their answers travel as length-prefixed pickles over a socket pair read and
    written by the event loop itself (no thread in between: each hand-over through a thread
    waited for the interpreter lock the busy loop held). Answers come back in the order of the
    calls.

    Args:
        settings: passed to the :class:`Judge`.
        clock: the intake's clock (picklable).
        datadir: the worker's private data folder.

    :meth:`start` starts the child (a fresh interpreter, safe beside Faust's threads) before
    the worker's event loop runs; :meth:`close` ends it.
    """

    def __init__(self, settings: Settings, clock: Callable[[], datetime], datadir: Path) -> None:
        self._init = (settings, clock, datadir)
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._inbox = bytearray()
        self._outbox = bytearray()
        self._writing = False
        self._failed: BaseException | None = None

    def start(self, timeout: float = 60.0) -> None:
        """Start the child and wait (at most ``timeout`` seconds) until its judge is made.

        Raises:
            JudgeFailed: the child could not start or make its judge.
        """
        ours, theirs = socket.socketpair()
        command = [sys.executable, "-c", f"import streams.judge as j; j.serve({theirs.fileno()})"]
        self._proc = subprocess.Popen(command, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        theirs.close()
        self._sock = ours
        ours.settimeout(timeout)
        try:
            ours.sendall(_frame(self._init))
            kind, detail = _read_frame(ours)
        except (OSError, EOFError) as exc:
            raise JudgeFailed(f"the judge process did not start: {exc}") from exc
        if kind != "ok":
            raise JudgeFailed(f"the judge process did not start: {detail}")
        ours.setblocking(False)

    def submit(self, method: str, number: int, carried: int, *args: Any) -> asyncio.Future[Any]:
        """Call ``method`` of the child's judge with ``args`` (after every call submitted
        before), as call ``number`` made when call ``carried`` was carried out (see
        :meth:`Judge.begin`); returns a future of its result, failed with :class:`JudgeFailed`
        if the child failed it or ended. Call from the event loop, after :meth:`start`."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if self._failed is not None or self._sock is None:
            future.set_exception(JudgeFailed(f"the judge process is gone ({self._failed or 'not started'})"))
            return future
        if self._loop is None:
            self._loop = loop
            loop.add_reader(self._sock.fileno(), self._readable)
        self._waiting.append(future)
        self._outbox += _frame((method, number, carried, args))
        self._flush()
        return future

    def _flush(self) -> None:
        assert self._sock is not None and self._loop is not None
        try:
            sent = self._sock.send(self._outbox)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self._fail(exc)
            return
        del self._outbox[:sent]
        if self._outbox and not self._writing:
            self._loop.add_writer(self._sock.fileno(), self._flush)
            self._writing = True
        elif not self._outbox and self._writing:
            self._loop.remove_writer(self._sock.fileno())
            self._writing = False

    def _readable(self) -> None:
        assert self._sock is not None
        try:
            data = self._sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError as exc:
            self._fail(exc)
            return
        if not data:
            code = self._proc.poll() if self._proc is not None else None
            self._fail(EOFError(f"it ended (exit code {code})"))
            return
        self._inbox += data
        while len(self._inbox) >= 8:
            size = int.from_bytes(self._inbox[:8], "big")
            if len(self._inbox) < 8 + size:
                break
            with memoryview(self._inbox) as view:  # released before the buffer shrinks
                kind, value = pickle.loads(view[8 : 8 + size])
            del self._inbox[: 8 + size]
            future = self._waiting.popleft()
            if future.done():
                continue
            if kind == "ok":
                future.set_result(value)
            else:
                future.set_exception(JudgeFailed(f"the judge process failed a call: {value}"))

    def _fail(self, exc: BaseException) -> None:
        if self._failed is None:
            self._failed = exc
        self._detach()
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_exception(JudgeFailed(f"the judge process is gone: {exc}"))

    def _detach(self) -> None:
        if self._loop is not None and self._sock is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._sock.fileno())
            if self._writing:
                self._loop.remove_writer(self._sock.fileno())
        self._writing = False
        self._loop = None

    def close(self, timeout: float = 10.0) -> None:
        """End the child: close the socket (the child ends at its end of input), wait at most
        ``timeout`` seconds, then kill it."""
        self._detach()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
