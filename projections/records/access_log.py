"""The access log and console sessions in the store.

The access log is one hash chain of :class:`schemas.access.AccessEntry` rows: the store's writer
gives each new entry the next ``seq``, the previous entry's hash as ``prev_hash``, ``hash_version``
2 and its own ``hash`` (:func:`schemas.access.record_hash`, RFC 8785) when it stores it, in the transaction that stores
it; an entry whose ID is already stored is skipped (a redelivery from the access-log topic).
Nothing is updated or deleted. :func:`check_chain` recomputes the chain and names the first entry
that no longer matches (``dealtrail verify``).

Console sessions are append-only ``started`` and ``ended`` rows keyed by the SHA-256 of the
session's random ID; a session is in force while it has no ``ended`` row and its user's current
revision is the one it was started under (a role change, a password reset or a deactivation is a
new revision, which ends the user's sessions at once).

Reads take any connection and are parameterised; writes take the writer's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb

from schemas.access import HASH_VERSION, AccessEntry, AccessRecord, record_hash

COLUMNS = (
    "seq",
    "entry_id",
    "logged_at",
    "user_name",
    "client",
    "kind",
    "outcome",
    "detail",
    "prev_hash",
    "hash",
    "hash_version",
)
"""The columns of ``access_log`` in order (``hash_version`` was added after 0.2.0: NULL for the
entries written before, and read as NULL from a store that has not been opened by a writer since)."""


_HEAD = "SELECT seq, hash FROM access_log WHERE seq = (SELECT max(seq) FROM access_log) ORDER BY entry_id LIMIT 1"
"""The last entry's ``(seq, hash)``: the maximum ``seq`` (a scan of one column), then that row,
rather than a top-N sort of the whole log (which every reading now makes longer)."""


def has_log(con: duckdb.DuckDBPyConnection) -> bool:
    """True if the store has an ``access_log`` table (a store written before it had none)."""
    rows = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_catalog = current_database() "
        "AND table_name = 'access_log'"
    ).fetchall()
    return bool(rows[0][0])


def _selected(con: duckdb.DuckDBPyConnection) -> str:
    """The select list of :data:`COLUMNS` for this store: a store written by 0.2.0 and opened
    read-only since has no ``hash_version`` column (its entries are all 0.2.0's)."""
    rows = con.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_catalog = current_database() "
        "AND table_name = 'access_log' AND column_name = 'hash_version'"
    ).fetchall()
    if rows[0][0]:
        return ", ".join(COLUMNS)
    return ", ".join(COLUMNS[:-1]) + ", NULL::INTEGER AS hash_version"


def append(con: duckdb.DuckDBPyConnection, entries: Sequence[AccessEntry]) -> int:
    """Chain and store ``entries`` in the order given; IDs already stored are skipped.

    Runs inside the caller's transaction when there is one (the projector's batch); the caller
    holds the store's write lock.

    Args:
        con: the store's writer connection.
        entries: new access entries.

    Returns:
        How many entries were stored.
    """
    if not entries:
        return 0
    ids = [e.entry_id for e in entries]
    stored = {r[0] for r in con.execute("SELECT entry_id FROM access_log WHERE entry_id IN ?", [ids]).fetchall()}
    head = con.execute(_HEAD).fetchall()
    seq, prev = (int(head[0][0]), str(head[0][1])) if head else (0, None)
    added = 0
    for entry in entries:
        if entry.entry_id in stored:
            continue
        stored.add(entry.entry_id)
        seq += 1
        base = AccessRecord.model_validate({**entry.model_dump(), "at": entry.at.astimezone(UTC), "seq": seq})
        record = base.model_copy(update={"prev_hash": prev, "hash": None, "hash_version": HASH_VERSION})
        digest = record_hash(record)
        con.execute(
            f"INSERT INTO access_log ({', '.join(COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                seq,
                entry.entry_id,
                record.at,
                entry.user,
                entry.client,
                entry.kind,
                entry.outcome,
                *(entry.detail, prev, digest, HASH_VERSION),
            ],
        ).fetchall()
        prev = digest
        added += 1
    return added


def _record(row: Sequence[Any]) -> AccessRecord:
    seq, entry_id, at, user, client, kind, outcome, detail, prev_hash, digest, version = row
    return AccessRecord(
        seq=seq,
        entry_id=entry_id,
        at=at.astimezone(UTC),
        user=user,
        client=client,
        kind=kind,
        outcome=outcome,
        detail=detail,
        prev_hash=prev_hash,
        hash=digest,
        hash_version=version,
    )


