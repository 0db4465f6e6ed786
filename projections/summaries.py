"""Summaries the console reads instead of the events (issue 23, item 2): the floor's per-table
"last state" (``sum_floor``), kept up to date by the store's writer in the transaction that
appends the events and rounds it is built from.

Idempotent under at-least-once delivery: for the tables a batch touched, the events of the
batch's time span are aggregated again (stored copies included) and merged with the stored row
by seq and time, and rounds are counted only as they are actually inserted, so a replayed batch
changes nothing and a late event (an older seq) does not undo a later state. A store written
before the summaries gets them built once, from its events and rounds, when a writer opens it
(:func:`ensure`); a reader of such a store falls back to the queries over the events
(:func:`floor_query`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources

import duckdb
import pyarrow as pa

SUMMARIES = {"sum_floor": 1}
"""Each summary table and the version of its definition (a new version is built again once)."""

EVENT_KEYS_SCHEMA = pa.schema([("table_id", pa.string()), ("occurred_at", pa.timestamp("us", tz="UTC"))])
ROUND_DELTA_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("game", pa.string()),
        ("dealer_id", pa.string()),
        ("completed_at", pa.timestamp("us", tz="UTC")),
    ]
)


def _sql(name: str) -> str:
    return resources.files("projections").joinpath("sql", name).read_text(encoding="utf-8")


def merge_floor(con: duckdb.DuckDBPyConnection, event_keys: pa.Table | None, round_delta: pa.Table | None) -> None:
    """Bring ``sum_floor`` up to date with a batch, inside the caller's transaction.

    Args:
        con: the writer's connection, in the transaction that stored the batch.
        event_keys: ``table_id`` and ``occurred_at`` of the batch's new events (a superset,
            such as the whole batch, gives the same result); None: no new events.
        round_delta: ``table_id``, ``game``, ``dealer_id``, ``completed_at`` of the rounds the
            batch actually inserted (never rows that were already stored: they are counted);
            None: no new rounds.
    """
    keys = event_keys if event_keys is not None else EVENT_KEYS_SCHEMA.empty_table()
    rounds = round_delta if round_delta is not None else ROUND_DELTA_SCHEMA.empty_table()
    if not keys.num_rows and not rounds.num_rows:
        return
    con.register("floor_event_keys", keys.select(["table_id", "occurred_at"]))
    con.register("floor_round_delta", rounds.select(["table_id", "game", "dealer_id", "completed_at"]))
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE floor_merged AS {_sql('sum_floor_merge.sql')}")
        # the summary is derived (rebuilt from the events at will): its touched rows are replaced
        con.execute("DELETE FROM sum_floor WHERE table_id IN (SELECT table_id FROM floor_merged)")
        con.execute("INSERT INTO sum_floor BY NAME SELECT * FROM floor_merged")
        con.execute("DROP TABLE floor_merged")
    finally:
        con.unregister("floor_event_keys")
        con.unregister("floor_round_delta")


def ensure(con: duckdb.DuckDBPyConnection, now: datetime | None = None) -> list[str]:
    """Create the summary tables and build, once, each summary this store has not built at its
    version (a store written before it: one pass over its events and rounds). Writer only.

    Returns:
        The names of the summaries built now (empty when all were up to date).
    """
    con.execute(_sql("006_summaries.sql"))
    built = {(str(n), int(v)) for n, v in con.execute("SELECT name, version FROM summary_builds").fetchall()}
    todo = [name for name, version in SUMMARIES.items() if (name, version) not in built]
    if not todo:
        return []
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM sum_floor")
        event_keys = con.sql(
            """SELECT table_id, min(occurred_at) AS occurred_at FROM events GROUP BY table_id
               UNION ALL SELECT table_id, max(occurred_at) FROM events GROUP BY table_id"""
        ).to_arrow_table()
        round_delta = con.sql("SELECT table_id, game, dealer_id, completed_at FROM rounds").to_arrow_table()
        merge_floor(con, event_keys.cast(EVENT_KEYS_SCHEMA), round_delta.cast(ROUND_DELTA_SCHEMA))
        for name in todo:
            con.execute(
                "INSERT INTO summary_builds VALUES ($n, $v, $t)",
                {"n": name, "v": SUMMARIES[name], "t": now or datetime.now(UTC)},
            )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return todo


def has_summary(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the store holds ``name`` built at its current version (a store a writer of this
    version opened); a reader of an older store falls back to the queries over the events."""
    try:
        row = con.execute(
            "SELECT count(*) FROM summary_builds WHERE name = $n AND version = $v",
            {"n": name, "v": SUMMARIES[name]},
        ).fetchone()
    except duckdb.CatalogException:
        return False
    return bool(row and row[0])


def floor_query(con: duckdb.DuckDBPyConnection) -> str:
    """The SQL of the floor's rows (one per table with events): ``sum_floor.sql`` over the
    summary, or ``con_floor.sql`` over the events in a store without it. Both give the same
    columns; the summary's also has ``supervisor_id``."""
    return _sql("sum_floor.sql") if has_summary(con, "sum_floor") else _sql("con_floor.sql")
