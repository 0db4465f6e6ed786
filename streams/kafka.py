"""Kafka client settings and the admin calls (kafka-python), shared by every adapter.

The same :class:`~dealtrail.settings.KafkaSettings` configure the kafka-python clients
(publisher, projector, admin) and the aiokafka clients inside Faust (worker), including
SASL/SSL. Secrets never appear in logs or error messages.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from streams.topics import Topics

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings


def client_config(kafka: KafkaSettings, client_id: str) -> dict[str, Any]:
    """Keyword arguments for kafka-python's clients (``KafkaProducer``, ``KafkaConsumer``, admin)."""
    cfg: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap.split(","),
        "client_id": client_id,
        "security_protocol": kafka.security_protocol,
    }
    if kafka.security_protocol.startswith("SASL"):
        cfg["sasl_mechanism"] = kafka.sasl_mechanism or "PLAIN"
        cfg["sasl_plain_username"] = kafka.sasl_username
        cfg["sasl_plain_password"] = kafka.sasl_password.get_secret_value() if kafka.sasl_password else None
    if kafka.security_protocol.endswith("SSL"):
        if kafka.ssl_cafile:
            cfg["ssl_cafile"] = str(kafka.ssl_cafile)
        if kafka.ssl_certfile:
            cfg["ssl_certfile"] = str(kafka.ssl_certfile)
        if kafka.ssl_keyfile:
            cfg["ssl_keyfile"] = str(kafka.ssl_keyfile)
    return cfg


def faust_credentials(kafka: KafkaSettings) -> Any:
    """The ``broker_credentials`` for Faust (None for PLAINTEXT)."""
    import faust

    context = None
    if kafka.security_protocol.endswith("SSL"):
        context = ssl.create_default_context(cafile=str(kafka.ssl_cafile) if kafka.ssl_cafile else None)
        if kafka.ssl_certfile:
            context.load_cert_chain(str(kafka.ssl_certfile), str(kafka.ssl_keyfile) if kafka.ssl_keyfile else None)
    if kafka.security_protocol.startswith("SASL"):
        return faust.SASLCredentials(
            username=kafka.sasl_username,
            password=kafka.sasl_password.get_secret_value() if kafka.sasl_password else None,
            mechanism=kafka.sasl_mechanism or "PLAIN",
            ssl_context=context,
        )
    if context is not None:
        return faust.SSLCredentials(context)
    return None


def create_topics(kafka: KafkaSettings, topics: Topics) -> list[str]:
    """Create the dealtrail topics that do not exist yet (idempotent).

    Returns:
        The names of the topics created by this call.

    Raises:
        kafka.errors.KafkaError: the cluster cannot be reached or refuses.
    """
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(**client_config(kafka, "dealtrail-admin"))
    try:
        existing = set(admin.list_topics())
        new = [
            NewTopic(t.name, num_partitions=t.partitions, replication_factor=topics.replication, topic_configs=t.config)
            for t in topics.all()
            if t.name not in existing
        ]
        if new:
            from kafka.errors import TopicAlreadyExistsError

            with contextlib.suppress(TopicAlreadyExistsError):  # a concurrent create; fine
                admin.create_topics(new)
        return [t.name for t in new]
    finally:
        admin.close()


def partition_for(key: bytes, partitions: int) -> int:
    """The partition the producers' default partitioner gives ``key`` (murmur2, as Kafka's Java
    client): where a table's events are, and its changelog and chain-head records."""
    from kafka.partitioner.default import murmur2

    return int((murmur2(key) & 0x7FFFFFFF) % partitions)


def read_range(
    kafka: KafkaSettings,
    topic: str,
    partition: int,
    start: int,
    stop: int | None,
    keys: Collection[bytes] | None,
) -> list[Any]:
    """The records of one partition with offsets in ``[start, stop)`` and one of the given keys.

    Used by the worker to re-read the messages of a table that its consumer passed over, and
    by the publisher to find the chain heads of its tables (see ``streams.app``,
    ``streams.publish``). Reads without a consumer group (nothing is committed).

    Args:
        kafka: cluster settings.
        topic: the topic name.
        partition: the partition number.
        start: first offset to read (inclusive; an offset before the partition's first
            retained record reads from that record).
        stop: offset to stop at (exclusive); None reads to the partition's current end.
        keys: only records with one of these keys are returned; None returns every record.

    Returns:
        kafka-python ``ConsumerRecord`` objects in offset order.

    Raises:
        kafka.errors.KafkaError: the cluster cannot be reached.
        TimeoutError: the range could not be read in 60 seconds.
    """
    import time

    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, partition)
    found: list[Any] = []
    consumer = KafkaConsumer(**client_config(kafka, "dealtrail-reread"), enable_auto_commit=False)
    try:
        consumer.assign([tp])
        if stop is None:
            stop = int(consumer.end_offsets([tp])[tp])
        consumer.seek(tp, max(start, int(consumer.beginning_offsets([tp])[tp])))
        deadline = time.monotonic() + 60
        while consumer.position(tp) < stop:
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic}[{partition}] offsets {start}..{stop - 1}")
            for rec in consumer.poll(timeout_ms=500).get(tp, []):
                if rec.offset >= stop:
                    break
                if keys is None or rec.key in keys:
                    found.append(rec)
    finally:
        consumer.close(autocommit=False)
    return found