@dataclass(frozen=True)
class LogFilter:
    """Which entries to read: by user (exact), kind (exact), period ``[since, until)``; None: any."""

    user: str | None = None
    kind: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def where(self) -> tuple[str, dict[str, Any]]:
        """The SQL condition and its parameters."""
        return (
            "($user IS NULL OR user_name = $user) AND ($kind IS NULL OR kind = $kind)"
            " AND ($since IS NULL OR logged_at >= $since) AND ($until IS NULL OR logged_at < $until)",
            {"user": self.user, "kind": self.kind, "since": self.since, "until": self.until},
        )


def entries(
    con: duckdb.DuckDBPyConnection, where: LogFilter, limit: int | None = 100, offset: int = 0
) -> tuple[list[dict[str, Any]], int]:
    """The entries that match, newest first, and how many match in all.

    Args:
        con: any connection of the store.
        where: the filter.
        limit: at most this many (None: all).
        offset: skip this many first.
    """
    if not has_log(con):
        return [], 0
    cond, params = where.where()
    total = con.execute(f"SELECT count(*) FROM access_log WHERE {cond}", params).fetchall()[0][0]
    page = "" if limit is None else f" LIMIT {int(limit)} OFFSET {int(offset)}"
    cur = con.execute(f"SELECT {_selected(con)} FROM access_log WHERE {cond} ORDER BY seq DESC{page}", params)
    return [dict(zip(COLUMNS, r, strict=True)) for r in cur.fetchall()], int(total)


