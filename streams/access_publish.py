"""The console's producer of the access-log topic (streaming deployment).

In the streaming deployment the console does not write access-log entries into the store: it
publishes each to ``<ns>.access-log.v1`` (one partition, keyed ``access-log``, so the entries keep
the order the console made them in), and the projector chains and stores them with its offsets
(``dealtrail/ingest/projector.py``). Each send waits for ``acks=all`` from an idempotent producer; the
entry's ULID (``entry_id``) makes a redelivery add nothing to the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from schemas.access import AccessEntry
from streams.acked_publish import AckedPublisher
from streams.topics import Topics

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings

KEY = b"access-log"
"""The key of every record of the access-log topic."""


class AccessPublishError(RuntimeError):
    """An entry could not be written to the access-log topic (the broker did not acknowledge it)."""


class AccessPublisher(AckedPublisher):
    """Publishes access-log entries, one acknowledged send at a time (one request in flight, so a
    retried entry keeps its place in the log's order).

    Args:
        kafka: the resolved cluster settings.
        topics: the namespace's topics (``topics.access_log``).
        timeout: seconds a send may wait for the broker's acknowledgement (seconds).

    Raises:
        kafka.errors.NoBrokersAvailable: the cluster cannot be reached.
    """

    def __init__(self, kafka: KafkaSettings, topics: Topics, timeout: float = 10.0) -> None:
        super().__init__(
            kafka, topics.access_log.name, "dealtrail-console-access", AccessPublishError, "the entry", timeout, 1
        )

    def send(self, entry: AccessEntry) -> None:
        """Publish one entry and wait until the broker has it.

        Raises:
            AccessPublishError: no acknowledgement within ``timeout`` seconds, or the send failed.
        """
        headers = [("kind", entry.kind.encode()), ("entry_id", entry.entry_id.encode())]
        self.send_all([(KEY, entry.model_dump_json().encode(), headers)])
