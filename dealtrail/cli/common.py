"""The command line: what every command group shares: the Typer app, the consoles, settings,
and the helpers that turn user errors into one line."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from dealtrail.settings import Settings
from dealtrail.settings import load as load_settings

if TYPE_CHECKING:
    import duckdb
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from projections.models.reviews import ReviewDue
    from projections.store.store import Store
    from streams.metrics import MetricsServer


EXIT_CODES = (
    "Exit codes: 0 done; 1 failed (e.g. a busy store); 2 usage or input error; 3 replay differs from the "
    "stored findings; 4 verification failed; 5 a write of the store failed (a full disk, a read-only or "
    "vanished store, a lost lock: one line says what it kept and the command that resumes); 130 interrupted."
)
"""The exit codes, as the help of the command line lists them (docs/getting-started.md#exit-codes)."""


app = typer.Typer(
    name="dealtrail",
    help="Audit trail for casino table-game dealing procedures (58 Pa. Code): simulate, audit, report.\n\n"
    + EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class PipeConsole(Console):
    """A rich :class:`~rich.console.Console` that word-wraps at the terminal's width on a terminal
    and never wraps when its output goes to a file or a pipe: a chain head's hash or a summary
    line stays on one line for ``grep``, ``cut`` and log collectors (rich otherwise wraps a pipe
    at 80 columns). Tables still fit the width (``COLUMNS``, else 80)."""

    @property
    def soft_wrap(self) -> bool:
        """True (print lines whole) unless the output is a terminal."""
        return not self.is_terminal

    @soft_wrap.setter
    def soft_wrap(self, value: bool) -> None:
        """Ignored: the output decides (see the class)."""


console = PipeConsole()


err = PipeConsole(stderr=True)


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


_TZ = "$DEALTRAIL_TIMEZONE, else UTC"
"""What ``--tz`` falls back to, shown in --help."""


def _zone_name(flag: str | None, settings: Settings) -> str:
    """The zone a command works in: ``--tz`` when given, else the casino's ``DEALTRAIL_TIMEZONE``
    (``settings.timezone``, default UTC): the one path every command's zone takes. A usage error
    for an unknown name."""
    from projections.display.timefmt import zone

    name = flag or settings.timezone
    try:
        zone(name)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    return name


def _zone(flag: str | None, settings: Settings) -> tzinfo:
    """:func:`_zone_name` as a ``tzinfo`` (``datetime.UTC`` or a ``ZoneInfo``)."""
    from projections.display.timefmt import zone

    return zone(_zone_name(flag, settings))


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


STORE_WRITE_FAILED = 5
"""The exit code of a command whose write of the store failed (a full disk, a read-only or
vanished store, a lost lock): one line says what the store kept and the command that resumes."""


@contextmanager
def writing(db: Path, resume: str, note: str | Callable[[], str] = "") -> Iterator[None]:
    """Turn a failed write of the store ``db`` inside the block into one line and exit code
    :data:`STORE_WRITE_FAILED`: the store, why, what it kept (per table its last stored event,
    read back once the writer is closed: put the block around the writer's ``with``) and
    ``resume``, the command that completes it. Any other error passes through.

    Args:
        db: the store file.
        resume: the command line that resumes (the same run again: every write skips rows
            already stored).
        note: a few words on what this command leaves unwritten (e.g. no generation), or "";
            a function is called for them once the writer is closed (it may read the store).
    """
    import duckdb

    from projections.store.failures import kept, write_failure

    try:
        yield
    except (OSError, duckdb.Error) as exc:
        cause = write_failure(exc, db)
        if cause is None:
            raise
        said = note() if callable(note) else note
        raise _fail(
            f"could not write the store {db} ({cause}): {kept(db)}{said}; to resume, run: {resume}",
            code=STORE_WRITE_FAILED,
        ) from None


def command_line(*parts: object) -> str:
    """``parts`` as one shell command line (``None`` and ``False`` parts left out, paths quoted)."""
    import shlex

    return shlex.join(str(p) for p in parts if p is not None and p is not False)


def _fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on one line to standard error; the exit to raise, with ``code``."""
    err.print(f"[bold red]error:[/] {' '.join(message.split())}", soft_wrap=True)  # one line, whatever the width
    return typer.Exit(code)


def store_failure(exc: BaseException) -> int:
    """Print one ``error:`` line for a store error no command turned into one (the last net of
    :func:`dealtrail.cli.main`, so that no DuckDB error reaches the user as a traceback); returns
    the exit code: 1 for a store another process holds (a busy store), else 2."""
    busy = is_locked(exc)
    said = f"the store is held by another process (is a projector, an audit or a console (serve) writing it?): {exc}"
    _fail(said if busy else f"the store cannot be used: {exc}")
    return 1 if busy else 2


def open_writer(db: Path, settings: Settings, resume: str) -> Store:
    """The store ``db`` opened as its one writer (``archive``, ``reaudit``).

    Args:
        db: the store file.
        settings: the settings (DuckDB's memory limit).
        resume: the command line that runs the command again (said when the store cannot be
            written: :func:`writing`).

    Raises:
        typer.Exit: no store at ``db`` (code 2), another process holds it (code 1), or it cannot
            be written (read-only, a full disk: :data:`STORE_WRITE_FAILED`).
    """
    from projections.store.store import Store

    if not db.exists():
        raise _fail(f"no dealtrail database at {db}")
    try:
        with writing(db, resume):
            return Store(db, settings.duckdb_memory_limit)
    except typer.Exit:
        raise
    except Exception as exc:  # duckdb raises its own IOException when the file is locked
        raise _fail(
            f"cannot open {db} for writing (is a projector, an audit or a console (serve) writing it?): {exc}", code=1
        ) from None


def _busy(db: Path | None, exc: Exception) -> typer.Exit:
    """The error for a store that cannot be opened read-only: exit code 1 when a writer holds its
    lock (a busy store, as every command says it), else 2 (a file that is not a DuckDB database,
    a folder: an input error)."""
    if not is_locked(exc):
        return _fail(f"cannot open {db} read-only: {exc}")
    return _fail(
        f"cannot open {db} read-only (is a projector, an audit or a console (serve) writing it?): {exc}", code=1
    )


def is_locked(exc: BaseException) -> bool:
    """True if DuckDB refused to open a file because another process holds its lock ("Could not
    set lock on file ...", or one this process holds with another configuration): a busy store, as
    opposed to a file that is not a database."""
    text = str(exc).lower()
    # the same file already open in this process with another configuration (a library caller,
    # or a test, holding its writer): held too, and said so
    return "lock" in text or "same database file with a different configuration" in text


def cannot_write(db: Path, exc: BaseException) -> typer.Exit:
    """The error for a store that cannot be opened for writing: exit code 1 when another process
    holds it (a busy store), else 2 (not a DuckDB database, a folder: an input error)."""
    if is_locked(exc):
        return _fail(
            f"cannot open {db} for writing (is a projector, an audit or a console (serve) writing it?): {exc}", code=1
        )
    return _fail(f"cannot open {db} for writing: {exc}")


def _read_store(db: Path, code: int = 2) -> duckdb.DuckDBPyConnection:
    """The store ``db`` opened read-only; a missing file or one that is no readable dealtrail
    store (another application's, a damaged or unknown DuckDB version: exit ``code``, 2 unless the
    command documents another) or one a writer holds (exit code 1, a busy store) ends the command
    with one ``error:`` line."""
    import duckdb

    from projections.store.store import connect_read_only

    try:
        return connect_read_only(db)
    except FileNotFoundError as exc:
        raise _fail(str(exc), code=code) from None
    except duckdb.Error as exc:
        if is_locked(exc):
            raise _busy(db, exc) from None
        raise _fail(f"cannot open {db} read-only: {exc}", code=code) from None


def _unreachable(settings: Settings, exc: Exception) -> typer.Exit:
    """The error for a cluster that did not answer within ``kafka.connect_timeout`` seconds."""
    return _fail(
        f"cannot reach Kafka at {settings.kafka.bootstrap} within {settings.kafka.connect_timeout:g} s "
        f"({type(exc).__name__}: no broker answered)"
    )


def review_due(settings: Settings) -> ReviewDue:
    """The review due times of the settings."""
    from projections.models.reviews import ReviewDue

    r = settings.review
    return ReviewDue(r.due_hours_voiding, r.due_hours_integrity, r.due_hours_procedural)


def report_grace(settings: Settings) -> timedelta:
    """The grace time after which a period's report is final (``DEALTRAIL_REPORTS__GRACE_MINUTES``)."""
    return timedelta(minutes=settings.reports.grace_minutes)


def report_signer(settings: Settings) -> Ed25519PrivateKey | None:
    """The property's key that signs each period report revision (``DEALTRAIL_SIGNING__KEY_FILE``);
    None when unset (the revisions are written unsigned and say so). A key file that cannot be used
    (missing, readable by others, no Ed25519 key) is one ``error:`` line and exit 2."""
    from projections.records.signing import SigningError, load_key

    if settings.signing.key_file is None:
        return None
    try:
        return load_key(settings.signing.key_file)
    except SigningError as exc:
        raise _fail(f"signing the report revisions: {exc}") from None


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
    from projections.store.private import open_private

    return open_private(path)


_INTERRUPTED = "interrupted (a store keeps every batch committed before; run the command again to complete it)"


_DUCKDB_INTERRUPTED = "Query interrupted"
"""How DuckDB's Python client reports Ctrl-C inside a query (a plain RuntimeError)."""


def serve_metrics(settings: Settings, db: Path | None = None, groups: tuple[str, ...] = ()) -> MetricsServer | None:
    """Serve this process's Prometheus metrics on ``metrics.host:metrics.port`` when the port is
    set (one line says where); None otherwise. Stop it with ``.stop()``.

    Args:
        settings: the settings (``metrics``, ``kafka``).
        db: the store this process writes: its size and free disk are reported.
        groups: consumer groups whose lag per partition is read from the broker at each scrape.

    Raises:
        typer.Exit: the port cannot be listened on (exit 1, one line).
    """
    if settings.metrics.port is None:
        return None
    from prometheus_client.registry import Collector

    from streams.metrics import LagCollector, MetricsServer, StoreCollector

    collectors: list[Collector] = []
    if db is not None:
        collectors.append(StoreCollector(db))
    if groups:
        collectors.append(LagCollector(settings.kafka, [(g, ()) for g in groups]))
    host, port = settings.metrics.host, settings.metrics.port
    try:
        server = MetricsServer(host, port, collectors)
    except OSError as exc:
        raise _fail(
            f"cannot serve the metrics on {host}:{port} (DEALTRAIL_METRICS__PORT in use?): {exc}", code=1
        ) from None
    err.print(f"metrics: http://{host}:{server.port}/metrics", soft_wrap=True, markup=False, highlight=False)
    return server
