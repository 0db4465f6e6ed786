"""The access log's hash chain in RFC 8785 (issue 35, item 1): new entries carry ``hash_version``
2 and are hashed as RFC 8785 JSON, reproducible with the standard library from the stored row;
entries written by 0.2.0 (no ``hash_version`` column, their own encoding) keep verifying, in a
store read-only and after a writer went on with the log; an altered old or new entry is caught."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from projections.records import access_log
from projections.store.store import Store, connect_read_only
from schemas.access import AccessEntry

T0 = datetime(2026, 11, 28, 3, 0, 1, 250000, tzinfo=UTC)


def _entry(n: int, detail: str = "") -> AccessEntry:
    return AccessEntry(
        entry_id=f"E{n}",
        at=T0 + timedelta(minutes=n),
        user="ada",
        client="10.0.0.7",
        kind="login_succeeded",
        outcome="ok",
        detail=detail or f'entry {n} \u00e9\u00e8 "quoted"',
    )


def _iso(at: datetime) -> str:
    """``at`` as the entries' JSON writes it: ISO 8601 in UTC with ``Z``, six fractional digits when any."""
    text = at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return text


def _members(row: dict[str, object]) -> dict[str, object]:
    """An entry's hashed members as docs/integrity.md names them, in 0.2.0's field order."""
    return {
        "entry_id": row["entry_id"],
        "at": _iso(row["logged_at"]),  # type: ignore[arg-type]
        "user": row["user_name"],
        "client": row["client"],
        "kind": row["kind"],
        "outcome": row["outcome"],
        "detail": row["detail"],
        "schema_version": 1,
        "seq": row["seq"],
        "prev_hash": row["prev_hash"],
    }


def _old_hash(row: dict[str, object]) -> str:
    """What dealtrail 0.2.0 hashed: the record's compact JSON in its field order, no ``hash_version``."""
    return hashlib.sha256(json.dumps(_members(row), separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()


def _rfc8785_hash(row: dict[str, object]) -> str:
    """The RFC 8785 hash as docs/integrity.md tells a recipient to compute it (standard library only)."""
    body = {**_members(row), "hash_version": row["hash_version"]}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _rows(con: duckdb.DuckDBPyConnection) -> list[dict[str, object]]:
    rows, _ = access_log.entries(con, access_log.LogFilter(), None)
    return sorted(rows, key=lambda r: int(r["seq"]))


def _old_store(path: Path, n: int) -> None:
    """A store whose access log was written by dealtrail 0.2.0: no ``hash_version`` column, ``n``
    entries chained with 0.2.0's hash and its ten-column insert."""
    Store(path).close()
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone = 'UTC'")
    con.execute("ALTER TABLE access_log DROP COLUMN hash_version")
    prev: str | None = None
    for i in range(1, n + 1):
        e = _entry(i, f"old {i}")
        row = {
            "seq": i,
            "entry_id": e.entry_id,
            "logged_at": e.at,
            "user_name": e.user,
            "client": e.client,
            "kind": e.kind,
            "outcome": e.outcome,
            "detail": e.detail,
            "prev_hash": prev,
        }
        digest = _old_hash(row)
        con.execute(
            "INSERT INTO access_log VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [i, e.entry_id, e.at, e.user, e.client, e.kind, e.outcome, e.detail, prev, digest],
        )
        prev = digest
    con.close()


def test_new_access_log_entries_are_hashed_in_rfc8785_with_hash_version_2(tmp_path: Path) -> None:
    with Store(tmp_path / "new.duckdb") as store:
        assert access_log.append(store.con, [_entry(1), _entry(2), _entry(3)]) == 3
        rows = _rows(store.con)
        assert [r["hash_version"] for r in rows] == [2, 2, 2]
        assert [r["hash"] for r in rows] == [_rfc8785_hash(r) for r in rows]
        assert rows[1]["prev_hash"] == rows[0]["hash"]
        assert access_log.check_chain(store.con).first_break is None


def test_an_access_log_written_by_0_2_0_verifies_read_only_and_after_a_writer_went_on(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    _old_store(db, 3)
    con = connect_read_only(db)  # no writer since: no hash_version column at all
    try:
        report = access_log.check_chain(con)
        assert (report.entries, report.first_break) == (3, None)
        assert [r["hash_version"] for r in _rows(con)] == [None, None, None]
    finally:
        con.close()
    with Store(db) as store:  # the writer adds the column; the old entries keep NULL
        assert access_log.append(store.con, [_entry(4), _entry(5)]) == 2
        rows = _rows(store.con)
        assert [r["hash_version"] for r in rows] == [None, None, None, 2, 2]
        assert rows[3]["prev_hash"] == rows[2]["hash"] == _old_hash(rows[2])
        assert rows[4]["hash"] == _rfc8785_hash(rows[4])
        report = access_log.check_chain(store.con)
        assert (report.entries, report.first_break) == (5, None)


@pytest.mark.parametrize(
    ("change", "seq"),
    [
        ("UPDATE access_log SET detail = 'edited' WHERE seq = 2", 2),  # an old entry
        ("UPDATE access_log SET detail = 'edited' WHERE seq = 4", 4),  # a new entry
        ("UPDATE access_log SET hash_version = NULL WHERE seq = 5", 5),  # a new entry passed off as old
        ("UPDATE access_log SET hash_version = 2 WHERE seq = 1", 1),  # an old entry passed off as new
    ],
)
def test_an_altered_old_or_new_access_log_entry_breaks_the_chain_at_it(tmp_path: Path, change: str, seq: int) -> None:
    db = tmp_path / "mixed.duckdb"
    _old_store(db, 3)
    with Store(db) as store:
        access_log.append(store.con, [_entry(4), _entry(5)])
        store.con.execute(change)
        broken = access_log.check_chain(store.con).first_break
        assert broken == (seq, f"E{seq}", "its hash does not match its content (altered)")