def kinds(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The kinds of entry the log holds, by name (for the page's filter)."""
    if not has_log(con):
        return []
    return [r[0] for r in con.execute("SELECT DISTINCT kind FROM access_log ORDER BY kind").fetchall()]


def since(con: duckdb.DuckDBPyConnection, at: datetime, kinds: Iterable[str]) -> Iterator[AccessRecord]:
    """The entries of the given kinds from ``at`` on, in chain order (the login guard's start)."""
    if not has_log(con):
        return
    cur = con.execute(
        f"SELECT {_selected(con)} FROM access_log WHERE logged_at >= ? AND kind IN ? ORDER BY seq",
        [at, list(kinds)],
    )
    for row in cur.fetchall():
        yield _record(row)


@dataclass(frozen=True)
class LogReport:
    """The outcome of :func:`check_chain`.

    Attributes:
        entries: how many entries the log holds.
        first_break: ``(seq, entry_id, problem)`` of the first entry that breaks the chain, or None.
    """

    entries: int
    first_break: tuple[int, str, str] | None


def check_chain(con: duckdb.DuckDBPyConnection) -> LogReport:
    """Recompute the access log's chain in ``seq`` order and name the first entry that breaks it:
    a hash that is not its content's (an altered entry), a ``prev_hash`` that is not the previous
    entry's hash, or a gap in ``seq`` (an entry removed or inserted). Each entry is hashed in the
    encoding its ``hash_version`` names (RFC 8785 for 2; 0.2.0's for NULL), so a log begun by
    0.2.0 and continued since verifies whole."""
    if not has_log(con):
        return LogReport(0, None)
    cur = con.execute(f"SELECT {_selected(con)} FROM access_log ORDER BY seq, entry_id")
    prev: str | None = None
    n = 0
    while rows := cur.fetchmany(10_000):
        for row in rows:
            n += 1
            seq, entry_id = int(row[0]), str(row[1])
            if seq != n:
                return LogReport(_count(con), (seq, entry_id, f"seq {seq} where {n} was expected (entry removed?)"))
            try:
                record = _record(row)
            except ValueError as exc:
                return LogReport(_count(con), (seq, entry_id, f"not a valid entry: {exc}"))
            if record.prev_hash != prev:
                return LogReport(_count(con), (seq, entry_id, "prev_hash is not the previous entry's hash"))
            if record_hash(record.model_copy(update={"hash": None})) != record.hash:
                return LogReport(_count(con), (seq, entry_id, "its hash does not match its content (altered)"))
            prev = record.hash
    return LogReport(n, None)


def head(con: duckdb.DuckDBPyConnection) -> tuple[int, str] | None:
    """The log's last entry: ``(seq, hash)``; None for an empty (or absent) log."""
    if not has_log(con):
        return None
    rows = con.execute(_HEAD).fetchall()
    return (int(rows[0][0]), str(rows[0][1])) if rows else None


def after(con: duckdb.DuckDBPyConnection, seq: int, limit: int = 500) -> list[AccessRecord]:
    """The stored entries whose ``seq`` is above ``seq``, in chain order, at most ``limit`` (the
    access-log forwarder's read: it resumes after the last entry it sent)."""
    if not has_log(con):
        return []
    cur = con.execute(
        f"SELECT {_selected(con)} FROM access_log WHERE seq > ? ORDER BY seq, entry_id LIMIT ?", [seq, limit]
    )
    return [_record(row) for row in cur.fetchall()]


def hash_at(con: duckdb.DuckDBPyConnection, seq: int) -> str | None:
    """The hash of the entry at ``seq``; None if the log holds no entry there."""
    if not has_log(con):
        return None
    rows = con.execute("SELECT hash FROM access_log WHERE seq = ? ORDER BY entry_id LIMIT 1", [seq]).fetchall()
    return str(rows[0][0]) if rows else None


def _count(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("SELECT count(*) FROM access_log").fetchall()[0][0])


# -- console sessions ---------------------------------------------------------------------------


def session_hash(session_id: str) -> str:
    """The SHA-256 (hex) under which a session's ID is stored."""
    return hashlib.sha256(session_id.encode()).hexdigest()


def start_session(
    con: duckdb.DuckDBPyConnection,
    session_id: str,
    user_name: str,
    at: datetime,
    signed_in_with: str | None = None,
    idp_sid: str | None = None,
) -> None:
    """Record the start of a session of ``user_name`` under the user's current revision, how
    the person signed in (``signed_in_with``: :class:`schemas.reviews.SignIn` as JSON; None: local)
    and the directory's session ID (``idp_sid``, a directory sign-in's ``sid``)."""
    con.execute(
        """INSERT INTO console_sessions (session_hash, user_name, kind, happened_at, user_changed_at, reason,
                                         signed_in_with, idp_sid)
           SELECT ?, name, 'started', ?, changed_at, '', ?, ? FROM dim_users WHERE name = ?""",
        [session_hash(session_id), at, signed_in_with, idp_sid, user_name],
    ).fetchall()


def end_sessions(
    con: duckdb.DuckDBPyConnection, at: datetime, reason: str, user_name: str | None, idp_sid: str | None
) -> list[str]:
    """End every open session of ``user_name`` and every one started under the directory session
    ``idp_sid`` (a back-channel logout names either or both); the users whose sessions ended."""
    cur = con.execute(
        """INSERT INTO console_sessions (session_hash, user_name, kind, happened_at, user_changed_at, reason)
           SELECT s.session_hash, s.user_name, 'ended', $at, NULL, $reason FROM console_sessions s
           WHERE s.kind = 'started'
             AND (s.user_name = $user OR (s.idp_sid IS NOT NULL AND s.idp_sid = $sid))
             AND NOT EXISTS (SELECT 1 FROM console_sessions e WHERE e.session_hash = s.session_hash
                             AND e.kind = 'ended')
           RETURNING user_name""",
        {"at": at, "reason": reason, "user": user_name, "sid": idp_sid},
    )
    return [str(r[0]) for r in cur.fetchall()]


def end_session(con: duckdb.DuckDBPyConnection, session_id: str, user_name: str, at: datetime, reason: str) -> None:
    """Record the end of a session (``logout``, ``idle``, ``lifetime``, ``user_changed``)."""
    con.execute(
        """INSERT INTO console_sessions (session_hash, user_name, kind, happened_at, user_changed_at, reason)
           VALUES (?, ?, 'ended', ?, NULL, ?)""",
        [session_hash(session_id), user_name, at, reason],
    ).fetchall()


def session(con: duckdb.DuckDBPyConnection, session_id: str) -> dict[str, Any] | None:
    """A session's state, or None if it was never started.

    Returns:
        ``user_name``, ``started_at``, ``ended`` (it has an end row), ``current`` (its user is
        active, still at the revision it was started under, and not holding a one-time password
        from an admin's reset), ``role``, ``signed_in_with`` (JSON text; None: local).
    """
    rows = con.execute(
        """SELECT s.user_name, s.happened_at,
                  EXISTS (SELECT 1 FROM console_sessions e WHERE e.session_hash = s.session_hash
                          AND e.kind = 'ended') AS ended,
                  coalesce(u.active AND u.changed_at = s.user_changed_at AND NOT coalesce(u.must_change, false),
                           false) AS current,
                  u.role, s.signed_in_with
           FROM console_sessions s LEFT JOIN dim_users u ON u.name = s.user_name
           WHERE s.session_hash = ? AND s.kind = 'started'""",
        [session_hash(session_id)],
    ).fetchall()
    if not rows:
        return None
    user_name, started_at, ended, current, role, signed_in_with = rows[0]
    return {
        "user_name": user_name,
        "started_at": started_at,
        "ended": ended,
        "current": current,
        "role": role,
        "signed_in_with": signed_in_with,
    }


# -- one-time codes (TOTP) ------------------------------------------------------------------------

SEALED = "fernet:"
"""The prefix of a TOTP secret stored encrypted (``fernet:`` and a Fernet token of the secret). A
stored secret without it is clear text, from a store written before secrets were encrypted;
:func:`seal_clear_totp` encrypts those."""


class TotpKeyError(ValueError):
    """A stored one-time-code secret cannot be read: no key given, or not the key it was sealed with."""


def seal(secret: str, key: bytes) -> str:
    """``secret`` encrypted with the Fernet ``key`` (AES-128-CBC and HMAC-SHA256), as stored."""
    from cryptography.fernet import Fernet

    return SEALED + Fernet(key).encrypt(secret.encode()).decode()


def unseal(stored: str, key: bytes | None) -> str:
    """The secret of a stored value (clear text of an older store is returned as it is).

    Raises:
        TotpKeyError: the value is sealed and ``key`` is None or not the key it was sealed with.
    """
    if not stored.startswith(SEALED):
        return stored
    from cryptography.fernet import Fernet, InvalidToken

    if key is None:
        raise TotpKeyError(
            "the one-time-code secrets are encrypted: their key is needed (DEALTRAIL_SECURITY__TOTP_KEY)"
        )
    try:
        return Fernet(key).decrypt(stored.removeprefix(SEALED).encode()).decode()
    except (InvalidToken, ValueError):
        raise TotpKeyError("a one-time-code secret does not open with this key (another store's key?)") from None


def _totp_stored(con: duckdb.DuckDBPyConnection, user_name: str) -> str | None:
    rows = con.execute(
        """SELECT secret, active FROM console_totp WHERE user_name = ?
           ORDER BY changed_at DESC, rowid DESC LIMIT 1""",
        [user_name],
    ).fetchall()
    return str(rows[0][0]) if rows and rows[0][1] and rows[0][0] else None


def has_totp(con: duckdb.DuckDBPyConnection, user_name: str) -> bool:
    """True if the user has a one-time code enrolled (no key needed)."""
    return _totp_stored(con, user_name) is not None


def totp_secret(con: duckdb.DuckDBPyConnection, user_name: str, key: bytes | None) -> str | None:
    """The user's TOTP secret in force, decrypted with ``key``, or None (not enrolled).

    Raises:
        TotpKeyError: the secret is sealed and ``key`` does not open it.
    """
    stored = _totp_stored(con, user_name)
    return None if stored is None else unseal(stored, key)


def put_totp(con: duckdb.DuckDBPyConnection, user_name: str, secret: str | None, at: datetime, key: bytes) -> None:
    """Enrol ``secret`` for the user, stored encrypted with the Fernet ``key`` (None: remove the
    enrolment); a new row either way."""
    stored = None if secret is None else seal(secret, key)
    con.execute("INSERT INTO console_totp VALUES (?, ?, ?, ?)", [user_name, stored, secret is not None, at]).fetchall()


def drop_totp(con: duckdb.DuckDBPyConnection, user_name: str, at: datetime) -> bool:
    """Remove the user's enrolment, if any (a password reset: a lost phone); True if there was one."""
    if not has_totp(con, user_name):
        return False
    con.execute("INSERT INTO console_totp VALUES (?, NULL, false, ?)", [user_name, at]).fetchall()
    return True


def seal_clear_totp(con: duckdb.DuckDBPyConnection, key: bytes) -> int:
    """Encrypt every clear-text secret an older store holds, in place, in one transaction; returns
    how many. The one rewrite of a stored row in dealtrail, on purpose: the row keeps its user,
    time and meaning, only the form its secret is kept in changes; appending an encrypted row
    instead would leave the clear secret in the store, readable by anyone with the file."""
    rows = con.execute(
        "SELECT rowid, secret FROM console_totp WHERE secret IS NOT NULL AND NOT starts_with(secret, ?)", [SEALED]
    ).fetchall()
    if not rows:
        return 0
    con.execute("BEGIN TRANSACTION")
    try:
        for rowid, secret in rows:
            con.execute("UPDATE console_totp SET secret = ? WHERE rowid = ?", [seal(str(secret), key), rowid])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return len(rows)
