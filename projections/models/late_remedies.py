"""Remedies recorded after the remedy window (rulebook 10.3.5): the engine stops awaiting an owed
remedy ``remedy_window`` after its round ended, and its finding stays overdue; a remedy event for
that round recorded later still is stored with the events, and shown beside the finding as
"remedy recorded after the window" with its delay. It changes no verdict."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import duckdb

REMEDY_TYPES = (
    "RoundVoided",
    "WagersReturned",
    "DeckRemoved",
    "ShuffleCompleted",
    "NoRollCalled",
    "DiceShaken",
    "PlayerVoidDecided",
    "HandReset",
    "CardsRemovedFromDevice",
)
"""Event types that can carry out a remedy (``streams.engine.remedies.REMEDY_EVENTS``, less
``WagerSettled``, which only a push makes a remedy)."""


def late_remedies(
    con: duckdb.DuckDBPyConnection, finding_id: str, window: timedelta, status: str | None = None
) -> list[dict[str, Any]]:
    """The remedy events of an overdue finding's round recorded after the remedy window.

    Args:
        con: a connection to the store (read-only is enough).
        finding_id: the finding (its latest generation's revisions are read).
        window: the remedy window in force (``DEALTRAIL_REMEDY_WINDOW``).
        status: the finding's remedy status as the caller read it from the incidents read model
            (the finding page has it): anything but ``overdue`` answers at once, without reading
            the store; None reads it here.

    Returns:
        One dict per event, in seq order: ``event_id``, ``type``, ``occurred_at`` and
        ``delay_seconds`` (after the finding was raised). Empty when the finding is not overdue,
        prescribes no remedy or names no round.
    """
    if status is not None and status != "overdue":
        return []
    # the finding first: most are not overdue, and then no event is read at all
    found = con.execute(
        """SELECT any_value(table_id), any_value(round_id), arg_max(status, revision),
                  any_value(required_remedy), min(observed_at)
           FROM findings
           WHERE finding_id = $id AND generation = (SELECT max(generation) FROM findings WHERE finding_id = $id)""",
        {"id": finding_id},
    ).fetchone()
    if not found or found[2] != "overdue" or found[3] is None or found[1] is None:
        return []
    table_id, round_id, _, _, raised = found
    ended_row = con.execute(
        "SELECT max(completed_at) FROM rounds WHERE table_id = $t AND round_id = $r", {"t": table_id, "r": round_id}
    ).fetchone()
    ended = ended_row[0] if ended_row and ended_row[0] is not None else raised
    rows = con.execute(
        """SELECT event_id, type, occurred_at, epoch(occurred_at - $raised) AS delay_seconds
           FROM events
           WHERE table_id = $t AND round_id = $r AND list_contains($types, type) AND occurred_at > $after
           ORDER BY seq""",
        {"t": table_id, "r": round_id, "types": list(REMEDY_TYPES), "after": ended + window, "raised": raised},
    ).fetchall()
    return [{"event_id": str(e), "type": str(t), "occurred_at": at, "delay_seconds": float(d)} for e, t, at, d in rows]
