"""The one rule for removing a DuckDB store: only a store that holds nothing.

A command may remove a store file only when it created the file itself in the same run and
the file holds no row in any table (no event, finding, dead letter, user, token, review,
snapshot or offset): an empty file left by a run that could not start. Whatever else fails, a
store holding anything stays where it is, with its write-ahead log.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from projections.store.summaries import DERIVED_TABLES


def holds_records(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether any table of the store behind ``con`` has a row (a store of the wrong shape counts);
    the summaries' tables (:data:`projections.store.summaries.DERIVED_TABLES`) are derived, not records."""
    tables = con.execute(
        "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
    ).fetchall()
    for schema, name in tables:
        if name in DERIVED_TABLES:
            continue
        ident = '"' + str(schema).replace('"', '""') + '"."' + str(name).replace('"', '""') + '"'
        if con.execute(f"SELECT EXISTS (SELECT 1 FROM {ident})").fetchone() != (False,):
            return True
    return False


def remove_if_empty(path: Path) -> bool:
    """Remove the store file ``path`` and its write-ahead log when it holds nothing.

    Call it only for a file this run created (and has closed). A file that cannot be opened, or
    holds any row, is kept.

    Returns:
        True when the file was removed.
    """
    wal = path.with_name(path.name + ".wal")
    if not path.exists():
        return False
    try:
        con = duckdb.connect(str(path))  # replays a write-ahead log, so its rows count too
    except duckdb.Error:
        return False
    try:
        if holds_records(con):
            return False
    except duckdb.Error:
        return False
    finally:
        con.close()
    path.unlink(missing_ok=True)
    wal.unlink(missing_ok=True)
    return True
