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


def late_remedies(con: duckdb.DuckDBPyConnection, finding_id: str, window: timedelta) -> list[dict[str, Any]]:
    """The remedy events of an overdue finding's round recorded after the remedy window.

    Args:
        con: a connection to the store (read-only is enough).
        finding_id: the finding (its latest generation's revisions are read).
        window: the remedy window in force (``DEALTRAIL_REMEDY_WINDOW``).

    Returns:
        One dict per event, in seq order: ``event_id``, ``type``, ``occurred_at`` and
        ``delay_seconds`` (after the finding was raised). Empty when the finding is not overdue,
        prescribes no remedy or names no round.
    """
    rows = con.execute(
        """WITH f AS (
               SELECT any_value(table_id) AS table_id, any_value(round_id) AS round_id,
                      arg_max(status, revision) AS status, any_value(required_remedy) AS required,
                      min(observed_at) AS raised
               FROM findings
               WHERE finding_id = $id AND generation = (SELECT max(generation) FROM findings WHERE finding_id = $id)
           ), ended AS (
               SELECT coalesce(max(r.completed_at), any_value(f.raised)) AS at
               FROM f LEFT JOIN rounds r ON r.table_id = f.table_id AND r.round_id = f.round_id
           )
           SELECT e.event_id, e.type, e.occurred_at, epoch(e.occurred_at - f.raised) AS delay_seconds
           FROM events e, f, ended
           WHERE f.status = 'overdue' AND f.required IS NOT NULL AND e.table_id = f.table_id
             AND e.round_id = f.round_id AND list_contains($types, e.type)
             AND e.occurred_at > ended.at + $window
           ORDER BY e.seq""",
        {"id": finding_id, "types": list(REMEDY_TYPES), "window": window},
    ).fetchall()
    return [{"event_id": str(e), "type": str(t), "occurred_at": at, "delay_seconds": float(d)} for e, t, at, d in rows]
