"""Cold months in Parquet: whole months of events (and their snapshots) moved out of the live
store into a folder of Parquet files, and read back transparently by ``replay``, ``verify``,
``reaudit`` and the reports (``report``, the scheduled period reports and the console's).

``dealtrail archive --before MONTH --to DIR`` (:func:`archive`) writes every event whose
``occurred_at`` falls before the first instant of MONTH (UTC months) with DuckDB's
``COPY ... (FORMAT PARQUET, PARTITION_BY (month, table_id))`` into a staging folder of DIR, one
folder per kind (``events``, ``table_snapshots``), month and table. Before anything leaves the
store, each (kind, month, table) part is read back from its files and compared with the store:
its row count, its chain heads (the first and last hash by seq) and a digest of every row's
payload hash (snapshots: of every state's SHA-256) must match. Only then are the files moved
into place, the rows deleted from the store and the archive manifest appended (one row per
file, in one transaction), and the manifest written as ``DIR/manifest.json`` too (append-only:
a later archive adds a run to it). Findings, rounds, reviews and reports stay in the store.

Readers (:func:`attach_archive`) put a temporary view named ``events`` (and, read-only,
``table_snapshots``) in front of the store's table: the store's rows UNION ALL the archived files
its manifest lists, so every query of those commands reads the archived months as if they were
stored, and the chain check runs across the boundary (the first live event of a table links to
the last archived one). A file the manifest lists and the folder lacks is an error, never a
silently shorter trail.

DuckDB does not give the space of deleted rows back to the file system; the archive therefore
writes the remaining store to a new file (``COPY FROM DATABASE``) and replaces the old one
(:func:`compact`), which needs the store to itself: stop the projector while archiving.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from projections.store import summaries
from projections.store.private import make_private_dirs, write_private_text

KINDS: dict[str, tuple[str, str, str, str]] = {
    # kind: (the store's time column, the order within a table, the head column, the digest column)
    "events": ("occurred_at", "seq, arrival", "payload->>'hash'", "payload_hash"),
    "table_snapshots": ("last_occurred_at", "last_seq, last_occurred_at", "last_hash", "state_sha256"),
}
"""The tables whose old months are archived, and how each part is checked."""

MANIFEST_TABLE = "archive_manifest"
"""The store's record of every archived file (append-only)."""

MANIFEST_JSON = "manifest.json"
"""The manifest's copy in the archive folder."""

MANIFEST_DDL = f"""CREATE TABLE IF NOT EXISTS {MANIFEST_TABLE} (
    archived_at TIMESTAMPTZ NOT NULL,  -- the archive run
    before      VARCHAR NOT NULL,      -- the run's --before month (YYYY-MM)
    folder      VARCHAR NOT NULL,      -- the run's --to folder (absolute)
    kind        VARCHAR NOT NULL,      -- events or table_snapshots
    month       VARCHAR NOT NULL,      -- YYYY-MM (UTC)
    table_id    VARCHAR NOT NULL,
    path        VARCHAR NOT NULL,      -- the file, relative to the folder
    rows        BIGINT NOT NULL,
    first_seq   BIGINT,
    last_seq    BIGINT,
    first_hash  VARCHAR,               -- chain heads: the first and last hash by seq
    last_hash   VARCHAR,
    digest      VARCHAR NOT NULL       -- md5 of every row's payload hash (snapshots: state SHA-256), in order
)"""


class ArchiveError(ValueError):
    """The archive cannot run or cannot be read: one sentence, nothing deleted."""


@dataclass
class ArchivePart:
    """One (kind, month, table) part of an archive run, as checked.

    Attributes:
        kind / month / table_id: what it holds.
        rows: rows in its files (equal to the store's).
        first_seq / last_seq / first_hash / last_hash: its chain heads.
        digest: md5 of every row's payload hash in order (equal to the store's).
        files: its files, relative to the archive folder.
    """

    kind: str
    month: str
    table_id: str
    rows: int
    first_seq: int | None
    last_seq: int | None
    first_hash: str | None
    last_hash: str | None
    digest: str
    files: list[str] = field(default_factory=list)


