"""The publisher: validates dealing events and sends them to the events topic (kafka-python).

Each event is validated against ``schemas/`` first; a line that is not a valid event never
reaches the events topic: it goes to the dead-letter topic with the reason. Events are sent
with ``acks=all`` by an idempotent producer, keyed by table ID (one partition per table keeps
its events in order), with the event ID in a header.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemas.codec import DecodeError, decode, encode
from schemas.events import DealingEvent
from streams.kafka import client_config
from streams.topics import Topics

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings


def dead_letter_value(source: str, position: str, reason: str, detail: str, raw: bytes) -> bytes:
    """The JSON value of a dead-letter record (the raw input as text, or base64 if not UTF-8)."""
    import base64

    rec: dict[str, Any] = {"source": source, "position": position, "reason": reason, "detail": detail}
    try:
        rec["raw"] = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        rec["raw_base64"] = base64.b64encode(raw).decode("ascii")
    return json.dumps(rec).encode()


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
            f"(first: {first}); publish the file again (the pipeline ignores exact duplicates)"
        )


@dataclass
class PublishSummary:
    """What a publish run sent: events to the events topic, rejected lines by reason."""

    sent: int = 0
    rejected: Counter[str] = field(default_factory=Counter)


class Publisher:
    """Sends validated events to the events topic; invalid input to the dead-letter topic.

    Args:
        kafka: cluster settings (bootstrap, security).
        topics: the namespace's topics.
        linger_ms: producer batching delay (milliseconds).

    Raises:
        kafka.errors.NoBrokersAvailable: the cluster cannot be reached.
    """

    def __init__(self, kafka: KafkaSettings, topics: Topics, linger_ms: int = 5) -> None:
        from kafka import KafkaProducer

        self.topics = topics
        self.failed: list[tuple[str, str]] = []
        self.producer = KafkaProducer(
            **client_config(kafka, "dealtrail-publisher"),
            acks="all",
            enable_idempotence=True,
            linger_ms=linger_ms,
            retries=2**31 - 1,
            max_in_flight_requests_per_connection=5,
            batch_size=256 * 1024,
            compression_type=None,
        )

    def send(self, event: DealingEvent) -> Any:
        """Send one validated event; returns the producer's future (a failure is also kept in
        :attr:`failed` and raised by :meth:`flush`)."""
        key = event.table_id.encode()
        future = self.producer.send(
            self.topics.events.name,
            key=key,
            value=encode(event),
            headers=[("event_id", event.event_id.encode()), ("type", event.type.encode())],
        )
        return future.add_errback(self._on_error, f"event {event.event_id}")

    def reject(self, raw: bytes, reason: str, detail: str, source: str, position: str) -> Any:
        """Send rejected input to the dead-letter topic with its reason."""
        future = self.producer.send(
            self.topics.dead_letter.name,
            key=None,
            value=dead_letter_value(source, position, reason, detail, raw),
            headers=[("reason", reason.encode())],
        )
        return future.add_errback(self._on_error, f"dead letter of {source} {position}")

    def _on_error(self, what: str, exc: BaseException) -> None:
        self.failed.append((what, f"{type(exc).__name__}: {exc}"[:300]))

    def publish_line(self, raw: bytes, source: str, position: str, summary: PublishSummary) -> None:
        """Validate one line and send it to the events topic, or reject it."""
        try:
            event = decode(raw)
        except DecodeError as exc:
            self.reject(raw, exc.reason, exc.detail, source, position)
            summary.rejected[exc.reason] += 1
            return
        self.send(event)
        summary.sent += 1

    def flush(self, timeout: float = 120.0) -> None:
        """Wait until every sent record is acknowledged (seconds).

        The producer retries on its own (a broker restart is ridden out); a record it finally
        gives up on is reported here, never dropped silently.

        Raises:
            kafka.errors.KafkaTimeoutError: not all records were acknowledged in time.
            PublishError: some records failed (their event IDs are in the error).
        """
        self.producer.flush(timeout=timeout)
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
) -> PublishSummary:
    """Publish every line of a JSON Lines event file (blank lines skipped).

    Args:
        path: the event file.
        publisher: where to send.
        progress: called with the bytes read since its last call.
        rate: at most this many lines per second (a live floor's pace, for soak runs and
            fault drills); None sends as fast as the producer takes them.
        clock: the time in seconds (monotonic), for the pacing.
        sleep: waits a number of seconds, for the pacing.

    Returns:
        How many events were sent and how many lines were rejected, by reason.

    Raises:
        PublishError: some records were not acknowledged (see :meth:`Publisher.flush`).
    """
    summary = PublishSummary()
    source = str(path)
    pending = 0
    started = clock()
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            pending += len(raw)
            if rate is not None:
                ahead = started + line_no / rate - clock()
                if ahead > 0:
                    sleep(ahead)
            if raw.strip():
                publisher.publish_line(raw, source, f"line {line_no}", summary)
            if progress is not None and line_no % 10_000 == 0:
                progress(pending)
                pending = 0
    publisher.flush()
    if progress is not None:
        progress(pending)
    return summary
