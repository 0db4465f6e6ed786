"""The publisher: validates dealing events and sends them to the events topic (kafka-python).

Each event is validated against ``schemas/`` first; a line that is not a valid event never
reaches the events topic: it goes to the dead-letter topic with the reason. Events are sent
with ``acks=all`` by an idempotent producer, keyed by table ID (one partition per table keeps
its events in order), with the event ID in a header. An event without ``prev_hash``/``hash``
is stamped into its table's hash chain first (:class:`ChainKeeper`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemas.chain import Chainer, E, unchained
from schemas.codec import TABLE_ID_IN_LINE, DecodeError, decode, encode, raw_field
from schemas.events import DealingEvent
from schemas.lines import RAW_KEEP, read_lines
from streams.clock import IntakeClock, utc_now
from streams.engine.engine import EventRejected, Plausibility, check_plausible
from streams.engine.reorder import ReorderLimits, TableWindow
from streams.kafka import (
    client_config,
    compression_type,
    consumer_config,
    create_topics,
    iter_range,
    partition_for,
    read_range,
    unreachable_errors,
)
from streams.link import Backoff
from streams.topics import Topics

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings


RAW_LIMIT = RAW_KEEP
"""Bytes of the rejected input a dead-letter record carries (Kafka refuses records over 1 MB);
a longer input is cut, and the record keeps its full length and SHA-256."""


def dead_letter_value(
    source: str,
    position: str,
    reason: str,
    detail: str,
    raw: bytes,
    raw_bytes: int | None = None,
    raw_sha256: str | None = None,
) -> bytes:
    """The JSON value of a dead-letter record (the raw input as text, or base64 if not UTF-8).

    Input longer than :data:`RAW_LIMIT` bytes is cut to that length; ``raw_bytes`` and
    ``raw_sha256`` then describe the whole input, which stays at ``source`` / ``position``.
    For input already cut while it was read (a too-large line), pass its beginning as ``raw``
    and the whole input's ``raw_bytes`` (bytes) and ``raw_sha256`` (hex).
    """
    import hashlib

    rec: dict[str, Any] = {"source": source, "position": position, "reason": reason, "detail": detail}
    if raw_bytes is not None and raw_sha256 is not None:
        rec["raw_bytes"] = raw_bytes
        rec["raw_sha256"] = raw_sha256
        raw = raw[:RAW_LIMIT]
    elif len(raw) > RAW_LIMIT:
        rec["raw_bytes"] = len(raw)
        rec["raw_sha256"] = hashlib.sha256(raw).hexdigest()
        raw = raw[:RAW_LIMIT]
    return json.dumps({**rec, **raw_field(raw)}).encode()


def _content_digest(event: DealingEvent) -> bytes:
    """A digest of an event's content without its chain fields (``prev_hash``, ``hash``,
    ``hash_version``)."""
    import hashlib

    return hashlib.blake2b(encode(unchained(event)), digest_size=16).digest()


STALE_BATCH = 10_000
"""Stale events (older than their table's last :attr:`Chainer.WINDOW`) a publisher keeps before it
compares them with the topic in one read of their partitions: the memory of the comparison is
this many events plus one chunk of records, however long the partitions' history."""


def _place(value: bytes | None) -> tuple[str, int]:
    """``(table_id, seq)`` of a record's JSON value, read without validating the event.

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``); TypeError, KeyError: not an event's shape.
    """
    data = json.loads(value or b"")
    return str(data["table_id"]), int(data["seq"])


RIDE_OUT = 15 * 60
"""How long a record may wait for the cluster before the publisher gives up on it (seconds): a
broker outage this long is ridden out; the records are then reported (``PublishError``)."""


class PublishError(RuntimeError):
    """Some records were not acknowledged by the cluster (after the producer's own retries).

    Attributes:
        failed: ``(event ID or dead-letter position, error)`` of each unacknowledged record.
    """

    def __init__(self, failed: list[tuple[str, str]]) -> None:
        self.failed = failed
        first = "; ".join(f"{what}: {err}" for what, err in failed[:3])
        super().__init__(
            f"{len(failed)} record(s) were not acknowledged by the cluster and may not be on the topic "
            f"(first: {first}); publish the file again: events already on the topic are not sent twice"
        )


class ChainKeeper:
    """The publisher's part of the per-table hash chain: stamps unchained events so that each
    table's chain goes on across publish runs.

    Where a table's chain stands is kept in the compacted chain-heads topic (one record per
    table: head seq, head hash, partition, and ``window_offset``, the events-topic offset where
    the table's last :attr:`schemas.chain.Chainer.WINDOW` events begin). Before it stamps, the
    keeper reads the table's events from ``window_offset`` to the end of its partition: the head
    is the last chained one, even if a run crashed before it wrote its heads, and a re-sent copy
    of any of those events is stamped exactly as before (so it stays an exact duplicate). A table
    with no record yet gets a marker at the current end of its partition before its first event
    is sent, so a crash of this run is found the same way by the next one.

    One publisher per table at a time: two runs stamping the same table at once fork its chain
    (``dealtrail verify`` and DT-chain-broken then report it).
    """

    def __init__(self, kafka: KafkaSettings, topics: Topics, producer: Any) -> None:
        self.kafka = kafka
        self.topics = topics
        self.producer = producer
        self.chainer = Chainer()
        self.ready: set[str] = set()
        self.partition_of: dict[str, int] = {}
        # table -> (seq, offset on the events topic, or the send's future) of its known events
        self.known: dict[str, list[tuple[int, Any]]] = {}
        self.touched: set[str] = set()
        # head records still to write for tables without one, before their first event
        self.markers: dict[str, dict[str, Any]] = {}

    def prepare(self, table_ids: Iterable[str]) -> None:
        """Find the chain heads of these tables (one read of the heads topic, one per partition),
        waiting for the cluster (capped backoff) through an outage of up to :data:`RIDE_OUT` s.

        Raises:
            kafka.errors.KafkaError: the cluster cannot be reached (for longer than ``RIDE_OUT``).
            TimeoutError: a topic could not be read in 60 seconds (for longer than ``RIDE_OUT``).
        """
        tables = list(table_ids)
        backoff = Backoff(first=0.5, cap=5.0)
        give_up = time.monotonic() + RIDE_OUT
        away: tuple[type[BaseException], ...] = (*unreachable_errors(), TimeoutError)
        while True:
            try:
                return self._prepare_once(tables)
            except away:
                if time.monotonic() > give_up:
                    raise
                time.sleep(backoff.next())

    def _prepare_once(self, table_ids: Iterable[str]) -> None:
        from kafka import KafkaConsumer, TopicPartition

        tables = sorted(set(table_ids) - self.ready)
        if not tables:
            return
        consumer = KafkaConsumer(**consumer_config(self.kafka, "dealtrail-publisher-chain"), enable_auto_commit=False)
        try:
            if not consumer.partitions_for_topic(self.topics.chain_heads.name):
                create_topics(self.kafka, self.topics)  # a namespace made before the heads topic existed
            heads = self._heads(consumer)
            events = self.topics.events.name
            partitions = sorted(consumer.partitions_for_topic(events) or range(self.topics.events.partitions))
            ends = consumer.end_offsets([TopicPartition(events, p) for p in partitions])
        finally:
            consumer.close(autocommit=False)
        starts: dict[int, int] = {}
        wanted: dict[int, set[bytes]] = {}
        for table in tables:
            key = table.encode()
            p = partitions[partition_for(key, len(partitions))]
            self.partition_of[table] = p
            head = heads.get(table)
            if head is None or head.get("partition") != p:
                start = int(ends[TopicPartition(events, p)])
                self.markers[table] = {"seq": 0, "hash": None, "partition": p, "window_offset": start}
            else:
                start = int(head["window_offset"])
                if head.get("hash"):
                    self.chainer.heads[table] = (int(head["seq"]), str(head["hash"]))
            starts[p] = min(starts.get(p, start), start)
            wanted.setdefault(p, set()).add(key)
        for p, start in starts.items():
            for rec in read_range(self.kafka, events, p, start, None, wanted[p]):
                try:
                    event = decode(rec.value)
                except DecodeError:
                    continue
                if event.hash is not None and event.table_id.encode() == rec.key:
                    self.chainer.remember(event)
                    self.known.setdefault(event.table_id, []).append((event.seq, rec.offset))
        self.ready.update(tables)

    def stamp(self, event: E) -> tuple[E, bytes | None]:
        """The event with its chain fields, and its canonical bytes if this call stamped it
        (see :meth:`schemas.chain.Chainer.stamp_encoded`)."""
        if event.hash is None and event.table_id not in self.ready:
            self.prepare([event.table_id])
        marker = self.markers.pop(event.table_id, None)
        if marker is not None:  # on the broker before the table's first event of this run
            self._send_head(event.table_id, marker)
            self.producer.flush()
        if event.hash is not None:  # chained upstream: keep it, and know it if it comes again
            self.chainer.remember(event)
            return event, None
        return self.chainer.stamp_encoded(event)

    def published_before(self, event: DealingEvent) -> str | None:
        """Whether the events topic already holds this event.

        Returns:
            ``"copy"``: an exact copy of one of the table's last :attr:`Chainer.WINDOW`
            events; ``"stale"``: at or below the table's head but older than that, so it cannot
            be compared; None: a new event, or a conflicting copy (same seq, other content),
            which the engine must see.
        """
        if event.table_id not in self.ready:
            self.prepare([event.table_id])
        head = self.chainer.heads.get(event.table_id)
        if head is None or event.seq > head[0]:
            return None
        prior = self.chainer.recalled(event.table_id, event.seq)
        if prior is None:
            # a seq within the remembered span that was never sent arrived out of seq order
            # (merged feeds): it is new, and the engine's reorder window puts it in its place
            return None if self.chainer.covers(event.table_id, event.seq) else "stale"
        return "copy" if (event == prior[1] if event.hash is not None else unchained(event) == prior[0]) else None

    def published_as(self, events: list[DealingEvent]) -> list[str]:
        """What the events topic holds at the places of stale events (see :meth:`published_before`).

        The partitions of their tables are read once each (after this run's sends are
        acknowledged), from the start to their current end in chunks of
        :data:`streams.kafka.CHUNK_RECORDS` records, and only the records of the wanted tables and
        seqs are kept (a digest each): memory grows with the number of ``events``, not with the
        partitions' history.

        Args:
            events: stale events of tables this keeper prepared.

        Returns:
            For each event, in order: ``"copy"``, an event with the same content at the table's
            same seq (and, if the event carries a hash, the same hash): already published;
            ``"conflict"``: another event at that seq; ``"missing"``: no event at that seq (the
            table went on past it).

        Raises:
            kafka.errors.KafkaError: the cluster cannot be reached.
            TimeoutError: no record of a partition came for 60 seconds.
        """
        self.producer.flush()
        wanted: dict[int, set[tuple[str, int]]] = {}
        for event in events:
            wanted.setdefault(self.partition_of[event.table_id], set()).add((event.table_id, event.seq))
        held: dict[tuple[str, int], list[tuple[bytes, str | None]]] = {}
        for p, places in wanted.items():
            keys = {table.encode() for table, _ in places}
            for rec in iter_range(self.kafka, self.topics.events.name, p, 0, None, keys):
                try:  # its place first (plain JSON); the whole event only at a wanted place
                    place = _place(rec.value)
                    if place not in places:
                        continue
                    found = decode(rec.value or b"")
                except (DecodeError, ValueError, TypeError, KeyError):
                    continue
                if (found.table_id, found.seq) == place:
                    held.setdefault(place, []).append((_content_digest(found), found.hash))
        answers = []
        for event in events:
            mine, there = _content_digest(event), held.get((event.table_id, event.seq), [])
            if any(d == mine and (event.hash is None or h == event.hash) for d, h in there):
                answers.append("copy")
            else:
                answers.append("conflict" if there else "missing")
        return answers

    def sent(self, event: DealingEvent, future: Any) -> None:
        """Note an event sent to the events topic (its future gives the offset later)."""
        if event.hash is None:
            return
        known = self.known.setdefault(event.table_id, [])
        known.append((event.seq, future))
        if len(known) > 4 * Chainer.WINDOW:
            del known[: len(known) - Chainer.WINDOW]
        self.touched.add(event.table_id)

    def write_heads(self) -> None:
        """Send the head record of every table stamped or adopted in this run (call after the
        events were acknowledged: the offsets come from their sends)."""
        for table in sorted(self.touched):
            head = self.chainer.heads.get(table)
            if head is None:
                continue
            offsets = []
            for _, where in self.known.get(table, [])[-Chainer.WINDOW :]:
                offsets.append(where if isinstance(where, int) else where.value.offset)
            partition = self.partition_of.get(table)
            if partition is None:
                partition = self.known[table][-1][1].value.partition
            self._send_head(
                table,
                {"seq": head[0], "hash": head[1], "partition": partition, "window_offset": min(offsets)},
            )
        self.touched.clear()

    def _send_head(self, table: str, value: dict[str, Any]) -> None:
        self.producer.send(self.topics.chain_heads.name, key=table.encode(), value=json.dumps(value).encode())

    def _heads(self, consumer: Any) -> dict[str, dict[str, Any]]:
        name = self.topics.chain_heads.name
        heads: dict[str, dict[str, Any]] = {}
        for p in sorted(consumer.partitions_for_topic(name) or ()):
            for rec in read_range(self.kafka, name, p, 0, None, None):
                if rec.key and rec.value:
                    heads[rec.key.decode()] = json.loads(rec.value)
        return heads


@dataclass
class PublishSummary:
    """What a publish run did with each non-blank line.

    Attributes:
        sent: events sent to the events topic.
        copies: exact copies of one of their table's last :attr:`Chainer.WINDOW` events on the
            topic, not sent again (nothing recorded).
        already_published: events at or below their table's head on the topic but older than
            that window, found on the topic with the same content at the same seq (the
            partition's history is read back to compare): not sent again, nothing recorded.
        rejected: lines that are not valid events (or too large to send), by reason; each in
            the dead-letter topic. Among them ``conflicts_with_published``: an event older than
            its table's window whose seq the topic holds with other content, and
            ``behind_published_head``: one whose seq the topic does not hold although the
            table went on past it (neither can be linked into the chain where it belongs).
    """

    sent: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    copies: int = 0
    already_published: int = 0


class Publisher:
    """Sends validated events to the events topic; invalid input to the dead-letter topic.

    Args:
        kafka: cluster settings (bootstrap, security).
        topics: the namespace's topics.
        linger_ms: producer batching delay (milliseconds).
        chain: stamp the per-table hash chain on events that carry none (:class:`ChainKeeper`);
            events that carry one keep it.
        limits: the plausibility limits of rulebook 10.3.4 (``settings.plausibility``): an
            event beyond them goes to the dead-letter topic with its reason instead of being
            chained (a seq far ahead would become its table's chain head, and every later event
            would link to it); the seq limit needs the chain's head, so without ``chain`` only
            the worker checks it. With limits, an event recorded more than ``max_clock_skew``
            after ``clock`` is rejected as ``recorded_in_future`` before anything else is done
            with it (:class:`streams.clock.IntakeClock`). None checks none.
        reorder: the bounds of a per-table reorder window (rulebook 10.1.2, the ``reorder``
            settings) that events pass through before they are chained, so that a file whose
            events come out of seq order within a table is stamped in seq order, as the audit
            stamps it (the chain then links each event to the one the engine applies before it);
            what the windows hold is sent by :meth:`release_held` at the end of the input.
            None (or no ``chain``): every event is sent in arrival order.
        clock: the publisher's clock (timezone-aware; the system clock by default).

    Raises:
        kafka.errors.NoBrokersAvailable: the cluster cannot be reached.
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        topics: Topics,
        linger_ms: int = 5,
        chain: bool = True,
        limits: Plausibility | None = None,
        reorder: ReorderLimits | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        from kafka import KafkaProducer

        self.topics = topics
        self.limits = limits
        self.intake = IntakeClock(limits, clock) if limits is not None else None
        self.reorder = reorder
        self.windows: dict[str, TableWindow[tuple[bytes, DealingEvent, str, str]]] = {}
        # stale events waiting to be compared with the topic, STALE_BATCH at a time (see _settle_stale)
        self.stale: list[tuple[bytes, DealingEvent, str, str]] = []
        self.failed: list[tuple[str, str]] = []
        self.producer = KafkaProducer(
            **client_config(kafka, "dealtrail-publisher"),
            acks="all",
            enable_idempotence=True,
            linger_ms=linger_ms,
            retries=2**31 - 1,
            max_in_flight_requests_per_connection=5,
            batch_size=256 * 1024,
            compression_type=compression_type(kafka),
            # ride out a broker outage: records wait in the producer (and a full buffer makes
            # send wait) up to RIDE_OUT seconds, then fail and are reported, never dropped silently
            delivery_timeout_ms=RIDE_OUT * 1000,
            max_block_ms=RIDE_OUT * 1000,
        )
        self.keeper = ChainKeeper(kafka, topics, self.producer) if chain else None

    def send(self, event: DealingEvent) -> Any:
        """Send one validated event; returns the producer's future (a failure is also kept in
        :attr:`failed` and raised by :meth:`flush`)."""
        data = None
        if self.keeper is not None:
            event, data = self.keeper.stamp(event)
        key = event.table_id.encode()
        future = self.producer.send(
            self.topics.events.name,
            key=key,
            value=encode(event) if data is None else data,
            headers=[("event_id", event.event_id.encode()), ("type", event.type.encode())],
        )
        future.add_errback(self._on_error, f"event {event.event_id}")
        if self.keeper is not None:
            self.keeper.sent(event, future)
        return future

    def reject(
        self,
        raw: bytes,
        reason: str,
        detail: str,
        source: str,
        position: str,
        raw_bytes: int | None = None,
        raw_sha256: str | None = None,
    ) -> Any:
        """Send rejected input to the dead-letter topic with its reason (``raw_bytes`` and
        ``raw_sha256``: see :func:`dead_letter_value`)."""
        future = self.producer.send(
            self.topics.dead_letter.name,
            key=None,
            value=dead_letter_value(source, position, reason, detail, raw, raw_bytes, raw_sha256),
            headers=[("reason", reason.encode())],
        )
        return future.add_errback(self._on_error, f"dead letter of {source} {position}")

    def _on_error(self, what: str, exc: BaseException) -> None:
        self.failed.append((what, f"{type(exc).__name__}: {exc}"[:300]))

    def publish_line(self, raw: bytes, source: str, position: str, summary: PublishSummary) -> None:
        """Validate one line and send it to the events topic (through its table's reorder window,
        when there is one), or reject it."""
        try:
            event = decode(raw)
        except DecodeError as exc:
            self.reject(raw, exc.reason, exc.detail, source, position)
            summary.rejected[exc.reason] += 1
            return
        if self.intake is not None:  # a time that cannot be true is refused before it is chained
            try:
                self.intake.check(event)
            except EventRejected as exc:
                self.reject(raw, exc.reason, exc.detail, source, position)
                summary.rejected[exc.reason] += 1
                return
        if self.reorder is None or self.keeper is None:
            self._publish(raw, event, source, position, summary)
            return
        window = self.windows.get(event.table_id)
        if window is None:
            if event.table_id not in self.keeper.ready:  # a pipe: its tables are prepared as they come
                self.keeper.prepare([event.table_id])
            head = self.keeper.chainer.heads.get(event.table_id)
            window = self.windows[event.table_id] = TableWindow(head[0] if head else None, self.reorder)
        if self.limits is not None:  # judged on arrival: a seq far ahead must not wait in the window
            try:
                check_plausible(window.last, event, self.limits)
            except EventRejected as exc:
                self.reject(raw, exc.reason, exc.detail, source, position)
                summary.rejected[exc.reason] += 1
                return
        for held in window.push(event.seq, event.occurred_at, (raw, event, source, position)):
            self._release(window, held, summary)

    def release_held(self, summary: PublishSummary) -> None:
        """Send what the reorder windows hold, each table's in seq order, and settle the stale
        events still waiting to be compared with the topic (the end of the input)."""
        for window in self.windows.values():
            for held in window.flush():
                self._release(window, held, summary)
        self._settle_stale(summary)

    def _settle_stale(self, summary: PublishSummary) -> None:
        """Compare the stale events waiting with what the topic holds at their places (one
        bounded read of each partition concerned, :meth:`ChainKeeper.published_as`): a copy is
        counted as already published, anything else dead-lettered with its reason."""
        if not self.stale or self.keeper is None:
            return
        stale, self.stale = self.stale, []
        found = self.keeper.published_as([event for _, event, _, _ in stale])
        for (raw, event, source, position), there in zip(stale, found, strict=True):
            if there == "copy":  # a file published again: quiet, counted
                summary.already_published += 1
                continue
            head = self.keeper.chainer.heads[event.table_id][0]
            reason, what = (
                ("conflicts_with_published", "holds another event at that seq")
                if there == "conflict"
                else ("behind_published_head", "holds no event at that seq")
            )
            detail = (
                f"table {event.table_id} is at seq {head} on the events topic, which {what}; this event "
                f"(seq {event.seq}) is older than the table's last {Chainer.WINDOW} events and is not sent"
            )
            self.reject(raw, reason, detail, source, position)
            summary.rejected[reason] += 1

    def _release(
        self,
        window: TableWindow[tuple[bytes, DealingEvent, str, str]],
        held: tuple[bytes, DealingEvent, str, str],
        summary: PublishSummary,
    ) -> None:
        raw, event, source, position = held
        self._publish(raw, event, source, position, summary)
        head = self.keeper.chainer.heads.get(event.table_id) if self.keeper is not None else None
        if head is not None:
            window.last = head[0]  # the chain's word on where the table is

    def _publish(self, raw: bytes, event: DealingEvent, source: str, position: str, summary: PublishSummary) -> None:
        """Chain one validated event and send it, or reject it (a copy, a stale or an implausible event)."""
        from kafka.errors import MessageSizeTooLargeError

        if self.keeper is not None:
            seen = self.keeper.published_before(event)
            if seen == "copy":
                summary.copies += 1
                return
            if seen == "stale":  # compared with the topic later, with others (never sent: no order to keep)
                self.stale.append((raw, event, source, position))
                if len(self.stale) >= STALE_BATCH:
                    self._settle_stale(summary)
                return
        if self.limits is not None:
            chained = self.keeper.chainer.heads.get(event.table_id) if self.keeper is not None else None
            try:
                check_plausible(None if chained is None else chained[0], event, self.limits)
            except EventRejected as exc:
                self.reject(raw, exc.reason, exc.detail, source, position)
                summary.rejected[exc.reason] += 1
                return
        try:
            self.send(event)
        except MessageSizeTooLargeError as exc:
            self.reject(raw, "too_large", str(exc)[:300], source, position)
            summary.rejected["too_large"] += 1
            return
        summary.sent += 1

    def flush(self, timeout: float = RIDE_OUT + 60.0) -> None:
        """Wait until every sent record is acknowledged (seconds).

        The producer retries on its own (a broker outage of up to :data:`RIDE_OUT` seconds is
        ridden out); a record it finally gives up on is reported here, never dropped silently.

        Raises:
            kafka.errors.KafkaTimeoutError: not all records were acknowledged in time.
            PublishError: some records failed (their event IDs are in the error).
        """
        self.producer.flush(timeout=timeout)
        self._raise_failed()
        if self.keeper is not None and self.keeper.touched:
            self.keeper.write_heads()  # only once the events they point at are acknowledged
            self.producer.flush(timeout=timeout)
            self._raise_failed()

    def _raise_failed(self) -> None:
        if self.failed:
            failed, self.failed = self.failed, []
            raise PublishError(failed)

    def close(self) -> None:
        """Flush and close the producer."""
        self.producer.close(timeout=30)


def publish_file(
    path: Path,
    publisher: Publisher,
    progress: Callable[[int], None] | None = None,
    rate: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    *,
    max_record_bytes: int,
) -> PublishSummary:
    """Publish every line of a JSON Lines event file (blank lines skipped).

    Lines are read with :func:`schemas.lines.read_lines`: a byte-order mark at the start of
    any line is skipped, LF, CRLF and a lone CR end a line, and a line over
    ``max_record_bytes`` goes to the dead-letter topic as ``too_large`` (its first 256 KiB,
    its length and SHA-256) without ever being held whole.

    Args:
        path: the event file.
        publisher: where to send.
        progress: called with the bytes read since its last call.
        rate: at most this many lines per second (a live floor's pace, for soak runs and
            fault drills); None sends as fast as the producer takes them.
        clock: the time in seconds (monotonic), for the pacing.
        sleep: waits a number of seconds, for the pacing.
        max_record_bytes: the longest line taken as an event (bytes; the setting).

    Returns:
        How many events were sent and how many lines were rejected, by reason.

    Raises:
        PublishError: some records were not acknowledged (see :meth:`Publisher.flush`).
    """
    summary = PublishSummary()
    source = str(path)
    keeper = getattr(publisher, "keeper", None)
    # find every table's chain head up front, one read per partition (a pipe can be read only
    # once: its tables are then prepared one by one as they come)
    if keeper is not None and path.is_file():
        with path.open("rb") as fh:
            keeper.prepare(
                {
                    m.group(1).decode("utf-8", "replace")
                    for line in read_lines(fh, max_record_bytes)
                    if not line.too_large and (m := TABLE_ID_IN_LINE.search(line.data))
                }
            )
    pending = 0
    started = clock()
    with path.open("rb") as fh:
        for line in read_lines(fh, max_record_bytes):
            line_no, raw = line.number, line.data
            pending += line.read
            if rate is not None:
                ahead = started + line_no / rate - clock()
                if ahead > 0:
                    sleep(ahead)
            if line.too_large:
                detail = (
                    f"the line is {line.size:,} bytes, over the record limit of {max_record_bytes:,} "
                    "(DEALTRAIL_MAX_RECORD_BYTES)"
                )
                publisher.reject(raw, "too_large", detail, source, f"line {line_no}", line.size, line.sha256)
                summary.rejected["too_large"] += 1
            elif raw.strip():
                publisher.publish_line(raw, source, f"line {line_no}", summary)
            if progress is not None and line_no % 10_000 == 0:
                progress(pending)
                pending = 0
    publisher.release_held(summary)
    publisher.flush()
    if progress is not None:
        progress(pending)
    return summary
