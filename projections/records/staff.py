"""The staff roster in the store: roster events written append-only, the roster in force, and
the one way every page, report, export and notification shows a person: ``Name (ID)``.

Writes go through the store's one writer connection (``dealtrail staff import``, the console's
admin page, or the projector from the staff topic) and are idempotent by ``change_id``. Reads take
any connection and work on a store written before the roster existed (no names, IDs as before).

The supervisor on duty is read from the dealing events, not the roster: the latest ``FLOOR``
actor (the floorperson whose ID the events carry, e.g. the one who verified the deck or
authorised a change) at the table at or before the moment asked about.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import pyarrow as pa

from schemas.staff import StaffMemberRecorded

STAFF_SCHEMA = pa.schema(
    [
        ("change_id", pa.string()),
        ("staff_id", pa.string()),
        ("name", pa.string()),
        ("role", pa.string()),
        ("active", pa.bool_()),
        ("change", pa.string()),
        ("recorded_by", pa.string()),
        ("recorded_at", pa.timestamp("us", tz="UTC")),
        ("source", pa.string()),
        ("payload", pa.string()),
    ]
)
"""The columns of the ``staff_changes`` table, in order."""


def has_roster(con: duckdb.DuckDBPyConnection) -> bool:
    """True if the store holds the roster table (a store last written before it has none)."""
    rows = con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'dim_staff'").fetchall()
    return bool(rows and rows[0][0])


def staff_row(event: StaffMemberRecorded) -> dict[str, Any]:
    """The ``staff_changes`` row of one roster event (see :data:`STAFF_SCHEMA`)."""
    return {
        "change_id": event.change_id,
        "staff_id": event.staff_id,
        "name": event.name,
        "role": event.role,
        "active": event.active,
        "change": event.change,
        "recorded_by": event.recorded_by,
        "recorded_at": event.recorded_at,
        "source": event.source,
        "payload": event.model_dump_json(),
    }


def append(con: duckdb.DuckDBPyConnection, events: Iterable[StaffMemberRecorded]) -> int:
    """Store roster events in one statement (the writer's connection; hold its write lock); a
    ``change_id`` stored before adds nothing (a redelivery).

    Returns:
        How many events were stored now.
    """
    rows = [staff_row(e) for e in events]
    if not rows:
        return 0
    batch = pa.Table.from_pylist(rows, schema=STAFF_SCHEMA)
    con.register("staff_batch", batch)
    try:
        got = con.execute(
            """INSERT INTO staff_changes
               SELECT DISTINCT ON (change_id) * FROM staff_batch b
               WHERE NOT EXISTS (SELECT 1 FROM staff_changes s WHERE s.change_id = b.change_id)"""
        ).fetchall()
    finally:
        con.unregister("staff_batch")
    return int(got[0][0]) if got else 0


def roster(con: duckdb.DuckDBPyConnection, include_inactive: bool = True) -> list[dict[str, Any]]:
    """The roster in force, supervisors first then dealers, by ID (empty on an old store)."""
    if not has_roster(con):
        return []
    cur = con.execute(
        """SELECT staff_id, name, role, active, change, recorded_by, recorded_at, source FROM dim_staff
           WHERE active OR $all ORDER BY role DESC, staff_id""",
        {"all": include_inactive},
    )
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def history(con: duckdb.DuckDBPyConnection, staff_id: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """Roster events, newest first (one person's with ``staff_id``); ``limit`` rows at most."""
    if not has_roster(con):
        return []
    cur = con.execute(
        """SELECT change_id, staff_id, name, role, active, change, recorded_by, recorded_at, source
           FROM staff_changes WHERE $id IS NULL OR staff_id = $id
           ORDER BY recorded_at DESC, change_id DESC LIMIT $limit""",
        {"id": staff_id, "limit": limit},
    )
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def names(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Each rostered ID's current name, deactivated people included (their old rounds keep a
    name); empty on a store without a roster."""
    if not has_roster(con):
        return {}
    return {str(i): str(n) for i, n in con.execute("SELECT staff_id, name FROM dim_staff").fetchall()}


def label(staff_id: str | None, known: Mapping[str, str]) -> str:
    """How a person is shown everywhere: ``Name (ID)`` when the roster names the ID, else the ID
    alone; ``""`` for None. Plain text: the caller escapes it (templates autoescape)."""
    if not staff_id:
        return ""
    name = known.get(staff_id)
    return f"{name} ({staff_id})" if name else staff_id


def revision(
    current: Mapping[str, Any] | None,
    *,
    change_id: str,
    staff_id: str,
    name: str,
    role: str,
    active: bool,
    recorded_by: str,
    recorded_at: datetime,
    source: str,
) -> StaffMemberRecorded | None:
    """The roster event that brings ``staff_id``'s entry from ``current`` (its ``dim_staff``
    row, None if new) to the values given, or None when nothing would change.

    Raises:
        pydantic.ValidationError: a value the roster does not take (an empty name, an unknown role).
    """
    if current is None:
        change = "added"
    elif (current["name"], current["role"], bool(current["active"])) == (name.strip(), role, active):
        return None
    elif bool(current["active"]) != active:
        change = "reactivated" if active else "deactivated"
    else:
        change = "changed"
    return StaffMemberRecorded.model_validate(
        {
            "change_id": change_id,
            "staff_id": staff_id,
            "name": name,
            "role": role,
            "active": active,
            "change": change,
            "recorded_by": recorded_by,
            "recorded_at": recorded_at,
            "source": source,
        }
    )


def current(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """The roster in force keyed by ID (every entry, deactivated ones too)."""
    return {r["staff_id"]: r for r in roster(con)}


def supervisors_by_table(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Each table's supervisor on duty now: the ID of the latest ``FLOOR`` actor in its events."""
    rows = con.execute(
        "SELECT table_id, arg_max(actor_id, seq) FROM events WHERE actor_role = 'FLOOR' GROUP BY table_id"
    ).fetchall()
    return {str(t): str(a) for t, a in rows if a is not None}


FAR_PAST, FAR_FUTURE = datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC)
SUPERVISOR_NEAR = timedelta(hours=12)
"""How far from a finding's time :func:`supervisor_on_duty` looks first (the store keeps its batches of events in
arrival order, so a time bound reads those days' row groups, not the history); the whole
history only when no floorperson acted at the table in that span."""


