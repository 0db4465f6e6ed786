"""Consumer lag from the broker itself: each consumer group's committed offset per partition
against the partition's end, and the group's members (kafka-python's admin client and a consumer
without a group), for ``dealtrail status`` and the ``dealtrail_consumer_group_lag`` metric.

The end of a partition is its last stable offset (dealtrail's consumers read committed records
only: :data:`streams.kafka.ISOLATION_LEVEL`), so an open transaction's records are not counted
as lag. A partition the group has never committed has no committed offset (None): its lag is the
whole partition (from its first offset still kept).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streams.kafka import client_config, consumer_config

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings

REQUEST_MS = 5_000
"""How long one request of :class:`LagReader` waits for the broker (milliseconds)."""


@dataclass(frozen=True)
class PartitionLag:
    """One partition of a topic a consumer group reads.

    Attributes:
        group: the consumer group.
        topic: the topic.
        partition: the partition number.
        committed: the group's committed offset (the next record it will read); None: never committed.
        start: the partition's first offset still kept (retention removed what is before it).
        end: the partition's end (the offset the next record will get; its last stable offset).
    """

    group: str
    topic: str
    partition: int
    committed: int | None
    start: int
    end: int

    @property
    def lag(self) -> int:
        """Records of the partition the group has not committed yet (records)."""
        return max(0, self.end - (self.start if self.committed is None else max(self.committed, self.start)))


@dataclass(frozen=True)
class Member:
    """A consumer of a group, as the group's coordinator lists it.

    Attributes:
        client_id: the client's name (Faust's and dealtrail's clients name the process).
        host: the address it connected from.
        partitions: ``(topic, partition)`` assigned to it.
    """

    client_id: str
    host: str
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class GroupLag:
    """A consumer group: its state, members and lag per partition.

    Attributes:
        group: the group ID.
        state: the coordinator's state of the group (``Stable``, ``Empty``, ``Dead``, ...).
        members: its consumers now (none when no process of the group runs).
        partitions: the partitions of the topics it reads, in order.
    """

    group: str
    state: str
    members: tuple[Member, ...]
    partitions: tuple[PartitionLag, ...]

    @property
    def lag(self) -> int:
        """The group's lag over all its partitions (records)."""
        return sum(p.lag for p in self.partitions)


class LagReader:
    """Reads consumer groups' lag from the cluster; keeps its clients open between reads (a
    metrics scrape every few seconds does not reconnect each time). Not thread-safe: one
    reader per thread.

    Args:
        kafka: the cluster settings (``kafka.bootstrap`` as resolved).
        client_id: the clients' name in the broker's logs.
    """

    def __init__(self, kafka: KafkaSettings, client_id: str = "dealtrail-lag") -> None:
        self.kafka, self.client_id = kafka, client_id
        self._admin: Any = None
        self._consumer: Any = None

    def _clients(self) -> tuple[Any, Any]:
        from kafka import KafkaAdminClient, KafkaConsumer

        if self._admin is None:
            # one_shot: no broker answering within kafka.connect_timeout fails the read (a person
            # or a scrape waits on it)
            config = client_config(self.kafka, self.client_id, one_shot=True)
            self._admin = KafkaAdminClient(**config, request_timeout_ms=REQUEST_MS)
        if self._consumer is None:
            self._consumer = KafkaConsumer(
                **consumer_config(self.kafka, self.client_id, one_shot=True), group_id=None, enable_auto_commit=False
            )
        return self._admin, self._consumer

    def read(self, groups: Sequence[str], topics: Sequence[str] = ()) -> list[GroupLag]:
        """The lag of each group in ``groups``.

        Args:
            groups: the consumer groups to read.
            topics: topics whose every partition is listed for each group even if the group
                never committed there (the events topic of a new worker group); the topics a
                group committed offsets on are always listed.

        Raises:
            kafka.errors.KafkaError: the cluster did not answer (the clients are closed and
                made again by the next read).
        """
        try:
            return self._read(groups, topics)
        except Exception:
            self.close()
            raise

    def _read(self, groups: Sequence[str], topics: Sequence[str]) -> list[GroupLag]:
        from kafka import TopicPartition

        admin, consumer = self._clients()
        described: dict[str, Any] = admin.describe_groups(list(groups))
        offsets: dict[str, Any] = admin.list_group_offsets({g: None for g in groups})
        out = []
        for group in groups:
            committed = {
                (tp.topic, tp.partition): (None if meta.offset is None or meta.offset < 0 else int(meta.offset))
                for tp, meta in offsets.get(group, {}).items()
            }
            names = {t for t, _ in committed} | set(topics)
            parts = []
            for name in sorted(names):
                numbers = consumer.partitions_for_topic(name) or set()
                parts += [TopicPartition(name, p) for p in sorted(numbers)]
            ends = consumer.end_offsets(parts, timeout_ms=REQUEST_MS) if parts else {}
            starts = consumer.beginning_offsets(parts, timeout_ms=REQUEST_MS) if parts else {}
            info = described.get(group) or {}
            members = tuple(_member(m) for m in info.get("members") or ())
            out.append(
                GroupLag(
                    group,
                    str(info.get("group_state") or "Unknown"),
                    members,
                    tuple(
                        PartitionLag(
                            group,
                            tp.topic,
                            tp.partition,
                            committed.get((tp.topic, tp.partition)),
                            int(starts.get(tp) or 0),
                            int(ends.get(tp) or 0),
                        )
                        for tp in parts
                    ),
                )
            )
        return out

    def close(self) -> None:
        """Close the clients (made again by the next read)."""
        for client in (self._admin, self._consumer):
            if client is not None:
                with contextlib.suppress(Exception):  # closing a broken client: nothing more to do
                    client.close()
        self._admin = self._consumer = None


def _member(member: dict[str, Any]) -> Member:
    """A :class:`Member` of kafka-python's group member description (a dict); an assignment the
    admin client could not decode (a protocol of Faust's own) lists no partitions."""
    assigned: list[tuple[str, int]] = []
    assignment = member.get("member_assignment")
    if isinstance(assignment, dict):
        for entry in assignment.get("assigned_partitions") or ():
            assigned += [(str(entry["topic"]), int(p)) for p in entry.get("partitions") or ()]
    host = str(member.get("client_host") or "").lstrip("/")
    return Member(str(member.get("client_id") or ""), host, tuple(sorted(assigned)))
