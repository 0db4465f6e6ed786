"""The console's producer of the reviews topic (streaming deployment).

In the streaming deployment the console does not write a review into the store: it publishes the
review event to ``<ns>.reviews.v1``, keyed by finding ID, and the projector stores it with its
offsets (``projections/projector.py``). Each send waits for ``acks=all`` from an idempotent
producer, so a review the console answered 201 for is in the topic; the review's ULID
(``review_id``) makes a redelivery add nothing to the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from schemas.reviews import AnyReview
from streams.kafka import client_config
from streams.topics import Topics

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings

Review = AnyReview
"""Any review event (approvals and rejections of a proposed disposition included)."""


class ReviewPublishError(RuntimeError):
    """A review could not be written to the reviews topic (the broker did not acknowledge it)."""


class ReviewPublisher:
    """Publishes review events to the reviews topic, one acknowledged send at a time.

    Args:
        kafka: the resolved cluster settings.
        topics: the namespace's topics (``topics.reviews``).
        timeout: seconds a send may wait for the broker's acknowledgement (seconds).

    Raises:
        kafka.errors.NoBrokersAvailable: the cluster cannot be reached.
    """

    def __init__(self, kafka: KafkaSettings, topics: Topics, timeout: float = 10.0) -> None:
        from kafka import KafkaProducer

        self.topic = topics.reviews.name
        self.timeout = timeout
        self.producer: Any = KafkaProducer(
            **client_config(kafka, "dealtrail-console", one_shot=True),
            acks="all",
            enable_idempotence=True,
            linger_ms=0,
            retries=2**31 - 1,
            max_in_flight_requests_per_connection=5,
        )

    def send(self, review: Review) -> None:
        """Publish one review keyed by its finding ID and wait until the broker has it.

        Raises:
            ReviewPublishError: no acknowledgement within ``timeout`` seconds, or the send failed.
        """
        from kafka.errors import KafkaError

        future = self.producer.send(
            self.topic,
            key=review.finding_id.encode(),
            value=review.model_dump_json().encode(),
            headers=[("type", review.type.encode()), ("review_id", review.review_id.encode())],
        )
        try:
            future.get(timeout=self.timeout)
        except KafkaError as exc:
            raise ReviewPublishError(f"the review was not stored in {self.topic}: {type(exc).__name__}") from None

    def close(self, timeout: float = 10) -> None:
        """Flush and close the producer, waiting at most ``timeout`` seconds for the broker."""
        self.producer.close(timeout=timeout)
