"""Kafka client settings and the admin calls (kafka-python), shared by every adapter.

The same :class:`~dealtrail.settings.KafkaSettings` configure the kafka-python clients
(publisher, projector, admin) and the aiokafka clients inside Faust (worker), including
SASL/SSL. Secrets never appear in logs or error messages.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from streams.topics import Topics

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings
    from schemas.events import DealingEvent
    from streams.batches import UnreadableBatch


log = logging.getLogger("dealtrail.kafka")

RECONNECT_BACKOFF_MAX_MS = 5_000
"""The longest wait between two reconnection attempts of a kafka-python client (milliseconds)."""


def client_config(kafka: KafkaSettings, client_id: str, one_shot: bool = False) -> dict[str, Any]:
    """Keyword arguments for kafka-python's clients (``KafkaProducer``, ``KafkaConsumer``, admin).

    Args:
        kafka: cluster settings.
        client_id: the client's name in the broker's logs.
        one_shot: a client of a command a user waits on (``project``, ``replay``/``verify
            --source kafka``): it gives up after ``kafka.connect_timeout`` seconds when no broker
            answers. Other clients (publisher, worker re-reads, admin) keep kafka-python's 30 s,
            so that they ride out a broker restart.
    """
    cfg: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap.split(","),
        "client_id": client_id,
        "security_protocol": kafka.security_protocol,
        # reconnection attempts back off exponentially up to this (kafka-python's default, 30 s,
        # let a client miss a broker that had been back for half a minute)
        "reconnect_backoff_max_ms": RECONNECT_BACKOFF_MAX_MS,
    }
    if one_shot:
        cfg["bootstrap_timeout_ms"] = int(kafka.connect_timeout * 1000)
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


ISOLATION_LEVEL = "read_committed"
"""How every consumer dealtrail runs reads a topic: committed records only. Records of a
transaction its producer aborted (or has not committed yet) are never delivered, and a
consumer's end of a partition is its last stable offset (the first offset of a transaction
still open), not the high watermark. A non-transactional producer's records are all committed."""


def consumer_config(kafka: KafkaSettings, client_id: str, one_shot: bool = False) -> dict[str, Any]:
    """Keyword arguments for every kafka-python ``KafkaConsumer`` dealtrail builds: the client
    settings of :func:`client_config` and ``isolation_level`` :data:`ISOLATION_LEVEL`.

    A test (``tests/unit/test_committed_reads.py``) fails if a consumer anywhere in the code is
    built without it. The Faust worker's consumer (aiokafka) reads with the same level
    (:func:`read_committed`).

    Args:
        kafka: cluster settings.
        client_id: the client's name in the broker's logs.
        one_shot: a client of a command a user waits on (see :func:`client_config`).
    """
    return {**client_config(kafka, client_id, one_shot), "isolation_level": ISOLATION_LEVEL}


def read_committed(consumer: Any) -> Any:
    """Make an aiokafka ``AIOKafkaConsumer`` not yet started read with :data:`ISOLATION_LEVEL`.

    Faust builds its worker's consumer with ``read_committed`` only under its
    ``exactly_once`` processing guarantee (which dealtrail does not use); aiokafka 0.14 hands
    the consumer's ``_isolation_level`` to the fetcher it makes at ``start()``, so this is set
    on the consumer between construction and start (a test holds both internals).

    Returns:
        The same consumer.

    Raises:
        RuntimeError: the consumer has started already (its fetcher would not see the level).
    """
    if getattr(consumer, "_fetcher", None) is not None:
        raise RuntimeError("the consumer has started: its isolation level can no longer be set")
    consumer._isolation_level = ISOLATION_LEVEL
    return consumer


def compression_type(kafka: KafkaSettings) -> str | None:
    """The ``compression_type`` of dealtrail's producers (kafka-python's and Faust's name for
    the ``kafka.compression`` setting): None for ``none``, else the codec's name."""
    return None if kafka.compression == "none" else kafka.compression


def unreachable_errors() -> tuple[type[Exception], ...]:
    """The exceptions a kafka-python client raises when no broker of the bootstrap list answers
    within ``connect_timeout`` (at its construction or its first request)."""
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError, NodeNotReadyError

    return (KafkaTimeoutError, KafkaConnectionError, NodeNotReadyError)


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


class CreatedTopics(NamedTuple):
    """What :func:`create_topics` did.

    Attributes:
        bootstrap: the bootstrap servers the admin client dialled (comma-separated), as its config
            holds them.
        brokers: the brokers of the cluster that answered (``host:port`` as advertised).
        created: the names of the topics created by this call.
    """

    bootstrap: str
    brokers: list[str]
    created: list[str]


