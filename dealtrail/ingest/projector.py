"""The projector: Kafka topics -> the DuckDB store (the only writer of the file).

It consumes the dealing-events, findings, rounds, dead-letter, reviews, staff and snapshots topics in
batches and writes them into the same tables the embedded audit (and the embedded console) fill
(a snapshot once the events it covers are stored: :class:`SnapshotGate`), de-duplicated on event
ID (and payload), finding ID + revision, round, dead-letter position, review ID and roster change
ID (roster events are stored just before the batch's transaction: a crash in between redelivers
them, and their ID absorbs it). The Kafka
offsets of a batch are stored
in the ``offsets`` table in the same DuckDB transaction, and committed to Kafka only after that
transaction commits; on start the projector resumes from the offsets in DuckDB (the file is the
truth; a new file starts at the beginning of each topic), so a crash between the two commits
repeats at most one batch, which de-duplication absorbs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from projections.models.reviews import review_row
from projections.records import staff
from projections.store.store import BatchCounts, Store
from schemas.access import ACCESS_ADAPTER, AccessEntry
from schemas.codec import DecodeError, decode, encode
from schemas.findings import Finding
from schemas.reviews import REVIEW_ADAPTER
from schemas.snapshots import TableSnapshot
from schemas.staff import STAFF_ADAPTER, StaffMemberRecorded
from streams.batches import Probe, find_unreadable, unreadable_error
from streams.clock import HostClockCheck, IntakeClock, record_time, utc_now
from streams.engine.engine import EventRejected, Plausibility, check_plausible
from streams.kafka import consumer_config, key_mismatch, unreachable_errors
from streams.link import Backoff, KafkaLink, quiet_clients
from streams.metrics import STORE_RECORDS, STORE_WRITE

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from dealtrail.reporting.schedule import Schedule
    from dealtrail.settings import Settings
    from projections.models.control import ControlArgs
    from projections.models.reviews import ReviewDue
    from projections.store.replica import ReplicaTimer

log = logging.getLogger("dealtrail.projector")
ROUND_TIMES = ("started_at", "completed_at")


@dataclass
class ProjectSummary:
    """What a projector run wrote (rows added after de-duplication) and read: ``records`` read,
    ``bad_records`` of the findings/rounds/dead-letter topics it could not read (stored as dead
    letters), ``skipped_events`` records of the events topic that are not a valid event of the table they are
    keyed by, or beyond the plausibility limits of rulebook 10.3.4 (the worker dead-letters those),
    ``duplicates`` valid events of the events topic not stored because the store (or an event
    before it in the same batch) holds the same fact: duplicate deliveries (a re-sent buffer, a
    file published twice, a batch read again after a crash; :func:`schemas.chain.same_fact`)."""

    written: BatchCounts
    records: int = 0
    batches: int = 0
    bad_records: int = 0
    skipped_events: int = 0
    duplicates: int = 0
    reports: list[Path] = field(default_factory=list)
    exports: list[str] = field(default_factory=list)
    """The export revisions written (``DEALTRAIL_EXPORT__TO``): their folders, as DuckDB names them."""


def _round_row(value: bytes) -> dict[str, Any]:
    row: dict[str, Any] = json.loads(value)
    for k in ROUND_TIMES:
        row[k] = datetime.fromisoformat(row[k])
    row.setdefault("deck_suspect", False)  # a round published before the field existed
    return row


def _dead_row(value: bytes) -> dict[str, Any]:
    rec = json.loads(value)
    return {
        "source": str(rec.get("source", "")),
        "position": str(rec.get("position", "")),
        "reason": str(rec.get("reason", "")),
        "detail": str(rec.get("detail", "")),
        "raw": str(rec.get("raw", rec.get("raw_base64", ""))),
    }


def _staff_event(key: bytes | None, value: bytes | None) -> StaffMemberRecorded:
    """The roster event of a record of the staff topic.

    Raises:
        ValueError: not a roster event, or keyed by something other than its staff ID.
    """
    if not value:
        raise ValueError("an empty record on the staff topic")
    event = STAFF_ADAPTER.validate_json(value)
    if key != event.staff_id.encode():
        raise ValueError(f"staff_key_mismatch: keyed {key!r}, not by its staff ID")
    return event


def _review_row(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """The ``reviews`` row of a record of the reviews topic.

    Raises:
        ValueError: not a review event, or keyed by something other than its finding ID.
    """
    if not value:
        raise ValueError("an empty record on the reviews topic")
    review = REVIEW_ADAPTER.validate_json(value)
    if key != review.finding_id.encode():
        shown = key.decode("utf-8", "replace")[:80] if key is not None else None
        raise ValueError(f"review_key_mismatch: keyed {shown!r}, not by its finding ID {review.finding_id}")
    return review_row(review)


def project(
    settings: Settings,
    store: Store,
    once: bool = False,
    max_seconds: float | None = None,
    poll_ms: int = 500,
    max_records: int = 20_000,
    schedule: Schedule | None = None,
    reports: Path | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    write_lock: contextlib.AbstractContextManager[Any] | None = None,
    on_batch: Callable[[BatchCounts], None] | None = None,
    property_name: str | None = None,
    review_due: ReviewDue | None = None,
    console_url: str | None = None,
    report_grace: timedelta | None = None,
    report_check_seconds: float = 30.0,
    link: KafkaLink | None = None,
    stop: threading.Event | None = None,
    replica: ReplicaTimer | None = None,
    report_max_listed: int | None = None,
    report_signer: Ed25519PrivateKey | None = None,
    report_control: ControlArgs | None = None,
    exporter: Exporter | None = None,
) -> ProjectSummary:
    """Project the topics into ``store`` until stopped (or caught up, with ``once``).

    A broker outage of any length is ridden out: the consumer reconnects by itself, the lag is
    measured with capped exponential backoff, and a consumer that fails is replaced by a new
    one that resumes from the offsets in the store; ``link`` says once that the connection is
    lost and once that it is back (and holds what ``/readyz`` reports). Only ``once`` gives up,
    when no broker has answered for ``kafka.connect_timeout`` seconds (at the start or later).

    Args:
        settings: cluster and namespace.
        store: the DuckDB writer.
        once: return when every partition of the four topics is read to its end offset.
        max_seconds: give up after this many seconds (seconds); None waits forever.
        poll_ms: how long one poll waits for records (milliseconds).
        max_records: records per batch at most.
        schedule: write each closed period's report, and a new revision of each stale one
            (``dealtrail.reporting.schedule.run_due``), into ``reports``, from this process's own
            connection, every ``report_check_seconds`` and once more when ``once`` has caught up.
        reports: the folder of the scheduled reports.
        clock: the current time (tests pass their own).
        write_lock: held around each batch's transaction and each scheduled report, when other
            threads of this process write through the store's connection too (the console and
            notifier of ``dealtrail project --serve``); None: this thread is the only one.
        on_batch: called with what each batch added, once its transaction has committed (the
            notifier of ``project --serve`` wakes on it instead of waiting out its period).
        property_name: the casino property the scheduled reports' headers name (the resolved
            ``DEALTRAIL_PROPERTY``); None: none shown.
        review_due: review due times per severity for the scheduled reports (resolved
            settings); None: lateness not judged.
        console_url: the console's address the scheduled reports link to; None: no links.
        report_grace: the scheduled reports' grace time (event time, resolved settings
            ``DEALTRAIL_REPORTS__GRACE_MINUTES``; see ``projections.reports.report.judge_status``);
            None: ``dealtrail.reporting.schedule.DEFAULT_GRACE``.
        report_check_seconds: seconds between two looks for closed periods and stale reports
            (resolved ``DEALTRAIL_REPORTS__CHECK_SECONDS``).
        link: the connection state to report to (the health endpoints read it); None: a new
            one that logs its lines to ``dealtrail.projector``.
        stop: set (by a signal handler) to end the run after the batch in progress, within
            seconds even while the cluster is away; None: runs until ``once`` or ``max_seconds``.
        replica: copy the store to its read replica when due (between two batches, under
            ``write_lock``; :mod:`projections.store.replica`), and once more at the end; None: no replica.
        report_max_listed: how many voiding and integrity incidents each scheduled report lists
            (resolved ``DEALTRAIL_REPORTS__MAX_LISTED``); None: every one.
        report_signer: the property's key that signs each scheduled report revision (resolved
            ``DEALTRAIL_SIGNING__KEY_FILE``); None: the revisions are written unsigned and say so.
        report_control: the reports' control charts' minimum rounds, CUSUM k and h and the dealers' slot (resolved
            ``DEALTRAIL_CONTROL__*``); None: their defaults.
        exporter: export each closed gaming day not exported yet (``DEALTRAIL_EXPORT__TO``), at the
            scheduled reports' looks (:class:`Exporter`); None: no exports.

    Returns:
        The rows written.

    Raises:
        KafkaUnreachableError: ``once``, and no broker answered for ``kafka.connect_timeout`` seconds.
        TimeoutError: ``max_seconds`` passed before the projector caught up (with ``once``).
    """
    from kafka.errors import KafkaError

    link = link if link is not None else KafkaLink(settings.kafka.bootstrap, log.warning)
    stop = stop if stop is not None else threading.Event()
    summary = ProjectSummary(written=BatchCounts())
    started = time.monotonic()
    backoff = Backoff(first=0.5, cap=RETRY_CAP)
    run = _Run(settings, store, summary, max_records, write_lock, on_batch, link)
    run.replica = replica
    reporting = _Reporting(
        store, write_lock, summary, schedule, reports, clock, property_name, review_due, console_url,
        report_grace, report_check_seconds,
    )  # fmt: skip
    reporting.max_listed = report_max_listed
    reporting.signer = report_signer
    reporting.control = report_control
    reporting.archive = settings.archive.dir  # the reports read the archived months too
    reporting.exporter = exporter
    with quiet_clients():
        while not stop.is_set():
            consumer = None
            try:
                consumer = run.open()
                link.up()
                backoff.reset()
                done = run.loop(
                    consumer,
                    once=once,
                    poll_ms=poll_ms,
                    stop=stop,
                    deadline=None if max_seconds is None else started + max_seconds,
                    max_seconds=max_seconds,
                    scheduled=reporting.look,
                )
                if done:
                    if replica is not None:
                        replica.copy(store.con, store.path, write_lock)  # what this run stored, at the end
                    return summary
            except (*unreachable_errors(), KafkaError) as exc:
                # the cluster did not answer (at the start, or a request of the run): say so once,
                # wait (capped backoff) and open a new consumer from the offsets in the store
                link.down(exc)
            finally:
                if consumer is not None:
                    with contextlib.suppress(Exception):  # a consumer of a cluster that is away
                        consumer.close(autocommit=False, timeout_ms=CLOSE_MS)
            if once and link.down_for() > settings.kafka.connect_timeout:
                raise KafkaUnreachableError(link.down_for())
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                if once:
                    raise TimeoutError(f"projector not caught up after {max_seconds:.0f} s")
                return summary
            stop.wait(backoff.next())
    return summary


PROBE_EVERY = 2.0
"""Seconds between two measures of the lag (end offsets) while connected (seconds)."""
REQUEST_MS = 2_000
"""How long a request of the projector's own (end offsets, the Kafka commit) waits for the
cluster (milliseconds): short, so that a stop during an outage ends the process within seconds."""
CLOSE_MS = 1_000
"""How long closing the consumer waits for the cluster (milliseconds)."""
IDLE_LOOK = 2.0
"""Seconds without a new batch after which the projector looks for due reports (seconds)."""
RETRY_CAP = 5.0
"""The longest wait between two attempts to reach the cluster (seconds)."""


class KafkaUnreachableError(RuntimeError):
    """``--once``: no broker answered for longer than ``kafka.connect_timeout``.

    Args:
        seconds: how long the cluster has not answered (seconds).
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no broker answered for {seconds:.0f} s")
        self.seconds = seconds