def supervisor_on_duty(
    con: duckdb.DuckDBPyConnection,
    table_id: str,
    round_id: str | None,
    at: datetime,
    through_seq: int | None = None,
) -> str | None:
    """The supervisor on duty for a round: the latest ``FLOOR`` actor at the table up to the
    round's last stored event (without a round: up to ``at``), or None when the events name none.

    A table's seq and time go together, so the latest one up to that seq is found among the
    events within :data:`SUPERVISOR_NEAR` of ``at`` whenever any is there. ``through_seq``: the
    round's last seq when the caller has read it (:func:`dealtrail.investigate.replay.round_seqs`); looked
    for here otherwise."""
    upto = (
        "$through"
        if through_seq is not None
        else """(SELECT coalesce(
                   (SELECT max(seq) FROM events WHERE table_id = $t AND round_id = $r
                      AND occurred_at BETWEEN $lo AND $hi),
                   (SELECT max(seq) FROM events WHERE table_id = $t AND occurred_at <= $at
                      AND occurred_at >= $lo)))"""
    )
    sql = f"""SELECT arg_max(actor_id, seq) FROM events
              WHERE table_id = $t AND actor_role = 'FLOOR' AND seq <= {upto}
                AND occurred_at >= $lo AND occurred_at <= $hi"""
    near: dict[str, Any] = {"t": table_id, "lo": at - SUPERVISOR_NEAR, "hi": at + SUPERVISOR_NEAR}
    near |= {"through": through_seq} if through_seq is not None else {"r": round_id, "at": at}
    row = con.execute(sql, near).fetchone()
    if not row or row[0] is None:  # nobody on the floor in those days: the whole history
        row = con.execute(sql, {**near, "lo": FAR_PAST, "hi": FAR_FUTURE}).fetchone()
    return str(row[0]) if row and row[0] is not None else None


def with_names(table: pa.Table, known: Mapping[str, str], column: str = "dealer_id") -> pa.Table:
    """``table`` (an export's rows) with a ``<person>_name`` column right after ``column``: the
    roster's name of each ID, null where the roster has none (the CSV writer neutralises it like
    every text cell). A table without ``column`` is returned as it is."""
    if column not in table.column_names:
        return table
    ids = table.column(column).to_pylist()
    values = pa.array([known.get(i) if i is not None else None for i in ids], type=pa.string())
    return table.add_column(table.column_names.index(column) + 1, column.removesuffix("_id") + "_name", values)
