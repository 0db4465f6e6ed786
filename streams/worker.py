"""The Faust worker: a thin adapter around the pure engine, in two processes.

One agent consumes the dealing-events topic in batches (``stream.take_events``) and hands each
batch of raw messages to the worker's judge process (:mod:`streams.judge`), which decodes each
message at the edge, passes it through its table's reorder window and duplicate index, applies
:func:`streams.engine.apply` to the table's state, and says what to send. This process sends
findings and completed rounds to their topics as soon as the judge's answer comes back, while
the judge already works on the next batch. The states of the tables changed are written to a
Faust table (backed by its changelog) every ``worker.state_interval`` seconds, not per batch (a
state is a whole table's JSON, 15 KB and more): the events applied in between are held
unacknowledged until then, so Faust never commits an offset before the state that holds it.
Every ``snapshot_every`` seqs of a table the worker also sends the table's engine state to the
snapshots topic (:func:`streams.judge.snapshot_value`), which the projector stores for replays.
A message that fails validation goes to the dead-letter topic with its reason; the agent goes
on. Delivery is at-least-once: findings have deterministic IDs and the engine ignores exact
duplicates, so a redelivered batch is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import shutil
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from streams.batches import guard_aiokafka
from streams.clock import utc_now
from streams.judge import (
    DEAD_LETTER,
    FINDING,
    FORGET,
    ROUND,
    SNAPSHOT,
    JudgeProcess,
    Outcome,
    settle_heap,
    stored_json,
)
from streams.kafka import compression_type, faust_credentials, read_committed
from streams.link import KafkaLink
from streams.metrics import DEAD_LETTERS, EVENTS_JUDGED, FINDINGS, REORDER_HELD, ROUND_LATENCY, ROUNDS
from streams.publish import dead_letter_value

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


def count_sent(kind: str, value: bytes, sent: Any, published: float | None) -> None:
    """Count a record the worker sent in its metrics: a finding by rule and severity, a dead
    letter by reason, a round record (and, once the broker acknowledges it, the time since
    ``published``, the broker's timestamp of the newest event of its batch, in epoch seconds)."""
    if kind == FINDING:
        try:
            finding = json.loads(value)
            FINDINGS.labels(str(finding.get("rule_id", "")), str(finding.get("severity", ""))).inc()
        except ValueError:  # the worker's own JSON: never, but a metric never stops a send
            FINDINGS.labels("unknown", "unknown").inc()
    elif kind == DEAD_LETTER:
        try:
            DEAD_LETTERS.labels(str(json.loads(value).get("reason", "unknown"))).inc()
        except ValueError:
            DEAD_LETTERS.labels("unknown").inc()
    elif kind == ROUND:
        ROUNDS.inc()
        if published is not None:
            add = getattr(sent, "add_done_callback", None)

            def acknowledged(future: Any) -> None:
                if _delivered(future):
                    ROUND_LATENCY.observe(max(0.0, time.time() - published))

            if add is None:
                acknowledged(sent)
            else:
                add(acknowledged)


async def write_state(table: Any, producer: Any, key: bytes, stored: bytes, partition: int | None = None) -> None:
    """Set ``table[key] = stored`` and send its changelog record through the producer's lane
    for states (``producer.send_state``, see :func:`_transport_class`), awaited.

    ``table[key] = value`` in Faust puts the changelog record in a producer buffer, and the
    flush before an offset commit gives up on that buffer after 0.1 s of silence
    (faust-streaming 0.15.3, ``ProducerBuffer.flush_atmost``); while an agent holds the event
    loop with a long batch, a commit could then land before the state of the events it
    commits, and a crash right after restored a state older than the committed offsets (the
    events in between were never applied again: a sequence gap that the replay does not
    have). Sending the record with an awaited ``send_state`` hands it to the states' Kafka
    producer before the batch is acknowledged, and the flush before each commit waits for it.

    The record goes to the changelog partition of the same number as the events partition the
    table's messages come from: Faust restores a worker's table entries from the changelog
    partitions of the events partitions assigned to it, so a table published by a producer
    whose partitioner is not murmur2 (librdkafka's CRC32) keeps its state on the worker that
    takes its events over after a rebalance or a restart.

    Args:
        table: the Faust table (raw bytes keys and values).
        producer: the app's producer (its ``send_state``: a Kafka producer of its own, so a
            slow append of the states does not hold up the findings and round records).
        key: the table ID as bytes.
        stored: the entry as JSON bytes.
        partition: the table's events partition (None: the key's partition by murmur2, as the
            Java client and Faust's producer place it).
    """
    table.data[key] = stored
    await producer.send_state(table.changelog_topic.get_topic_name(), key, stored, partition)


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


PRODUCER_BATCH_BYTES = 512 * 1024
"""The most bytes the worker's producer puts in one batch of a partition (aiokafka's default:
16 KB); see :func:`faust_settings`."""


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
        # A table entry is 15 KB and more: in aiokafka's default 16 KB batches nearly every entry
        # filled its partition's batch, and the next one waited for it to be sent (1.5 ms each,
        # up to 95 ms for one state write, findings waiting behind it). Half the broker's 1 MB
        # message limit, so a batch fits it even uncompressed.
        "producer_max_batch_size": PRODUCER_BATCH_BYTES,
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
    0.15.3 sets, and whose producer sends the table's states through a Kafka producer of their
    own (``send_state``).

    **Two producers.** aiokafka sends one produce request at a time to a broker. A state write
    (about 50 entries of 6 to 14 KB, compressed to 70-85 KB, once per ``state_interval``)
    shared the request queue with the findings and round records, and an append of it that
    the broker took 120 to 270 ms over (its request log: ``localTimeMs``, in
    ``LogSegment.append``) held every round record sent meanwhile that long: most of the tail
    of ``make bench-stream`` (p99 114 to 192 ms in six runs; 88 to 109 in six with the
    states on their own producer: docs/performance.md). The states' producer has the same
    settings (client ID with ``-states``); ``flush`` waits for both, so Faust's commit still
    finds each state in the changelog before the offsets it holds are committed, and a stop
    sends what both hold.

    ``send_state(topic, key, value, partition)`` returns the delivery future; it raises
    ``faust.exceptions.ProducerSendError`` if the record cannot be queued (not started, too
    large). A state whose delivery fails for good stops the worker (``app.on_judge_failed``:
    exit 1 under :func:`run_worker`) and makes every later ``flush`` raise
    ``ProducerSendError``, so Faust commits no offset after it: aiokafka's own flush returns
    even when a batch failed.

    **The fetch wait.** aiokafka sends one fetch at a time to a broker, for the assigned
    partitions that hold no record still to be handed on. When the agent has not yet taken a
    busy partition's records, the fetch that goes out can name only quiet partitions (Faust's
    ``__assignor-__leader`` topic, which never gets a record): the broker holds it the whole
    wait, and nothing new of any partition is fetched until it returns. Measured with ``make
    bench-stream --stages``: fetches of that leader partition alone, 1.5 s each, and the events
    appended 0.9 s (p50) before they were in a fetch response. The wait bounds that stall.
    """
    from faust.exceptions import ProducerSendError
    from faust.transport.drivers import aiokafka as driver

    wait_ms = max(1, round(fetch_max_wait * 1000))

    class FetchThread(driver.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            # aiokafka 0.14 gives this to the Fetcher it makes when the consumer starts
            consumer._fetch_max_wait_ms = wait_ms
            # committed records only, as every consumer of dealtrail (Faust asks for it only
            # under exactly_once): an aborted transaction's records are never taken
            return read_committed(consumer)

    class FetchConsumer(driver.Consumer):
        def _new_consumer_thread(self) -> FetchThread:
            return FetchThread(self, loop=self.loop, beacon=self.beacon)

    class TwoLaneProducer(driver.Producer):
        """Faust's producer, and beside it one for the table's states (see above)."""

        _states: Any = None

        def __post_init__(self) -> None:
            super().__post_init__()
            self._unsent: set[asyncio.Future[Any]] = set()  # states not yet acknowledged by the broker
            self._failed: list[BaseException] = []

        def _settle(self, delivery: asyncio.Future[Any]) -> None:
            """A state's delivery ended: one that failed for good (the producer gave up) stops
            the worker, as a failed send does (``app.on_judge_failed``), and fails every flush
            after it, so no offset of the events it holds is committed (they are read again)."""
            self._unsent.discard(delivery)
            if delivery.cancelled() or delivery.exception() is None:
                return
            error = delivery.exception()
            assert error is not None
            self._failed.append(error)
            log.critical(
                "the worker stops: a state could not be written to the changelog (%s); nothing is lost "
                "(the events it holds are read again)",
                f"{type(error).__name__}: {error}"[:300],
            )
            stop = getattr(self.app, "on_judge_failed", None)
            if stop is not None:
                stop()

        async def on_start(self) -> None:
            await super().on_start()
            config = {**self._settings_default(), **self._settings_auth(), **self._settings_extra()}
            config["client_id"] = f"{config['client_id']}-states"
            self._states = self._producer_type(**config)
            await self._states.start()

        async def on_stop(self) -> None:
            if self._states is not None:
                await self._states.stop()  # sends what it holds first
                self._states = None
            await super().on_stop()

        async def flush(self) -> None:
            await super().flush()
            if self._states is not None:
                await self._states.flush()
            # a delivery that failed, its callback not run yet, counts as well
            failed = [*self._failed, *(d.exception() for d in self._unsent if d.done() and not d.cancelled())]
            first = next((error for error in failed if error is not None), None)
            if first is not None:
                raise ProducerSendError(f"a state could not be written to the changelog: {first!r}")

        async def send_state(self, topic: str, key: bytes, value: bytes, partition: int | None) -> Any:
            from aiokafka.errors import KafkaError

            if self._states is None:
                raise ProducerSendError("the producer of the states is not started")
            try:
                delivery = await self._states.send(topic, value, key=key, partition=partition)
            except KafkaError as exc:
                raise ProducerSendError(f"Error while sending a state: {exc!r}") from exc
            self._unsent.add(delivery)
            delivery.add_done_callback(self._settle)
            return delivery

    class FetchTransport(driver.Transport):
        Consumer = FetchConsumer
        Producer = TwoLaneProducer

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

    The agent hands each batch of raw messages to the worker's judge process
    (:class:`streams.judge.JudgeProcess`: decode, reorder window, duplicate index, engine) and
    carries out what it decides, in order: findings, round rows, snapshots and dead letters
    sent, table entries written (with this process's outbox), events acknowledged once the
    entries that hold them are written. The next batch is handed over while the judge works on
    the one before (at most :data:`IN_FLIGHT` calls out).

    Args:
        settings: cluster, namespace (topic names, application ID) and worker tuning.
        clock: the worker's clock (timezone-aware, picklable; the system clock by default): an
            event recorded more than ``max_clock_skew`` after it is dead-lettered as
            ``recorded_in_future`` when it is taken, before the engine sees it.

    Returns:
        The app, with the ``audit`` agent and the ``table-states`` table registered; its
        ``judge`` (not started: :func:`run_worker` starts it before the event loop runs and
        closes it at the end).
    """
    from faust.types import TP

    topics = settings.topics
    app = _app_class(settings.worker.fetch_max_wait)(topics.app_id, **faust_settings(settings))
    # Faust makes <datadir>/v<version>/tables on start (mode masked by the umask only): made
    # here first, owner-only, Faust finds them there
    private_folder(Path(app.conf.tabledir))
    source_name = topics.events.name

    def raw_topic(name: str) -> Any:
        return app.topic(name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")

    source = raw_topic(source_name)
    sends = {
        FINDING: raw_topic(topics.findings.name),
        ROUND: raw_topic(topics.rounds.name),
        SNAPSHOT: raw_topic(topics.snapshots.name),
        DEAD_LETTER: raw_topic(topics.dead_letter.name),
    }
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
    outbox = Outbox()
    counts = WorkCounts()
    app.work_counts = counts  # type: ignore[attr-defined]  # read by run_worker's stop line
    judge = JudgeProcess(settings, clock, Path(app.conf.datadir))
    app.judge = judge  # type: ignore[attr-defined]  # started and closed by run_worker
    # what the worker does when its judge fails or a send fails for good (run_worker: exit 1)
    app.on_judge_failed = None  # type: ignore[attr-defined]
    batch, within = settings.worker.batch, settings.worker.within
    interval = settings.worker.state_interval

    # table -> the Faust table value its judge holds (decoded, or known to be absent), by
    # identity: a value the judge does not hold (restored from the changelog after a rebalance,
    # written by another worker) is handed over with the next call that may load it
    known: dict[bytes, object] = {}

    def given(keys: Iterable[bytes]) -> dict[bytes, Any]:
        out: dict[bytes, Any] = {}
        for key in keys:
            value = states.get(key)
            if known.get(key, _UNKNOWN) is not value:
                out[key] = value
        return out

    # The calls out to the judge, in order: (number, its result, done when carried out), and the
    # events handed over and not acknowledged yet, with the number of the call that took them.
    # Faust commits the offset of an acknowledged event only, after flushing the producer, so a
    # state is always in the changelog before the offsets it holds are committed.
    calls: deque[tuple[int, asyncio.Future[Outcome], asyncio.Future[None], dict[bytes, Any]]] = deque()
    # the broker's timestamp of the newest event of each batch call (epoch seconds), for the
    # round-record latency of what the call decides
    published: dict[int, float] = {}
    held: deque[tuple[int, Any]] = deque()
    numbers = itertools.count()
    carrier: list[asyncio.Task[None]] = []
    carried = [-1]  # the number of the last call carried out
    last_write = [time.monotonic()]
    broken: list[BaseException] = []

    def call(
        method: str,
        *args: Any,
        events: Iterable[Any] = (),
        handed: dict[bytes, Any] | None = None,
        newest: float | None = None,
    ) -> asyncio.Future[None]:
        """Hand ``method`` of the judge to its process (after every call made before), with the
        ``events`` it takes (acknowledged once their states are written) and the table values
        ``handed`` over in ``args``; returns a future done once what it decided is carried out."""
        loop = asyncio.get_running_loop()
        if broken:  # the worker is stopping: nothing more is judged or carried out
            failed: asyncio.Future[None] = loop.create_future()
            failed.set_exception(broken[0])
            return failed
        number = next(numbers)
        if newest is not None:
            published[number] = newest
        result = judge.submit(method, number, carried[0], *args)
        done: asyncio.Future[None] = loop.create_future()
        held.extend((number, e) for e in events)
        calls.append((number, result, done, handed or {}))
        if not carrier or carrier[0].done():
            carrier[:] = [loop.create_task(carry_out_calls())]
        return done

    async def carry_out_calls() -> None:
        while calls:
            number, result, done, handed = calls[0]
            try:
                await carry_out(number, await result, handed)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # the judge's process died, or a send failed for good
                # nothing more is carried out: no later state is written and no event acknowledged
                # after a send that failed, so every event not acknowledged is read again
                broken.append(exc)
                while calls:
                    left = calls.popleft()[2]
                    if not left.done():
                        left.set_exception(exc)
                log.critical(
                    "the worker stops: %s; nothing is lost (the events not acknowledged are read again)",
                    f"{type(exc).__name__}: {exc}"[:300],
                )
                if app.on_judge_failed is not None:  # type: ignore[attr-defined]
                    app.on_judge_failed()  # type: ignore[attr-defined]  # run_worker's: exits the process
                await app.crash(exc)
                return
            calls.popleft()
            if not done.done():
                done.set_result(None)

    async def carry_out(number: int, out: Outcome, handed: dict[bytes, Any]) -> None:
        """Send what a call of the judge decided, write the entries it handed over, then
        acknowledge the events those entries hold; note which table values it now holds (of
        those ``handed`` over with the call, and those it wrote)."""
        newest = published.pop(number, None)
        for kind, key, value in out.actions:
            if kind == FORGET:
                assert key is not None
                outbox.forget(key)
                continue
            sent = await sends[kind].send(key=key, value=value)
            count_sent(kind, value, sent, newest)
            if kind in (FINDING, ROUND):
                assert key is not None
                outbox.add(key, kind == FINDING, value, sent)
        for key in out.loaded:
            known[key] = handed[key]
        for key, partition, offset, state_json, unfit, holding in out.writes:
            findings, rounds = outbox.undelivered(key)
            stored = stored_json(offset, state_json, findings, rounds, partition, unfit, holding)
            await write_state(states, app.producer, key, stored, partition)
            known[key] = stored
        for level, line, lifecycle in out.lines:
            (says if lifecycle else log).log(level, "%s", line)
        counts.applied += out.applied
        EVENTS_JUDGED.inc(out.applied)
        REORDER_HELD.set(out.held)
        counts.findings += out.findings
        counts.dead_letters += out.dead_letters
        if out.wrote:
            while held and held[0][0] <= number:
                held.popleft()[1].ack()
        carried[0] = number

    # record batches the consumer cannot read are passed over (streams.batches) and dead-lettered here
    unreadable = guard_aiokafka()

    async def report_unreadable() -> list[tuple[int, int, int]]:
        passed = []
        while unreadable:
            bad = unreadable.popleft()
            if bad.topic == source_name:
                passed.append((bad.partition, bad.first, bad.last))
            log.warning(
                "%s cannot be read (%s): sent to the dead-letter topic (unreadable_batch); reading on from offset %d",
                bad.position, bad.error[:200], bad.last + 1,
            )  # fmt: skip
            counts.dead_letters += 1
            DEAD_LETTERS.labels("unreadable_batch").inc()
            value = dead_letter_value(bad.topic, bad.position, "unreadable_batch", bad.error, b"")
            await sends[DEAD_LETTER].send(key=None, value=value)
        return passed

    def marks() -> dict[int, tuple[int | None, int | None]]:
        """Per events partition assigned: its high watermark as the consumer last saw it, and the
        committed offset the consumer resumed from (Faust 0.15 keeps it in
        ``Consumer._committed_offset`` after its seek); None where not known."""
        try:
            consumer = app.consumer
            mine = [tp for tp in consumer.assignment() if tp.topic == source_name]
            resumed = getattr(consumer, "_committed_offset", {})
        except Exception:  # no consumer yet: nothing known
            return {}
        out: dict[int, tuple[int | None, int | None]] = {}
        for tp in mine:
            try:
                mark = consumer.highwater(TP(source_name, tp.partition))
            except Exception:
                mark = None
            at = resumed.get(tp)
            out[tp.partition] = (None if mark is None else int(mark), None if at is None else int(at))
        return out

    # When the process last ran again after a stall (the timer late by more than reorder.idle:
    # SIGSTOP, a frozen VM, a blocked loop): the high watermarks its consumer saw before are
    # stale then, and a window is applied only after reorder.idle seconds of running since.
    running_since = [time.monotonic()]
    timer_ran = [time.monotonic()]
    # Set while a stop or a rebalance waits for every started event to be acknowledged: a batch
    # taken before the flow stopped may still be handed over then, and its states are written
    # (and its events acknowledged) at its end instead of at the next interval.
    draining = [False]

    @app.timer(interval)  # type: ignore[untyped-decorator]  # faust leaves its timer decorator untyped
    async def write_states_on_time() -> None:
        """Every ``interval``, even when no batch comes (a rebalance waits for every held event to
        be acknowledged): dead-letter the batches passed over, apply the reorder windows due
        (rulebook 10.1.2) and write the states changed."""
        now = time.monotonic()
        if stalled(timer_ran[0], now, interval, settings.reorder.idle):
            running_since[0] = now
        timer_ran[0] = now
        passed = await report_unreadable()
        if broken:
            return
        last_write[0] = time.monotonic()
        await call("tick", marks(), passed, running_since[0], not draining[0])

    async def drain() -> None:
        """Write the states of the events held, with what the reorder windows hold (a stop or a
        rebalance waits for them): the windows are not applied, the worker that owns their
        partitions next holds them as the audit would (see ``hold_again``)."""
        draining[0] = True
        if broken:
            return
        with contextlib.suppress(Exception):  # a broken judge: the events stay unacknowledged
            await call("write")

    app.before_drain = drain  # type: ignore[attr-defined]  # WorkerApp's hook (see _app_class)

    @app.on_partitions_assigned.connect  # type: ignore[arg-type]  # mode types receivers as returning None
    async def drained(sender: Any, *args: Any, **kwargs: Any) -> None:
        """The rebalance is over: states are written every ``interval`` again."""
        draining[0] = False
        assigned = args[0] if args else kwargs.get("assigned", ())
        says.info("assigned %s", partitions_line(assigned, source_name))
        if not broken:  # carried out in order; a failure there is the carrier's to report
            call("reset").add_done_callback(lambda f: f.cancelled() or f.exception())

    @app.on_rebalance_complete.connect  # type: ignore[arg-type]  # mode types receivers as returning None
    async def hold_again(sender: Any, *args: Any, **kwargs: Any) -> None:
        """The table entries of the partitions assigned are restored: the judge holds again what
        their windows held when they were written (the worker that had them stopped or gave them
        up), so a window is applied when its partition is read to the end and idle, as on the
        worker that wrote it, even if no more message of its table comes."""
        try:
            mine = {tp.partition for tp in app.consumer.assignment() if tp.topic == source_name}
        except Exception:  # no consumer (stopping): nothing to hold
            return
        values = {
            key: None if known.get(key, _UNKNOWN) is value else value  # None: the judge holds it as written
            for key, value in list(states.data.items())
            if stored_holds(value)
        }
        if values and not broken:
            handed = {key: value for key, value in values.items() if value is not None}
            await call("hold_again", values, mine, handed=handed)

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]  # mode types receivers as returning None
    async def revoked(sender: Any, *args: Any, **kwargs: Any) -> None:
        """Say which partitions this worker gives up (their states are written before the
        rebalance goes on: see ``drain``)."""
        given = args[0] if args else kwargs.get("revoked", ())
        if any(tp.topic == source_name for tp in given):
            says.info("revoked %s", partitions_line(given, source_name))

    @app.agent(source)
    async def audit(stream: Any) -> None:
        out: deque[asyncio.Future[None]] = deque()
        async for events in stream.take_events(batch, within=within):
            if broken:
                continue  # the worker is stopping; these events stay unacknowledged
            records = []
            for event in events:
                event.message.incref()  # acknowledged once the state that holds it is written
                msg = event.message
                raw: bytes = msg.value if isinstance(msg.value, bytes) else bytes(msg.value or b"")
                stamp = msg.timestamp  # seconds (float) in Faust; the judge takes ms
                records.append((msg.partition, msg.offset, msg.key, raw, round(stamp * 1000) if stamp else None))
            write = draining[0] or time.monotonic() - last_write[0] >= interval
            if write:
                last_write[0] = time.monotonic()
            keys = {r[2] for r in records if isinstance(r[2], bytes)}
            handed = given(keys)
            stamps = [r[4] for r in records if r[4] is not None]
            newest = max(stamps) / 1000 if stamps else None
            out.append(call("batch", records, handed, write, events=events, handed=handed, newest=newest))
            while len(out) >= IN_FLIGHT or (out and out[0].done()):
                with contextlib.suppress(Exception):  # a failure is carried out (the worker stops)
                    await out.popleft()

    return app