@dataclass(frozen=True)
class Exporter:
    """What the projector exports each closed gaming day with (:mod:`dealtrail.reporting.exports`):
    the location, the property's ID, the casino's zone and the property's signing key."""

    location: Any  # dealtrail.reporting.objectstore.Location
    property_id: str
    zone: str
    key: Ed25519PrivateKey


class _Reporting:
    """The projector's scheduled reports: writes the closed periods' reports that are due and new
    revisions of stale ones (:func:`dealtrail.reporting.schedule.run_due`), looking at most every
    ``check_seconds`` and whenever the projector has caught up; keeps ``run_due``'s memory
    between looks, so that a look reads only what the rows added since can change."""

    def __init__(
        self,
        store: Store,
        write_lock: contextlib.AbstractContextManager[Any] | None,
        summary: ProjectSummary,
        schedule: Schedule | None,
        reports: Path | None,
        clock: Callable[[], datetime],
        property_name: str | None,
        review_due: ReviewDue | None,
        console_url: str | None,
        grace: timedelta | None,
        check_seconds: float,
    ) -> None:
        self.store, self.lock, self.summary, self.schedule, self.reports = store, write_lock, summary, schedule, reports
        self.clock, self.property_name, self.review_due, self.console_url = (
            clock,
            property_name,
            review_due,
            console_url,
        )
        self.grace, self.check_seconds = grace, check_seconds
        self.max_listed: int | None = None  # the reports' listing cap (DEALTRAIL_REPORTS__MAX_LISTED)
        self.archive: Path | None = None  # the archived months' folder (DEALTRAIL_ARCHIVE__DIR)
        self.signer: Ed25519PrivateKey | None = None  # signs each revision (DEALTRAIL_SIGNING__KEY_FILE)
        self.control: ControlArgs | None = None  # the control charts' settings (DEALTRAIL_CONTROL__*)
        self.watch: Any = None  # dealtrail.reporting.schedule.ReportWatch
        self.exporter: Exporter | None = None  # exports each closed gaming day (DEALTRAIL_EXPORT__TO)
        self.next_look = 0.0
        self.dirty = False  # batches stored since the last look
        self.last_write = 0.0

    def look(self, wrote: bool, caught_up: bool = False) -> None:
        """Write what is due: when the projector has ``caught_up`` (``--once``), when it has been
        idle for :data:`IDLE_LOOK` seconds after storing batches (so a period's report follows
        its last events, without a revision per burst), and at most every ``check_seconds``
        while batches keep coming.

        Args:
            wrote: the poll before this look stored a batch.
            caught_up: ``--once`` has read everything: look now.
        """
        reporting = self.schedule is not None and self.reports is not None
        if not reporting and self.exporter is None:
            return
        now = time.monotonic()
        if wrote:
            self.dirty, self.last_write = True, now
        idle = self.dirty and now - self.last_write >= IDLE_LOOK
        if not (caught_up or idle or now >= self.next_look):
            return
        from dealtrail.reporting.schedule import ReportWatch, run_due

        self.watch = self.watch or ReportWatch()
        with self.lock if self.lock is not None else contextlib.nullcontext():
            if self.exporter is not None:
                self._export()
            if self.schedule is None or self.reports is None:
                self.dirty = False
                self.next_look = time.monotonic() + self.check_seconds
                return
            self.summary.reports += run_due(
                self.store.con,
                self.reports,
                self.schedule,
                self.clock(),
                property_name=self.property_name,
                review_due=self.review_due,
                console_url=self.console_url,
                grace=self.grace,
                watch=self.watch,
                max_listed=self.max_listed,
                archive=self.archive,
                signer=self.signer,
                control=self.control,
            )
        self.dirty = False
        self.next_look = time.monotonic() + self.check_seconds

    def _export(self) -> None:
        """Export each closed gaming day of the store not exported yet (the caller holds the lock)."""
        from dealtrail.reporting.exports import due_days, export_day

        x = self.exporter
        assert x is not None
        now = self.clock()
        for period in due_days(self.store.con, x.location, x.property_id, x.zone, now):
            done = export_day(
                self.store.con, x.location, x.property_id, period, x.zone, x.key, now,
                self.review_due, self.property_name, self.archive,
            )  # fmt: skip
            self.summary.exports.append(done.folder)


