"""The DuckDB store: append-only ``events``, ``findings``, ``rounds``, ``dead_letters`` (and
``dead_letter_counts``, the audit's rejected lines past the first thousands of a run, counted),
``table_states``, ``table_snapshots``, ``generations`` and ``offsets``, written in bulk by one
writer process, read by everyone else read-only.

Writes are idempotent: a batch inserts only rows whose keys are not yet stored (events by
``event_id`` + payload hash, or + payload without its chain fields: :data:`SAME_FACT_SQL`;
findings by ``finding_id`` + ``revision``, rounds by table and round, dead letters by source,
position and content, counted dead letters by source and batch, table states by table and seq
range, snapshots by table, last event and engine version), so at-least-once delivery and
re-audits add nothing twice. Bulk paths only: the audit's events come as Arrow rows its workers
built (:mod:`projections.store.event_rows`), the projector's through ``read_json`` over a staging
file, the other tables through Arrow tables; never row-by-row ``executemany``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from projections.store import summaries
from projections.store.failures import StoreLostError, file_identity
from projections.store.private import make_private_dirs
from projections.store.sql_files import read_sql
from schemas.access import AccessEntry
from schemas.findings import Finding
from streams.engine.state import TableState, dump_state

FINDINGS_SCHEMA = pa.schema(
    [
        ("finding_id", pa.string()),
        ("revision", pa.int32()),
        ("rule_id", pa.string()),
        ("citation", pa.string()),
        ("game", pa.string()),
        ("severity", pa.string()),
        ("provisional", pa.bool_()),
        ("table_id", pa.string()),
        ("round_id", pa.string()),
        ("status", pa.string()),
        ("message", pa.string()),
        ("required_remedy", pa.string()),
        ("evidence_event_ids", pa.list_(pa.string())),
        ("trigger_event_id", pa.string()),
        ("observed_at", pa.timestamp("us", tz="UTC")),
        ("remedy_event_ids", pa.list_(pa.string())),
        ("remedy_delay_seconds", pa.float64()),
        ("late", pa.bool_()),
        ("rulebook_revision", pa.int32()),
    ]
)
ROUNDS_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("round_id", pa.string()),
        ("game", pa.string()),
        ("round_no", pa.int32()),
        ("dealer_id", pa.string()),
        ("dealing_method", pa.string()),
        ("deck_id", pa.string()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("completed_at", pa.timestamp("us", tz="UTC")),
        ("started_event_id", pa.string()),
        ("completed_event_id", pa.string()),
        ("exempt_from_stub_count", pa.bool_()),
        ("stub_counted", pa.bool_()),
        ("rounds_since_stub_count", pa.int32()),
        ("voided", pa.bool_()),
        ("cards_dealt", pa.int32()),
        ("wagers", pa.int32()),
        ("deck_suspect", pa.bool_()),
    ]
)
DEAD_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("position", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("raw", pa.string()),
        ("byte_offset", pa.int64()),
        ("byte_length", pa.int64()),
        ("compact", pa.bool_()),
    ]
)
"""A batch of dead letters as :meth:`Store.write_batch` takes them (``byte_offset``,
``byte_length`` and ``compact`` may be left out of a row)."""
_LOG_KEYS = ("source", "position", "byte_offset", "byte_length", "reason", "detail", "raw")
"""The keys of a line of the store's dead-letter log (:attr:`Store.dead_letter_log`)."""
COUNT_GROUPS = 32
"""The most ``dead_letter_counts`` rows a counted batch gains by what its lines state (its table
and time), whatever they state: past it, the times go to their UTC quarter hour, then to one row
per reason and kind of time (see :meth:`Store._count_dead_letters`)."""
COUNT_TABLES = 8
"""The most distinct tables a counted batch states and still keeps in ``dead_letter_counts``
when its times go to quarter hours (past it, a row keeps how many, not which)."""
STATES_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("first_seq", pa.int64()),
        ("last_seq", pa.int64()),
        ("last_event_id", pa.string()),
        ("source", pa.string()),
        ("state", pa.string()),
        ("stamps", pa.string()),
    ]
)
SNAPSHOTS_SCHEMA = pa.schema(
    [
        ("table_id", pa.string()),
        ("last_seq", pa.int64()),
        ("last_event_id", pa.string()),
        ("last_hash", pa.string()),
        ("last_occurred_at", pa.timestamp("us", tz="UTC")),
        ("engine_version", pa.string()),
        ("rulebook_revision", pa.int32()),
        ("state_sha256", pa.string()),
        ("state", pa.string()),
        ("events_partition", pa.int32()),
        ("events_offset", pa.int64()),
    ]
)
"""``table_snapshots`` rows as the writer takes them: ``events_partition`` and ``events_offset``
are a worker's snapshot's (``schemas.snapshots.TableSnapshot.row``), absent (NULL) in the audit's."""
OFFSETS_SCHEMA = pa.schema(
    [("consumer", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("next_offset", pa.int64())]
)


EVENT_COLUMNS: dict[str, tuple[str, str]] = {
    "event_id": ("$.event_id", "VARCHAR"),
    "table_id": ("$.table_id", "VARCHAR"),
    "game": ("$.game", "VARCHAR"),
    "round_id": ("$.round_id", "VARCHAR"),
    "deck_id": ("$.deck_id", "VARCHAR"),
    "seq": ("$.seq", "BIGINT"),
    "type": ("$.type", "VARCHAR"),
    "occurred_at": ("$.occurred_at", "TIMESTAMPTZ"),
    "recorded_at": ("$.recorded_at", "TIMESTAMPTZ"),
    "actor_role": ("$.actor.role", "VARCHAR"),
    "actor_id": ("$.actor.id", "VARCHAR"),
}
"""The columns of ``events`` taken from each payload: column -> (JSON path, SQL type). The
reports read these columns; ``dealtrail verify`` checks them against the payload."""


def event_paths_sql(json_expr: str) -> str:
    """SQL for the list of the :data:`EVENT_COLUMNS` values (as strings) of the JSON value
    ``json_expr``: the JSON is parsed once for all of them."""
    paths = [path for path, _ in EVENT_COLUMNS.values()]
    return f"json_extract_string({json_expr}, {paths})"


def event_columns_sql(values: str) -> dict[str, str]:
    """SQL expression of each :data:`EVENT_COLUMNS` column (cast to its type) over ``values``,
    a list built by :func:`event_paths_sql`."""
    return {
        col: f"{values}[{i}]" if kind == "VARCHAR" else f"CAST({values}[{i}] AS {kind})"
        for i, (col, (_, kind)) in enumerate(EVENT_COLUMNS.items(), 1)
    }


BATCH_ORDER = "table_id, seq, arrival"
"""The order a batch's events are stored in: each table's run of seqs together. Batches follow
one another in arrival order, so a row group still spans the time of its batches (the zone maps
of ``occurred_at`` keep working), and a replay's few hundred consecutive events of one table lie
in a few hundred rows instead of being scattered over the whole batch (a window over the batch
and a parallel insert left them in hash order: 500 events of one table spread over 47,000 rows,
whose payloads were all decompressed to read them)."""


_NO_CHAIN = """'{"prev_hash":null,"hash":null,"hash_version":null}'"""


def same_fact_sql(arrived: str, stored: str) -> str:
    """SQL: the event row ``arrived`` (an alias) is the same fact as the event row ``stored`` of
    its ID (:func:`schemas.chain.same_fact`): the same payload without its chain fields and, if
    ``arrived`` carries a hash, the same hash. Not symmetric: a stamped event arriving after an
    unstamped one of the same content is not its copy."""
    a, s = arrived, stored
    return (
        f"(json_merge_patch({a}.payload, {_NO_CHAIN})::VARCHAR = json_merge_patch({s}.payload, {_NO_CHAIN})::VARCHAR"
        f" AND ({a}.payload->>'hash' IS NULL OR {a}.payload->>'hash' = {s}.payload->>'hash'))"
    )


SAME_FACT_SQL = same_fact_sql("b", "e")
"""SQL: the batch's event ``b`` is the same fact as the stored event ``e`` of its ID (the rule of
:func:`schemas.chain.same_fact`): the same payload without its chain fields and, if ``b``
carries a hash, the same hash. Such a copy is not stored again (an unchained copy of an event
stored with its chain, sent by a producer other than the publisher); one with other content is
stored beside the first (the engine raised DT-sequence-gap for it). Only evaluated for stored
events with the batch event's ID and another payload hash."""


def stage_line(arrival: int, raw: bytes) -> bytes:
    """One staged event: ``{"a": arrival, "e": <the event's JSON>}`` and a newline.

    ``raw`` must be one valid JSON document (it was validated); wrapping costs no parsing.
    """
    return b'{"a":%d,"e":%s}\n' % (arrival, raw.strip())


def finding_row(f: Finding) -> dict[str, Any]:
    """A :class:`Finding` as a row of the ``findings`` table."""
    return {
        "finding_id": f.finding_id,
        "revision": f.revision,
        "rule_id": f.rule_id,
        "citation": f.citation,
        "game": f.game.value,
        "severity": f.severity.value,
        "provisional": f.provisional,
        "table_id": f.table_id,
        "round_id": f.round_id,
        "status": f.status.value,
        "message": f.message,
        "required_remedy": f.required_remedy,
        "evidence_event_ids": list(f.evidence_event_ids),
        "trigger_event_id": f.trigger_event_id,
        "observed_at": f.observed_at,
        "remedy_event_ids": list(f.remedy_event_ids),
        "remedy_delay_seconds": f.remedy_delay_seconds,
        "late": f.late,
        "rulebook_revision": f.rulebook_revision,
    }


@dataclass
class BatchCounts:
    """Rows a batch actually added (after de-duplication)."""

    events: int = 0
    findings: int = 0
    rounds: int = 0
    dead_letters: int = 0
    reviews: int = 0

    def add(self, other: BatchCounts) -> None:
        """Accumulate another batch's counts."""
        self.reviews += other.reviews
        self.events += other.events
        self.findings += other.findings
        self.rounds += other.rounds
        self.dead_letters += other.dead_letters


def latest_generation(con: duckdb.DuckDBPyConnection) -> int:
    """The store's latest generation of findings (1 until ``dealtrail reaudit`` adds one)."""
    row = con.execute("SELECT coalesce(max(generation), 1) FROM generations").fetchone()
    return int(row[0]) if row else 1


def snapshot_row(
    state: TableState, occurred_at: datetime, engine_version: str, rulebook_revision: int
) -> dict[str, Any]:
    """A row of ``table_snapshots`` (see ``SNAPSHOTS_SCHEMA``) for ``state``, the state after
    the table's event ``state.last_seq`` (which happened at ``occurred_at``)."""
    text = dump_state(state)
    return {
        "table_id": state.table_id,
        "last_seq": state.last_seq,
        "last_event_id": state.last_event_id or "",
        "last_hash": state.last_hash,
        "last_occurred_at": occurred_at,
        "engine_version": engine_version,
        "rulebook_revision": rulebook_revision,
        "state_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "state": text,
    }


DATA_ERRORS: tuple[type[BaseException], ...] = (
    duckdb.DataError,
    duckdb.IntegrityError,
    duckdb.InvalidInputException,
    pa.ArrowException,
    ValueError,
    TypeError,
    OverflowError,
)
"""Errors by which the store refuses the data of a batch (a value its column cannot hold, a
constraint), as against errors of the store itself (I/O, a lost file)."""

ISOLATED_PARTS = (
    "raw_events",
    "event_rows",
    "findings",
    "rounds",
    "reviews",
    "snapshots",
    "table_states",
    "dead_letters",
)
"""The kinds of row :meth:`Store.write_batch_isolating` writes on their own, in this order
(events before the snapshots that count them); ``offsets`` go in after all of them."""


_DUCKDB_MAGIC = b"DUCK"
"""Bytes 8 to 11 of every DuckDB database file."""


class NotAStoreError(FileNotFoundError):
    """The path holds a file that is not a DuckDB database (a CSV, an event file ...).

    DuckDB would open such a file as an empty in-memory database: writes would vanish and
    read-only opens fail obscurely, so dealtrail refuses it up front.
    """


def check_store_path(path: str | os.PathLike[str]) -> None:
    """Refuse a ``--db`` path that holds something other than a DuckDB database.

    A missing or empty file passes (DuckDB creates the database).

    Raises:
        NotAStoreError: the file exists, is not empty and is not a DuckDB database, or is a folder.
    """
    p = Path(path)
    if p.is_dir():
        raise NotAStoreError(f"{path} is a folder, not a DuckDB database file")
    if not p.exists() or p.stat().st_size == 0:
        return
    with p.open("rb") as fh:
        head = fh.read(12)
    if head[8:12] != _DUCKDB_MAGIC:
        raise NotAStoreError(f"{path} is not a DuckDB database (it holds other data); pick another --db path")


def utc_session(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Set the session's ``TimeZone`` to UTC and return ``con``; every connection dealtrail opens
    goes through here.

    A ``TIMESTAMPTZ`` then comes back, prints, casts and exports as the same UTC instant on every
    host (DuckDB's default is the host's zone: a New York host would write ``-05:00`` into the
    CSV). Set with ``SET`` after connecting: the ``config`` argument is applied before the ICU
    extension that owns the setting is loaded.
    """
    con.execute("SET TimeZone = 'UTC'")
    # no progress bar: DuckDB draws one on the terminal for a query over 2 s (a re-audit's export)
    con.execute("SET enable_progress_bar = false")
    return con


STORE_SIGNATURE = ("events", ("event_id", "payload", "payload_hash"))
"""The table (and its columns) that marks a DuckDB database as a dealtrail store."""
READ_TABLES = ("events", "findings", "rounds", "dead_letters")
"""The tables every reader of a store needs."""


def check_store_tables(con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str], writer: bool) -> None:
    """Refuse a DuckDB database that is not a dealtrail store, in one clear sentence.

    Readers need a store that ``dealtrail audit`` or ``dealtrail project`` wrote (its
    :data:`READ_TABLES`). A writer also takes a database with no table at all (it becomes a
    store), but never one that holds another application's tables: a DuckDB file with tables
    and no dealtrail ``events`` table (:data:`STORE_SIGNATURE`) is refused rather than mixed.

    Raises:
        NotAStoreError: the database is not a dealtrail store (and, for a writer, not empty).
    """
    rows = con.execute(
        """SELECT table_name, list(column_name) FROM information_schema.columns
           WHERE table_catalog = current_database() GROUP BY table_name"""
    ).fetchall()
    columns = {str(name): {str(c) for c in cols} for name, cols in rows}
    table, needed = STORE_SIGNATURE
    if table in columns and set(needed) <= columns[table]:
        missing = [] if writer else [t for t in READ_TABLES if t not in columns]
        if not missing:
            return
    elif writer and not columns:
        return
    else:
        missing = [t for t in READ_TABLES if t not in columns] or [table]
    if not columns:
        raise NotAStoreError(
            f"{path} is an empty DuckDB database, not a dealtrail store; "
            "point --db at a store that dealtrail audit or dealtrail project wrote"
        )
    others = ", ".join(sorted(columns)[:5]) + (", ..." if len(columns) > 5 else "")
    raise NotAStoreError(
        f"{path} is a DuckDB database but not a dealtrail store (it has no dealtrail {', '.join(missing)} "
        f"table; it holds {others}); "
        + (
            "dealtrail does not write into another application's database: pick another --db path"
            if writer
            else "point --db at a store that dealtrail audit or dealtrail project wrote"
        )
    )


def connect_read_only(path: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """Open an existing store read-only (reports, replay, verify, digest, schedule), its session in UTC.

    Raises:
        FileNotFoundError: there is no store at ``path`` (:class:`NotAStoreError` if the file
            there is not a DuckDB database, or a DuckDB database but not a dealtrail store).
    """
    if not Path(path).exists():
        raise FileNotFoundError(f"no dealtrail database at {path}")
    check_store_path(path)
    con = utc_session(duckdb.connect(str(path), read_only=True))
    try:
        check_store_tables(con, path, writer=False)
    except BaseException:
        con.close()
        raise
    return con


def dead_letter_log(store: Path) -> Path:
    """The dead-letter log of the store file ``store``: ``<store>.dead-letters.jsonl`` beside it,
    the raw input of the dead letters stored ``compact`` (see :meth:`Store.write_batch`), one
    JSON object per line (``source``, ``position``, ``byte_offset``, ``byte_length``, ``reason``,
    ``detail``, ``raw``), only ever appended, owner-only. Back it up with the store."""
    return store.with_name(store.name + ".dead-letters.jsonl")


class Store:
    """The single writer of a dealtrail DuckDB file, its session in UTC.

    The file and its write-ahead log (``<path>.wal``, which DuckDB makes itself and which holds
    every committed row until a checkpoint) are owner-only: the file is made so on open, the log
    after each commit. (The CLI also sets the process umask to 077, so DuckDB creates the log
    owner-only; the chmod covers library callers and a log left by an older version.)

    Args:
        path: the database file (made owner-only).
        memory_limit: DuckDB's memory limit (``"512MB"``); None keeps DuckDB's default.

    Raises:
        duckdb.IOException: another process holds the file open for writing.
        NotAStoreError: ``path`` holds something other than a DuckDB database, or a DuckDB
            database with another application's tables (:func:`check_store_tables`).
    """

    def __init__(self, path: str | os.PathLike[str], memory_limit: str | None = None) -> None:
        self.path = Path(path)
        check_store_path(self.path)
        make_private_dirs(self.path.parent)
        config: dict[str, str | bool | int | float | list[str]] = {"memory_limit": memory_limit} if memory_limit else {}
        # DuckDB spills large operations (a checkpoint of a month's store, a big sort) to files in
        # <store>.tmp, made with the umask's mode: the folder is made owner-only first, so what it
        # spills (events, findings) is never readable by others
        self._temp = self.path.with_name(self.path.name + ".tmp")
        make_private_dirs(self._temp)
        with contextlib.suppress(OSError):  # one left by an earlier run, made with the umask's mode
            if self._temp.stat().st_mode & 0o077:
                self._temp.chmod(0o700)
        config["temp_directory"] = str(self._temp)
        self.con = utc_session(duckdb.connect(str(self.path), config=config))
        self._identity = file_identity(self.path)  # the file this writer holds (see check_held)
        try:
            check_store_tables(self.con, self.path, writer=True)
            self._private_files()
            self._create()
        except BaseException:  # a foreign database, a full disk: the file is let go (it can be read back)
            with contextlib.suppress(duckdb.Error):
                self.con.close()
            raise
        self.generation = latest_generation(self.con)
        """The generation the findings this writer stores belong to: the latest one when it opened
        (``dealtrail reaudit`` adds generations while it alone holds the file)."""
        self._stage_dir: tempfile.TemporaryDirectory[str] | None = None  # made when first needed

    def _create(self) -> None:
        """Create what is missing: the tables, views and summaries of this version."""
        for name in (
            "001_schema.sql",
            "002_views.sql",
            "003_console.sql",  # reviews, users, API tokens (models/reviews.py, records/users.py)
            "004_console_views.sql",
            "005_access.sql",  # access log, console sessions (projections/records/access_log.py)
            "005_staff.sql",  # the staff roster (projections/records/staff.py)
            "006_property_names.sql",  # the property's names (projections/records/property.py)
            "007_signing_keys.sql",  # the public keys signatures are checked with (issue 35)
            "008_user_profiles.sql",  # users' full names and titles, for sign-offs (records/users.py)
            "009_control.sql",  # control charts' baselines and signal reviews (issue 50)
        ):
            self.con.execute(read_sql(name))
        summaries.ensure(self.con)  # the console's summaries; built once for a store written before them

    def check_held(self) -> None:
        """Raise if the store's path no longer names the file this writer opened.

        Raises:
            StoreLostError: the file (or its folder) was removed, or another file put in its
                place, while this writer held it: what it commits lands in a file no one can
                open again, and its lock no longer keeps another writer from the path.
        """
        now = file_identity(self.path)
        if now != self._identity:
            what = "removed" if now is None else "replaced by another file"
            raise StoreLostError(
                f"the store file was {what} while this writer held it "
                "(its lock is lost; what it wrote since is in no file)"
            )

    def _private_files(self) -> None:
        """Make the file and its write-ahead log owner-only (a file of another owner is left as it is)."""
        for p in (self.path, self.path.with_name(self.path.name + ".wal")):
            with contextlib.suppress(OSError):
                if p.stat().st_mode & 0o077:
                    p.chmod(0o600)

    def close(self) -> None:
        """Checkpoint and close the file (and remove its spill folder if DuckDB left it empty).

        Raises:
            duckdb.Error: the checkpoint failed (a full disk): the file is closed all the same,
                and what was committed is in its write-ahead log.
        """
        try:
            self.con.execute("CHECKPOINT")
        finally:
            with contextlib.suppress(duckdb.Error):
                self.con.close()
            self._drop_stage()
            with contextlib.suppress(OSError):
                self._temp.rmdir()

    def _drop_stage(self) -> None:
        if self._stage_dir is not None:
            self._stage_dir.cleanup()
            self._stage_dir = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        # an error is on its way out: close without letting a failed checkpoint hide it (what
        # was committed is in the file's write-ahead log)
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.Error:
            pass
        finally:
            with contextlib.suppress(duckdb.Error):  # a database DuckDB stopped after a failed write
                self.con.close()
            self._drop_stage()
            with contextlib.suppress(OSError):  # the spill folder, if DuckDB left it empty
                self._temp.rmdir()

    def write_batch(
        self,
        raw_events: Sequence[tuple[int, bytes]],
        findings: Iterable[Finding] = (),
        rounds: Sequence[dict[str, Any]] = (),
        dead_letters: Sequence[dict[str, Any]] = (),
        offsets: Sequence[dict[str, Any]] = (),
        events_file: Path | None = None,
        table_states: Sequence[dict[str, Any]] = (),
        snapshots: Sequence[dict[str, Any]] = (),
        reviews: Sequence[dict[str, Any]] = (),
        event_rows: pa.Table | None = None,
        access: Sequence[AccessEntry] = (),
        dead_letters_new: bool = False,
        dead_letters_counted: bool = False,
    ) -> BatchCounts:
        """Write one batch in one transaction; rows already stored are skipped.

        Args:
            raw_events: ``(arrival, JSON bytes)`` of validated events: ``arrival`` is where the
                event arrived (file line number, Kafka offset), which orders events of one
                table that share a seq.
            findings: finding revisions.
            rounds: rows of the ``rounds`` table (see ``ROUNDS_SCHEMA``).
            dead_letters: rows with source, position, reason, detail, raw and optionally
                byte_offset and byte_length (where the rejected line lies in the source file,
                bytes) and ``compact``: True stores the row without its raw input, which goes
                to the store's dead-letter log instead (:attr:`dead_letter_log`, appended and
                flushed to disk before the transaction commits, one JSON line per row stored);
                the row names the log in ``raw_file``. So a flood of rejected lines costs the
                store's memory a few dozen bytes per line, not the line (issue 32).
            offsets: Kafka positions covered by this batch (consumer, topic, partition,
                next_offset), committed with the rows.
            events_file: a staged file of events to add, one ``{"a": arrival, "e": event}`` per
                line (see :func:`stage_line`; the audit's workers stage their lines so).
            table_states: tables' engine states at the end of an audited file (see
                ``STATES_SCHEMA``; ``state`` and ``stamps`` are JSON text); a state already stored for the same
                table, ``first_seq``, ``last_seq`` and ``last_event_id`` is kept as it is.
            snapshots: tables' engine states within the file (see ``SNAPSHOTS_SCHEMA``), each after
                an event of this batch or an earlier one; stored with ``events_through``, the
                table's stored events up to its ``last_seq`` once this batch's events are in (a
                worker's snapshot: only those that arrived at or below its ``events_offset``), and
                ``late_through``, its late events up to it (``sum_late_events``; NULL for a
                worker's snapshot when an event up to its ``last_seq`` arrived after its
                ``events_offset``: a replay then finds the counts apart and skips it). A snapshot
                already stored (same table, last event and engine version) is kept.
            reviews: rows of the ``reviews`` table (``projections.models.reviews.review_row``), from the
                reviews topic; a review ID already stored is skipped (a redelivery).
            event_rows: rows of ``events`` already built (the audit's workers build them:
                :class:`projections.store.event_rows.EventRowsFile`), in
                :data:`projections.store.event_rows.EVENTS_ARROW_SCHEMA`, distinct by ``event_id`` and
                ``payload_hash``; appended by DuckDB's Arrow scan, without parsing the payloads
                again. Rows already stored are skipped.
            access: access-log entries from the access-log topic, chained in this order after the
                stored ones (``projections.records.access_log.append``); an entry ID already stored is
                skipped (a redelivery).
            dead_letters_new: the store held no dead letter of these rows' ``source`` when the
                run that makes them began (the audit asks once): they are appended without
                being compared with the stored ones (a run's own positions are distinct), which
                spares a scan of every stored dead letter per batch (a million rejected lines
                were a million-row scan every 2,000 lines).
            dead_letters_counted: the ``compact`` dead letters of this batch are counted, not
                stored one row each: each is a line of the dead-letter log as above, and
                ``dead_letter_counts`` gains a few rows for the batch, at most
                :data:`COUNT_GROUPS` and a few per reason whatever its lines state (one per
                stated reason, table and time when there are that few: see
                :meth:`_count_dead_letters`), with the lines each counts (``stg_dead_letters``
                and the reports count them). A batch already counted (same source and the same
                positions and raw inputs in the same order: ``batch_key``) adds nothing. So a
                flood of rejected lines costs DuckDB's memory a few rows per batch, not ~20
                bytes per line (issue 32); the audit counts, in chunks the same whatever its
                number of workers, the rejected lines of a partition of the file's tables past
                its first :data:`dealtrail.ingest.audit.DEAD_LETTER_ROWS`.

        Returns:
            How many rows each table gained.
        """
        counts = BatchCounts()
        con = self.con
        new_events: list[pa.Table] = []  # the events inserted, as the summaries read them
        new_rounds: pa.Table | None = None
        con.execute("BEGIN TRANSACTION")
        try:
            if raw_events:
                new_events.append(self._insert_events(raw_events))
            if events_file is not None:
                new_events.append(self._insert_events_file(events_file))
            if event_rows is not None and event_rows.num_rows:
                new_events.append(self._insert_event_rows(event_rows))
            counts.events = sum(t.num_rows for t in new_events)
            added = pa.concat_tables([t for t in new_events if t.num_rows]) if counts.events else None
            if added is not None:  # before merge_floor: late against the seqs stored before this batch
                summaries.record_late(con, added)
            rows = [finding_row(f) for f in findings]
            if rows:
                con.register("findings_batch", pa.Table.from_pylist(rows, schema=FINDINGS_SCHEMA))
                counts.findings = self._count(
                    """INSERT INTO findings BY NAME SELECT b.*, $g AS generation FROM (
                           SELECT * FROM findings_batch
                           QUALIFY row_number() OVER (PARTITION BY finding_id, revision) = 1) b
                       ANTI JOIN (SELECT finding_id, revision FROM findings
                                  WHERE generation = $g AND finding_id IN (SELECT finding_id FROM findings_batch)) f
                       USING (finding_id, revision)""",
                    {"g": self.generation},
                )
            if rounds:
                con.register("rounds_batch", pa.Table.from_pylist(list(rounds), schema=ROUNDS_SCHEMA))
                new_rounds = con.sql(  # sql(): the Arrow result without a copy; run once, here
                    """INSERT INTO rounds BY NAME SELECT b.* FROM (
                           SELECT * FROM rounds_batch
                           QUALIFY row_number() OVER (PARTITION BY table_id, round_id) = 1) b
                       ANTI JOIN (SELECT table_id, round_id FROM rounds
                                  WHERE round_id IN (SELECT round_id FROM rounds_batch)) r
                       USING (table_id, round_id)
                       RETURNING """
                    + summaries.ROUND_COLUMNS
                ).to_arrow_table()
                counts.rounds = new_rounds.num_rows
            if dead_letters:
                counted = [d for d in dead_letters if dead_letters_counted and d.get("compact")]
                rows_each = [d for d in dead_letters if not (dead_letters_counted and d.get("compact"))]
                if counted:
                    counts.dead_letters += self._count_dead_letters(counted)
                if rows_each:
                    counts.dead_letters += self._insert_dead_letters(rows_each, dead_letters_new)
            if table_states:
                states = pa.Table.from_pylist(list(table_states), schema=STATES_SCHEMA)
                con.register("states_batch", states.append_column("n", pa.array(range(len(states)), pa.int64())))
                # Rows go in in the order given (ORDER BY n): state_before takes the latest written
                # among equals by rowid, and the window and the anti-join do not keep the order
                # they read (two states of a table in one batch came out either way round).
                con.execute(
                    """INSERT INTO table_states SELECT b.* EXCLUDE (n) FROM (
                           SELECT * FROM states_batch
                           QUALIFY row_number() OVER (PARTITION BY table_id, first_seq, last_seq, last_event_id
                                                      ORDER BY n) = 1) b
                       ANTI JOIN table_states s USING (table_id, first_seq, last_seq, last_event_id)
                       ORDER BY b.n"""
                )
            if snapshots:
                con.register("snapshots_batch", pa.Table.from_pylist(list(snapshots), schema=SNAPSHOTS_SCHEMA))
                con.execute(
                    # a worker's snapshot counts only the events of its partition up to its
                    # offset; an event with a seq up to its own that arrived after it (a late
                    # arrival, maybe in this very batch) is not in its state: late_through NULL
                    # makes a replay count, and the counts then differ (it is skipped, and said)
                    """INSERT INTO table_snapshots BY NAME
                       SELECT b.*, (SELECT count(*) FROM events e
                                    WHERE e.table_id = b.table_id AND e.seq <= b.last_seq
                                      AND (b.events_offset IS NULL OR e.arrival <= b.events_offset)
                                   ) AS events_through,
                              CASE WHEN b.events_offset IS NOT NULL AND EXISTS (
                                       SELECT 1 FROM events e WHERE e.table_id = b.table_id
                                       AND e.seq <= b.last_seq AND e.arrival > b.events_offset)
                                   THEN NULL
                                   ELSE (SELECT count(*) FROM sum_late_events l
                                         WHERE l.table_id = b.table_id AND l.seq <= b.last_seq) END AS late_through
                       FROM (SELECT * FROM snapshots_batch
                             QUALIFY row_number() OVER (
                                 PARTITION BY table_id, last_seq, last_event_id, engine_version) = 1) b
                       ANTI JOIN table_snapshots s USING (table_id, last_seq, last_event_id, engine_version)"""
                )
            if reviews:
                from projections.models.reviews import REVIEWS_SCHEMA

                con.register("reviews_batch", pa.Table.from_pylist(list(reviews), schema=REVIEWS_SCHEMA))
                counts.reviews = self._count(
                    """INSERT INTO reviews SELECT b.* FROM (
                           SELECT * FROM reviews_batch QUALIFY row_number() OVER (PARTITION BY review_id) = 1) b
                       ANTI JOIN (SELECT review_id FROM reviews
                                  WHERE review_id IN (SELECT review_id FROM reviews_batch)) r
                       USING (review_id)"""
                )
            if access:
                from projections.records import access_log

                access_log.append(con, access)
            if counts.events or counts.rounds:
                summaries.merge_floor(con, added, new_rounds)
            if rows or rounds:
                summaries.merge_findings(
                    con, self.generation, "findings_batch" if rows else None, "rounds_batch" if rounds else None
                )
            if offsets:
                con.register("offsets_batch", pa.Table.from_pylist(list(offsets), schema=OFFSETS_SCHEMA))
                con.execute("INSERT INTO offsets SELECT * FROM offsets_batch")
            con.execute("COMMIT")
            self.check_held()  # a commit into a file removed or replaced is kept nowhere: say so now
            self._private_files()
        except BaseException:
            # an interrupted query may already have ended the transaction: the error in flight
            # is the one to report
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise
        finally:
            for view in (
                "findings_batch", "rounds_batch", "dead_batch", "states_batch", "snapshots_batch", "offsets_batch",
                "reviews_batch",
                "event_rows_batch",
            ):  # fmt: skip
                con.unregister(view)
        return counts

    def write_batch_isolating(self, **parts: Any) -> tuple[BatchCounts, list[tuple[str, Any, str]]]:
        """:meth:`write_batch`, and if the store refuses a row of the batch (a value its column
        cannot hold, a constraint), the batch again without it (issue 19: no poison record).

        On a refusal of the data (:data:`DATA_ERRORS`), each kind of row is written on its own,
        split in halves down to the single row the store refuses (so a batch of n rows with one
        bad row costs about 2 log2 n extra transactions); ``offsets`` go in last, after every
        row they cover. Each write skips rows already stored, so a crash in between loses
        nothing and stores nothing twice. An error that is not about the data (a full disk, a
        lost file) is raised as before.

        Args:
            parts: the keyword arguments of :meth:`write_batch` (``raw_events`` as the first).

        Returns:
            The rows written, and the refused rows as ``(kind, row, error)``: kind is the
            argument's name (``raw_events``, ``event_rows``, ``findings``, ``rounds`` ...), row
            the item given (for ``event_rows`` the row as a dict).

        Raises:
            duckdb.Error, OSError: as :meth:`write_batch`, for errors that are not about one row.
        """
        try:
            return self.write_batch(**parts), []
        except DATA_ERRORS:
            pass
        counts = BatchCounts()
        refused: list[tuple[str, Any, str]] = []
        for kind in ISOLATED_PARTS:
            items = parts.get(kind)
            if items is None or not len(items):
                continue
            self._bisect(kind, items, counts, refused)
        rest = {k: v for k, v in parts.items() if k not in ISOLATED_PARTS and k != "raw_events"}
        counts.add(self.write_batch((), **rest))
        return counts, refused

    def _bisect(self, kind: str, items: Any, counts: BatchCounts, refused: list[tuple[str, Any, str]]) -> None:
        """Write ``items`` (a list, or an Arrow table for ``event_rows``) as ``kind``, leaving
        out the single rows the store refuses (added to ``refused``)."""
        stack = [items]
        while stack:
            part = stack.pop()
            try:
                if kind == "raw_events":
                    counts.add(self.write_batch(part))
                else:
                    counts.add(self.write_batch((), **{kind: part}))
                continue
            except DATA_ERRORS as exc:
                if len(part) > 1:
                    half = len(part) // 2
                    if isinstance(part, pa.Table):
                        stack += [part.slice(half), part.slice(0, half)]
                    else:
                        stack += [part[half:], part[:half]]
                    continue
                row = part.to_pylist()[0] if isinstance(part, pa.Table) else part[0]
                refused.append((kind, row, f"{type(exc).__name__}: {exc}"[:500]))

    @property
    def dead_letter_log(self) -> Path:
        """The store's dead-letter log (:func:`dead_letter_log`)."""
        return dead_letter_log(self.path)

    def _insert_dead_letters(self, dead_letters: Sequence[dict[str, Any]], new_source: bool) -> int:
        """Insert the dead letters not yet stored (same source, position and raw input); the raw
        input of the ``compact`` ones goes to :attr:`dead_letter_log` (appended and synced to
        disk here, inside the caller's transaction: a row is never committed before its raw
        input is on disk; a crash in between leaves a line the next run appends again)."""
        con = self.con
        batch = pa.Table.from_pylist(list(dead_letters), schema=DEAD_SCHEMA)
        con.register("dead_batch", batch.append_column("n", pa.array(range(len(batch)), pa.int64())))
        # a compact row keeps the first 8 hex digits of the md5 (what tells a changed line at the
        # same position apart; the whole one was a third of a compact row's bytes): rows compare on those
        stored = """(SELECT source, position, left(raw_hash, 8) AS raw_key FROM dead_letters
                     WHERE position IN (SELECT position FROM dead_batch))"""
        inserted = con.execute(
            """INSERT INTO dead_letters BY NAME
               SELECT b.* EXCLUDE (n, raw_key) FROM (
                   SELECT source, position, reason, detail,
                          CASE WHEN coalesce(compact, false) THEN '' ELSE raw END AS raw,
                          CASE WHEN coalesce(compact, false) THEN left(md5(raw), 8) ELSE md5(raw) END AS raw_hash,
                          left(md5(raw), 8) AS raw_key, byte_offset, byte_length,
                          TRY_CAST(json_extract_string(j, '$.occurred_at') AS TIMESTAMPTZ) AS occurred_at,
                          json_extract_string(j, '$.table_id') AS table_id,
                          CASE WHEN coalesce(compact, false) THEN $log END AS raw_file,
                          n
                   FROM (SELECT *, TRY_CAST(raw AS JSON) AS j FROM dead_batch)
                   QUALIFY row_number() OVER (PARTITION BY source, position, md5(raw) ORDER BY n) = 1) b"""
            + ("" if new_source else f" ANTI JOIN {stored} d USING (source, position, raw_key)")
            + " RETURNING source, position, raw_hash, raw_file",
            {"log": str(self.dead_letter_log)},
        ).fetchall()
        logged = {(src, pos, h[:8]) for src, pos, h, raw_file in inserted if raw_file is not None}
        if logged:  # in the batch's order, each stored row once
            rows = []
            for r in dead_letters:
                key = (r["source"], r["position"], hashlib.md5(str(r["raw"]).encode()).hexdigest()[:8])
                if r.get("compact") and key in logged:
                    logged.discard(key)
                    rows.append(r)
            self._log_dead_letters(rows)
        return len(inserted)

    def _count_dead_letters(self, dead_letters: Sequence[dict[str, Any]]) -> int:
        """Count the compact dead letters of one batch in ``dead_letter_counts`` and append their
        raw input to :attr:`dead_letter_log` (as :meth:`_insert_dead_letters` does, inside the
        caller's transaction), unless the same batch was counted before: the number counted.

        The batch gains at most :data:`COUNT_GROUPS` rows, or three per reason and kept table, whatever its
        lines state: one per stated (reason, table, time) when there are at most that many;
        else the times to their UTC quarter hour, the table kept when the batch states at most
        :data:`COUNT_TABLES`; else one per reason, kind of time (in the years 2000-2100, out of
        them, none) and kept table. Each row keeps the earliest and latest time its lines state
        and how many tables they state."""
        con = self.con
        batch = pa.Table.from_pylist(list(dead_letters), schema=DEAD_SCHEMA)
        con.register("dead_batch", batch.append_column("n", pa.array(range(len(batch)), pa.int64())))
        inserted = con.execute(
            """INSERT INTO dead_letter_counts BY NAME
               WITH b AS (
                   SELECT source, position, reason, n, left(md5(raw), 8) AS raw_key,
                          TRY_CAST(json_extract_string(j, '$.occurred_at') AS TIMESTAMPTZ) AS occurred_at,
                          json_extract_string(j, '$.table_id') AS table_id
                   FROM (SELECT *, TRY_CAST(raw AS JSON) AS j FROM dead_batch)
                   QUALIFY row_number() OVER (PARTITION BY source, position, md5(raw) ORDER BY n) = 1),
               k AS (SELECT source, md5(string_agg(position || ' ' || raw_key, ',' ORDER BY n)) AS batch_key
                     FROM b GROUP BY source),
               -- the table kept when the batch states few; the time to its UTC quarter hour (the
               -- years 2000 and 2101 begin on one: a quarter is in those years or out of them)
               q AS (SELECT b.*,
                            CASE WHEN (SELECT count(DISTINCT table_id) FROM b) <= $tables
                                 THEN table_id END AS kept_table,
                            to_timestamp(floor(epoch(occurred_at) / 900) * 900) AS quarter,
                            CASE WHEN occurred_at IS NULL THEN 'none'
                                 WHEN occurred_at >= TIMESTAMPTZ '2000-01-01 00:00:00+00'
                                      AND occurred_at < TIMESTAMPTZ '2101-01-01 00:00:00+00' THEN 'dated'
                                 ELSE 'undated' END AS kind
                     FROM b),
               -- the finest grouping that gives at most $groups rows: each stated (reason, table,
               -- time); else quarter hours; else one per reason, kept table and kind of time
               lvl AS (SELECT CASE WHEN (SELECT count(DISTINCT (reason, table_id, occurred_at)) FROM q) <= $groups
                                   THEN 0
                                   WHEN (SELECT count(DISTINCT (reason, kept_table, quarter)) FROM q) <= $groups THEN 1
                                   ELSE 2 END AS level),
               g AS (SELECT q.*,
                            CASE level WHEN 0 THEN table_id ELSE kept_table END AS g_table,
                            CASE level WHEN 0 THEN occurred_at WHEN 1 THEN quarter END AS g_time
                     FROM q, lvl)
               SELECT g.source, k.batch_key, arg_min(g.position, g.n) AS first_position,
                      arg_max(g.position, g.n) AS last_position, g.reason, g.g_table AS table_id,
                      CASE WHEN min(g.occurred_at) = max(g.occurred_at) THEN min(g.occurred_at) END AS occurred_at,
                      min(g.occurred_at) AS first_occurred_at, max(g.occurred_at) AS last_occurred_at,
                      count(DISTINCT g.table_id) AS stated_tables, count(*) AS lines, $log AS raw_file
               FROM g JOIN k USING (source)
               ANTI JOIN (SELECT DISTINCT source, batch_key FROM dead_letter_counts
                          WHERE source IN (SELECT source FROM k)) c USING (source, batch_key)
               GROUP BY g.source, k.batch_key, g.reason, g.g_table, g.g_time, g.kind
               RETURNING source, lines""",
            {"log": str(self.dead_letter_log), "groups": COUNT_GROUPS, "tables": COUNT_TABLES},
        ).fetchall()
        sources = {src for src, _ in inserted}
        if sources:  # each counted line once, in the batch's order
            seen: set[tuple[str, str, str]] = set()
            rows = []
            for r in dead_letters:
                key = (r["source"], r["position"], hashlib.md5(str(r["raw"]).encode()).hexdigest())
                if r["source"] in sources and key not in seen:
                    seen.add(key)
                    rows.append(r)
            self._log_dead_letters(rows)
        return sum(int(n) for _, n in inserted)

    def _log_dead_letters(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append ``rows`` to :attr:`dead_letter_log` (owner-only) and sync it to disk.

        Raises:
            OSError: the log cannot be written (a full disk): the transaction is rolled back.
        """
        text = "".join(json.dumps({k: r.get(k) for k in _LOG_KEYS}, ensure_ascii=False) + "\n" for r in rows)
        fd = os.open(self.dead_letter_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            with contextlib.suppress(OSError):  # a log of another owner is left as it is
                if os.fstat(fd).st_mode & 0o077:
                    os.fchmod(fd, 0o600)
            data = text.encode()
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)

    def _count(self, sql: str, params: dict[str, Any] | None = None) -> int:
        row = self.con.execute(sql, params).fetchone()
        return int(row[0]) if row else 0

    def _insert_events(self, raw_events: Sequence[tuple[int, bytes]]) -> pa.Table:
        if self._stage_dir is None:
            self._stage_dir = tempfile.TemporaryDirectory(prefix="dealtrail-stage-")
        stage = Path(self._stage_dir.name) / "events.jsonl"
        with stage.open("wb") as fh:
            for arrival, raw in raw_events:
                fh.write(stage_line(arrival, raw))
        return self._insert_events_file(stage)

    def _insert_events_file(self, path: Path) -> pa.Table:
        """Insert the staged events of ``path`` not yet stored; returns their
        :data:`projections.store.summaries.INSERTED_EVENT_COLUMNS` (one row per event inserted)."""
        if "'" in str(path):
            raise ValueError(f"staging path must not contain a quote: {path}")
        columns = ", ".join(f"{expr} AS {col}" for col, expr in event_columns_sql("k").items())
        return self.con.sql(
            f"""INSERT INTO events BY NAME
                WITH b0 AS (
                    SELECT {columns},
                           md5(j::VARCHAR) AS payload_hash,
                           j AS payload,
                           arrival
                    -- each staged line is parsed once, and each event once for all its columns
                    FROM (SELECT e AS j, a AS arrival, {event_paths_sql("e")} AS k
                          FROM read_json('{path}', format='newline_delimited', columns={{a: 'BIGINT', e: 'JSON'}}))
                    QUALIFY row_number() OVER (PARTITION BY event_id, payload_hash ORDER BY arrival) = 1
                ),
                -- an event of the batch that is the same fact as one that arrived before it in the
                -- same batch (an unstamped copy of a stamped event) is left out, as it would be
                -- against the stored one in a later batch
                b AS (
                    SELECT x.* FROM b0 x ANTI JOIN b0 y
                    ON x.event_id = y.event_id AND x.payload_hash <> y.payload_hash
                       AND (y.arrival < x.arrival OR (y.arrival = x.arrival AND y.payload_hash < x.payload_hash))
                       AND {same_fact_sql("x", "y")}
                )
                -- Only stored events of the batch's time span can be copies (the payload hash
                -- covers occurred_at): the zone maps skip the rest, and the join's hash table
                -- holds the batch's candidates, not the whole table.
                SELECT b.* FROM b ANTI JOIN (
                    SELECT event_id, payload_hash, payload FROM events
                    WHERE occurred_at BETWEEN (SELECT min(occurred_at) FROM b) AND (SELECT max(occurred_at) FROM b)
                      AND event_id IN (SELECT event_id FROM b)
                ) e ON b.event_id = e.event_id AND (b.payload_hash = e.payload_hash OR {SAME_FACT_SQL})
                ORDER BY {BATCH_ORDER}
                RETURNING {summaries.INSERTED_EVENT_COLUMNS}"""
        ).to_arrow_table()

    def _insert_event_rows(self, rows: pa.Table) -> pa.Table:
        self.con.register("event_rows_batch", rows)
        # No SAME_FACT_SQL here: the audit skips copies itself (streams.seen) and stamps a re-audited
        # file's events as before; comparing would read the stored payloads of the batch's time
        # span on every batch. The rows are distinct already (the builder leaves out in-batch copies), so no window
        # over the batch: only the stored events of the batch's time span can be copies (the
        # payload hash covers occurred_at), which the zone maps find without a full scan.
        return self.con.sql(
            """INSERT INTO events BY NAME
               SELECT b.* FROM event_rows_batch b ANTI JOIN (
                   SELECT event_id, payload_hash FROM events
                   WHERE occurred_at BETWEEN (SELECT min(occurred_at) FROM event_rows_batch)
                                         AND (SELECT max(occurred_at) FROM event_rows_batch)
                     AND event_id IN (SELECT event_id FROM event_rows_batch)
               ) e USING (event_id, payload_hash)
               ORDER BY """
            + BATCH_ORDER
            + " RETURNING "
            + summaries.INSERTED_EVENT_COLUMNS
        ).to_arrow_table()

    def state_before(self, table_id: str, seq: int, window: int) -> tuple[str, str] | None:
        """The stored end-of-file state of ``table_id`` that a file whose first event of the
        table has ``seq`` continues, as JSON texts ``(state, stamps)``; None if no state fits.

        Only states of files that began before ``seq`` are considered: first the one that ends
        just before it (``last_seq`` = seq - 1: the file before, also when this file is audited
        again); else one that ends at most ``window`` events into this file (the file repeats
        the last events of the one before, and the engine recognises exact copies of a table's
        last ``window`` events). A state that ends further into this file, or before seq - 1
        (events in between are not in the store), fits nothing: going on from it would report
        this file's events as contradictory or missing. The latest written wins among equals.
        """
        row = self.con.execute(
            """SELECT state::VARCHAR, stamps::VARCHAR FROM table_states
               WHERE table_id = $t AND first_seq < $s AND last_seq >= $s - 1 AND last_seq - $s < $window
               ORDER BY last_seq = $s - 1 DESC, last_seq DESC, rowid DESC LIMIT 1""",
            {"t": table_id, "s": seq, "window": window},
        ).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    def state_reach(self, table_id: str, seq: int) -> tuple[int, str] | None:
        """How far the stored states of ``table_id`` from files that began before ``seq`` reach:
        ``(last_seq, source)`` of the one that ends last (the latest written among equals), or
        None if there is none. Says why :meth:`state_before` found no state that fits."""
        row = self.con.execute(
            """SELECT last_seq, source FROM table_states WHERE table_id = $t AND first_seq < $s
               ORDER BY last_seq DESC, rowid DESC LIMIT 1""",
            {"t": table_id, "s": seq},
        ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def offsets(self, consumer: str) -> dict[tuple[str, int], int]:
        """The next offset to read per (topic, partition) for ``consumer``, as stored."""
        rows = self.con.execute(
            "SELECT topic, partition, next_offset FROM dim_offsets WHERE consumer = ?", [consumer]
        ).fetchall()
        return {(t, int(p)): int(o) for t, p, o in rows}
