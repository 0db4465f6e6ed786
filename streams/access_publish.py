"""The console's producer of the access-log topic (streaming deployment).

In the streaming deployment the console does not write access-log entries into the store: it
publishes each to ``<ns>.access-log.v1`` (one partition, keyed ``access-log``, so the entries keep
the order the console made them in), and the projector chains and stores them with its offsets
(``projections/projector.py``). Each send waits for ``acks=all`` from an idempotent producer; the
entry's ULID (``entry_id``) makes a redelivery add nothing to the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from schemas.access import AccessEntry
from streams.kafka import client_config
from streams.topics import Topics

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings

KEY = b"access-log"
"""The key of every record of the access-log topic."""


class AccessPublishError(RuntimeError):
    """An entry could not be written to the access-log topic (the broker did not acknowledge it)."""


class AccessPublisher:
    """Publishes access-log entries, one acknowledged send at a time.

    Args:
        kafka: the resolved cluster settings.
        topics: the namespace's topics (``topics.access_log``).
        timeout: seconds a send may wait for the broker's acknowledgement (seconds).

    Raises:
        kafka.errors.NoBrokersAvailable: the cluster cannot be reached.
    """

    def __init__(self, kafka: KafkaSettings, topics: Topics, timeout: float = 10.0) -> None:
        from kafka import KafkaProducer

        self.topic = topics.access_log.name
        self.timeout = timeout
        self.producer: Any = KafkaProducer(
            **client_config(kafka, "dealtrail-console-access", one_shot=True),
            acks="all",
            enable_idempotence=True,
            linger_ms=0,
            retries=2**31 - 1,
            max_in_flight_requests_per_connection=1,
        )

    def send(self, entry: AccessEntry) -> None:
        """Publish one entry and wait until the broker has it.

        Raises:
            AccessPublishError: no acknowledgement within ``timeout`` seconds, or the send failed.
        """
        from kafka.errors import KafkaError

        future = self.producer.send(
            self.topic,
            key=KEY,
            value=entry.model_dump_json().encode(),
            headers=[("kind", entry.kind.encode()), ("entry_id", entry.entry_id.encode())],
        )
        try:
            future.get(timeout=self.timeout)
        except KafkaError as exc:
            raise AccessPublishError(f"the entry was not stored in {self.topic}: {type(exc).__name__}") from None

    def close(self, timeout: float = 10) -> None:
        """Flush and close the producer, waiting at most ``timeout`` seconds for the broker."""
        self.producer.close(timeout=timeout)