class _Run:
    """One projector run: opens consumers (a new one after an outage) and reads batches into the store."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        summary: ProjectSummary,
        max_records: int,
        write_lock: contextlib.AbstractContextManager[Any] | None,
        on_batch: Callable[[BatchCounts], None] | None,
        link: KafkaLink,
    ) -> None:
        topics = settings.topics
        self.settings, self.store, self.summary, self.max_records = settings, store, summary, max_records
        self.lock = write_lock if write_lock is not None else contextlib.nullcontext()
        self.on_batch, self.link = on_batch, link
        self.names = [
            topics.events.name,
            topics.findings.name,
            topics.rounds.name,
            topics.dead_letter.name,
            topics.reviews.name,
            topics.staff.name,
            topics.access_log.name,
        ]
        self.gate = SnapshotGate(topics.snapshots.name)
        self.heads = Heads(settings.plausibility)
        self.group = topics.projector_group
        self.parts: list[Any] = []
        self.measures: deque[tuple[float, dict[Any, int]]] = deque(maxlen=10_000)
        self.reached_at: float | None = None  # the time of the latest measure whose ends were read
        self.replica: ReplicaTimer | None = None  # copies the store to its read replica when due

    def open(self) -> Any:
        """A consumer assigned every partition of the topics, each at the offset the store holds
        (a new store: the beginning of each topic; Kafka's committed offsets only show lag).

        Raises:
            kafka.errors.KafkaError: no broker answered within ``kafka.connect_timeout``.
        """
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            **consumer_config(self.settings.kafka, "dealtrail-projector", one_shot=True),
            group_id=self.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=self.max_records,
            # Fetched records wait in the client's memory until polled: large fetches made the
            # projector's memory jump by hundreds of MB whenever it lagged (soak run).
            fetch_max_bytes=16 * 1024 * 1024,
            max_partition_fetch_bytes=2 * 1024 * 1024,
        )
        try:
            parts = []
            for name in [*self.names, self.gate.topic]:
                for p in sorted(consumer.partitions_for_topic(name) or ()):
                    parts.append(TopicPartition(name, p))
            consumer.assign(parts)
            self.gate.partitions.update(tp.partition for tp in parts if tp.topic == self.names[0])
            stored = self.store.offsets(self.group)
            self.gate.projected.update({p: o for (t, p), o in stored.items() if t == self.names[0]})
            for tp in parts:
                if (tp.topic, tp.partition) in stored:
                    consumer.seek(tp, stored[(tp.topic, tp.partition)])
                else:
                    consumer.seek_to_beginning(tp)
        except BaseException:
            with contextlib.suppress(Exception):
                consumer.close(autocommit=False, timeout_ms=CLOSE_MS)
            raise
        self.parts = parts
        return consumer

    def loop(
        self,
        consumer: Any,
        once: bool,
        poll_ms: int,
        stop: threading.Event,
        deadline: float | None,
        max_seconds: float | None,
        scheduled: Callable[..., None],
    ) -> bool:
        """Read batches into the store until stopped, caught up (``once``) or past ``deadline``
        (monotonic seconds): True. While the cluster does not answer, it keeps polling (the
        client reconnects by itself) and measures the lag with capped backoff.

        Raises:
            TimeoutError: ``deadline`` passed with ``once`` before the projector caught up.
            KafkaUnreachableError: ``once``, and no broker answered for ``kafka.connect_timeout``.
            kafka.errors.KafkaError: a request failed in a way the consumer cannot go on from.
        """
        probe = Backoff(first=1.0, cap=RETRY_CAP)
        next_probe = 0.0
        while not stop.is_set():
            try:
                polled = consumer.poll(timeout_ms=poll_ms, max_records=self.max_records)
            except Exception as exc:
                # a record batch that cannot be read (corrupt, or a codec it cannot decompress) is
                # a dead letter, not an outage: found, stored with its partition and offsets, passed
                if not unreadable_error(exc) or not self.skip_unreadable(consumer, exc):
                    raise
                continue
            if polled:
                with self.lock:
                    added = _write(
                        self.store,
                        consumer,
                        self.group,
                        polled,
                        self.names,
                        self.summary,
                        self.gate,
                        self.heads,
                        self.link,
                    )
                if self.on_batch is not None:
                    self.on_batch(added)
            scheduled(bool(polled))
            if self.replica is not None and self.replica.due():
                self.replica.copy(self.store.con, self.store.path, self.lock)
            now = time.monotonic()
            if (not polled and once) or now >= next_probe:
                lag = self.lag(consumer)
                if lag is None:
                    next_probe = now + probe.next()
                    if once and self.link.down_for() > self.settings.kafka.connect_timeout:
                        raise KafkaUnreachableError(self.link.down_for())
                else:
                    probe.reset()
                    next_probe = now + PROBE_EVERY
                    if once and not polled and lag == 0:
                        scheduled(False, True)  # caught up: the reports of what is stored now
                        return True
            if deadline is not None and time.monotonic() > deadline:
                if once:
                    raise TimeoutError(f"projector not caught up after {max_seconds or 0:.0f} s")
                return True
        return True

    def skip_unreadable(self, consumer: Any, exc: BaseException) -> bool:
        """Find the record batch a poll failed on (``exc``), store it as a dead letter (reason
        ``unreadable_batch``, its partition and offsets, the error) with the partition's next
        offset in the same transaction, and move the consumer past it.

        The batch is found by reading each partition that has records left from the consumer's
        position with a probe consumer (no group): the one that fails there holds it; its end is
        the first offset after the position that reads (a binary search, a few reads).

        Returns:
            True if a batch was found and passed; False if every partition reads (the error
            was not a batch's: the caller raises it).
        """
        ends = consumer.end_offsets(self.parts, timeout_ms=REQUEST_MS)
        probe = Probe(self.settings.kafka)
        try:
            for tp in self.parts:
                bad = find_unreadable(probe, tp, int(consumer.position(tp)), int(ends.get(tp, 0)), exc)
                if bad is None:
                    continue
                low = bad.last + 1
                row = {
                    "source": tp.topic,
                    "position": bad.position,
                    "reason": "unreadable_batch",
                    "detail": bad.error,
                    "raw": "",
                }
                offset = {"consumer": self.group, "topic": tp.topic, "partition": tp.partition, "next_offset": low}
                with self.lock:
                    self.summary.written.add(self.store.write_batch((), dead_letters=[row], offsets=[offset]))
                self.summary.bad_records += 1
                consumer.seek(tp, low)
                self.link.consumption_error(f"{bad.position}: {type(exc).__name__}")
                log.warning(
                    "%s cannot be read (%s): stored as a dead letter (unreadable_batch); reading on from offset %d",
                    bad.position, row["detail"][:200], low,
                )  # fmt: skip
                return True
        finally:
            probe.close()
        return False

    def lag(self, consumer: Any) -> int | None:
        """Records left to read on every partition (messages), or None when the cluster did not
        answer within :data:`REQUEST_MS` (the link is then marked down). The lag in seconds is
        the age of the latest measure whose end offsets the consumer has reached."""
        from kafka.errors import KafkaError

        try:
            ends = consumer.end_offsets(self.parts, timeout_ms=REQUEST_MS)
        except KafkaError as exc:
            self.link.down(exc)
            return None
        now = time.monotonic()
        positions = {tp: int(consumer.position(tp)) for tp in ends}
        lag = sum(max(0, int(end) - positions[tp]) for tp, end in ends.items())
        self.measures.append((now, {tp: int(end) for tp, end in ends.items()}))
        while self.measures and all(positions.get(tp, 0) >= e for tp, e in self.measures[0][1].items()):
            self.reached_at = self.measures.popleft()[0]
        if self.reached_at is None:  # nothing measured is read yet: behind since the first measure
            self.reached_at = self.measures[0][0]
        self.link.up()
        self.link.lag(lag, now - self.reached_at if lag else 0.0)
        return lag


class SnapshotGate:
    """Holds back each snapshot of the snapshots topic until the events it covers are stored.

    The store counts, with each snapshot, the table's stored events up to its seq
    (``events_through``, which a replay checks); the worker's snapshot can arrive before the
    projector has read the event it was taken after, so a snapshot is stored only once the
    events topic is projected past that event (``TableSnapshot.partition`` and ``offset``), and
    the snapshots partition is read again from it until then. A snapshot naming an offset the
    events topic does not have (yet) is kept waiting; one naming a partition it does not have
    is stored as a dead letter.

    Args:
        topic: the snapshots topic's name.
    """

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.projected: dict[int, int] = {}  # events partition -> next offset stored
        self.partitions: set[int] = set()  # the events topic's partitions

    def admit(
        self, records: list[Any], batch_events: dict[int, int], dead: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], int]:
        """The ``table_snapshots`` rows of ``records`` (one partition's, in order) that can be
        stored with this batch (whose events reach ``batch_events``: partition -> next offset),
        and the offset to resume that partition from. Unreadable records go to ``dead``."""
        rows: list[dict[str, Any]] = []
        for r in records:
            try:
                snap = TableSnapshot.model_validate_json(r.value)
            except ValueError as exc:
                dead.append(_unreadable(self.topic, r, exc))
                continue
            if snap.partition not in self.partitions:
                why = ValueError(f"the events topic has no partition {snap.partition}")
                dead.append(_unreadable(self.topic, r, why))
                continue
            reached = max(self.projected.get(snap.partition, 0), batch_events.get(snap.partition, 0))
            if snap.offset >= reached:
                return rows, r.offset  # its events are not all stored yet: read it again later
            rows.append(snap.row())
        return rows, records[-1].offset + 1


def _unreadable(topic: str, r: Any, exc: Exception) -> dict[str, Any]:
    return {
        "source": topic,
        "position": f"{topic}[{r.partition}]@{r.offset}",
        "reason": "unreadable_record",
        "detail": str(exc)[:500],
        "raw": r.value.decode("utf-8", "replace") if r.value else "",
    }


def _refused_row(names: list[str], kind: str, row: Any, error: str) -> dict[str, Any]:
    """The ``dead_letters`` row (reason ``store_error``) of a row the store refused
    (:meth:`projections.store.store.Store.write_batch_isolating`)."""
    if kind == "raw_events":
        offset, data = row
        source, position, raw = names[0], f"{names[0]}@{offset}", bytes(data).decode("utf-8", "replace")
    else:
        doc = row.model_dump(mode="json") if isinstance(row, Finding) else row
        source, position, raw = kind, f"{kind} row", json.dumps(doc, default=str)
    what = kind.removesuffix("s").replace("raw_event", "event")
    return {"source": source, "position": position, "reason": "store_error",
            "detail": f"the store refused this {what}: {error}", "raw": raw}  # fmt: skip


class Heads:
    """The projector's side of the plausibility limits (rulebook 10.3.4): the worker refuses an
    implausible event (and dead-letters it), so the projector must not store it either.

    The seq limit is judged against the table's highest stored seq (read from the store once
    per table, then followed batch by batch), as the worker judges it against its state's. An
    event recorded more than ``max_clock_skew`` after its Kafka record's timestamp is not stored
    either (the worker dead-letters it as ``recorded_in_future``): the worker and the projector
    judge it against the same timestamp, never their own clocks, so the event is stored or
    dead-lettered exactly once whatever either host clock says (issue 46). The projector's clock
    decides only for a record without a timestamp. ``watch`` compares that clock with the
    records' timestamps (one line when it is off, and ``/readyz``).

    Args:
        limits: the resolved ``settings.plausibility``.
        clock: the projector's clock (timezone-aware; the system clock by default).
    """

    def __init__(self, limits: Plausibility, clock: Callable[[], datetime] = utc_now) -> None:
        self.limits = limits
        self.clock = clock
        self.intake = IntakeClock(limits, clock)
        self.watch = HostClockCheck(limits.max_clock_skew)
        self.last: dict[str, int | None] = {}

    def admits(self, store: Store, event: Any, stamped: datetime | None = None) -> bool:
        """Whether ``event`` is within the limits; if so, it becomes its table's head.
        ``stamped``: its Kafka record's timestamp (:func:`streams.clock.record_time`)."""
        table = event.table_id
        if table not in self.last:
            row = store.con.execute("SELECT max(seq) FROM events WHERE table_id = ?", [table]).fetchone()
            self.last[table] = None if row is None or row[0] is None else int(row[0])
        last = self.last[table]
        try:
            self.intake.check(event, stamped)
            check_plausible(last, event, self.limits)
        except EventRejected:
            return False
        self.last[table] = event.seq if last is None else max(last, event.seq)
        return True

    def observe(self, stamped: datetime | None, fresh: bool, link: KafkaLink | None) -> None:
        """Compare the projector's clock with one record's timestamp (``fresh``: read at the end of
        its partition); the verdict goes to ``link`` (a line when it changes, and ``/readyz``)."""
        if stamped is None:
            return
        line = self.watch.observe(self.clock(), stamped, fresh)
        if link is not None:
            link.host_clock(line, self.watch.as_json())


def _write(
    store: Store,
    consumer: Any,
    group: str,
    polled: dict[Any, list[Any]],
    names: list[str],
    summary: ProjectSummary,
    gate: SnapshotGate | None = None,
    heads: Heads | None = None,
    link: KafkaLink | None = None,
) -> BatchCounts:
    from kafka import OffsetAndMetadata
    from kafka.errors import KafkaError

    events_name, findings_name, rounds_name, dead_name, reviews_name, *more = names
    staff_name = more[0] if more else None
    access_name = more[1] if len(more) > 1 else None
    staff_events: list[StaffMemberRecorded] = []
    access_entries: list[AccessEntry] = []
    raw_events: list[tuple[int, bytes]] = []
    findings: list[Finding] = []
    rounds: list[dict[str, Any]] = []
    dead: list[dict[str, Any]] = []
    review_rows: list[dict[str, Any]] = []
    offsets: list[dict[str, Any]] = []
    commit: dict[Any, Any] = {}
    snapshots: list[dict[str, Any]] = []
    batch_events = {
        tp.partition: recs[-1].offset + 1 for tp, recs in polled.items() if tp.topic == events_name and recs
    }
    for tp, records in polled.items():
        STORE_RECORDS.labels(tp.topic).inc(len(records))
        if gate is not None and tp.topic == gate.topic:
            summary.records += len(records)
            rows, last = gate.admit(records, batch_events, dead)
            snapshots += rows
            if last <= records[-1].offset:
                consumer.seek(tp, last)
            offsets.append({"consumer": group, "topic": tp.topic, "partition": tp.partition, "next_offset": last})
            commit[tp] = OffsetAndMetadata(last, "", -1)
            continue
        for r in records:
            summary.records += 1
            try:
                if tp.topic == events_name:
                    try:
                        event = decode(r.value)
                    except DecodeError:
                        event = None
                    if event is None or key_mismatch(r.key, event) is not None:
                        # The worker owns the events topic's dead letters (it sent this record to the
                        # dead-letter topic, which is projected below); store the valid events of
                        # their own table's trail only (a record keyed otherwise is not part of it).
                        summary.skipped_events += 1
                        continue
                    stamped = record_time(r.timestamp)
                    if heads is not None and r is records[-1]:
                        high = consumer.highwater(tp)
                        heads.observe(stamped, high is not None and r.offset + 1 >= high, link)
                    if heads is not None and not heads.admits(store, event, stamped):
                        summary.skipped_events += 1  # implausible: the worker dead-letters it
                        continue
                    raw_events.append((r.offset, encode(event)))  # canonical, as the audit stores it
                elif tp.topic == findings_name:
                    findings.append(Finding.model_validate_json(r.value))
                elif tp.topic == rounds_name:
                    rounds.append(_round_row(r.value))
                elif tp.topic == dead_name:
                    dead.append(_dead_row(r.value))
                elif tp.topic == reviews_name:
                    review_rows.append(_review_row(r.key, r.value))
                elif tp.topic == staff_name:
                    staff_events.append(_staff_event(r.key, r.value))
                elif tp.topic == access_name:
                    if not r.value:
                        raise ValueError("an empty record on the access-log topic")
                    access_entries.append(ACCESS_ADAPTER.validate_json(r.value))
            except ValueError as exc:  # a record this projector cannot read: keep it as a dead letter
                summary.bad_records += 1
                dead.append(
                    {
                        "source": tp.topic,
                        "position": f"{tp.topic}[{tp.partition}]@{r.offset}",
                        "reason": "unreadable_record",
                        "detail": str(exc)[:500],
                        "raw": r.value.decode("utf-8", "replace") if r.value else "",
                    }
                )
        last = records[-1].offset + 1
        offsets.append({"consumer": group, "topic": tp.topic, "partition": tp.partition, "next_offset": last})
        commit[tp] = OffsetAndMetadata(last, "", -1)
    if staff_events:  # before the offsets: a crash in between redelivers them, and change_id dedups
        staff.append(store.con, staff_events)
    began = time.perf_counter()
    added, refused = store.write_batch_isolating(
        raw_events=raw_events,
        findings=findings,
        rounds=rounds,
        dead_letters=dead,
        offsets=offsets,
        snapshots=snapshots,
        reviews=review_rows,
        access=access_entries,
    )
    STORE_WRITE.observe(time.perf_counter() - began)
    # every valid event is stored, refused by the store (a dead letter below) or a copy of a stored fact
    summary.duplicates += len(raw_events) - added.events - sum(1 for kind, *_ in refused if kind == "raw_events")
    if refused:  # rows the store could not hold: dead letters, the batch stored without them, no crash loop
        summary.bad_records += len(refused)
        added.add(store.write_batch((), dead_letters=[_refused_row(names, *r) for r in refused]))
    summary.written.add(added)
    summary.batches += 1
    if gate is not None:
        for p, end in batch_events.items():
            gate.projected[p] = max(gate.projected.get(p, 0), end)
    try:  # the store holds the offsets; Kafka's copy only shows the group's lag to its tools
        consumer.commit(commit, timeout_ms=REQUEST_MS)
    except KafkaError as exc:
        if link is not None:
            link.down(exc)
    return added
