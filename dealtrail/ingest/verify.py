"""Tamper evidence: recompute each table's hash chain from the stored trail, and digests.

``verify`` reports, per table, the first broken link with the event IDs around it: an event
whose content no longer matches its hash (altered), or whose ``prev_hash`` is not the hash of
the event before it (an event inserted, deleted or moved). A ``digest`` (per table: the head
hash, its seq and the number of chained events) saved elsewhere later proves the trail was not
rewritten: ``verify --against`` checks the stored chain still passes through each digest head.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import duckdb

from projections.store.store import event_columns_sql, event_paths_sql
from schemas.chain import chain_hash
from schemas.codec import DecodeError, decode


@dataclass
class Break:
    """The first broken link of a table's chain."""

    table_id: str
    seq: int | None
    event_id: str
    previous_event_id: str | None
    problem: str


@dataclass
class ChainReport:
    """One table's chain: events read, events chained, head, and the first break (if any);
    ``copies``: exact copies of a chained event read again (a producer's redelivery on the topic),
    which are not links of the chain and not counted in ``events``."""

    table_id: str
    events: int = 0
    chained: int = 0
    head_seq: int | None = None
    head_hash: str | None = None
    first_break: Break | None = None
    seen: dict[int, str] | None = None
    copies: int = 0

    @property
    def intact(self) -> bool:
        """True if no link is broken."""
        return self.first_break is None


def check_chain(table_id: str, trail: Iterable[tuple[str, str]]) -> ChainReport:
    """Recompute one table's chain from ``(event_id, payload JSON)`` in seq order.

    A re-sent or conflicting copy (a seq not above the head) must link to the head but does
    not move it, as :class:`schemas.chain.Chainer` stamps it. An exact copy of an event already
    chained (same seq, same hash, its content matching the hash) is a redelivery, as the worker
    and the projector take it: counted in ``copies``, not a link (a producer other than
    ``dealtrail publish`` may put such copies on the events topic; the store holds none).
    """
    report = ChainReport(table_id, seen={})
    head_id: str | None = None
    for event_id, payload in trail:
        report.events += 1
        if report.first_break is not None:
            continue
        try:
            event = decode(payload)
        except DecodeError as exc:
            report.first_break = Break(
                table_id, None, event_id, head_id, f"stored event no longer decodes ({exc.reason})"
            )
            continue
        if event.hash is None:
            if report.head_hash is not None:
                report.first_break = Break(
                    table_id, event.seq, event_id, head_id, "event without hash in a chained trail"
                )
            continue
        if chain_hash(event) != event.hash:
            report.first_break = Break(
                table_id, event.seq, event_id, head_id, "content does not match its hash (altered)"
            )
            continue
        assert report.seen is not None
        if report.seen.get(event.seq) == event.hash:
            report.copies += 1
            report.events -= 1
            continue
        if report.head_hash is not None and event.prev_hash != report.head_hash:
            report.first_break = Break(
                table_id,
                event.seq,
                event_id,
                head_id,
                "prev_hash is not the previous event's hash (inserted, deleted or moved)",
            )
            continue
        report.chained += 1
        if report.head_seq is None or event.seq > report.head_seq:
            report.head_seq, report.head_hash, head_id = event.seq, event.hash, event.event_id
            report.seen[event.seq] = event.hash
    return report


def column_mismatches(con: duckdb.DuckDBPyConnection, table_id: str | None = None) -> list[tuple[str, str, int, str]]:
    """Stored events whose columns no longer match their payload: the chain covers the payload
    only, and the reports read the columns, so an edit there must show too.

    Returns:
        ``(event_id, table_id, seq, "column, column")`` per event that differs, in table and seq order.
    """
    derived = {**event_columns_sql("k"), "payload_hash": "md5(payload::VARCHAR)"}
    checks = ", ".join(f"CASE WHEN {col} IS DISTINCT FROM {expr} THEN '{col}' END" for col, expr in derived.items())
    rows = con.execute(
        f"""SELECT * FROM (
                SELECT event_id, table_id, seq, arrival, list_filter([{checks}], lambda c: c IS NOT NULL) AS cols
                FROM (SELECT *, {event_paths_sql("payload")} AS k FROM events
                      WHERE $table IS NULL OR table_id = $table))
            WHERE len(cols) > 0 ORDER BY table_id, seq, arrival""",
        {"table": table_id},
    ).fetchall()
    return [(str(e), str(t), int(q), ", ".join(c)) for e, t, q, _, c in rows]


def tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables of the store."""
    return [str(r[0]) for r in con.execute("SELECT DISTINCT table_id FROM events ORDER BY 1").fetchall()]


def digest(reports: list[ChainReport]) -> dict[str, Any]:
    """The digest of intact chains: table -> head seq, head hash, chained events."""
    return {
        r.table_id: {"head_seq": r.head_seq, "head_hash": r.head_hash, "events": r.chained}
        for r in reports
        if r.head_hash is not None
    }


def check_against(reports: list[ChainReport], saved: dict[str, Any]) -> list[str]:
    """Problems with a saved digest, one sentence each.

    Per table of the digest: missing from the store; its chain broken before the saved head
    (the break itself is the evidence, the head cannot be reached); its saved head no longer in
    the chain (rewritten with a consistent new chain); or fewer chained events than then.
    """
    by_table = {r.table_id: r for r in reports}
    problems = []
    for table_id, head in sorted(saved.items()):
        r = by_table.get(table_id)
        if r is None:
            problems.append(f"{table_id}: in the digest but not in the store")
            continue
        seen = r.seen or {}
        b = r.first_break
        if b is not None and (b.seq is None or b.seq <= head["head_seq"]) and head["head_seq"] not in seen:
            # the link that broke comes first: what follows it cannot be checked against the head
            at = "an undecodable event" if b.seq is None else f"seq {b.seq}"
            problems.append(
                f"{table_id}: the chain is broken at {at}, before the digest head at seq {head['head_seq']}: "
                "the trail from there cannot be confirmed"
            )
        elif seen.get(head["head_seq"]) != head["head_hash"]:
            problems.append(
                f"{table_id}: the chain no longer passes through the digest head at seq {head['head_seq']} "
                "(the trail was rewritten)"
            )
        elif r.chained < head["events"]:
            problems.append(f"{table_id}: {head['events']} chained events at digest time, {r.chained} now")
    return problems


def load_digest(path: Path) -> dict[str, Any]:
    """Read a digest file written by ``dealtrail digest --out``.

    Raises:
        ValueError: the file is not a digest.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("tables"), dict):
        raise ValueError(f"{path} is not a dealtrail digest")
    tables_: dict[str, Any] = data["tables"]
    return tables_


def load_access_head(path: Path) -> dict[str, Any] | None:
    """The access log's head saved in a digest (``{"head_seq", "head_hash"}``); None when the
    digest holds none (an older digest, or a store without an access log then).

    Raises:
        ValueError: the file's ``access_log`` is not a head.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    saved = data.get("access_log") if isinstance(data, dict) else None
    if saved is None:
        return None
    if (
        not isinstance(saved, dict)
        or not isinstance(saved.get("head_seq"), int)
        or not isinstance(saved.get("head_hash"), str)
    ):
        raise ValueError(f"{path}: access_log is not a head (head_seq, head_hash)")
    return saved


def check_access_head(hash_at_seq: str | None, saved: dict[str, Any]) -> str | None:
    """The problem with the access log against its head saved in a digest, in one sentence; None
    if the log still holds that entry (``hash_at_seq``: the hash of the log's entry at the saved
    ``head_seq``, None if it has none)."""
    seq = saved["head_seq"]
    if hash_at_seq is None:
        return f"access log: the digest head, entry {seq}, is missing (the log was truncated)"
    if hash_at_seq != saved["head_hash"]:
        return f"access log: entry {seq} is not the digest head (the log was rewritten)"
    return None


def as_dict(b: Break) -> dict[str, Any]:
    """A break as JSON-ready data."""
    return asdict(b)
