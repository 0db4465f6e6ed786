"""The ``TableSnapshot`` record: a table's engine state after one of its events, as the worker
emits it to the snapshots topic and the projector stores it in ``table_snapshots``."""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, Field

from schemas.base import Frozen


class TableSnapshot(Frozen):
    """A table's engine state after its event ``last_seq`` (``<ns>.snapshots.v1``, keyed by table).

    The fields up to ``state`` are the columns of ``table_snapshots`` that the embedded audit
    writes (same state JSON, same SHA-256 of it, same engine version and rulebook revision
    tags); a replay starts from it only after checking them against the stored trail, so a
    record altered on its way is skipped, not trusted.

    Attributes:
        table_id: the table.
        last_seq: the seq of the last event the state holds.
        last_event_id: that event's ID.
        last_hash: that event's chain hash (None for an unchained table).
        last_occurred_at: when that event happened.
        engine_version: the engine that made the state (``streams.engine.catalog.ENGINE_VERSION``).
        rulebook_revision: the rulebook revision of its rules.
        state_sha256: SHA-256 (hex) of ``state``'s UTF-8 bytes.
        state: the state as JSON text (``streams.engine.state.dump_state``).
        partition: the partition of the events topic that holds the table's events.
        offset: the offset there of the last message of the table the worker had taken when
            it made the snapshot (the last event's own, or a later one that released it from the
            reorder window). The state holds exactly the table's events of that partition at or
            below it with a seq at or below ``last_seq``: the projector stores the snapshot once it
            has stored the events up to it, counts those alone (``events_through``), and marks it
            unfit for a replay when an event with such a seq came after it.
    """

    table_id: str = Field(min_length=1, max_length=200)
    last_seq: int = Field(ge=1)
    last_event_id: str = Field(min_length=1, max_length=200)
    last_hash: str | None = None
    last_occurred_at: AwareDatetime
    engine_version: str = Field(min_length=1, max_length=200)
    rulebook_revision: int = Field(ge=1)
    state_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    state: str
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)

    def row(self) -> dict[str, Any]:
        """The ``table_snapshots`` row (``projections.store.store.SNAPSHOTS_SCHEMA``) of this record:
        ``partition`` and ``offset`` become ``events_partition`` and ``events_offset``."""
        row = self.model_dump(exclude={"partition", "offset"})
        row["events_partition"], row["events_offset"] = self.partition, self.offset
        return row
