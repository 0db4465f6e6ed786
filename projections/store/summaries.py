"""Summaries the console reads instead of the events (issue 23, item 2): the floor's per-table
"last state" (``sum_floor``), the finding half of the incidents read model (``sum_findings``) and
the late events a replay's snapshot check counts (``sum_late_events``), kept up to date by the
store's writer in the transaction that appends the events, findings and rounds they are built from.

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

import duckdb
import pyarrow as pa

from projections.store.sql_files import read_sql

SUMMARIES = {"sum_floor": 2, "sum_findings": 1, "sum_late_events": 2}
"""Each summary table and the version of its definition (a new version is built again once)."""
DERIVED_TABLES = frozenset({*SUMMARIES, "summary_builds", "sum_late_events_mark"})
"""Tables whose rows are derived from the others (rebuilt at will): a store holding rows only in
these holds no record (:func:`projections.store.discard.holds_records`)."""

FLOOR_EVENT_COLUMNS = "table_id, game, seq, occurred_at, actor_role, actor_id"
"""What ``sum_floor`` takes from each event (SQL over a row of ``events``; the store's inserts
return it for the events they add). Devices are not summarised here: the floor takes their state
from the engine's own stored state (:mod:`projections.models.device_state`, rulebook 10.3.1)."""
INSERTED_EVENT_COLUMNS = FLOOR_EVENT_COLUMNS + ", event_id, arrival"
"""What the store's inserts return for each event they add: the floor's columns, the event ID
(which :func:`record_late` keeps for a late event) and the arrival (its order within the batch)."""
ROUND_COLUMNS = "table_id, game, dealer_id, completed_at"
"""What ``sum_floor`` takes from each round (the store's insert returns it for the rounds it adds)."""


def merge_floor(con: duckdb.DuckDBPyConnection, new_events: pa.Table | None, new_rounds: pa.Table | None) -> None:
    """Bring ``sum_floor`` up to date with a batch, inside the caller's transaction.

    Args:
        con: the writer's connection, in the transaction that stored the batch.
        new_events: :data:`FLOOR_EVENT_COLUMNS` of the events the batch inserted (events
            already stored may be among them: they change nothing); None: none.
        new_rounds: :data:`ROUND_COLUMNS` of the rounds the batch actually inserted (never
            rows that were already stored: they are counted); None: none.
    """
    if (new_events is None or not new_events.num_rows) and (new_rounds is None or not new_rounds.num_rows):
        return
    events = (
        new_events
        if new_events is not None
        else con.sql(f"SELECT {FLOOR_EVENT_COLUMNS} FROM events LIMIT 0").to_arrow_table()
    )
    rounds = (
        new_rounds
        if new_rounds is not None
        else con.sql(f"SELECT {ROUND_COLUMNS} FROM rounds LIMIT 0").to_arrow_table()
    )
    con.register("floor_new_events", events)
    con.register("floor_round_delta", rounds)
    try:
        _merge(con)
    finally:
        con.unregister("floor_new_events")
        con.unregister("floor_round_delta")


def _merge(con: duckdb.DuckDBPyConnection) -> None:
    """``sum_floor_merge.sql`` over the relations ``floor_new_events`` and ``floor_round_delta``."""
    merged = con.sql(read_sql("sum_floor_merge.sql")).to_arrow_table()  # a row per touched table
    con.register("floor_merged", merged)
    try:
        # the summary is derived (rebuilt from the events at will): its touched rows are replaced
        con.execute("DELETE FROM sum_floor WHERE table_id IN (SELECT table_id FROM floor_merged)")
        con.execute("INSERT INTO sum_floor BY NAME SELECT * FROM floor_merged")
    finally:
        con.unregister("floor_merged")


LATE_SQL = """
    SELECT table_id, seq, event_id FROM (
        SELECT r.table_id, r.seq, r.event_id, {stored} AS stored,
               max(r.seq) OVER (PARTITION BY r.table_id ORDER BY {order}
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
        FROM {rows})
    WHERE seq <= greatest(before, stored)
"""
"""The late events among the rows ``r`` of ``{rows}`` in the order they were stored (``{order}``):
each whose seq is at or below a seq its table had before it, in the store (``{stored}``, NULL:
none) or earlier among the rows."""


