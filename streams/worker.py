"""The Faust worker: a thin adapter around the pure engine.

One agent consumes the dealing-events topic in batches (``stream.take_events``), decodes each
message at the edge, applies :func:`streams.engine.apply` to the table's state, and sends
findings and completed rounds to their topics at once. The states of the tables changed are
written to a Faust table (backed by its changelog) every ``worker.state_interval`` seconds, not
per batch (a state is a whole table's JSON, 15 KB and more): the events applied in between are
held unacknowledged until then, so Faust never commits an offset before the state that holds
it. Every ``snapshot_every`` seqs of a table the worker also sends the table's engine state to
the snapshots topic (:func:`snapshot_value`), which the projector stores for replays. A message
that fails validation goes to the dead-letter topic with its reason; the agent goes on.
Delivery is at-least-once: findings have deterministic IDs and the engine ignores exact
duplicates, so a redelivered batch is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import TypeAdapter

from schemas import events as ev
from schemas.codec import DecodeError, decode, encode
from schemas.snapshots import TableSnapshot
from streams.batches import guard_aiokafka
from streams.clock import IntakeClock, utc_now
from streams.engine import EventRejected, TableState, apply, check_plausible
from streams.engine.catalog import ENGINE_VERSION, RULEBOOK_REVISION
from streams.engine.reorder import TableWindow
from streams.engine.round_rows import round_row
from streams.engine.state import dump_state
from streams.kafka import compression_type, faust_credentials, key_mismatch, read_range, unreachable_errors
from streams.link import Backoff, KafkaLink
from streams.publish import dead_letter_value
from streams.seen import SeenIndex

if TYPE_CHECKING:
    import faust

    from dealtrail.settings import Settings

log = logging.getLogger("dealtrail.worker")
says = logging.getLogger("dealtrail.worker.lifecycle")
"""The worker's lifecycle lines (start, assignment, revocation, stop): shown at every
``worker.loglevel`` (:func:`say_lifecycle`), never a line per event."""
TABLE_NAME = "table-states"


@dataclass
class WorkCounts:
    """What a worker process did since it started, for its stop line.

    Attributes:
        applied: events applied by the engine (copies skipped and refused events not counted).
        findings: finding revisions sent to the findings topic.
        dead_letters: records sent to the dead-letter topic.
    """

    applied: int = 0
    findings: int = 0
    dead_letters: int = 0


def say_lifecycle() -> None:
    """Let the lifecycle lines through whatever ``worker.loglevel`` is: an operator reading the
    compose logs at ``warning`` (the compose file's level) still sees them. They go to stderr
    through their own handler, in the format of Faust's lines (idempotent)."""
    import sys

    says.setLevel(logging.INFO)
    says.propagate = False
    if not says.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s"))
        says.addHandler(handler)


def partitions_line(tps: Any, topic: str) -> str:
    """``topic[0, 2]`` for the partitions of ``topic`` among the ``TP`` set ``tps`` (``none``
    when there are none)."""
    mine = sorted(tp.partition for tp in tps if tp.topic == topic)
    return f"{topic}[{', '.join(map(str, mine))}]" if mine else f"no partition of {topic}"


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


def stalled(last_tick: float, now: float, interval: float, idle: float) -> bool:
    """Whether the process stalled between two runs of the worker's state timer.

    Args:
        last_tick: monotonic seconds of the timer's previous run.
        now: monotonic seconds now.
        interval: the timer's interval (``worker.state_interval``), seconds.
        idle: ``reorder.idle``, seconds.

    Returns:
        True if the timer ran later than ``interval`` plus ``idle`` seconds after its previous
        run (a SIGSTOP, a frozen machine, an event loop held that long): the high watermarks the
        consumer saw before may be far behind the broker's by now.
    """
    return now - last_tick > interval + idle


def stored_holds(value: bytes | dict[str, Any] | None) -> bool:
    """Whether a Faust table value (the JSON bytes of a :class:`Stored`, or the decoded JSON a
    changelog recovery put back) holds events in its reorder window, read without decoding the
    state (an entry written by pydantic ends with ``"held":[]}`` when its window is empty)."""
    if value is None:
        return False
    if isinstance(value, dict):
        return bool(value.get("held"))
    return not value.rstrip().endswith(b'"held":[]}')


def round_json(row: dict[str, Any]) -> bytes:
    """A ``rounds`` row as JSON bytes (timestamps in ISO 8601)."""
    return json.dumps({k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}).encode()


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
    gets no more snapshots (:func:`snapshot_value`).

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


class Taken(NamedTuple):
    """A message taken into a table's reorder window (the fields of a Kafka record the worker
    reads when it applies it)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes


class Outbox:
    """Per table, the findings and round rows sent and not yet confirmed delivered.

    Each send returns a future that Faust resolves when the broker acknowledges the record;
    :meth:`undelivered` drops the confirmed ones, and what is left goes into the next table
    entry written (:class:`Stored`).
    """

    def __init__(self) -> None:
        self._pending: dict[bytes, list[tuple[bool, bytes, Any]]] = {}

    def add(self, key: bytes, is_finding: bool, value: bytes, sent: Any) -> None:
        """Track ``value`` (a finding if ``is_finding``, else a round row) sent for table ``key``;
        ``sent`` is what ``Topic.send`` returned (a future of the record's metadata)."""
        self._pending.setdefault(key, []).append((is_finding, value, sent))

    def forget(self, key: bytes) -> None:
        """Drop what is tracked for ``key`` (its entry was just loaded from the table)."""
        self._pending.pop(key, None)

    def undelivered(self, key: bytes) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
        """The findings and round rows of ``key`` whose delivery is not confirmed, in send order."""
        left = [item for item in self._pending.get(key, ()) if not _delivered(item[2])]
        self._pending[key] = left
        return tuple(v for f, v, _ in left if f), tuple(v for f, v, _ in left if not f)


def _delivered(sent: Any) -> bool:
    done = getattr(sent, "done", None)
    if done is None:  # not a future: the send returned its metadata, so it was delivered
        return True
    return bool(done()) and not sent.cancelled() and sent.exception() is None


STORED = TypeAdapter(Stored)


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


def snapshot_due(before: TableState | None, after: TableState, every: int) -> bool:
    """True if the table's seq crossed a multiple of ``every`` with this event: the worker
    keeps a snapshot of a table every ``every`` seqs (``settings.snapshot_every``), at the
    same points whichever worker applies the event and however often it is redelivered."""
    return after.last_seq // every > (before.last_seq if before is not None else 0) // every


class StateCache:
    """Decoded table entries, valid while the Faust table still holds the same stored bytes.

    Decoding a state costs more than applying a batch, so the worker keeps the decoded entry
    and checks by identity that the table still holds the bytes it wrote (after a rebalance or
    a recovery it does not, and the entry is decoded again from the table).
    """

    def __init__(self) -> None:
        self._entries: dict[bytes, tuple[object, Stored]] = {}

    def get(self, key: bytes, stored: bytes | dict[str, Any] | None) -> tuple[Stored | None, bool]:
        """The entry for ``key`` given the table's current value ``stored`` (the JSON bytes this
        worker wrote, or the decoded JSON a changelog recovery put back), and whether it was
        just loaded from the table (so its outbox may not have been delivered)."""
        if stored is None:
            self._entries.pop(key, None)
            return None, False
        hit = self._entries.get(key)
        if hit is not None and hit[0] is stored:
            return hit[1], False
        entry = STORED.validate_python(stored) if isinstance(stored, dict) else STORED.validate_json(stored)
        self._entries[key] = (stored, entry)
        return entry, True

    def put(self, key: bytes, stored: bytes, entry: Stored) -> None:
        """Remember the entry just written to the table as ``stored``."""
        self._entries[key] = (stored, entry)


async def write_state(table: Any, key: bytes, stored: bytes, partition: int | None = None) -> None:
    """Set ``table[key] = stored`` and send its changelog record, awaited.

    ``table[key] = value`` in Faust puts the changelog record in a producer buffer, and the
    flush before an offset commit gives up on that buffer after 0.1 s of silence
    (faust-streaming 0.15.3, ``ProducerBuffer.flush_atmost``); while an agent holds the event
    loop with a long batch, a commit could then land before the state of the events it
    commits, and a crash right after restored a state older than the committed offsets (the
    events in between were never applied again: a sequence gap that the replay does not
    have). Sending the record with an awaited ``send`` hands it to the Kafka producer (or
    attaches it to the current event's offset) before the batch is acknowledged, and the
    commit waits for both.

    The record goes to the changelog partition of the same number as the events partition the
    table's messages come from: Faust restores a worker's table entries from the changelog
    partitions of the events partitions assigned to it, so a table published by a producer
    whose partitioner is not murmur2 (librdkafka's CRC32) keeps its state on the worker that
    takes its events over after a rebalance or a restart.

    Args:
        table: the Faust table (raw bytes keys and values).
        key: the table ID as bytes.
        stored: the entry as JSON bytes.
        partition: the table's events partition (None: the key's partition by murmur2, as the
            Java client and Faust's producer place it).
    """
    table.data[key] = stored
    await table.changelog_topic.send(
        key=key, value=stored, partition=partition, key_serializer="raw", value_serializer="raw"
    )


def private_folder(path: Path) -> Path:
    """Create ``path`` owner-only (0700, whatever the umask) with each missing parent; a folder
    that was there before is left as it is, except ``path`` itself, which is made 0700.

    Raises:
        OSError: a folder cannot be created or its mode set.
    """
    missing: list[Path] = []
    at = path
    while not at.exists():
        missing.append(at)
        at = at.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another worker made it just now
            folder.mkdir(mode=0o700)
        if folder != path:
            folder.chmod(0o700)  # mkdir's mode is masked by the umask
    path.chmod(0o700)
    return path


def worker_datadir(settings: Settings) -> Path:
    """This worker process's own Faust data folder: ``<worker.datadir>/<app id>-<pid>``."""
    return settings.worker.datadir / f"{settings.topics.app_id}-{os.getpid()}"


def faust_settings(settings: Settings) -> dict[str, Any]:
    """The ``faust.App`` settings of the worker (the benchmark's bare agent uses them too).

    Creates the worker's own data folder (:func:`worker_datadir`, owner-only); ``run_worker``
    removes it when the worker stops.

    Raises:
        OSError: the data folder cannot be created.
    """
    topics = settings.topics
    datadir = private_folder(worker_datadir(settings))
    return {
        # Faust's partition assignor tells workers apart by URL: each worker needs its own,
        # even with the web server off, or a second worker on the same host gets nothing.
        "canonical_url": f"http://{socket.gethostname()}-{os.getpid()}:6066",
        "broker": [f"kafka://{b}" for b in settings.kafka.bootstrap.split(",")],
        "broker_credentials": faust_credentials(settings.kafka),
        "store": "memory://",
        # Faust keeps a small data folder per worker (the table state lives in memory and in
        # its changelog): one per process under the worker.datadir setting, not the working directory.
        "datadir": str(datadir),
        "web_enabled": False,
        "topic_partitions": topics.partitions,
        "topic_replication_factor": topics.replication,
        "consumer_auto_offset_reset": "earliest",
        "processing_guarantee": "at_least_once",
        # A finding waits at most this long in the producer (10 ms; 50 ms added about as much to
        # the alert latency); the states are written once per state_interval whatever this is.
        "producer_linger": 0.01,
        "producer_acks": -1,
        # findings, rounds, snapshots and the states' changelog, compressed per batch as the
        # publisher's events are (the kafka.compression setting)
        "producer_compression_type": compression_type(settings.kafka),
        "table_cleanup_interval": 3600.0,
        # A crashed worker's partitions move to the others after this many seconds (Faust's
        # default is 60 s); heartbeats run in the background, so long batches do not matter.
        "broker_session_timeout": 12.0,
        "broker_heartbeat_interval": 3.0,
        # Standby replicas stalled a second worker's recovery in our tests (faust-streaming
        # 0.15.3); the changelog alone restores a table's state when its partition moves.
        "table_standby_replicas": 0,
    }


def _transport_class(fetch_max_wait: float) -> type[Any]:
    """Faust's aiokafka transport whose worker consumer asks the broker to hold a fetch at most
    ``fetch_max_wait`` seconds (``worker.fetch_max_wait``) instead of the 1.5 s faust-streaming
    0.15.3 sets.

    aiokafka sends one fetch at a time to a broker, for the assigned partitions that hold no
    record still to be handed on. When the agent has not yet taken a busy partition's records,
    the fetch that goes out can name only quiet partitions (Faust's ``__assignor-__leader``
    topic, which never gets a record): the broker holds it the whole wait, and nothing new of
    any partition is fetched until it returns. Measured with ``make bench-stream --stages``:
    fetches of that leader partition alone, 1.5 s each, and the events appended 0.9 s (p50)
    before they were in a fetch response. The wait bounds that stall.
    """
    from faust.transport.drivers import aiokafka as driver

    wait_ms = max(1, round(fetch_max_wait * 1000))

    class FetchThread(driver.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            # aiokafka 0.14 gives this to the Fetcher it makes when the consumer starts
            consumer._fetch_max_wait_ms = wait_ms
            return consumer

    class FetchConsumer(driver.Consumer):
        def _new_consumer_thread(self) -> FetchThread:
            return FetchThread(self, loop=self.loop, beacon=self.beacon)

    class FetchTransport(driver.Transport):
        Consumer = FetchConsumer

    return FetchTransport


def _app_class(fetch_max_wait: float = 0.05) -> type[faust.App]:
    """``faust.App`` whose consumer fetches with ``fetch_max_wait`` (seconds; see
    :func:`_transport_class`), with a hook run before the consumer waits for every started event to be
    acknowledged (Faust's ``_consumer_wait_empty``, faust-streaming 0.15.3), at a rebalance's
    revocation and at a clean stop, after the flow of new events has been stopped.

    The worker holds the events it applied unacknowledged until the states that hold them are
    written (:func:`create_app`); its timer writes them every ``state_interval``, but a stopping
    app ends its timers first, so without the hook a clean stop with held events waited for an
    acknowledgement that never came (and was killed). The hook writes the states and
    acknowledges the events there, so a stop or a rebalance goes on at once.
    """
    import faust

    transport_class = _transport_class(fetch_max_wait)

    class WorkerApp(faust.App):
        before_drain: Callable[[], Awaitable[None]] | None = None

        def _new_transport(self) -> Any:
            return transport_class(self.conf.broker_consumer, self)

        async def _consumer_wait_empty(self, consumer: Any, logger: Any) -> None:
            if self.before_drain is not None:
                await self.before_drain()
            await super()._consumer_wait_empty(consumer, logger)

    return WorkerApp


def create_app(settings: Settings, clock: Callable[[], datetime] = utc_now) -> faust.App:
    """Build the Faust application of the dealtrail worker.

    Args:
        settings: cluster, namespace (topic names, application ID) and worker tuning.
        clock: the worker's clock (timezone-aware; the system clock by default): an event
            recorded more than ``max_clock_skew`` after it is dead-lettered as
            ``recorded_in_future`` when it is taken, before the engine sees it.

    Returns:
        The app, with the ``audit`` agent and the ``table-states`` table registered.
    """
    from faust.types import TP

    topics = settings.topics
    app = _app_class(settings.worker.fetch_max_wait)(topics.app_id, **faust_settings(settings))
    # Faust makes <datadir>/v<version>/tables on start (mode masked by the umask only): made
    # here first, owner-only, Faust finds them there
    private_folder(Path(app.conf.tabledir))
    source_name = topics.events.name
    source = app.topic(
        topics.events.name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    findings_topic = app.topic(
        topics.findings.name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    rounds_topic = app.topic(
        topics.rounds.name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    dead_topic = app.topic(
        topics.dead_letter.name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    snapshots_topic = app.topic(
        topics.snapshots.name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    snapshot_every = settings.snapshot_every
    states = app.Table(
        TABLE_NAME,
        key_type=bytes,
        partitions=topics.partitions,
        use_partitioner=True,
    )
    # Keys are the table ID's bytes, unencoded, so the producer's partitioner puts each
    # changelog record in the partition of its key in the events topic (co-partitioning,
    # which state recovery after a rebalance relies on); values are JSON bytes made by
    # pydantic-core (several times faster than Faust's json codec on these states).
    states.key_serializer = "raw"  # type: ignore[attr-defined]
    states.value_serializer = "raw"  # type: ignore[attr-defined]
    cache = StateCache()
    outbox = Outbox()
    counts = WorkCounts()
    app.work_counts = counts  # type: ignore[attr-defined]  # read by run_worker's stop line
    batch, within = settings.worker.batch, settings.worker.within

    async def send(key: bytes, is_finding: bool, value: bytes) -> None:
        topic = findings_topic if is_finding else rounds_topic
        outbox.add(key, is_finding, value, await topic.send(key=key, value=value))

    async def dead_letter(topic: str, key: Any, position: str, reason: str, detail: str, raw: bytes) -> None:
        counts.dead_letters += 1
        await dead_topic.send(key=key, value=dead_letter_value(topic, position, reason, detail, raw))

    max_record = settings.max_record_bytes
    duplicates = [0]  # duplicate deliveries skipped by this process (logged with each state write)
    reported = [0]
    limits = settings.plausibility  # rulebook 10.3.4: an implausible event is dead-lettered, the table stays as it was
    intake = IntakeClock(limits, clock)  # and one recorded after this worker's clock (recorded_in_future)

    async def decoded(msg: Any, raw: bytes) -> ev.DealingEvent | None:
        """The event in a message (a Faust message or a re-read record), or None after sending
        the message to the dead-letter topic with the reason it does not decode (``too_large``
        for a record over ``settings.max_record_bytes``, which is not parsed)."""
        position = f"{msg.topic}[{msg.partition}]@{msg.offset}"
        if len(raw) > max_record:
            detail = f"the record is {len(raw):,} bytes, over the record limit of {max_record:,}"
            detail += " (DEALTRAIL_MAX_RECORD_BYTES)"
            await dead_letter(msg.topic, msg.key, position, "too_large", detail, raw)
            return None
        try:
            return decode(raw)
        except DecodeError as exc:
            await dead_letter(msg.topic, msg.key, position, exc.reason, exc.detail, raw)
            return None

    # Each table's reorder window (rulebook 10.1.2): events are applied in seq order within it.
    # What a window holds is written with the table's state (Stored.held) and rebuilt from the
    # stored entry whenever the entry is loaded from the table (after a restart or a rebalance).
    window_limits = settings.reorder.limits
    windows: dict[bytes, TableWindow[tuple[Taken, ev.DealingEvent]]] = {}
    last_taken: dict[bytes, float] = {}  # table -> when (monotonic) its last message was taken
    # partition -> when (monotonic) its last message was taken, and table -> its partition: a
    # window counts as idle only while its partition is quiet too, since the seq it waits for
    # may be queued behind other tables' messages of that partition (a worker catching up after
    # a restart, a loaded worker) rather than lost
    partition_taken: dict[int, float] = {}
    table_partition: dict[bytes, int] = {}
    # partition -> the offset after the last message the agent took there, and the record
    # batches passed over there (unreadable): a window is applied only once its partition is
    # read up to the high watermark its consumer has seen (consumer_reached), so an event queued
    # behind other tables' messages on a loaded worker is waited for as the audit waits for it
    partition_next: dict[int, int] = {}
    passed: dict[int, list[tuple[int, int]]] = {}

    def highwater(partition: int) -> int | None:
        try:
            mark = app.consumer.highwater(TP(source_name, partition))
        except Exception:  # no consumer yet, or the partition is not assigned: not known
            return None
        return None if mark is None else int(mark)

    def position(partition: int) -> int | None:
        """The offset after the last message the agent took on the events partition since the
        assignment, or (none taken yet) the committed offset the consumer resumed from (Faust
        0.15 keeps it in ``Consumer._committed_offset`` after its seek): a window held again
        after a takeover is applied once that partition is idle, not after 30 s."""
        taken = partition_next.get(partition)
        if taken is not None:
            return taken
        try:
            resumed = getattr(app.consumer, "_committed_offset", {}).get(TP(source_name, partition))
        except Exception:  # no consumer yet: not known
            return None
        return None if resumed is None else int(resumed)

    def consumer_reached(partition: int) -> bool:
        """True if the agent has taken every message of the events partition up to the high
        watermark its consumer has seen (nothing more is queued for it), or that mark is not
        known yet."""
        return read_up_to(position(partition), highwater(partition), passed.get(partition, ()))

    def window_of(key: bytes, state: TableState | None, holding: tuple[tuple[int, int, bytes], ...]) -> None:
        window: TableWindow[tuple[Taken, ev.DealingEvent]] = TableWindow(
            state.last_seq if state is not None else None, window_limits
        )
        items = []
        for partition, offset, value in holding:
            dealing = decode(value)  # it decoded when it was taken
            items.append(
                (dealing.seq, dealing.occurred_at, (Taken(source_name, partition, offset, key, value), dealing))
            )
        window.restore(items)
        windows[key] = window
        if holding:
            last_taken[key] = time.monotonic()
            table_partition[key] = holding[0][0]

    async def load(key: bytes) -> Applied | None:
        entry, loaded = cache.get(key, states.get(key))
        if entry is None:
            if key not in live:
                windows.pop(key, None)
            return None
        if loaded:  # maybe undelivered before a crash: send again
            outbox.forget(key)
            for value in entry.findings:
                await send(key, True, value)
            for value in entry.rounds:
                await send(key, False, value)
        if loaded or key not in windows:
            window_of(key, entry.state, entry.held)
        return Applied(entry.partition, entry.offset, entry.state, entry.unfit)

    # Every event judged here, by table and seq (streams.seen): an exact copy of one, however
    # far back, is a duplicate delivery, skipped before the engine. A table this process took
    # over (a restart, a rebalance) is read back from its partition once, at its first late event.
    seen = SeenIndex(Path(app.conf.datadir))
    read_back: set[bytes] = set()

    async def duplicate(key: bytes, msg: Any, dealing: ev.DealingEvent, data: bytes) -> bool:
        """True if ``dealing`` (at or below its table's last seq) is the same fact as an event
        of its table judged before, in this process or on the topic before ``msg``."""
        if seen.is_copy(dealing, data):
            return True
        if key in read_back or seen.knows(dealing.table_id, dealing.seq):
            return False
        read_back.add(key)
        backoff = Backoff(first=0.5, cap=5.0)
        away: tuple[type[BaseException], ...] = (*unreachable_errors(), TimeoutError)
        while True:
            try:
                records = await asyncio.to_thread(
                    read_range, settings.kafka, msg.topic, msg.partition, 0, msg.offset, {key}
                )
                break
            except away:  # the cluster is away: wait for it (capped backoff)
                await asyncio.sleep(backoff.next())
            except Exception:  # the engine judges the event as it would without the index
                table = key.decode(errors="replace")
                log.exception("table %s: could not read back %s[%d]", table, msg.topic, msg.partition)
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

    async def step(
        key: bytes,
        current: Applied | None,
        msg: Any,
        dealing: ev.DealingEvent,
        raw: bytes,
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
        if before is not None and dealing.seq <= before.last_seq and await duplicate(key, msg, dealing, data):
            duplicates[0] += 1
            return Applied(msg.partition, msg.offset, before, unfit)
        try:
            state, found = apply(before, dealing, data, limits)
        except EventRejected as exc:
            await dead_letter(msg.topic, msg.key, position, exc.reason, exc.detail, raw)
            return Applied(msg.partition, msg.offset, before, unfit) if before is not None else None
        except Exception as exc:
            log.exception("engine error at %s", position)
            detail = f"{type(exc).__name__}: {exc}"[:500]
            await dead_letter(msg.topic, msg.key, position, "engine_error", detail, raw)
            return Applied(msg.partition, msg.offset, before, unfit) if before is not None else None
        if state is before and not found:
            duplicates[0] += 1  # an exact copy the engine recognised
        else:
            seen.note(dealing, data, applied=before is None or dealing.seq > before.last_seq)
            counts.applied += 1
        counts.findings += len(found)
        for f in found:
            await send(key, True, f.model_dump_json().encode())
        if (
            isinstance(dealing, ev.RoundCompleted)
            and before is not None
            and before.round is not None
            and state.last_event_id == dealing.event_id
        ):
            await send(key, False, round_json(round_row(before.round, state, dealing)))
        if before is not None and dealing.seq < before.last_seq:
            unfit = True  # out of seq order: a replay applies it earlier, and may differ from here on
        elif not unfit and state is not before and snapshot_due(before, state, snapshot_every):
            partition, offset = through if through is not None else (msg.partition, msg.offset)
            value = snapshot_value(state, dealing.occurred_at, partition, offset)
            await snapshots_topic.send(key=key, value=value)
        return Applied(msg.partition, msg.offset, state, unfit)

    async def mismatched(msg: Any, dealing: ev.DealingEvent, raw: bytes) -> bool:
        """True (after dead-lettering it as ``key_mismatch``) if the message's key is not its table."""
        detail = key_mismatch(msg.key, dealing)
        if detail is None:
            return False
        position = f"{msg.topic}[{msg.partition}]@{msg.offset}"
        await dead_letter(msg.topic, msg.key, position, "key_mismatch", detail, raw)
        return True

    async def take(
        key: bytes,
        current: Applied | None,
        msg: Any,
        dealing: ev.DealingEvent,
        raw: bytes,
        through: tuple[int, int] | None = None,
    ) -> Applied | None:
        """Take one message of table ``key`` into its reorder window and apply what the window
        releases (in seq order); returns where the table stands: its position is that of
        ``msg``, the last message taken, whether applied or held. ``through``: the partition and
        offset of the last message taken from the table's partition, when ``msg`` is an earlier
        one read again (``recheck``); None: ``msg``'s own."""
        window = windows.get(key)
        if window is None:
            window = windows[key] = TableWindow(current.state.last_seq if current is not None else None, window_limits)
        last_taken[key] = partition_taken[msg.partition] = time.monotonic()
        table_partition[key] = msg.partition
        try:  # judged on arrival (rulebook 10.3.4): a seq far ahead must not wait in the window
            intake.check(dealing)
            check_plausible(window.last, dealing, limits)
        except EventRejected as exc:
            position = f"{msg.topic}[{msg.partition}]@{msg.offset}"
            await dead_letter(msg.topic, msg.key, position, exc.reason, exc.detail, raw)
            return None if current is None else Applied(msg.partition, msg.offset, current.state, current.unfit)
        taken = Taken(msg.topic, msg.partition, msg.offset, msg.key, raw)
        for item, event in window.push(dealing.seq, dealing.occurred_at, (taken, dealing)):
            at = through if through is not None else (msg.partition, msg.offset)
            current = await step(key, current, item, event, item.value, at)
            if current is not None:
                window.last = current.state.last_seq  # the engine's word on where the table is
        if current is None:
            return None
        return Applied(msg.partition, msg.offset, current.state, current.unfit)

    async def release_idle(now: float) -> None:
        """Apply what the windows of tables idle for ``reorder.idle`` seconds hold, a table being
        idle while neither it nor its partition has had a message for that long and the agent
        has taken every message of its partition up to the high watermark seen (the stream's
        end of input: the audit and the re-audit empty their windows at the end of theirs).
        Quiet time counts from the last stall of the process at the latest (``running_since``).
        A stop or a rebalance does not apply them: they are stored with the table's state and
        held by whichever worker owns the partition next. Called with ``lock`` held."""
        for key in [k for k, w in windows.items() if len(w)]:
            partition = table_partition.get(key, -1)
            quiet_since = max(last_taken.get(key, now), partition_taken.get(partition, 0.0), running_since[0])
            if not window_due(now - quiet_since, settings.reorder.idle, consumer_reached, partition):
                continue
            current = await load_live(key)  # (re)builds the window from the stored entry if need be
            window = windows.get(key)
            if current is None or window is None:
                continue
            position = (current.partition, current.offset)
            taken = (position[0], position[1]) if position[0] is not None else None  # the last message taken
            for item, event in window.flush():
                current = await step(key, current, item, event, item.value, taken)
                if current is None:
                    break
                window.last = current.state.last_seq
            if current is not None:
                live[key] = Applied(position[0], position[1], current.state, current.unfit)

    # table -> offsets [first, end) of its partition that the consumer passed over before the
    # table's current run (its stored offset lies before the run) and that were not read again
    # because its next event did not jump in seq: in an out-of-order trail a passed-over event
    # (seq n + 1, published before seq n) hides behind a next event that looks in order, and the
    # range is read again as soon as the table's window holds an event (a hole where that event
    # would be); a range whose table never holds one is never read
    unverified: dict[bytes, tuple[int, int]] = {}

    async def recheck(key: bytes, current: Applied, msg: Any, first: int, end: int) -> Applied | None:
        """Take the messages of table ``key`` at offsets ``first`` to ``end - 1`` of ``msg``'s
        partition, read again (see ``unverified``); returns where the table stands, at the
        position of ``msg`` (the last message taken from the consumer)."""
        backoff = Backoff(first=0.5, cap=5.0)
        away: tuple[type[BaseException], ...] = (*unreachable_errors(), TimeoutError)
        while True:
            try:
                records = await asyncio.to_thread(
                    read_range, settings.kafka, msg.topic, msg.partition, first, end, {key}
                )
                break
            except away:  # the cluster is away: wait for it (capped backoff)
                await asyncio.sleep(backoff.next())
            except Exception:  # the worker goes on; the window gives up on the hole as the audit would
                log.exception(
                    "table %s: could not re-read %s[%d]", key.decode(errors="replace"), msg.topic, msg.partition
                )
                return current
        if not records:
            return current
        log.warning(
            "table %s: an event is held; re-read %s[%d] offsets %d..%d, passed over before: %d message(s) of the table",
            key.decode(errors="replace"), msg.topic, msg.partition, first, end - 1, len(records),
        )  # fmt: skip
        state: Applied | None = current
        for rec in records:
            raw = bytes(rec.value or b"")
            dealing = await decoded(rec, raw)
            if dealing is not None and not await mismatched(rec, dealing, raw):
                state = await take(key, state, rec, dealing, raw, (msg.partition, msg.offset))
        return None if state is None else Applied(msg.partition, msg.offset, state.state, state.unfit)

    async def catch_up(key: bytes, current: Applied, msg: Any, seq: int) -> Applied | None:
        """Apply the messages of table ``key`` between its stored offset and ``msg`` (same
        partition) that the consumer passed over, read again; returns where the table stands."""
        backoff = Backoff(first=0.5, cap=5.0)
        away: tuple[type[BaseException], ...] = (*unreachable_errors(), TimeoutError)
        while True:
            try:
                records = await asyncio.to_thread(
                    read_range, settings.kafka, msg.topic, msg.partition, current.offset + 1, msg.offset, {key}
                )
                break
            except away:  # the cluster is away: wait for it (capped backoff)
                await asyncio.sleep(backoff.next())
            except Exception:  # the worker goes on; the engine reports the seq gap as a finding
                log.exception(
                    "table %s: could not re-read %s[%d]", key.decode(errors="replace"), msg.topic, msg.partition
                )
                return current
        log.warning(
            "table %s: seq %d follows %d; re-read %s[%d] offsets %d..%d: %d message(s) of the table",
            key.decode(errors="replace"), seq, current.state.last_seq, msg.topic, msg.partition,
            current.offset + 1, msg.offset - 1, len(records),
        )  # fmt: skip
        state: Applied | None = current
        for rec in records:
            raw = bytes(rec.value or b"")
            dealing = await decoded(rec, raw)
            if dealing is not None and not await mismatched(rec, dealing, raw):
                state = await take(key, state, rec, dealing, raw)
        return state

    # Tables whose state changed since it was last written, and the events applied since then,
    # held unacknowledged (an extra reference each) until the states that hold them are written:
    # Faust commits the offset of an acknowledged event only, after flushing the producer, so
    # the state is always in the changelog before the offsets it holds are committed.
    live: dict[bytes, Applied | None] = {}
    held: list[Any] = []
    lock = asyncio.Lock()
    interval = settings.worker.state_interval
    last_write = [time.monotonic()]

    async def load_live(key: bytes) -> Applied | None:
        return live[key] if key in live else await load(key)

    async def write_states() -> None:
        """Write the state of every table changed since the last write (its Faust table entry
        and changelog record, with its outbox), then acknowledge the events applied since.
        Called with ``lock`` held."""
        for key, current in live.items():
            if current is None:
                continue
            findings, rounds = outbox.undelivered(key)
            window = windows.get(key)
            holding = tuple((t.partition, t.offset, t.value) for _, _, (t, _) in window.held()) if window else ()
            entry = Stored(current.offset, current.state, findings, rounds, current.partition, current.unfit, holding)
            stored = STORED.dump_json(entry)
            await write_state(states, key, stored, current.partition)
            cache.put(key, stored, entry)
        live.clear()
        for event in held:
            event.ack()
        held.clear()
        last_write[0] = time.monotonic()
        if duplicates[0] != reported[0]:
            log.info("%d duplicate deliveries skipped (exact copies of events judged before)", duplicates[0])
            reported[0] = duplicates[0]

    # record batches the consumer cannot read are passed over (streams.batches) and dead-lettered here
    unreadable = guard_aiokafka()

    async def report_unreadable() -> None:
        while unreadable:
            bad = unreadable.popleft()
            if bad.topic == source_name:
                passed.setdefault(bad.partition, []).append((bad.first, bad.last))
            log.warning(
                "%s cannot be read (%s): sent to the dead-letter topic (unreadable_batch); reading on from offset %d",
                bad.position, bad.error[:200], bad.last + 1,
            )  # fmt: skip
            await dead_letter(bad.topic, None, bad.position, "unreadable_batch", bad.error, b"")

    # When the process last ran again after a stall (the timer late by more than reorder.idle:
    # SIGSTOP, a frozen VM, a blocked loop): the high watermarks its consumer saw before are
    # stale then, and a window is applied only after reorder.idle seconds of running since.
    running_since = [time.monotonic()]
    timer_ran = [time.monotonic()]

    @app.timer(interval)  # type: ignore[untyped-decorator]  # faust leaves its timer decorator untyped
    async def write_states_on_time() -> None:
        """Write the changed states every ``interval`` even when no batch comes (a rebalance
        waits for every held event to be acknowledged), and dead-letter the batches passed over."""
        now = time.monotonic()
        if stalled(timer_ran[0], now, interval, settings.reorder.idle):
            running_since[0] = now
        timer_ran[0] = now
        await report_unreadable()
        async with lock:
            if windows and not draining[0]:
                await release_idle(time.monotonic())
            if held or live:  # live alone: a window applied with no new message since
                await write_states()

    # Set while a stop or a rebalance waits for every started event to be acknowledged: a batch
    # taken before the flow stopped may still be applied then, and its states are written (and
    # its events acknowledged) at its end instead of at the next interval.
    draining = [False]

    async def drain() -> None:
        """Write the states of the events held, with what the reorder windows hold (a stop or a
        rebalance waits for them): the windows are not applied, the worker that owns their
        partitions next holds them as the audit would (see ``hold_again``)."""
        draining[0] = True
        async with lock:
            if held or live:
                await write_states()

    app.before_drain = drain  # type: ignore[attr-defined]  # WorkerApp's hook (see _app_class)

    # messages a consumer passed over (see DeliveredRuns): a seq jump of a table whose last
    # taken offset lies before its partition's current run is checked by reading the gap again
    runs = DeliveredRuns()

    @app.on_partitions_assigned.connect  # type: ignore[arg-type]  # mode types receivers as returning None
    async def drained(sender: Any, *args: Any, **kwargs: Any) -> None:
        """The rebalance is over: states are written every ``interval`` again."""
        draining[0] = False
        assigned = args[0] if args else kwargs.get("assigned", ())
        says.info("assigned %s", partitions_line(assigned, source_name))
        # the tables' windows are rebuilt from their stored entries (this worker may have lost
        # some partitions, or got back one whose tables another worker moved on)
        windows.clear()
        last_taken.clear()
        partition_taken.clear()
        table_partition.clear()
        partition_next.clear()
        passed.clear()
        runs.clear()
        unverified.clear()

    @app.on_rebalance_complete.connect  # type: ignore[arg-type]  # mode types receivers as returning None
    async def hold_again(sender: Any, *args: Any, **kwargs: Any) -> None:
        """The table entries of the partitions assigned are restored: hold again what their
        windows held when they were written (the worker that had them stopped or gave them up),
        so a window is applied when its partition is read to the end and idle, as on the
        worker that wrote it, even if no more message of its table comes."""
        try:
            mine = {tp.partition for tp in app.consumer.assignment() if tp.topic == source_name}
        except Exception:  # no consumer (stopping): nothing to hold
            return
        async with lock:
            restored = 0
            for key, value in list(states.data.items()):
                if key in windows or key in live or not stored_holds(value):
                    continue
                entry = STORED.validate_python(value) if isinstance(value, dict) else STORED.validate_json(value)
                if entry.partition not in mine:
                    continue  # left over from a partition this worker had: its owner holds them
                await load(key)
                restored += len(entry.held)
            if restored:
                says.info("holding again %d event(s) stored in the reorder windows of the tables taken over", restored)

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]  # mode types receivers as returning None
    async def revoked(sender: Any, *args: Any, **kwargs: Any) -> None:
        """Say which partitions this worker gives up (their windows are applied and their states
        written before the rebalance goes on: see ``drain``)."""
        given = args[0] if args else kwargs.get("revoked", ())
        if any(tp.topic == source_name for tp in given):
            says.info("revoked %s", partitions_line(given, source_name))

    @app.agent(source)
    async def audit(stream: Any) -> None:
        async for events in stream.take_events(batch, within=within):
            async with lock:
                for event in events:
                    event.message.incref()  # acknowledged by write_states, not by take_events
                    held.append(event)
                    msg = event.message
                    start = runs.note(msg.partition, msg.offset)
                    partition_next[msg.partition] = max(partition_next.get(msg.partition, 0), msg.offset + 1)
                    raw: bytes = msg.value if isinstance(msg.value, bytes) else bytes(msg.value or b"")
                    dealing = await decoded(msg, raw)
                    if dealing is None or await mismatched(msg, dealing, raw):
                        continue
                    key = dealing.table_id.encode()
                    current = await load_live(key)
                    if current is not None and current.holds(msg.partition, msg.offset):
                        continue  # a redelivery of a message this state already holds
                    if current is not None and current.same_partition(msg.partition) and current.offset + 1 < start:
                        window = windows.get(key)
                        top = max([current.state.last_seq, *(h[0] for h in (window.held() if window else ()))])
                        skipped = dealing.seq > top + 1
                        if not skipped:  # see unverified
                            unverified[key] = (current.offset + 1, start)
                    else:
                        skipped = False
                    if skipped and current is not None:
                        # A seq jump: either the trail has a gap (the engine reports it) or the
                        # consumer passed over messages of this table (a Faust rebalance can skip
                        # prefetched messages and still commit past them); read them again first.
                        unverified.pop(key, None)
                        current = await catch_up(key, current, msg, dealing.seq)
                    taken = live[key] = await take(key, current, msg, dealing, raw)
                    if key in unverified and taken is not None and len(windows.get(key) or ()):
                        first, end = unverified.pop(key)
                        live[key] = await recheck(key, taken, msg, first, end)
                if draining[0] or time.monotonic() - last_write[0] >= interval:
                    await write_states()

    return app


ALIVE_EVERY = 2.0
"""Seconds between two touches of the worker's alive file, and two probes of the cluster (seconds)."""
QUIET_AFTER_ERROR = 3.0
"""The cluster is taken as back once it accepts connections and the client has logged no
connection error for this long (seconds)."""
CONNECTION_ERRORS = (
    "Unable connect to node",
    "Unable to update metadata",
    "Unable to request metadata",
    "Connect call failed",
    "NodeNotReadyError",
    "KafkaConnectionError",
    "Marking the coordinator dead",
)
"""Parts of the aiokafka log lines that mean the cluster is out of reach."""


class LinkWatch(logging.Filter):
    """The worker's view of its Kafka connection: one line when it is lost, one when it is back.

    As a filter on the aiokafka loggers it drops their per-retry lines (thousands a second while
    the broker is down) and marks the link down on the first; :meth:`probe`, run by a timer,
    marks it up again once a bootstrap broker accepts connections and the client has been quiet
    for :data:`QUIET_AFTER_ERROR` seconds. While the link is down every aiokafka line below
    CRITICAL is dropped; while it is up only the connection errors are.

    Args:
        link: the connection state that prints the two lines.
        clock: monotonic seconds.
    """

    def __init__(self, link: KafkaLink, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.link, self.clock = link, clock
        self.last_error = -1e9

    def filter(self, record: logging.LogRecord) -> bool:
        """Drop (and act on) an aiokafka record; keep the rest."""
        if record.levelno >= logging.CRITICAL:
            return True
        if record.levelno >= logging.WARNING:
            message = record.getMessage()
            if any(part in message for part in CONNECTION_ERRORS):
                self.last_error = self.clock()
                if self.link.connected or not self.link.ever_connected:
                    self.link.down(message[:200])
                return False
        return self.link.connected

    async def probe(self, bootstrap: str, timeout: float = 2.0) -> None:
        """Mark the link up when a bootstrap broker accepts a connection and the client has been
        quiet long enough; down when none does."""
        reached = False
        for address in bootstrap.split(","):
            host, _, port = address.strip().rpartition(":")
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)), timeout)
            except (OSError, TimeoutError, ValueError):
                continue
            writer.close()
            reached = True
            break
        if not reached:
            self.link.down(f"no broker of {bootstrap} accepts connections")
        elif self.clock() - self.last_error >= QUIET_AFTER_ERROR:
            self.link.up()

    def install(self) -> None:
        """Filter every aiokafka logger that exists now (Faust imported them all)."""
        for name in list(logging.Logger.manager.loggerDict):
            if name == "aiokafka" or name.startswith("aiokafka."):
                logger = logging.getLogger(name)
                if self not in logger.filters:
                    logger.addFilter(self)


def watch_link(app: faust.App, settings: Settings) -> LinkWatch:
    """Add the worker's liveness and connection timer to ``app``: every :data:`ALIVE_EVERY`
    seconds it touches ``worker.alive_file`` (when set) and probes the cluster (see
    :class:`LinkWatch`); it runs through broker outages, as long as the event loop does."""
    watch = LinkWatch(KafkaLink(settings.kafka.bootstrap, log.warning))
    watch.install()
    # kafka-python (the worker's re-reads of passed-over messages, which retry while the cluster
    # is away) logs a line per reconnection attempt: its loggers, made on first use, inherit this
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    alive = settings.worker.alive_file

    @app.timer(ALIVE_EVERY)  # type: ignore[untyped-decorator]  # faust leaves its timer decorator untyped
    async def alive_and_linked() -> None:
        if alive is not None:
            with contextlib.suppress(OSError):  # a liveness check then fails, which says enough
                alive.touch()
        await watch.probe(settings.kafka.bootstrap)

    return watch


STOP_WITHIN = 5.0
"""Seconds a stopping worker waits for the cluster before it exits without it (seconds): compose
sends SIGKILL 10 s after SIGTERM."""


def _worker_class() -> type[faust.Worker]:
    """``faust.Worker`` that, once told to stop (SIGTERM or SIGINT), exits within
    :data:`STOP_WITHIN` seconds if the cluster does not answer (see :func:`_exit_when_stuck`)."""
    import faust

    class StoppingWorker(faust.Worker):
        on_stop_signal: Callable[[], None] | None = None

        def _schedule_shutdown(self, signal: Any) -> None:
            if not self._signal_stop_time and self.on_stop_signal is not None:
                self.on_stop_signal()
            super()._schedule_shutdown(signal)

    return StoppingWorker


def _stopped_line(counts: WorkCounts) -> None:
    says.info(
        "worker stopped: %d events applied, %d findings sent, %d dead letters",
        counts.applied, counts.findings, counts.dead_letters,
    )  # fmt: skip


def _exit_when_stuck(settings: Settings, watch: LinkWatch, counts: WorkCounts | None = None) -> None:
    """Started by the stop signal: after :data:`STOP_WITHIN` seconds, once the cluster does not
    answer, say so in one line, remove the worker's own folder and alive file, and exit (0).

    Nothing is lost: the events whose states could not be written were not acknowledged, so the
    worker group reads them again after a restart (at-least-once; the engine ignores the copies).
    """
    import threading

    def one_line(args: threading.ExceptHookArgs) -> None:
        # the client threads that Faust stops fail on the absent cluster: a line, not a traceback
        log.warning(
            "stopping: %s ended with %s", args.thread.name if args.thread else "a thread", args.exc_type.__name__
        )

    threading.excepthook = one_line

    def wait() -> None:
        time.sleep(STOP_WITHIN)
        while watch.link.connected:  # the cluster answers: the stop is only slow, let it finish
            time.sleep(0.5)
        log.warning(
            "stopping without Kafka at %s: exiting now; the events not yet written are read again "
            "after a restart (nothing is lost)",
            settings.kafka.bootstrap,
        )
        shutil.rmtree(worker_datadir(settings), ignore_errors=True)
        if settings.worker.alive_file is not None:
            settings.worker.alive_file.unlink(missing_ok=True)
        if counts is not None:
            _stopped_line(counts)
        logging.shutdown()
        os._exit(0)

    threading.Thread(target=wait, name="dealtrail-stop-deadline", daemon=True).start()


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


def run_worker(settings: Settings) -> None:
    """Run the worker until it is stopped (SIGTERM or SIGINT); exits the process.

    Through a broker outage of any length the worker keeps running: its clients reconnect by
    themselves, and one line says that the connection is lost and one that it is back
    (:class:`LinkWatch`); ``worker.alive_file`` is touched all along. A stop during an outage
    ends the process within :data:`STOP_WITHIN` seconds.

    The worker's own data folder (:func:`worker_datadir`) is removed when it stops; only a
    killed worker (SIGKILL) leaves its folder behind.
    """
    app = create_app(settings)
    watch = watch_link(app, settings)
    counts: WorkCounts = app.work_counts  # type: ignore[attr-defined]
    say_lifecycle()
    topics = settings.topics
    says.info(
        "worker starting: group %s, reading %s, writing %s, %s, %s, %s; Kafka at %s; compression %s",
        topics.app_id, topics.events.name, topics.findings.name, topics.rounds.name, topics.snapshots.name,
        topics.dead_letter.name, settings.kafka.bootstrap, settings.kafka.compression,
    )  # fmt: skip
    try:
        worker = _worker_class()(app, loglevel=settings.worker.loglevel, quiet=settings.worker.loglevel != "debug")
        worker.on_stop_signal = lambda: _exit_when_stuck(settings, watch, counts)  # type: ignore[attr-defined]
        worker.spinner = None
        settle_heap()
        worker.execute_from_commandline()
    finally:
        _stopped_line(counts)
        shutil.rmtree(worker_datadir(settings), ignore_errors=True)
        if settings.worker.alive_file is not None:
            settings.worker.alive_file.unlink(missing_ok=True)
