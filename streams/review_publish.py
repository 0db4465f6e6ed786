"""The console's producer of the reviews topic (streaming deployment).

In the streaming deployment the console does not write a review into the store: it publishes the
review event to ``<ns>.reviews.v1``, keyed by finding ID, and the projector stores it with its
offsets (``dealtrail/ingest/projector.py``). Each send waits for ``acks=all`` from an idempotent
producer, so a review the console answered 201 for is in the topic; the review's ULID
(``review_id``) makes a redelivery add nothing to the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from schemas.reviews import AnyReview
from streams.acked_publish import AckedPublisher
from streams.topics import Topics

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings

Review = AnyReview
"""Any review event (approvals and rejections of a proposed disposition included)."""


class ReviewPublishError(RuntimeError):
    """A review could not be written to the reviews topic (the broker did not acknowledge it)."""


class ReviewPublisher(AckedPublisher):
    """Publishes review events to the reviews topic, one acknowledged send at a time.

    Args:
        kafka: the resolved cluster settings.
        topics: the namespace's topics (``topics.reviews``).
        timeout: seconds a send may wait for the broker's acknowledgement (seconds).

    Raises:
        kafka.errors.NoBrokersAvailable: the cluster cannot be reached.
    """

    def __init__(self, kafka: KafkaSettings, topics: Topics, timeout: float = 10.0) -> None:
        super().__init__(kafka, topics.reviews.name, "dealtrail-console", ReviewPublishError, "the review", timeout)

    def send(self, review: Review) -> None:
        """Publish one review keyed by its finding ID and wait until the broker has it.

        Raises:
            ReviewPublishError: no acknowledgement within ``timeout`` seconds, or the send failed.
        """
        headers = [("type", review.type.encode()), ("review_id", review.review_id.encode())]
        self.send_all([(review.finding_id.encode(), review.model_dump_json().encode(), headers)])