def record_late(con: duckdb.DuckDBPyConnection, new_events: pa.Table) -> int:
    """Keep in ``sum_late_events`` the events of a batch that came late: whose seq is at or below
    a seq of their table stored before them, by an earlier batch (``sum_floor.last_seq``, so call
    it before :func:`merge_floor` of the same batch) or earlier in this one (the batch is stored
    in :data:`projections.store.store.BATCH_ORDER`: the second of two events with one seq). Then the
    mark (``sum_late_events_mark``) says the record is up to date with the store's events.
    Inside the caller's transaction, after the batch's events are in.

    A snapshot of a table at seq S stays fit for a replay as long as no event with a seq at or
    below S is stored after it (rulebook 10.1.2: the replay applies a table's events in seq
    order); every such event is late by this definition (the event at S was stored first), so
    the replay compares how many late events up to S the table has with how many it had when
    the snapshot was written (``table_snapshots.late_through``) instead of counting the table's
    whole history (:func:`dealtrail.investigate.replay.snapshot_start`). The definition is the order the
    store keeps, so :func:`ensure` builds the same record again from the events alone.

    Args:
        con: the writer's connection, in the transaction that stored the batch.
        new_events: :data:`INSERTED_EVENT_COLUMNS` of the events the batch inserted (never events
            stored before: an insert skips them).

    Returns:
        How many late events were recorded (0 for a trail that arrives in seq order).
    """
    if not new_events.num_rows:
        return 0
    con.register("late_new_events", new_events)
    try:
        late = con.execute(
            "INSERT INTO sum_late_events "
            + LATE_SQL.format(
                order="r.seq, r.arrival",
                rows="late_new_events r LEFT JOIN sum_floor f ON f.table_id = r.table_id",
                stored="f.last_seq",
            )
        ).fetchone()
    finally:
        con.unregister("late_new_events")
    mark_late_record(con)
    return int(late[0]) if late else 0


def mark_late_record(con: duckdb.DuckDBPyConnection) -> None:
    """Note that ``sum_late_events`` is up to date with the store's events as they are now (the
    writer, after a batch or a build; the archive, after it moved events out of a store whose
    record was up to date: their late events stay recorded, as their snapshots counted them)."""
    con.execute("DELETE FROM sum_late_events_mark")
    con.execute(f"INSERT INTO sum_late_events_mark SELECT count(*) FROM {_own_events(con)}")


def _own_events(con: duckdb.DuckDBPyConnection) -> str:
    """The store's own ``events`` table, named by its database: what the late record's mark counts,
    also where an archive's view of the same name stands in front of it."""
    name = con.execute("SELECT current_database()").fetchone()
    assert name is not None
    return f'"{name[0]}".main.events'


