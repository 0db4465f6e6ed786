"""One producer shape for the console's small topics (reviews, the access log, the staff roster):
an idempotent producer whose every send waits for ``acks=all``, so a record the console or a
command reported as recorded is in the topic. Each topic's publisher names its topic, client and
error, and builds its records (``streams/review_publish.py``, ``access_publish.py``,
``staff_publish.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from streams.kafka import client_config

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings

Record = tuple[bytes, bytes, list[tuple[str, bytes]]]
"""A record to send: key, value and headers."""


class AckedPublisher:
    """Sends records to one topic and waits for the broker's acknowledgement of each.

    Args:
        kafka: the resolved cluster settings.
        topic: the topic's name.
        client_id: the producer's client ID (``dealtrail-console``, ...).
        error: the exception raised when a record is not acknowledged.
        what: what a record is, for the error's text ("the review", "the entry", ...).
        timeout: seconds a send may wait for the broker's acknowledgement (seconds).
        in_flight: unacknowledged requests per connection (1 keeps a retried record in order).

    Raises:
        kafka.errors.NoBrokersAvailable: the cluster cannot be reached.
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        topic: str,
        client_id: str,
        error: type[Exception],
        what: str,
        timeout: float = 10.0,
        in_flight: int = 5,
    ) -> None:
        from kafka import KafkaProducer

        self.topic, self.timeout, self.error, self.what = topic, timeout, error, what
        self.producer: Any = KafkaProducer(
            **client_config(kafka, client_id, one_shot=True),
            acks="all",
            enable_idempotence=True,
            linger_ms=0,
            retries=2**31 - 1,
            max_in_flight_requests_per_connection=in_flight,
        )

    def send_all(self, records: Iterable[Record]) -> int:
        """Send ``records`` in order and wait until the broker has every one.

        Returns:
            How many were sent.

        Raises:
            the publisher's ``error``: a record was not acknowledged within ``timeout`` seconds,
            or its send failed.
        """
        from kafka.errors import KafkaError

        futures = [self.producer.send(self.topic, key=k, value=v, headers=h) for k, v, h in records]
        try:
            for f in futures:
                f.get(timeout=self.timeout)
        except KafkaError as exc:
            raise self.error(f"{self.what} was not stored in {self.topic}: {type(exc).__name__}") from None
        return len(futures)

    def close(self, timeout: float = 10) -> None:
        """Flush and close the producer, waiting at most ``timeout`` seconds for the broker."""
        self.producer.close(timeout=timeout)