def create_topics(kafka: KafkaSettings, topics: Topics) -> CreatedTopics:
    """Create the dealtrail topics that do not exist yet (idempotent).

    Returns:
        The address dialled, the brokers that answered and the topics created.

    Raises:
        kafka.errors.KafkaError: the cluster cannot be reached or refuses.
    """
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(**client_config(kafka, "dealtrail-admin"))
    try:
        dialled = ",".join(str(b) for b in admin.config["bootstrap_servers"])
        brokers = [f"{b['host']}:{b['port']}" for b in admin.describe_cluster().get("brokers", [])]
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
        return CreatedTopics(dialled, brokers, [t.name for t in new])
    finally:
        admin.close()


def key_mismatch(key: bytes | None, event: DealingEvent) -> str | None:
    """Why a record's Kafka key does not fit its event, or None if it is the event's ``table_id``.

    Every topic is keyed by table ID, so one partition holds a table's trail in order; a record
    keyed otherwise (another table's ID, none at all) is not part of its table's trail: the
    worker sends it to the dead-letter topic (reason ``key_mismatch``), the projector does not
    store it and the Kafka replay does not read it.

    Args:
        key: the record's key (bytes, or None for a record without a key).
        event: the record's decoded event.
    """
    if key == event.table_id.encode():
        return None
    shown = "no key" if key is None else f"key {key.decode('utf-8', 'replace')!r}"
    return f"the record has {shown}, not its event's table_id {event.table_id!r}"


def partition_for(key: bytes, partitions: int) -> int:
    """The partition kafka-python's and aiokafka's default partitioner gives ``key`` (murmur2, as
    Kafka's Java client): where ``dealtrail publish`` puts a table's events, and where Faust puts
    its changelog records. Other producers may use another partitioner (see :func:`likely_partitions`):
    a lookup by table never relies on this alone."""
    from kafka.partitioner.default import murmur2

    return int((murmur2(key) & 0x7FFFFFFF) % partitions)


def likely_partitions(key: bytes, partitions: int) -> list[int]:
    """Every partition of a topic of ``partitions`` partitions, those that the common
    partitioners give ``key`` first: murmur2 (the Java client, kafka-python, aiokafka, dealtrail
    publish), CRC32 (librdkafka's default ``consistent_random`` and every binding on it:
    confluent-kafka, kcat, the Go and .NET clients), FNV-1a (Sarama's default), then the others in order.

    A producer may use any partitioner as long as each table's records go to one partition
    (docs/streaming.md, "Producer contract"); a lookup by table reads them in this order and
    stops at the first partition that holds the table (:func:`read_table`).
    """
    import zlib

    fnv = 0x811C9DC5
    for byte in key:
        fnv = ((fnv ^ byte) * 0x01000193) & 0xFFFFFFFF
    signed = fnv - (1 << 32) if fnv >= 1 << 31 else fnv
    first = [
        partition_for(key, partitions),
        zlib.crc32(key) % partitions,
        abs(signed) % partitions,  # Go: int32(hash) % n, negated when negative
    ]
    order: list[int] = []
    for p in [*first, *range(partitions)]:
        if p not in order:
            order.append(p)
    return order


class TableRecords(NamedTuple):
    """What :func:`read_table` found.

    Attributes:
        partition: the partition that holds the table's records, or None if none does.
        records: the table's records there (kafka-python ``ConsumerRecord``), in offset order.
        searched: the partitions read, in the order read (the last one holds the table, if any).
        unreadable: the record batches passed over in them, unreadable (see :func:`iter_range`).
    """

    partition: int | None
    records: list[Any]
    searched: list[int]
    unreadable: list[UnreadableBatch]


def read_table(kafka: KafkaSettings, topic: str, partitions: int, key: bytes, one_shot: bool = False) -> TableRecords:
    """The records keyed ``key`` (a table ID) in a topic, found from the data, whatever partitioner
    its producer used.

    The partitions are read in the order of :func:`likely_partitions` and the search stops at the
    first that holds a record of the key (a producer keeps each table in one partition), so a
    trail published by any of the common clients is found in the first read or three; a table
    the topic does not hold reads every partition once (the scan is bounded by the topic).

    Args:
        kafka: cluster settings.
        topic: the topic name.
        partitions: its number of partitions.
        key: the table ID as UTF-8 bytes.
        one_shot: give up after ``kafka.connect_timeout`` when no broker answers.

    Raises:
        kafka.errors.KafkaError: the cluster cannot be reached.
        TimeoutError: a partition could not be read in 60 seconds.
    """
    searched: list[int] = []
    unreadable: list[UnreadableBatch] = []
    for p in likely_partitions(key, partitions):
        searched.append(p)
        found = read_range(kafka, topic, p, 0, None, {key}, one_shot=one_shot, unreadable=unreadable)
        if found:
            return TableRecords(p, found, searched, unreadable)
    return TableRecords(None, [], searched, unreadable)


