"""A table's devices and decks as the engine itself holds them: read from the latest engine state
the store keeps for the table (``table_states`` at the end of an audited file, or
``table_snapshots`` the audit, the re-audit and the projector keep), never recomputed here.

The console's floor shows it, and pages that draw a table (the replay) can ask for it with
:func:`table_device_state`. Because it is the engine's state, the clearing rules of rulebook
10.1.2 and 10.3.1 (a fault belongs to its deck and ends with a clearing shuffle of that deck) and
10.3.2 (a device returns to use only by its return to service) are the engine's, not repeated in
SQL beside it. The state is as of its ``last_seq``: a snapshot taken every
``DEALTRAIL_SNAPSHOT_EVERY`` events may trail the table's last event.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import duckdb
import pydantic_core

from projections.store import summaries

_LATEST = """
    WITH m AS (
        SELECT table_id, m.s AS last_seq, m.p AS pref, m.r AS rid FROM (
            -- narrow columns only: a month holds tens of thousands of snapshots; the greatest
            -- (seq, pref, row ID) of each table, a grouped max (a window over them took twice as long)
            SELECT table_id, max({'s': last_seq, 'p': pref, 'r': rid}) AS m FROM (
                SELECT table_id, last_seq, 1 AS pref, rowid AS rid FROM table_states
                WHERE $t::VARCHAR IS NULL OR table_id = $t
                UNION ALL
                SELECT table_id, last_seq, 0 AS pref, rowid AS rid FROM table_snapshots
                WHERE $t::VARCHAR IS NULL OR table_id = $t
            ) GROUP BY table_id
        )
    )
    -- the chosen rows' keys, joined by row ID in the same read (a key made for every snapshot
    -- in the grouped max took three times as long)
    SELECT m.table_id, m.last_seq, m.pref, m.rid,
           CASE WHEN m.pref = 1 THEN concat_ws('/', 'states', s.first_seq, s.last_seq, s.last_event_id, s.source)
                ELSE concat_ws('/', 'snapshot', n.last_seq, n.last_event_id, n.engine_version, n.state_sha256)
           END AS row_key
    FROM m
    LEFT JOIN (SELECT rowid AS rid, first_seq, last_seq, last_event_id, source FROM table_states) s
           ON m.pref = 1 AND s.rid = m.rid
    LEFT JOIN (SELECT rowid AS rid, last_seq, last_event_id, engine_version, state_sha256 FROM table_snapshots) n
           ON m.pref = 0 AND n.rid = m.rid