@dataclass
class ArchiveResult:
    """What :func:`archive` moved.

    Attributes:
        months: the months archived (YYYY-MM).
        parts: one per (kind, month, table).
        events / snapshots: rows moved.
        bytes_before / bytes_after: the store file's size before and after (bytes).
        copy_seconds / verify_seconds / delete_seconds / compact_seconds: the steps' times (seconds).
    """

    months: list[str]
    parts: list[ArchivePart]
    events: int
    snapshots: int
    bytes_before: int = 0
    bytes_after: int = 0
    copy_seconds: float = 0.0
    verify_seconds: float = 0.0
    delete_seconds: float = 0.0
    compact_seconds: float = 0.0


_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


def month_start(text: str) -> datetime:
    """The first instant (UTC) of the month ``YYYY-MM``.

    Raises:
        ArchiveError: not a month.
    """
    m = _MONTH.match(text.strip())
    if m is None or not 1 <= int(m.group(2)) <= 12:
        raise ArchiveError(f"--before must be a month YYYY-MM, e.g. 2026-11; got {text!r}")
    return datetime(int(m.group(1)), int(m.group(2)), 1, tzinfo=UTC)


def _quoted(path: Path) -> str:
    if "'" in str(path):
        raise ArchiveError(f"the archive folder must not contain a quote: {path}")
    return str(path)


def _month_sql(column: str) -> str:
    return f"strftime({column}, '%Y-%m')"  # the session is in UTC (projections.store.store.utc_session)


def _parts_sql(kind: str, source: str, where: str) -> str:
    """Per (month, table) of ``source``: rows, first/last seq and hash, and the digest."""
    time_col, order, head, digest = KINDS[kind]
    seq = "seq" if kind == "events" else "last_seq"
    return f"""SELECT {_month_sql(time_col)} AS month, table_id, count(*) AS n,
                      arg_min({seq}, ({order})), arg_max({seq}, ({order})),
                      arg_min({head}, ({order})), arg_max({head}, ({order})),
                      md5(string_agg({digest}, ',' ORDER BY {order}))
               FROM {source} {where} GROUP BY ALL ORDER BY month, table_id"""


def archive(
    con: duckdb.DuckDBPyConnection,
    db: Path,
    before: str,
    folder: Path,
    now: datetime,
) -> ArchiveResult:
    """Move the months before ``before`` of ``events`` and ``table_snapshots`` to Parquet in ``folder``.

    Args:
        con: the store's writer connection (no other process may hold the file).
        db: the store file (its size is measured).
        before: the first month kept (YYYY-MM, UTC); every earlier month is archived.
        folder: the archive folder (made owner-only); an earlier archive's folder is added to.
        now: the time the run is recorded with (UTC).

    Returns:
        What was moved, checked and how long each step took.

    Raises:
        ArchiveError: a bad month, nothing stored before it, the newest month asked for, a
            table whose archived and live events would interleave by seq, a folder that cannot be
            written, or a part whose files do not match the store; nothing is deleted then.
    """
    boundary = month_start(before)
    span = con.execute("SELECT min(occurred_at), max(occurred_at), count(*) FROM events").fetchone()
    if span is None or not span[2]:
        raise ArchiveError(f"{db} holds no event: there is nothing to archive")
    first, last = span[0], span[1]
    if first >= boundary:
        raise ArchiveError(
            f"{db} holds no event before {before} (its events run from {first:%Y-%m} to {last:%Y-%m}): nothing archived"
        )
    if last < boundary:
        raise ArchiveError(
            f"--before {before} would archive every stored month, {last:%Y-%m} included; the newest month stays "
            f"in the store: give --before {last:%Y-%m} or earlier"
        )
    interleaved = con.execute(
        """SELECT table_id FROM events GROUP BY table_id
           HAVING max(seq) FILTER (WHERE occurred_at < $b) >= min(seq) FILTER (WHERE occurred_at >= $b)
           ORDER BY 1 LIMIT 3""",
        {"b": boundary},
    ).fetchall()
    if interleaved:
        raise ArchiveError(
            f"table {interleaved[0][0]} has events before {before} whose seq follows events from {before} on "
            "(out of time order at the boundary): archive a month earlier"
        )
    _writable(folder)
    folder = folder.resolve()
    run = now.strftime("%Y%m%dT%H%M%S%fZ")
    stage = folder / f".staging-{run}"
    result = ArchiveResult([], [], 0, 0, bytes_before=_size(db))
    try:
        make_private_dirs(stage)
        started = time.monotonic()
        for kind, (time_col, order, _, _) in KINDS.items():
            con.execute(
                f"""COPY (SELECT *, {_month_sql(time_col)} AS month FROM {kind} WHERE {time_col} < $b
                          ORDER BY table_id, {order})
                    TO '{_quoted(stage / kind)}'
                    (FORMAT PARQUET, PARTITION_BY (month, table_id), WRITE_PARTITION_COLUMNS true,
                     FILENAME_PATTERN 'part-{run}-{{i}}', COMPRESSION zstd)""",
                {"b": boundary},
            )
        result.copy_seconds = time.monotonic() - started
        started = time.monotonic()
        for kind, (time_col, _, _, _) in KINDS.items():
            result.parts += _check(con, kind, stage, folder, time_col, boundary)
        result.verify_seconds = time.monotonic() - started
        started = time.monotonic()
        _move_into_place(stage, folder, result.parts)
        result.events = sum(p.rows for p in result.parts if p.kind == "events")
        result.snapshots = sum(p.rows for p in result.parts if p.kind == "table_snapshots")
        result.months = sorted({p.month for p in result.parts if p.kind == "events"})
        _delete_and_record(con, result, before, folder, now, boundary)
        result.delete_seconds = time.monotonic() - started
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    _append_json(folder, result, before, now)
    return result


