"""The command line: the store's other copies: the read replica (``--replica`` of ``project``
and ``audit``), the cold months in Parquet (``archive``, and ``--archive`` of ``replay``,
``verify`` and ``reaudit``), and the line every reading command prints about the copy it reads."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dealtrail.cli.common import _DB, _fail, app, command_line, console, err, load, open_writer, writing

if TYPE_CHECKING:
    import duckdb

    from dealtrail.settings import Settings
    from projections.store.replica import ReplicaTimer
    from projections.store.store import Store


REPLICA_HELP = "Keep a read-only copy of the store here, replaced atomically (report, verify, replay read it)."
EVERY_HELP = "Copy the store to --replica this often: 30s, 5m, 1h."
ARCHIVE_HELP = "The folder of the store's archived months (dealtrail archive --to)."
ARCHIVE_DEFAULT = "$DEALTRAIL_ARCHIVE__DIR, else the folder the store's manifest names"
REPLICA_DEFAULT = "$DEALTRAIL_REPLICA__PATH, else none"


def replica_timer(
    settings: Settings, replica: Path | None, every: str | None, db: Path, wait_first: bool = False
) -> ReplicaTimer | None:
    """The replica the command keeps (``--replica``, else ``DEALTRAIL_REPLICA__PATH``), copied every
    ``--replica-every`` (else ``DEALTRAIL_REPLICA__EVERY`` seconds); None without one. Bad
    values end the command with one line before any work."""
    from projections.store.replica import ReplicaTimer, check_replica_path, parse_every

    path = replica or settings.replica.path
    if path is None:
        if every is not None:
            raise _fail("--replica-every needs --replica (or DEALTRAIL_REPLICA__PATH)")
        return None
    try:
        seconds = parse_every(every) if every is not None else settings.replica.every
        check_replica_path(path, db)
    except ValueError as exc:
        raise _fail(str(exc)) from None

    def say(line: str) -> None:
        err.print(line, soft_wrap=True, markup=False, highlight=False)

    return ReplicaTimer(path, seconds, say, wait_first=wait_first)


def announce(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Say on stderr which copy a reading command reads (the store, or a replica and its age)."""
    from projections.store.replica import describe_copy, replica_info

    err.print(describe_copy(path, replica_info(con), datetime.now(UTC)), soft_wrap=True, markup=False, highlight=False)


def announce_path(path: Path) -> None:
    """:func:`announce` for a command that opens the store itself later (nothing is said if the
    file cannot be opened: the command's own error follows)."""
    import duckdb

    from projections.store.store import connect_read_only

    try:
        con = connect_read_only(path)
    except (OSError, duckdb.Error):
        return
    try:
        announce(con, path)
    finally:
        con.close()


def read_archive(
    con: duckdb.DuckDBPyConnection, folder: Path | None, settings: Settings, snapshots: bool = True
) -> None:
    """Read the store's archived months on ``con`` (:func:`projections.store.archive.attach_archive`)
    from ``--archive``, else ``DEALTRAIL_ARCHIVE__DIR``, else the folder its manifest names; says
    which on stderr. An archive folder that lacks a file ends the command with one line."""
    from projections.store.archive import ArchiveError, attach_archive

    try:
        read = attach_archive(con, folder or settings.archive.dir, snapshots)
    except ArchiveError as exc:
        raise _fail(str(exc)) from None  # the caller closes the connection
    if read is not None:
        err.print(
            f"reading archived months from {read[0]} ({read[1]} files)", soft_wrap=True, markup=False, highlight=False
        )


def _close_after_failure(store: Store) -> None:
    """Close a writer whose write failed (its checkpoint may fail too: what it committed is in the log)."""
    store.__exit__(RuntimeError, None, None)


@app.command("archive")
def archive_cmd(
    before: Annotated[str, typer.Option("--before", help="Archive every month before this one (YYYY-MM, UTC).")],
    to: Annotated[Path, typer.Option("--to", help="The archive folder (Parquet by month and table; added to).")],
    db: Annotated[
        Path | None,
        typer.Option(help="DuckDB store (opened for writing: stop the projector first).", show_default=_DB),
    ] = None,
    compact: Annotated[
        bool,
        typer.Option("--compact/--no-compact", help="Copy the store to a new file afterwards, to give the space back."),
    ] = True,
) -> None:
    """Move whole months of events (and their snapshots) to Parquet files, checked before they
    leave the store; replay, verify, reaudit and the reports read them back from the folder.

    Exit 5 when the store cannot be written (a full disk, a read-only store): one line says what
    it kept and how to resume."""
    import duckdb

    from projections.store.archive import ArchiveError, archive, month_start
    from projections.store.archive import compact as compact_store
    from projections.store.failures import write_failure

    settings = load()
    db = db or settings.db
    try:
        month_start(before)
    except ArchiveError as exc:
        raise _fail(str(exc)) from None
    resume = command_line(
        "dealtrail", "archive", "--db", db, "--before", before, "--to", to, None if compact else "--no-compact"
    )
    # the store's own writes (the deletion with its manifest rows, one transaction; the checkpoint)
    with writing(
        db, resume, note=f"; the months are still in the store (files already in {to} are not in its manifest)"
    ):
        store = open_writer(db, settings, resume)
        try:
            result = archive(store.con, db, before, to, datetime.now(UTC))
        except ArchiveError as exc:
            store.close()
            raise _fail(str(exc)) from None
        except (OSError, duckdb.Error) as exc:
            _close_after_failure(store)
            if write_failure(exc, db) is not None:
                raise
            raise _fail(f"archive to {to} failed, nothing deleted: {type(exc).__name__}: {exc}", code=1) from None
        store.close()
    if compact:
        try:
            result.compact_seconds = compact_store(db)
        except (OSError, duckdb.Error) as exc:
            err.print(
                f"archived, but the store was not compacted ({type(exc).__name__}: {exc}); it is whole, and "
                "DuckDB reuses the freed space for new rows",
                soft_wrap=True,
                markup=False,
            )
    result.bytes_after = db.stat().st_size
    console.print(
        f"archived {', '.join(result.months)}: {result.events:,} events and {result.snapshots:,} snapshots of "
        f"{len({p.table_id for p in result.parts})} tables to {to.resolve()} "
        f"({sum(len(p.files) for p in result.parts)} files, each checked: rows, chain heads, digest)"
    )
    console.print(
        f"store {db}: {result.bytes_before / 1e6:.1f} MB -> {result.bytes_after / 1e6:.1f} MB"
        + ("" if compact else " (--no-compact: the space is reused by later rows, the file does not shrink)")
    )
    console.print(
        f"archive s: copy {result.copy_seconds:.2f}, verify {result.verify_seconds:.2f}, "
        f"delete {result.delete_seconds:.2f}, compact {result.compact_seconds:.2f}"
    )
