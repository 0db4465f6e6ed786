"""Conflicting copies (issue 46 item 3): two stored records that claim one event ID with different
content, a data-quality incident of their own.

A re-sent copy whose content differs from the record first stored under its event ID (a field
changed on the way, a device that re-numbers its buffer) is not a duplicate delivery: the store
keeps both records (its events are keyed by event ID and payload), the engine applied the first
to arrive and judged the later one as a contradiction (``DT-sequence-gap`` "arrived again"), which
may be too far behind the table's head for the engine to compare. This read model names both
records, the fields that differ and which one the store's trail keeps: it reads the ``events``
table only, so the audit's store and the projector's say the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import duckdb

CHAIN_FIELDS = ("prev_hash", "hash", "hash_version")
"""Fields that follow from the content (listed apart from the content's own differences)."""


@dataclass(frozen=True)
class CopyRecord:
    """One stored record of a conflicting event ID.

    Attributes:
        seq: its seq.
        arrival: where it arrived (the audit's file line, the projector's Kafka offset).
        payload_hash: the store's hash of its content (md5 of its JSON).
    """

    seq: int
    arrival: int
    payload_hash: str


@dataclass(frozen=True)
class ConflictingCopy:
    """Two records with one event ID and different content.

    Attributes:
        table_id: their table.
        event_id: the event ID both claim.
        kept: the record the trail keeps (the first to arrive: the one the engine applied).
        other: the later record, stored beside it and judged as contradicting it.
        fields: the content fields that differ (dotted paths for nested fields), sorted;
            the hash-chain fields are left out (they follow from the content).
        chain_fields: the hash-chain fields that differ too.
    """

    table_id: str
    event_id: str
    kept: CopyRecord
    other: CopyRecord
    fields: tuple[str, ...]
    chain_fields: tuple[str, ...]

    def message(self) -> str:
        """One line for the investigator."""
        differ = ", ".join(self.fields) if self.fields else "none of the content fields (the hash chain only)"
        return (
            f"event ID {self.event_id} of table {self.table_id} is claimed by two records with different content: "
            f"seq {self.kept.seq} at arrival {self.kept.arrival} and seq {self.other.seq} at arrival "
            f"{self.other.arrival}; fields that differ: {differ}. The store keeps both; the trail keeps the first "
            f"(arrival {self.kept.arrival}, applied by the engine), the later one is a contradicting record."
        )

    def as_json(self) -> dict[str, Any]:
        """The incident as JSON (the evidence package, the replay)."""
        return {
            "table_id": self.table_id,
            "event_id": self.event_id,
            "kept": self.kept.__dict__,
            "other": self.other.__dict__,
            "fields": list(self.fields),
            "chain_fields": list(self.chain_fields),
            "message": self.message(),
        }


def differing_fields(a: Any, b: Any, prefix: str = "") -> list[str]:
    """The dotted paths at which two JSON values differ (a key present in one only counts)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b)):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in a or key not in b:
                out.append(path)
            else:
                out += differing_fields(a[key], b[key], path)
        return out
    return [] if a == b else [prefix or "(the whole record)"]


def conflicting_copies(
    con: duckdb.DuckDBPyConnection, table_id: str | None = None, event_ids: list[str] | None = None
) -> list[ConflictingCopy]:
    """The conflicting copies in the store's events, of one table or of some event IDs (all if
    neither is given), in table and arrival order: one incident per later record of an event ID.

    Args:
        con: a connection to the store (read-only is enough).
        table_id: only this table's.
        event_ids: only these event IDs'.
    """
    rows = con.execute(
        """SELECT table_id, event_id, seq, arrival, payload_hash, payload::VARCHAR FROM events
           WHERE event_id IN (
               SELECT event_id FROM events
               WHERE ($t IS NULL OR table_id = $t) AND ($ids IS NULL OR event_id IN (SELECT unnest($ids)))
               GROUP BY event_id HAVING count(DISTINCT payload_hash) > 1)
           ORDER BY table_id, event_id, arrival, payload_hash""",
        {"t": table_id, "ids": event_ids},
    ).fetchall()
    out: list[ConflictingCopy] = []
    first: tuple[Any, ...] | None = None
    for row in rows:
        if first is None or (row[0], row[1]) != (first[0], first[1]):
            first = row
            continue
        if row[4] == first[4]:
            continue
        a, b = json.loads(first[5]), json.loads(row[5])
        paths = differing_fields(a, b)
        out.append(
            ConflictingCopy(
                table_id=str(row[0]),
                event_id=str(row[1]),
                kept=CopyRecord(int(first[2]), int(first[3]), str(first[4])),
                other=CopyRecord(int(row[2]), int(row[3]), str(row[4])),
                fields=tuple(p for p in paths if p not in CHAIN_FIELDS),
                chain_fields=tuple(p for p in paths if p in CHAIN_FIELDS),
            )
        )
    out.sort(key=lambda c: (c.table_id, c.other.arrival))
    return out