def read_range(
    kafka: KafkaSettings,
    topic: str,
    partition: int,
    start: int,
    stop: int | None,
    keys: Collection[bytes] | None,
    one_shot: bool = False,
    unreadable: list[UnreadableBatch] | None = None,
) -> list[Any]:
    """The records of one partition with offsets in ``[start, stop)`` and one of the given keys,
    as a list (see :func:`iter_range`, which this collects; same arguments and errors).

    Used by the worker to re-read the messages of a table that its consumer passed over, and
    by the publisher to find the chain heads of its tables (see ``streams.worker``,
    ``streams.publish``).

    Returns:
        kafka-python ``ConsumerRecord`` objects in offset order.
    """
    return list(iter_range(kafka, topic, partition, start, stop, keys, one_shot, unreadable))


CHUNK_RECORDS = 500
"""Records one poll of :func:`iter_range` returns at most (its memory is one such chunk)."""


def iter_range(
    kafka: KafkaSettings,
    topic: str,
    partition: int,
    start: int,
    stop: int | None,
    keys: Collection[bytes] | None,
    one_shot: bool = False,
    unreadable: list[UnreadableBatch] | None = None,
) -> Iterator[Any]:
    """The records of one partition with offsets in ``[start, stop)`` and one of the given keys,
    read in chunks of at most :data:`CHUNK_RECORDS` records (memory does not grow with the range).

    Reads without a consumer group (nothing is committed). A record batch that cannot be read
    (corrupt, failing its CRC, a codec the process cannot decompress) is passed over, as the
    worker and the projector pass it (:mod:`streams.batches`): one warning line names its
    partition and offsets (logged here, or by the caller that takes the batches in
    ``unreadable``), and the rest of the range is read.

    Args:
        kafka: cluster settings.
        topic: the topic name.
        partition: the partition number.
        start: first offset to read (inclusive; an offset before the partition's first
            retained record reads from that record).
        stop: offset to stop at (exclusive); None reads to the partition's current end.
        keys: only records with one of these keys are yielded; None yields every record.
        one_shot: give up after ``kafka.connect_timeout`` when no broker answers (see
            :func:`client_config`).
        unreadable: where the batches passed over are added, for the caller to count and say
            (None: each is said here, in a warning line of the ``dealtrail.kafka`` logger).

    Yields:
        kafka-python ``ConsumerRecord`` objects in offset order.

    Raises:
        kafka.errors.KafkaError: the cluster cannot be reached.
        TimeoutError: no record of the range came for 60 seconds.
    """
    import time

    from kafka import KafkaConsumer, TopicPartition

    from streams.batches import Probe, find_unreadable, unreadable_error

    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(
        **consumer_config(kafka, "dealtrail-reread", one_shot), enable_auto_commit=False, max_poll_records=CHUNK_RECORDS
    )
    try:
        consumer.assign([tp])
        if stop is None:
            stop = int(consumer.end_offsets([tp])[tp])
        consumer.seek(tp, max(start, int(consumer.beginning_offsets([tp])[tp])))
        deadline = time.monotonic() + 60
        while consumer.position(tp) < stop:
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic}[{partition}] offsets {start}..{stop - 1}")
            try:
                polled = consumer.poll(timeout_ms=500).get(tp, [])
                if polled:
                    deadline = time.monotonic() + 60  # a long range is read as long as it moves
            except Exception as exc:
                if not unreadable_error(exc):
                    raise
                probe = Probe(kafka)
                try:
                    bad = find_unreadable(probe, tp, int(consumer.position(tp)), stop, exc)
                finally:
                    probe.close()
                if bad is None:
                    raise
                if unreadable is not None:
                    unreadable.append(bad)  # the caller says it
                else:
                    log.warning(
                        "%s cannot be read (%s): passed over as an unreadable batch; reading on from offset %d",
                        bad.position, bad.error[:200], bad.last + 1,
                    )  # fmt: skip
                consumer.seek(tp, bad.last + 1)
                deadline = time.monotonic() + 60
                continue
            for rec in polled:
                if rec.offset >= stop:
                    break
                if keys is None or rec.key in keys:
                    yield rec
    finally:
        consumer.close(autocommit=False)