IN_FLIGHT = 2
"""Calls of the agent out to the judge at most (one judged while the next is taken)."""
_UNKNOWN = object()


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


RECOVERY_STALL_SECONDS = 60.0
"""How long a changelog partition being recovered may go without an event before the worker
says how its consumer sees that partition (:func:`recovery_stall`)."""


def recovery_stall(recovery: Any, consumer: Any, now: float) -> str | None:
    """One line on a stalled state recovery, or None while it progresses.

    After a rebalance, Faust reads each changelog partition the worker takes over up to its end
    before it lets events through. faust-streaming 0.15.3 has been seen (about one run in fifteen
    of ``test_two_workers_share_partitions_and_one_takes_over_when_the_other_stops`` on a loaded
    machine, whatever the consumer's isolation level) to receive no event at all for such a
    partition while its consumer goes on fetching, so the worker waits for ever. The cause is not
    found; this line gives the next look what it needs: per partition still owed, the end it
    waits for, where recovery stands, the consumer's position and whether it is paused.

    Args:
        recovery: Faust's ``app.tables.recovery`` (its ``in_recovery``, ``active_highwaters``,
            ``active_offsets``, ``_recovery_started_at`` and ``_active_events_received_at``).
        consumer: Faust's ``app.consumer`` (aiokafka driver).
        now: ``time.monotonic()``.
    """
    started = getattr(recovery, "_recovery_started_at", None)
    if not getattr(recovery, "in_recovery", False) or started is None:
        return None
    received = getattr(recovery, "_active_events_received_at", {})
    stalled = [
        tp
        for tp, end in sorted(recovery.active_highwaters.items())
        if end is not None
        and end > (recovery.active_offsets.get(tp) or -1)
        and now - received.get(tp, started) >= RECOVERY_STALL_SECONDS
    ]
    if not stalled:
        return None
    try:  # aiokafka's partitions are named tuples too: Faust's (topic, partition) finds them
        client = consumer._thread._ensure_consumer()
        paused = {(tp.topic, tp.partition) for tp in client.paused()}
        assignment = client._fetcher._subscriptions.subscription.assignment
    except Exception:  # the consumer is not there (any more): say what recovery knows
        paused, assignment = set(), None
    parts = []
    for tp in stalled:
        state = assignment.state_value(tp) if assignment is not None else None
        position = getattr(state, "_position", None) if state is not None else None
        parts.append(
            f"{tp.topic}[{tp.partition}] end {recovery.active_highwaters[tp]}, recovered to "
            f"{recovery.active_offsets.get(tp)}, consumer at {position}"
            f"{', paused' if (tp.topic, tp.partition) in paused else ''}"
            f"{', not assigned' if assignment is not None and state is None else ''}"
        )
    return f"state recovery has received nothing for {RECOVERY_STALL_SECONDS:.0f} s or more: " + "; ".join(parts)


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

    @app.timer(RECOVERY_STALL_SECONDS / 2)  # type: ignore[untyped-decorator]  # faust leaves it untyped
    async def stalled_recovery() -> None:
        try:
            recovery = app.tables.recovery  # type: ignore[attr-defined]  # TableManager's, not its interface's
            line = recovery_stall(recovery, app.consumer, time.monotonic())
        except Exception as exc:  # a diagnosis never stops the worker
            line = f"state recovery could not be looked at: {type(exc).__name__}: {exc}"[:300]
        if line is not None:
            log.warning("%s", line)

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


