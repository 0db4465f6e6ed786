"""The publisher: validates dealing events and sends them to the events topic (kafka-python).

Each event is validated against ``schemas/`` first; a line that is not a valid event never
reaches the events topic: it goes to the dead-letter topic with the reason. Events are sent
with ``acks=all`` by an idempotent producer, keyed by table ID (one partition per table keeps
its events in order), with the event ID in a header.
"""

from __future__ import annotations

import json
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
        """Send one validated event; returns the producer's future."""
        key = event.table_id.encode()
        return self.producer.send(
            self.topics.events.name,
            key=key,
            value=encode(event),
            headers=[("event_id", event.event_id.encode()), ("type", event.type.encode())],
        )

    def reject(self, raw: bytes, reason: str, detail: str, source: str, position: str) -> Any:
        """Send rejected input to the dead-letter topic with its reason."""
        return self.producer.send(
            self.topics.dead_letter.name,
            key=None,
            value=dead_letter_value(source, position, reason, detail, raw),
            headers=[("reason", reason.encode())],
        )

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

        Raises:
            kafka.errors.KafkaTimeoutError: not all records were acknowledged in time.
        """
        self.producer.flush(timeout=timeout)

    def close(self) -> None:
        """Flush and close the producer."""
        self.producer.close(timeout=30)


def publish_file(path: Path, publisher: Publisher, progress: Callable[[int], None] | None = None) -> PublishSummary:
    """Publish every line of a JSON Lines event file (blank lines skipped).

    Returns:
        How many events were sent and how many lines were rejected, by reason.
    """
    summary = PublishSummary()
    source = str(path)
    pending = 0
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            pending += len(raw)
            if raw.strip():
                publisher.publish_line(raw, source, f"line {line_no}", summary)
            if progress is not None and line_no % 10_000 == 0:
                progress(pending)
                pending = 0
    publisher.flush()
    if progress is not None:
        progress(pending)
    return summary