"""
"""Each table's latest engine state: its seq, where it is kept (``pref`` 1: the audit's
``table_states``, preferred at an equal seq; 0: a ``table_snapshots`` row), its row ID, and a
key that names the row's content in the store (rows are only ever added, and a row with the same
table, seqs and last event is never written twice: :meth:`projections.store.store.Store.write_batch`)."""

Latest = tuple[str, int, int, int, str]
"""A row of :data:`_LATEST`: (table, last_seq, pref, row ID, row key)."""


def _latest_texts(con: duckdb.DuckDBPyConnection, table_id: str | None = None) -> dict[str, tuple[int, str]]:
    """The latest stored engine state of each table (or of ``table_id``) as its JSON text:
    table -> (last_seq, text) (see :func:`_texts_of`)."""
    top = [
        (str(t), int(seq), int(p), int(r), str(k))
        for t, seq, p, r, k in con.execute(_LATEST, {"t": table_id}).fetchall()
    ]
    return _texts_of(con, top)


def _texts_of(con: duckdb.DuckDBPyConnection, top: list[Latest]) -> dict[str, tuple[int, str]]:
    """The JSON texts of the chosen rows ``top``: table -> (last_seq, text).

    The latest rows are chosen on narrow columns, then only their states are read, by row ID
    (a state is tens to hundreds of KB; every snapshot's would be read otherwise). A row read by
    its ID is used only if it is still the chosen table and seq (a writer's checkpoint between the
    two reads may renumber rows); otherwise that state is read by table and seq."""
    texts: dict[tuple[str, int, int], str] = {}
    for pref, kept_in in ((1, "table_states"), (0, "table_snapshots")):
        chosen = {(t, seq) for t, seq, p, _, _ in top if p == pref}
        if not chosen:
            continue
        rows = con.execute(
            f"SELECT table_id, last_seq, state::VARCHAR FROM {kept_in} WHERE rowid IN (SELECT unnest($r))",
            {"r": [rid for _, _, p, rid, _ in top if p == pref]},
        ).fetchall()
        texts |= {(str(t), int(seq), pref): str(text) for t, seq, text in rows if (str(t), int(seq)) in chosen}
        for t, seq in chosen - {(t, seq) for t, seq, p in texts if p == pref}:
            again = con.execute(
                f"SELECT state::VARCHAR FROM {kept_in} WHERE table_id = ? AND last_seq = ? LIMIT 1", [t, seq]
            ).fetchone()
            if again is not None:
                texts[t, seq, pref] = str(again[0])
    out = {}
    for t, seq, pref, _, _ in top:
        text = texts.get((t, seq, pref))
        if text is not None:
            out[t] = (seq, text)
    return out


def latest_states(con: duckdb.DuckDBPyConnection, table_id: str | None = None) -> dict[str, tuple[int, dict[str, Any]]]:
    """The latest stored engine state of each table (or of ``table_id``): table -> (last_seq, state JSON).

    Chosen and read as :func:`_latest_texts` says; the JSON is parsed by pydantic-core's parser
    (a third of ``json.loads``' time on a day's 215 KB of states; about the same on a month's
    1.5 MB, most of it the strings of decks removed long ago)."""
    return {t: (seq, pydantic_core.from_json(text)) for t, (seq, text) in _latest_texts(con, table_id).items()}


_FLOOR_MEMO: dict[str, tuple[object, dict[str, Any]]] = {}
"""Table -> (what names its engine state, its :func:`device_state` less removed decks): the
floor's last reading of each table, reused while the state is the same (a table's latest state
changes every ``DEALTRAIL_SNAPSHOT_EVERY`` events, the floor asks every second). A state is
named by its store file and row key (:data:`_LATEST`), so an unchanged state is not even read,
or, for a store without a file (in memory), by the SHA-256 of its text."""


def _floor_state(table_id: str, text: str, name: object = None) -> dict[str, Any]:
    """:func:`device_state` of the state ``text`` without its removed decks, parsed only when
    the state differs from the one last seen for ``table_id``: when its ``name`` (store file and
    row key) differs, or without one, when the text does (a SHA-256 of 1.5 MB takes about 2 ms,
    parsing it 12 to 27). Each call returns a copy of its own (a few devices and decks), so a
    caller that changes it changes no later reading."""
    key = name if name is not None else hashlib.sha256(text.encode()).digest()
    known = _FLOOR_MEMO.get(table_id)
    if known is None or known[0] != key:
        found = device_state(pydantic_core.from_json(text))
        found["decks"] = {k: d for k, d in found["decks"].items() if d["status"] != "removed"}
        known = _FLOOR_MEMO[table_id] = (key, found)
    return copy.deepcopy(known[1])


def _remembered(table_id: str, name: object) -> dict[str, Any] | None:
    """A copy of the floor's last reading of ``table_id`` if it is of the state ``name``."""
    known = _FLOOR_MEMO.get(table_id)
    return copy.deepcopy(known[1]) if known is not None and known[0] == name else None


def device_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """The devices and decks of one engine state (the JSON of ``streams.engine.state.TableState``).

    Returns:
        ``status``: "no device", "out of service" (a device taken out of service), "faulted" (a
        device with a fault its remedy has not cleared, or unusable since one, rulebook 10.4.1; a
        deck with an unresolved fault, or a fault of the device that named no deck) or "in service";
        ``fault_event_id``: the event of the fault shown
        (None if none); ``devices``: device ID -> {``type``, ``status``, ``covered_or_signed``,
        ``fault_event_id``}; ``decks``: deck ID -> {``status`` ("removed", "faulted", "suspect",
        "dealt" since its shuffle, "shuffled", "not shuffled"), ``fault_event_id``,
        ``suspect_finding_id``}; ``current_deck_id``.
    """
    unusable: Mapping[str, str] = state.get("unusable") or {}
    pending: Mapping[str, Mapping[str, Any]] = state.get("faults") or {}
    devices: dict[str, dict[str, Any]] = {}
    for device_id, d in (state.get("devices") or {}).items():
        fault_id = unusable.get(device_id) or (pending.get(device_id) or {}).get("event_id")
        if d.get("out_of_service"):
            status = "out of service"
        elif fault_id is not None:
            status = "faulted"
        else:
            status = "in service"
        devices[device_id] = {
            "type": d.get("device_type"),
            "status": status,
            "covered_or_signed": bool(d.get("covered_or_signed")),
            "fault_event_id": fault_id,
        }
    device_fault = state.get("shuffler_fault")
    fault_seq = int(state.get("fault_seq") or 0)
    decks: dict[str, dict[str, Any]] = {}
    for deck_id, k in (state.get("decks") or {}).items():
        fault = k.get("fault_event_id")
        if fault is None and device_fault is not None and int(k.get("cleared_seq") or 0) <= fault_seq:
            fault = device_fault
        suspect = k.get("composition_finding") or {}
        if k.get("removed"):
            status, fault = "removed", None
        elif fault is not None:
            status = "faulted"
        elif k.get("composition_flagged"):
            status = "suspect"
        elif k.get("dealt_round_id"):
            status = "dealt"
        elif k.get("last_shuffle"):
            status = "shuffled"
        else:
            status = "not shuffled"
        decks[deck_id] = {
            "status": status,
            "fault_event_id": fault,
            "suspect_finding_id": suspect.get("finding_id") if k.get("composition_flagged") else None,
        }
    shown = next((d["fault_event_id"] for d in devices.values() if d["fault_event_id"]), None)
    shown = shown or next((k["fault_event_id"] for k in decks.values() if k["fault_event_id"]), None)
    if not devices:
        status = "no device"
    elif any(d["status"] == "out of service" for d in devices.values()):
        status = "out of service"
    elif shown is not None or device_fault is not None:
        status = "faulted"
        shown = shown or device_fault
    else:
        status = "in service"
    return {
        "status": status,
        "fault_event_id": shown if status == "faulted" else None,
        "devices": devices,
        "decks": decks,
        "current_deck_id": state.get("current_deck_id"),
    }


