"""The projector: Kafka topics -> the DuckDB store (the only writer of the file).

It consumes the dealing-events, findings, rounds, dead-letter, reviews and snapshots topics in
batches and writes them into the same tables the embedded audit (and the embedded console) fill
(a snapshot once the events it covers are stored: :class:`SnapshotGate`), de-duplicated on event
ID (and payload), finding ID + revision, round, dead-letter position and review ID. The Kafka
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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from projections.reviews import review_row
from projections.store import BatchCounts, Store
from schemas.codec import DecodeError, decode, encode
from schemas.findings import Finding
from schemas.reviews import REVIEW_ADAPTER
from schemas.snapshots import TableSnapshot
from streams.engine.engine import EventRejected, Plausibility, check_plausible
from streams.kafka import client_config, key_mismatch

if TYPE_CHECKING:
    from dealtrail.schedule import Schedule
    from dealtrail.settings import Settings
    from projections.reviews import ReviewDue

log = logging.getLogger("dealtrail.projector")
ROUND_TIMES = ("started_at", "completed_at")


@dataclass
class ProjectSummary:
    """What a projector run wrote (rows added after de-duplication) and read: ``records`` read,
    ``bad_records`` of the findings/rounds/dead-letter topics it could not read (stored as dead
    letters), ``skipped_events`` records of the events topic that are not a valid event of the table they are
    keyed by, or beyond the plausibility limits of rulebook 10.3.4 (the worker dead-letters those)."""

    written: BatchCounts
    records: int = 0
    batches: int = 0
    bad_records: int = 0
    skipped_events: int = 0
    reports: list[Path] = field(default_factory=list)


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
) -> ProjectSummary:
    """Project the topics into ``store`` until stopped (or caught up, with ``once``).

    Args:
        settings: cluster and namespace.
        store: the DuckDB writer.
        once: return when every partition of the four topics is read to its end offset.
        max_seconds: give up after this many seconds (seconds); None waits forever.
        poll_ms: how long one poll waits for records (milliseconds).
        max_records: records per batch at most.
        schedule: write each closed period's report, and a new revision of each stale one
            (``dealtrail.schedule.run_due``), into ``reports``, from this process's own
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
            ``DEALTRAIL_REPORTS__GRACE_MINUTES``; see ``projections.report.judge_status``);
            None: ``dealtrail.schedule.DEFAULT_GRACE``.
        report_check_seconds: seconds between two looks for closed periods and stale reports
            (resolved ``DEALTRAIL_REPORTS__CHECK_SECONDS``).

    Returns:
        The rows written.

    Raises:
        kafka.errors.KafkaError: the cluster cannot be reached.
        TimeoutError: ``max_seconds`` passed before the projector caught up (with ``once``).
    """
    from kafka import KafkaConsumer, TopicPartition

    topics = settings.topics
    names = [
        topics.events.name,
        topics.findings.name,
        topics.rounds.name,
        topics.dead_letter.name,
        topics.reviews.name,
    ]
    lock = write_lock if write_lock is not None else contextlib.nullcontext()
    gate = SnapshotGate(topics.snapshots.name)
    heads = Heads(settings.plausibility)
    group = topics.projector_group
    consumer = KafkaConsumer(
        **client_config(settings.kafka, "dealtrail-projector", one_shot=True),
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=max_records,
        # Fetched records wait in the client's memory until polled: large fetches made the
        # projector's memory jump by hundreds of MB whenever it lagged (soak run).
        fetch_max_bytes=16 * 1024 * 1024,
        max_partition_fetch_bytes=2 * 1024 * 1024,
    )
    summary = ProjectSummary(written=BatchCounts())
    started = time.monotonic()
    watch: Any = None  # run_due's memory between checks (dealtrail.schedule.ReportWatch)
    next_check = started
    try:
        parts = []
        for name in [*names, gate.topic]:
            for p in sorted(consumer.partitions_for_topic(name) or ()):
                parts.append(TopicPartition(name, p))
        consumer.assign(parts)
        gate.partitions.update(tp.partition for tp in parts if tp.topic == names[0])
        stored = store.offsets(group)
        gate.projected.update({p: o for (t, p), o in stored.items() if t == names[0]})
        for tp in parts:
            if (tp.topic, tp.partition) in stored:
                consumer.seek(tp, stored[(tp.topic, tp.partition)])
            else:  # a new store starts from the beginning; Kafka's committed offsets only show lag
                consumer.seek_to_beginning(tp)
        while True:
            polled = consumer.poll(timeout_ms=poll_ms, max_records=max_records)
            if polled:
                with lock:
                    added = _write(store, consumer, group, polled, names, summary, gate, heads)
                if on_batch is not None:
                    on_batch(added)
            caught_up = (
                not polled
                and once
                and all(consumer.position(tp) >= end for tp, end in consumer.end_offsets(parts).items())
            )
            if schedule is not None and reports is not None and (caught_up or time.monotonic() >= next_check):
                from dealtrail.schedule import ReportWatch, run_due

                watch = watch or ReportWatch()
                with lock:
                    summary.reports += run_due(
                        store.con,
                        reports,
                        schedule,
                        clock(),
                        property_name=property_name,
                        review_due=review_due,
                        console_url=console_url,
                        grace=report_grace,
                        watch=watch,
                    )
                next_check = time.monotonic() + report_check_seconds
            if caught_up:
                return summary
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                if once:
                    raise TimeoutError(f"projector not caught up after {max_seconds:.0f} s")
                return summary
    finally:
        consumer.close(autocommit=False)


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
    (:meth:`projections.store.Store.write_batch_isolating`)."""
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
    per table, then followed batch by batch), as the worker judges it against its state's.

    Args:
        limits: the resolved ``settings.plausibility``.
    """

    def __init__(self, limits: Plausibility) -> None:
        self.limits = limits
        self.last: dict[str, int | None] = {}

    def admits(self, store: Store, event: Any) -> bool:
        """Whether ``event`` is within the limits; if so, it becomes its table's head."""
        table = event.table_id
        if table not in self.last:
            row = store.con.execute("SELECT max(seq) FROM events WHERE table_id = ?", [table]).fetchone()
            self.last[table] = None if row is None or row[0] is None else int(row[0])
        last = self.last[table]
        try:
            check_plausible(last, event, self.limits)
        except EventRejected:
            return False
        self.last[table] = event.seq if last is None else max(last, event.seq)
        return True


def _write(
    store: Store,
    consumer: Any,
    group: str,
    polled: dict[Any, list[Any]],
    names: list[str],
    summary: ProjectSummary,
    gate: SnapshotGate | None = None,
    heads: Heads | None = None,
) -> BatchCounts:
    from kafka import OffsetAndMetadata

    events_name, findings_name, rounds_name, dead_name, reviews_name = names
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
                    if heads is not None and not heads.admits(store, event):
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
    added, refused = store.write_batch_isolating(
        raw_events=raw_events,
        findings=findings,
        rounds=rounds,
        dead_letters=dead,
        offsets=offsets,
        snapshots=snapshots,
        reviews=review_rows,
    )
    if refused:  # rows the store could not hold: dead letters, the batch stored without them, no crash loop
        summary.bad_records += len(refused)
        added.add(store.write_batch((), dead_letters=[_refused_row(names, *r) for r in refused]))
    summary.written.add(added)
    summary.batches += 1
    consumer.commit(commit)
    if gate is not None:
        for p, end in batch_events.items():
            gate.projected[p] = max(gate.projected.get(p, 0), end)
    return added
