"""The property's public signing keys and their validity periods, as recorded in the store.

Each key is one row of ``signing_keys`` (append-only, ``sql/007_signing_keys.sql``): its ID (the
SHA-256 of its DER encoding), its public key (PEM) and the instant from which it signs. A key is
valid until the next key's ``valid_from``; rotating the key adds a row and changes none, so an
earlier signature is checked with the key valid when it was made. No private key is stored.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import duckdb


def _has_table(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'signing_keys' AND schema_name = 'main'"
    ).fetchall()
    return bool(rows[0][0])


def history(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every recorded key, oldest first: ``key_id``, ``public_key_pem``, ``valid_from``,
    ``valid_until`` (the next key's ``valid_from``; None for the key in force) and
    ``recorded_by``; [] for a store without keys (or written before keys existed)."""
    if not _has_table(con):
        return []
    rows = con.execute(
        "SELECT key_id, public_key_pem, valid_from, recorded_by FROM signing_keys ORDER BY valid_from, key_id"
    ).fetchall()
    out = [
        {"key_id": k, "public_key_pem": pem, "valid_from": at.astimezone(UTC), "recorded_by": by}
        for k, pem, at, by in rows
    ]
    for n, this in enumerate(out):
        this["valid_until"] = out[n + 1]["valid_from"] if n + 1 < len(out) else None
    return out


def current(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The key in force (the latest recorded), or None."""
    keys = history(con)
    return keys[-1] if keys else None


def valid_at(con: duckdb.DuckDBPyConnection, key_id: str, at: datetime) -> dict[str, Any] | None:
    """The recorded key ``key_id`` if it was valid at ``at`` (its period holds ``at``), else None."""
    for key in history(con):
        if (
            key["key_id"] == key_id
            and key["valid_from"] <= at
            and (key["valid_until"] is None or at < key["valid_until"])
        ):
            return key
    return None


def validity_problem(keys: list[dict[str, Any]], key_id: str, at: datetime) -> str | None:
    """Why a signature by ``key_id`` made at ``at`` is not within that key's validity, or None if it is.

    Args:
        keys: :func:`history` of the store (every recorded key with its validity period).
        key_id: the key that made the signature.
        at: when the signed thing says it was made (timezone-aware).

    Returns:
        One sentence naming the key and the dates (the key is not recorded, ``at`` is before it
        was valid, or after it was retired by a rotation); None when ``at`` lies in its period.
    """
    for key in keys:
        if key["key_id"] != key_id:
            continue
        start, end = key["valid_from"], key["valid_until"]
        until = end.isoformat() if end is not None else "now (in force)"
        period = f"valid from {start.isoformat()} until {until}"
        made = at.astimezone(UTC).isoformat()
        if at < start:
            return f"made at {made}, before key {key_id} was valid ({period})"
        if end is not None and at >= end:
            return f"made at {made}, after key {key_id} was retired at {end.isoformat()} ({period})"
        return None
    return f"key {key_id} is not recorded in the store's signing_keys (not a key of this property's store)"


def record(con: duckdb.DuckDBPyConnection, key_id: str, public_key_pem: str, at: datetime, by: str) -> None:
    """Record a public key valid from ``at`` (a new row; the key before it is valid until ``at``).

    Args:
        con: the store's writer connection.
        key_id: :func:`projections.records.signing.key_id` of the key.
        public_key_pem: the public key (PEM).
        at: from when it signs (timezone-aware), after the key in force's ``valid_from``.
        by: who recorded it (the operator's name).

    Raises:
        ValueError: ``at`` without an offset, not after the key in force, or the key recorded already.
    """
    if at.tzinfo is None:
        raise ValueError("a key's valid_from must carry its offset")
    keys = history(con)
    if any(k["key_id"] == key_id for k in keys):
        raise ValueError(f"key {key_id} is recorded already")
    if keys and at <= keys[-1]["valid_from"]:
        raise ValueError(f"a new key must be valid after the key in force ({keys[-1]['valid_from'].isoformat()})")
    con.execute("INSERT INTO signing_keys VALUES ($1, $2, $3, $4)", [key_id, public_key_pem, at, by]).fetchall()