def _size(path: Path) -> int:
    wal = path.with_name(path.name + ".wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _writable(folder: Path) -> None:
    for p in (folder, *folder.parents):
        if p.exists():
            if not p.is_dir():
                raise ArchiveError(f"--to {folder}: {p} is a file, not a folder; nothing archived")
            if not os.access(p, os.W_OK | os.X_OK):
                raise ArchiveError(f"--to {folder}: the folder {p} is not writable; nothing archived")
            return


def _check(
    con: duckdb.DuckDBPyConnection, kind: str, stage: Path, folder: Path, time_col: str, boundary: datetime
) -> list[ArchivePart]:
    """Compare every (month, table) part of ``kind`` written under ``stage`` with the store."""
    files = sorted((stage / kind).rglob("*.parquet"))
    stored = con.execute(_parts_sql(kind, kind, f"WHERE {time_col} < $b"), {"b": boundary}).fetchall()
    if not files:
        if stored:
            raise ArchiveError(f"the archive of {kind} wrote no file; nothing deleted")
        return []
    names = [_quoted(f) for f in files]
    written = con.execute(
        _parts_sql(kind, f"read_parquet({names}, hive_partitioning = false)", ""),
    ).fetchall()
    by_part: dict[tuple[str, str], list[str]] = {}
    for name, m, t in con.execute(
        f"""SELECT filename, any_value(month), any_value(table_id) FROM read_parquet({names}, filename = true,
                hive_partitioning = false) GROUP BY filename ORDER BY filename"""
    ).fetchall():
        by_part.setdefault((str(m), str(t)), []).append(str(Path(name).relative_to(stage)))
    if stored != written:
        bad = next(
            (f"{kind} {s[0]} table {s[1]}" for s, w in zip(stored, written, strict=False) if s != w),
            f"{kind}: {len(stored)} parts stored, {len(written)} written",
        )
        raise ArchiveError(f"the archived files do not match the store ({bad}); nothing deleted")
    return [
        ArchivePart(kind, str(m), str(t), int(n), fs, ls, fh, lh, str(d), by_part.get((str(m), str(t)), []))
        for m, t, n, fs, ls, fh, lh, d in stored
    ]


def _move_into_place(stage: Path, folder: Path, parts: list[ArchivePart]) -> None:
    """Move the checked files from the staging folder to their place in ``folder`` (same names:
    each run's files carry its time, so a later run never overwrites one)."""
    for part in parts:
        for rel in part.files:
            target = folder / rel
            make_private_dirs(target.parent)
            if target.exists():
                raise ArchiveError(f"{target} exists already; nothing deleted")
            os.replace(stage / rel, target)


def _delete_and_record(
    con: duckdb.DuckDBPyConnection,
    result: ArchiveResult,
    before: str,
    folder: Path,
    now: datetime,
    boundary: datetime,
) -> None:
    con.execute(MANIFEST_DDL)
    late_current = summaries.late_record_current(con)
    con.execute("BEGIN TRANSACTION")
    try:
        for kind, (time_col, _, _, _) in KINDS.items():
            con.execute(f"DELETE FROM {kind} WHERE {time_col} < $b", {"b": boundary})
        if late_current:  # the archived events' late events stay recorded: the record still holds them all
            summaries.mark_late_record(con)
        rows = [
            (now, before, str(folder), p.kind, p.month, p.table_id, rel, _file_rows(con, folder / rel),
             p.first_seq, p.last_seq, p.first_hash, p.last_hash, p.digest)
            for p in result.parts
            for rel in p.files
        ]  # fmt: skip
        con.executemany(f"INSERT INTO {MANIFEST_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _file_rows(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    row = con.execute(f"SELECT count(*) FROM read_parquet('{_quoted(path)}')").fetchone()
    return int(row[0]) if row else 0


def _append_json(folder: Path, result: ArchiveResult, before: str, now: datetime) -> None:
    """Add this run to ``folder/manifest.json`` (written to a new file, then replaced)."""
    path = folder / MANIFEST_JSON
    runs: list[Any] = []
    if path.exists():
        try:
            runs = list(json.loads(path.read_text(encoding="utf-8")).get("runs", []))
        except (ValueError, AttributeError):
            runs = []  # an unreadable copy: the store's manifest is the authority
    runs.append(
        {
            "archived_at": now.isoformat(),
            "before": before,
            "months": result.months,
            "events": result.events,
            "snapshots": result.snapshots,
            "parts": [
                {
                    "kind": p.kind,
                    "month": p.month,
                    "table_id": p.table_id,
                    "rows": p.rows,
                    "first_seq": p.first_seq,
                    "last_seq": p.last_seq,
                    "first_hash": p.first_hash,
                    "last_hash": p.last_hash,
                    "digest": p.digest,
                    "files": p.files,
                }
                for p in result.parts
            ],
        }
    )
    tmp = path.with_name(f".{MANIFEST_JSON}.tmp")
    write_private_text(tmp, json.dumps({"runs": runs}, indent=1) + "\n")
    os.replace(tmp, path)


def compact(db: Path) -> float:
    """Give the space of deleted rows back: copy the store to a new file and replace it.

    Args:
        db: the store file, closed (no process may hold it).

    Returns:
        The seconds it took.

    Raises:
        OSError, duckdb.Error: the copy failed; the store is left as it was.
    """
    started = time.monotonic()
    tmp = db.with_name(f".{db.name}.compact.tmp")
    tmp.unlink(missing_ok=True)
    try:
        with duckdb.connect(str(db)) as con:
            name = con.execute("SELECT current_database()").fetchone()
            assert name is not None
            con.execute(f"ATTACH '{_quoted(tmp)}' AS dealtrail_compact")
            con.execute(f'COPY FROM DATABASE "{name[0]}" TO dealtrail_compact')
            con.execute("DETACH dealtrail_compact")
        os.chmod(tmp, 0o600)
        os.replace(tmp, db)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return time.monotonic() - started


def archived_files(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str]]:
    """The store's archived files: ``(kind, folder, path)`` per file; empty without an archive."""
    try:
        rows = con.execute(f"SELECT kind, folder, path FROM {MANIFEST_TABLE} ORDER BY archived_at, path").fetchall()
    except duckdb.CatalogException:
        return []
    return [(str(k), str(f), str(p)) for k, f, p in rows]


def attach_archive(
    con: duckdb.DuckDBPyConnection, folder: Path | None, snapshots: bool = True
) -> tuple[Path, int] | None:
    """Read the store's archived months through ``con``: temporary views ``events`` (and, with
    ``snapshots``, ``table_snapshots``) over the store's rows and the archived files.

    Args:
        con: a connection to the store (read-only, or the re-audit's writer).
        snapshots: also a view over ``table_snapshots`` (False for the re-audit's writer,
            which writes snapshots into the store's table).
        folder: the archive folder (``--archive``, else ``DEALTRAIL_ARCHIVE__DIR``); None: the
            folder the store's manifest names (the latest run's ``--to``).

    Returns:
        ``(folder, files)`` read; None if the store has no archive.

    Raises:
        ArchiveError: a file the manifest lists is missing from the folder.
    """
    files = archived_files(con)
    if not files:
        return None
    base = folder.resolve() if folder is not None else Path(files[-1][1])
    if not base.is_dir():
        raise ArchiveError(
            f"the store's archived months are not readable: no archive folder {base} "
            "(give --archive DIR or set DEALTRAIL_ARCHIVE__DIR)"
        )
    missing = [p for _, _, p in files if not (base / p).is_file()]
    if missing:
        raise ArchiveError(
            f"the archive folder {base} lacks {len(missing)} file(s) its manifest lists, e.g. {missing[0]}: "
            "the archived trail is incomplete"
        )
    name = con.execute("SELECT current_database()").fetchone()
    assert name is not None
    kinds = ["events", *(["table_snapshots"] if snapshots else [])]
    for kind in kinds:
        paths = [_quoted(base / p) for k, _, p in files if k == kind]
        if not paths:
            continue
        cold = f"SELECT * EXCLUDE (month) FROM read_parquet({paths}, hive_partitioning = false, union_by_name = true)"
        if kind == "events":
            con.execute(f"CREATE OR REPLACE TEMP VIEW {ARCHIVED_EVENTS} AS {cold}")
            cold = f"SELECT * FROM {ARCHIVED_EVENTS}"
        con.execute(
            f"""CREATE OR REPLACE TEMP VIEW {kind} AS
                SELECT * FROM "{name[0]}".main.{kind}
                UNION ALL BY NAME
                {cold}"""
        )
    return base, len(files)


ARCHIVED_EVENTS = "archived_events"
"""The temporary view :func:`attach_archive` puts over the archived events alone (the Parquet files)."""


def reads_archive(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``con`` reads the store's archived months already (:func:`attach_archive` ran on it)."""
    rows = con.execute("SELECT count(*) FROM duckdb_views() WHERE temporary AND view_name = 'events'").fetchall()
    return bool(rows[0][0])


@contextmanager
def reading_archive(con: duckdb.DuckDBPyConnection, folder: Path | None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection that reads the store's archived months with its live rows (the reports).

    Without an archive, or on a connection that reads it already, ``con`` itself. Otherwise a
    cursor of ``con`` (its own session: the views never stand in front of the tables of a
    writer's connection, which still inserts into them) in UTC, with :func:`attach_archive`'s
    views on it; closed on exit.

    Args:
        con: any connection to the store (read-only, or the projector's writer).
        folder: the archive folder (resolved ``--archive`` / ``DEALTRAIL_ARCHIVE__DIR``); None:
            the folder the store's manifest names.

    Raises:
        ArchiveError: a file the manifest lists is missing, or the folder is (the figures of an
            archived month would otherwise come out as nothing).
    """
    if not archived_files(con) or reads_archive(con):
        yield con
        return
    cur = con.cursor()
    try:
        cur.execute("SET TimeZone = 'UTC'")
        attach_archive(cur, folder, snapshots=False)
        yield cur
    finally:
        cur.close()


def event_sources(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """SQL names of the store's own ``events`` table (``live_events``: row IDs work on it) and
    of its archived events (``archived_events``: an empty relation without an archive), for the
    report queries that read the live rows by row ID (``rpt_device_faults.sql``)."""
    name = con.execute("SELECT current_database()").fetchall()[0][0]
    live = f'"{name}".main.events'
    cold = ARCHIVED_EVENTS if reads_archive(con) else f"(SELECT * FROM {live} LIMIT 0)"
    return {"live_events": live, "archived_events": cold}
