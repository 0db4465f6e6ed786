"""The casino property's name as recorded in the store (the console's first-use page).

Each name an admin gives is a new row of ``property_names`` (append-only); the latest is in
force. A name recorded here wins over ``DEALTRAIL_PROPERTY``; with neither, pages and reports
say the property is not named, never a stand-in such as "Casino".
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb

MAX_NAME = 200
"""The longest property name (characters), as ``DEALTRAIL_PROPERTY`` allows."""
NOT_NAMED = "property not named"
"""What a page or report shows when no name is recorded or set."""


def _has_table(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'property_names' AND schema_name = 'main'"
    ).fetchall()
    return bool(rows[0][0])


def history(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every recorded name, newest first (``name``, ``set_at``, ``set_by``); [] in a store
    written before names were recorded."""
    if not _has_table(con):
        return []
    cur = con.execute("SELECT name, set_at, set_by FROM property_names ORDER BY set_at DESC, rowid DESC")
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def recorded(con: duckdb.DuckDBPyConnection) -> str | None:
    """The name in force in the store, or None when none is recorded."""
    names = history(con)
    return str(names[0]["name"]) if names else None


def resolve(con: duckdb.DuckDBPyConnection, configured: str | None) -> str | None:
    """The property's name: the one recorded in the store, else ``configured``
    (``DEALTRAIL_PROPERTY``), else None (not named)."""
    return recorded(con) or configured or None


def record(con: duckdb.DuckDBPyConnection, name: str, at: datetime, by: str) -> str:
    """Record a new name for the property (a new row; earlier names stay).

    Args:
        con: the store's writer connection.
        name: the name (spaces at the ends dropped; 1 to :data:`MAX_NAME` characters, no control
            characters).
        at: when (timezone-aware).
        by: the admin who named it.

    Returns:
        The name recorded.

    Raises:
        ValueError: an empty, too long or unprintable name.
    """
    name = " ".join(name.split())
    if not name or len(name) > MAX_NAME or not name.isprintable():
        raise ValueError(f"the property's name must be 1 to {MAX_NAME} printable characters")
    con.execute("INSERT INTO property_names VALUES ($1, $2, $3)", [name, at, by]).fetchall()
    return name
