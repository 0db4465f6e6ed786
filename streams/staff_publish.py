"""The producer of the staff topic (streaming deployment).

In the streaming deployment the projector is the store's one writer: a roster change made on the
console's admin page, or loaded with ``dealtrail staff import --publish``, is published to
``<ns>.staff.v1``, keyed by staff ID, and the projector stores it (``dealtrail/ingest/projector.py``),
as reviews travel. Each send waits for ``acks=all`` from an idempotent producer, so a change the
console or the command reported as recorded is in the topic; the event's ``change_id`` makes a
redelivery add nothing to the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from schemas.staff import StaffMemberRecorded
from streams.acked_publish import AckedPublisher
from streams.kafka import consumer_config
from streams.topics import Topics

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings


class StaffPublishError(RuntimeError):
    """A roster event could not be written to the staff topic (the broker did not acknowledge it)."""


class StaffPublisher(AckedPublisher):
    """Publishes roster events to the staff topic, waiting for the broker's acknowledgement.

    Args:
        kafka: the resolved cluster settings.
        topics: the namespace's topics (``topics.staff``).
        timeout: seconds a send may wait for the broker's acknowledgement (seconds).

    Raises:
        kafka.errors.NoBrokersAvailable: the cluster cannot be reached.
    """

    def __init__(self, kafka: KafkaSettings, topics: Topics, timeout: float = 10.0) -> None:
        super().__init__(kafka, topics.staff.name, "dealtrail-staff", StaffPublishError, "the roster change", timeout)

    def send(self, events: Iterable[StaffMemberRecorded]) -> int:
        """Publish roster events keyed by staff ID, in order, and wait until the broker has them all.

        Returns:
            How many were published.

        Raises:
            StaffPublishError: an event was not acknowledged within ``timeout`` seconds.
        """
        return self.send_all(
            (
                e.staff_id.encode(),
                e.model_dump_json().encode(),
                [("type", e.type.encode()), ("change_id", e.change_id.encode())],
            )
            for e in events
        )


def read_roster(kafka: KafkaSettings, topics: Topics, timeout: float = 10.0) -> dict[str, dict[str, Any]]:
    """The roster in force as the staff topic holds it (its latest event per staff ID, keyed by
    ID, as ``projections.records.staff.current`` gives it from a store), read from the beginning of the
    topic: ``dealtrail staff import --publish`` compares a file with it while the projector holds
    the store. A record that is no roster event is skipped (the projector dead-letters it).

    Raises:
        kafka.errors.KafkaError: the cluster did not answer within ``timeout`` seconds.
    """
    import time

    from kafka import KafkaConsumer, TopicPartition
    from pydantic import ValidationError

    from schemas.staff import STAFF_ADAPTER

    consumer: Any = KafkaConsumer(**consumer_config(kafka, "dealtrail-staff-reader", one_shot=True), group_id=None)
    try:
        parts = [
            TopicPartition(topics.staff.name, p) for p in sorted(consumer.partitions_for_topic(topics.staff.name) or ())
        ]
        if not parts:
            return {}
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        roster: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            if time.monotonic() > deadline:
                raise StaffPublishError(f"reading {topics.staff.name} took longer than {timeout:g} s")
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    try:
                        e = STAFF_ADAPTER.validate_json(r.value or b"")
                    except ValidationError:
                        continue
                    roster[e.staff_id] = {"name": e.name, "role": e.role, "active": e.active}
        return roster
    finally:
        consumer.close()
