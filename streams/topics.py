"""The Kafka topics of dealtrail, declared once with their settings (one writer each).

| topic | key | writer | content |
|---|---|---|---|
| ``<ns>.dealing-events.v1`` | table ID | the publisher | dealing events (JSON), the system of record: kept forever |
| ``<ns>.findings.v1`` | table ID | the worker | finding revisions (JSON ``Finding``) |
| ``<ns>.rounds.v1`` | table ID | the worker | completed rounds (JSON rows of the ``rounds`` table) |
| ``<ns>.dead-letter.v1`` | table ID if known | publisher and worker | rejected input with its reason |
| ``<ns>.chain-heads.v1`` | table ID | the publisher | each table's hash-chain head (compacted) |
| ``<ns>.reviews.v1`` | finding ID | the console | review events (JSON, ``schemas.reviews``): kept forever |
| ``<ns>.snapshots.v1`` | table ID | the worker | a table's engine state every ``snapshot_every`` seqs |
| ``<ns>.staff.v1`` | staff ID | console, ``staff import`` | roster events (JSON, ``schemas.staff``): kept forever |
| ``<ns>.access-log.v1`` | ``access-log`` | the console | access-log entries (JSON, ``schemas.access``): kept forever |

The Faust worker also creates its changelog topic ``<ns>-worker-table-states-changelog`` (compacted,
partitioned like the events topic).
"""

from __future__ import annotations

from dataclasses import dataclass, field

EVENTS_RETENTION = {
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "cleanup.policy": "delete",
    "message.timestamp.type": "LogAppendTime",
}
"""The dealing-events topic is the system of record: never expire a record. Its records carry the
broker's time of append (``LogAppendTime``), not the producer's: the worker and the projector
judge ``recorded_in_future`` against it (issue 46), so no producer's or reader's host clock does."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic: name, partitions and topic-level configuration."""

    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Topics:
    """All dealtrail topics of one namespace."""

    namespace: str
    partitions: int
    replication: int = 1

    @property
    def events(self) -> TopicSpec:
        """Dealing events, keyed by table ID (one partition holds a table's events in order)."""
        return TopicSpec(f"{self.namespace}.dealing-events.v1", self.partitions, dict(EVENTS_RETENTION))

    @property
    def findings(self) -> TopicSpec:
        """Finding revisions, keyed by table ID."""
        return TopicSpec(f"{self.namespace}.findings.v1", self.partitions, {"retention.ms": "-1"})

    @property
    def rounds(self) -> TopicSpec:
        """Completed rounds, keyed by table ID."""
        return TopicSpec(f"{self.namespace}.rounds.v1", self.partitions, {"retention.ms": "-1"})

    @property
    def dead_letter(self) -> TopicSpec:
        """Rejected input with the reason (never dropped)."""
        return TopicSpec(f"{self.namespace}.dead-letter.v1", 1, {"retention.ms": "-1"})

    @property
    def chain_heads(self) -> TopicSpec:
        """The head of each table's hash chain as the publisher left it (compacted: the latest
        record per table is kept), so the next publish run links to it."""
        return TopicSpec(f"{self.namespace}.chain-heads.v1", 1, {"cleanup.policy": "compact"})

    @property
    def reviews(self) -> TopicSpec:
        """Review events of findings (``FindingAcknowledged`` ...), keyed by finding ID (one
        partition holds a finding's reviews in order); the console writes them in the streaming
        deployment and the projector stores them. Kept forever, like the events."""
        return TopicSpec(f"{self.namespace}.reviews.v1", self.partitions, {"retention.ms": "-1"})

    @property
    def snapshots(self) -> TopicSpec:
        """Tables' engine states (JSON ``TableSnapshot``), keyed by table ID, for the projector to
        store in ``table_snapshots`` (a replay starts from the nearest one)."""
        return TopicSpec(f"{self.namespace}.snapshots.v1", self.partitions, {"retention.ms": "-1"})

    @property
    def staff(self) -> TopicSpec:
        """Roster events (``StaffMemberRecorded``), keyed by staff ID; the console's admin page
        and ``dealtrail staff import --publish`` write them in the streaming deployment and the
        projector stores them. One partition: the roster is small and read in one order. Kept
        forever, like the reviews."""
        return TopicSpec(f"{self.namespace}.staff.v1", 1, {"retention.ms": "-1"})

    @property
    def access_log(self) -> TopicSpec:
        """Access-log entries of the console (sign-ins, logouts, user changes, downloads, reviews),
        one partition so they keep the order the console made them in; the console writes them
        in the streaming deployment and the projector chains and stores them. Kept forever."""
        return TopicSpec(f"{self.namespace}.access-log.v1", 1, {"retention.ms": "-1"})

    @property
    def app_id(self) -> str:
        """The Faust application ID (consumer group and changelog prefix of the workers)."""
        return f"{self.namespace}-worker"

    @property
    def projector_group(self) -> str:
        """The consumer group of the DuckDB projector."""
        return f"{self.namespace}-projector"

    def all(self) -> list[TopicSpec]:
        """The topics ``dealtrail topics create`` makes (Faust makes its own changelog)."""
        return [
            self.events,
            self.findings,
            self.rounds,
            self.dead_letter,
            self.chain_heads,
            self.reviews,
            self.snapshots,
            self.staff,
            self.access_log,
        ]