def table_device_state(con: duckdb.DuckDBPyConnection, table_id: str) -> dict[str, Any] | None:
    """One table's devices and decks from its latest stored engine state (:func:`device_state`,
    plus ``as_of_seq``: the seq of the last event that state applied), or None if the store keeps
    no engine state of the table."""
    found = latest_states(con, table_id).get(table_id)
    if found is None:
        return None
    seq, state = found
    return {**device_state(state), "as_of_seq": seq}


def floor_device_states(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """Every table's :func:`table_device_state` in one read, less its removed decks (the floor
    shows none: a table's state names every deck it has had, hundreds after a month), plus
    ``since``: when its shown fault happened, or when its device was last taken out of service
    (the events' ``occurred_at``)."""
    top = [
        (str(t), int(seq), int(p), int(r), str(k)) for t, seq, p, r, k in con.execute(_LATEST, {"t": None}).fetchall()
    ]
    where = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    store = str(where[0]) if where and where[0] else None  # None: in memory, named by its text
    out: dict[str, dict[str, Any]] = {}
    unread = []
    for row in top:
        kept = _remembered(row[0], (store, row[4])) if store is not None else None
        if kept is None:
            unread.append(row)
        else:
            out[row[0]] = {**kept, "as_of_seq": row[1]}
    keys = {t: k for t, _, _, _, k in unread}
    for t, (seq, text) in _texts_of(con, unread).items():
        out[t] = {**_floor_state(t, text, (store, keys[t]) if store is not None else None), "as_of_seq": seq}
    out = {row[0]: out[row[0]] for row in top if row[0] in out}  # in the order of the choice, as read before
    faults = [d["fault_event_id"] for d in out.values() if d["fault_event_id"]]
    when = _event_times(con, faults) if faults else {}
    off = {t for t, d in out.items() if d["status"] == "out of service"}
    taken: dict[str, datetime] = {}
    if off:
        taken = {
            str(t): at
            for t, at in con.execute(
                """SELECT table_id, max(occurred_at) FROM events
                   WHERE type = 'DeviceTakenOutOfService' AND list_contains($t, table_id) GROUP BY table_id""",
                {"t": sorted(off)},
            ).fetchall()
        }
    for table_id, d in out.items():
        d["since"] = taken.get(table_id) if table_id in off else when.get(d["fault_event_id"] or "")
    return out


FAULT_NEAR = timedelta(days=1)
"""How far back from the floor's latest event a shown fault's event is looked for first (the
store keeps its batches of events in arrival order, so a bound on the time reads those row groups only); the
whole history only for a fault older than that."""


def _event_times(con: duckdb.DuckDBPyConnection, ids: list[str]) -> dict[str, datetime]:
    """``occurred_at`` of the stored events with these IDs (event ID -> time; an ID not stored is
    absent): looked for within :data:`FAULT_NEAR` of the floor's latest event first."""
    sql = "SELECT event_id, occurred_at FROM events WHERE list_contains($ids, event_id)"
    latest = (
        con.execute("SELECT max(last_event_at) FROM sum_floor").fetchone()
        if summaries.has_summary(con, "sum_floor")
        else None
    )
    found: dict[str, datetime] = {}
    if latest and latest[0] is not None:
        near = con.execute(sql + " AND occurred_at >= $since", {"ids": ids, "since": latest[0] - FAULT_NEAR})
        found = {str(e): t for e, t in near.fetchall()}
    if missing := sorted(set(ids) - set(found)):
        found |= {str(e): t for e, t in con.execute(sql, {"ids": missing}).fetchall()}
    return found