JUDGE_FAILED_EXIT = 1
"""The worker's exit code when its judge process fails or a send fails for good."""


def _exit_failed(settings: Settings, counts: WorkCounts) -> NoReturn:
    """End the worker at once (exit :data:`JUDGE_FAILED_EXIT`) after its judge process failed or
    a send failed for good: its stop line, its own folder and alive file removed. A clean stop
    would wait for events that will never be acknowledged; none is (the group reads them again,
    as after a crash), and the judge ends when its socket closes."""
    _stopped_line(counts)
    shutil.rmtree(worker_datadir(settings), ignore_errors=True)
    if settings.worker.alive_file is not None:
        settings.worker.alive_file.unlink(missing_ok=True)
    logging.shutdown()
    os._exit(JUDGE_FAILED_EXIT)


def run_worker(settings: Settings) -> None:
    """Run the worker until it is stopped (SIGTERM or SIGINT); exits the process.

    Through a broker outage of any length the worker keeps running: its clients reconnect by
    themselves, and one line says that the connection is lost and one that it is back
    (:class:`LinkWatch`); ``worker.alive_file`` is touched all along. A stop during an outage
    ends the process within :data:`STOP_WITHIN` seconds.

    The worker's own data folder (:func:`worker_datadir`) is removed when it stops; only a
    killed worker (SIGKILL) leaves its folder behind. If its judge process fails (or a send
    fails for good), the worker exits at once with :data:`JUDGE_FAILED_EXIT`.

    Raises:
        streams.judge.JudgeFailed: the judge process could not start.
    """
    metrics = None
    if settings.metrics.port is not None:
        from streams.metrics import LagCollector, MetricsServer

        lag = LagCollector(settings.kafka, [(settings.topics.app_id, [settings.topics.events.name])])
        try:
            metrics = MetricsServer(settings.metrics.host, settings.metrics.port, [lag])
        except OSError as exc:
            log.critical(
                "cannot serve the metrics on %s:%d (DEALTRAIL_METRICS__PORT in use?): %s",
                settings.metrics.host, settings.metrics.port, exc,
            )  # fmt: skip
            raise SystemExit(1) from None
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
    if metrics is not None:
        says.info("metrics: http://%s:%d/metrics", metrics.host, metrics.port)
    try:
        worker = _worker_class()(app, loglevel=settings.worker.loglevel, quiet=settings.worker.loglevel != "debug")
        worker.on_stop_signal = lambda: _exit_when_stuck(settings, watch, counts)  # type: ignore[attr-defined]
        worker.spinner = None
        app.on_judge_failed = lambda: _exit_failed(settings, counts)  # type: ignore[attr-defined]
        app.judge.start()  # type: ignore[attr-defined]
        settle_heap()
        worker.execute_from_commandline()
    finally:
        app.judge.close()  # type: ignore[attr-defined]
        if metrics is not None:
            metrics.stop()
        _stopped_line(counts)
        shutil.rmtree(worker_datadir(settings), ignore_errors=True)
        if settings.worker.alive_file is not None:
            settings.worker.alive_file.unlink(missing_ok=True)
