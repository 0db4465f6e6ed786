"""The command line: what every command group shares: the Typer app, the consoles, settings,
and the helpers that turn user errors into one line."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from dealtrail.settings import Settings
from dealtrail.settings import load as load_settings

if TYPE_CHECKING:
    from projections.reviews import ReviewDue
    from projections.store import Store


app = typer.Typer(
    name="dealtrail",
    help="Audit trail for casino table-game dealing procedures (58 Pa. Code): simulate, audit, report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


console = Console()


err = Console(stderr=True)


def _show_version(value: bool) -> None:
    if value:
        from dealtrail import __version__

        console.print(f"dealtrail {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Audit trail for casino table-game dealing procedures (58 Pa. Code): simulate, audit, report."""


_DB = f"$DEALTRAIL_DB, else {Settings.model_fields['db'].default}"


_OUT = f"$DEALTRAIL_OUT, else {Settings.model_fields['out'].default}"


_PERIODS = f"$DEALTRAIL_OUT/periods, else {Settings.model_fields['out'].default / 'periods'}"


_BOOTSTRAP = f"$DEALTRAIL_KAFKA_BOOTSTRAP, else {Settings.model_fields['kafka'].default.bootstrap}"
"""What a None option falls back to, shown in --help."""


def _zone(name: str) -> tzinfo:
    """``--tz`` as a zone, or a usage error."""
    from projections.timefmt import zone

    try:
        return zone(name)
    except ValueError as exc:
        raise _fail(str(exc)) from None


def _output_file(path: Path | None, flag: str) -> None:
    """Refuse an output file that is a folder, or whose folder is a file (before any work)."""
    if path is None:
        return
    if path.is_dir():
        raise _fail(f"{flag} {path} is a folder; give a file name")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise _fail(f"{flag} {path}: {parent} is a file, not a folder")
            break


def _output_folder(path: Path, flag: str) -> None:
    """Refuse an output folder that is a file (or lies under one), before any work."""
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise _fail(f"{flag} {path}: {p} is a file, not a folder")
            return


def load() -> Settings:
    """The settings, or a clear error naming each invalid ``DEALTRAIL_*`` variable (never its value)."""
    from pydantic import ValidationError

    try:
        return load_settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"DEALTRAIL_{'__'.join(str(p) for p in e['loc']).upper()}: {e['msg']}" for e in exc.errors()
        )
        raise _fail(f"invalid settings: {problems}") from None


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", soft_wrap=True)  # one line, whatever the width
    return typer.Exit(code)


def open_writer(db: Path, settings: Settings) -> Store:
    """The store ``db`` opened as its one writer (``archive``, ``reaudit``).

    Raises:
        typer.Exit: no store at ``db`` (code 2), or another process holds it (code 1).
    """
    from projections.store import Store

    if not db.exists():
        raise _fail(f"no dealtrail database at {db}")
    try:
        return Store(db, settings.duckdb_memory_limit)
    except Exception as exc:  # duckdb raises its own IOException when the file is locked
        raise _fail(
            f"cannot open {db} for writing (is a projector, an audit or a console (serve) writing it?): {exc}", code=1
        ) from None


def _busy(db: Path | None, exc: Exception) -> typer.Exit:
    """The error for a store that cannot be opened read-only because a writer holds it."""
    return _fail(f"cannot open {db} read-only (is a projector, an audit or a console (serve) writing it?): {exc}")


def _unreachable(settings: Settings, exc: Exception) -> typer.Exit:
    """The error for a cluster that did not answer within ``kafka.connect_timeout`` seconds."""
    return _fail(
        f"cannot reach Kafka at {settings.kafka.bootstrap} within {settings.kafka.connect_timeout:g} s "
        f"({type(exc).__name__}: no broker answered)"
    )


def review_due(settings: Settings) -> ReviewDue:
    """The review due times of the settings."""
    from projections.reviews import ReviewDue

    r = settings.review
    return ReviewDue(r.due_hours_voiding, r.due_hours_integrity, r.due_hours_procedural)


def report_grace(settings: Settings) -> timedelta:
    """The grace time after which a period's report is final (``DEALTRAIL_REPORTS__GRACE_MINUTES``)."""
    return timedelta(minutes=settings.reports.grace_minutes)


def _period(from_: str | None, to: str | None) -> tuple[datetime | None, datetime | None]:
    """``--from`` and ``--to`` as times; an error if the period is empty or inverted."""
    start, end = _when(from_, "--from"), _when(to, "--to")
    if start is not None and end is not None and start >= end:
        raise _fail(f"--from must be before --to (got {from_} to {to})")
    return start, end


def _when(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise _fail(f"{name} must be an ISO 8601 time, e.g. 2026-11-27T18:00:00+00:00; got {value!r}") from None
    if t.tzinfo is None:
        raise _fail(f"{name} needs a time zone (add +00:00 or Z): {value!r}")
    return t


def _owner_only(path: Path) -> IO[str]:
    """Open ``path`` for writing text, readable by its owner only (dead letters hold raw input,
    like the database); a file that was there before is emptied and made owner-only too."""
    from projections.private import open_private

    return open_private(path)


_INTERRUPTED = "interrupted (a store keeps every batch committed before; run the command again to complete it)"


_DUCKDB_INTERRUPTED = "Query interrupted"
"""How DuckDB's Python client reports Ctrl-C inside a query (a plain RuntimeError)."""