def late_record_current(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``sum_late_events`` holds every late event of the store: built at this version, and
    the store's events are as many as when a writer of this version last brought it up to date.
    False after a writer of an older version stored events (it records none), after an archive
    moved events out (until the next writer builds the record again), or in a store without the
    record; a replay then counts the history (:func:`dealtrail.investigate.replay.snapshot_start`). Reads
    the count of the store's own ``events`` table (its metadata, not its rows), also where an
    archive's view stands in front of it."""
    if not has_summary(con, "sum_late_events"):
        return False
    row = con.execute(
        f"SELECT (SELECT max(events) FROM sum_late_events_mark) = (SELECT count(*) FROM {_own_events(con)})"
    ).fetchone()
    return bool(row and row[0])


def _build_late(con: duckdb.DuckDBPyConnection) -> None:
    """Build ``sum_late_events`` again from the store's events in the order they were stored (row
    IDs: batches in turn, each in :data:`projections.store.store.BATCH_ORDER`), the record
    :func:`record_late` keeps batch by batch, and mark it up to date. Inside the caller's transaction."""
    con.execute("DELETE FROM sum_late_events")
    con.execute(
        "INSERT INTO sum_late_events "
        + LATE_SQL.format(
            order="r.rid", rows="(SELECT rowid AS rid, table_id, seq, event_id FROM events) r", stored="NULL"
        )
    )
    mark_late_record(con)


def ensure(con: duckdb.DuckDBPyConnection, now: datetime | None = None) -> list[str]:
    """Create the summary tables and build, once, each summary this store has not built at its
    version (a store written before it: one pass over its events, findings and rounds), and the
    late record again whenever it is not up to date with the store's events
    (:func:`late_record_current`: a writer of an older version stored some). Writer only.

    Returns:
        The names of the summaries built now (empty when all were up to date).
    """
    con.execute(read_sql("006_summaries.sql"))
    built = {(str(n), int(v)) for n, v in con.execute("SELECT name, version FROM summary_builds").fetchall()}
    todo = [name for name, version in SUMMARIES.items() if (name, version) not in built]
    # events stored or removed since the late record was brought up to date (a writer of an older
    # version stored some without recording them): it is built again, the same record the writer
    # keeps from the store's order
    stale = "sum_late_events" not in todo and not late_record_current(con)
    if not todo and not stale:
        return []
    con.execute("BEGIN TRANSACTION")
    try:
        if "sum_floor" in todo:
            con.execute("DELETE FROM sum_floor")
            # one pass over the whole store, through the same merge as every batch
            con.execute(f"CREATE OR REPLACE TEMP VIEW floor_new_events AS SELECT {FLOOR_EVENT_COLUMNS} FROM events")
            con.execute(f"CREATE OR REPLACE TEMP VIEW floor_round_delta AS SELECT {ROUND_COLUMNS} FROM rounds")
            _merge(con)
            con.execute("DROP VIEW floor_new_events")
            con.execute("DROP VIEW floor_round_delta")
        if "sum_late_events" in todo or stale:
            _build_late(con)
        if "sum_findings" in todo:
            con.execute("DELETE FROM sum_findings")
            for (generation,) in con.execute("SELECT DISTINCT generation FROM findings ORDER BY 1").fetchall():
                build_findings(con, int(generation))
        for name in todo:
            con.execute(
                "INSERT INTO summary_builds VALUES ($n, $v, $t)",
                {"n": name, "v": SUMMARIES[name], "t": now or datetime.now(UTC)},
            )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return todo + (["sum_late_events"] if stale else [])


def build_findings(con: duckdb.DuckDBPyConnection, generation: int) -> None:
    """(Re)build ``sum_findings`` for every finding of ``generation``, inside the caller's
    transaction (a store's first open by this version, a new generation of ``dealtrail reaudit``)."""
    every = con.sql(
        "SELECT DISTINCT finding_id FROM findings WHERE generation = $g", params={"g": generation}
    ).to_arrow_table()
    con.register("sum_touched", every)
    try:
        _replace_findings(con, generation)
    finally:
        con.unregister("sum_touched")


def merge_findings(
    con: duckdb.DuckDBPyConnection, generation: int, findings_batch: str | None, rounds_batch: str | None
) -> None:
    """Bring ``sum_findings`` up to date with a batch, inside the caller's transaction.

    The rows made again are those of the findings in the batch (a new finding, a new revision
    of one: its remedy status), of the findings whose round the batch completes (their dealer:
    a finding is raised while its round is dealt, the round is stored when it ends), and of the
    consequences of the batch's tables still without a cause (a cause stored after them). Each
    row is computed from the stored findings and rounds, so a batch delivered twice changes
    nothing (at-least-once).

    Args:
        con: the writer's connection, in the transaction that stored the batch.
        generation: the generation the writer stores findings in.
        findings_batch: the name of a registered relation with the batch's findings
            (``finding_id``, ``table_id``), stored or already there; None: none.
        rounds_batch: the name of a registered relation with the batch's rounds
            (``table_id``, ``round_id``); None: none.
    """
    parts = []
    if findings_batch is not None:
        parts.append(f"SELECT finding_id FROM {findings_batch}")
        parts.append(
            f"""SELECT finding_id FROM sum_findings WHERE generation = $g AND cause_finding_id IS NULL
                AND rule_id IN ('DT-remedy-overdue', 'DT-chain-broken')
                AND table_id IN (SELECT table_id FROM {findings_batch})"""
        )
    if rounds_batch is not None:
        parts.append(
            f"""SELECT s.finding_id FROM sum_findings s SEMI JOIN {rounds_batch} b
                ON s.table_id = b.table_id AND s.round_id = b.round_id
                WHERE s.generation = $g AND s.dealer_id IS NULL"""
        )
    if not parts:
        return
    touched = con.sql(" UNION ".join(parts), params={"g": generation}).to_arrow_table()
    if touched is None or not touched.num_rows:
        return
    con.register("sum_touched", touched)
    try:
        _replace_findings(con, generation)
    finally:
        con.unregister("sum_touched")


def _replace_findings(con: duckdb.DuckDBPyConnection, generation: int) -> None:
    """Replace the ``sum_findings`` rows of ``generation`` for the findings in ``sum_touched``."""
    rows = con.sql(read_sql("sum_findings_rows.sql"), params={"g": generation}).to_arrow_table()
    con.register("sum_findings_new", rows)
    try:
        # derived rows (rebuilt from the findings at will): the touched ones are replaced
        con.execute(
            "DELETE FROM sum_findings WHERE generation = $g AND finding_id IN (SELECT finding_id FROM sum_touched)",
            {"g": generation},
        )
        con.execute("INSERT INTO sum_findings BY NAME SELECT * FROM sum_findings_new")
    finally:
        con.unregister("sum_findings_new")


FINDINGS_SOURCE = """SELECT * EXCLUDE (generation) FROM sum_findings
WHERE generation = coalesce(getvariable('dealtrail_generation'), (SELECT max(generation) FROM generations), 1)
  AND detected_at >= $start AND detected_at < $end
  AND ($table_id IS NULL OR table_id = $table_id)
  AND ($finding_id IS NULL OR finding_id = $finding_id)
  AND ($case_of IS NULL OR finding_id = $case_of OR cause_finding_id = $case_of)
  AND ($ids::VARCHAR[] IS NULL OR finding_id IN (SELECT unnest($ids::VARCHAR[])))
  AND ($game IS NULL OR game = $game) AND ($rule IS NULL OR rule_id = $rule)
  AND ($severity IS NULL OR severity = $severity) AND ($status IS NULL OR status = $status)
  AND ($dealer IS NULL OR dealer_id = $dealer) AND ($incident IS NULL OR (cause_finding_id IS NULL) = $incident)"""
"""The finding half of the incidents read model read from ``sum_findings``: the rows and columns
``rpt_findings.sql`` gives for the session's generation, the period and the table (unordered).
The model's filters on these columns are applied here too, before its review joins (they are
applied again after them, where the live query needs them)."""


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
    return read_sql("sum_floor.sql") if has_summary(con, "sum_floor") else read_sql("con_floor.sql")


def generation_findings(con: duckdb.DuckDBPyConnection) -> str:
    """A relation (SQL, for a FROM clause) with one row per finding of the session's generation
    and at least ``finding_id``, ``game``, ``table_id``, ``rule_id``: ``sum_findings``, or the
    view ``dim_findings`` (every revision ranked) in a store without the summary."""
    if has_summary(con, "sum_findings"):
        return """(SELECT * FROM sum_findings WHERE generation = coalesce(getvariable('dealtrail_generation'),
                   (SELECT max(generation) FROM generations), 1))"""
    return "dim_findings"


def supervisor_now(con: duckdb.DuckDBPyConnection, table_id: str) -> str | None:
    """The table's supervisor on duty now (the latest ``FLOOR`` actor in its events), from
    ``sum_floor``, or from the events in a store without it (:func:`projections.records.staff.supervisors_by_table`)."""
    if has_summary(con, "sum_floor"):
        row = con.execute("SELECT supervisor_id FROM sum_floor WHERE table_id = ?", [table_id]).fetchone()
        return str(row[0]) if row and row[0] is not None else None
    from projections.records import staff

    return staff.supervisors_by_table(con).get(table_id)
