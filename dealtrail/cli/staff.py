"""The command line: the staff roster (``dealtrail staff import``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dealtrail.cli.common import _DB, _fail, app, console, err, load
from dealtrail.settings import Settings

if TYPE_CHECKING:
    from schemas.staff import StaffMemberRecorded

staff_app = typer.Typer(help="The staff roster: dealer and supervisor IDs with their names.", no_args_is_help=True)
app.add_typer(staff_app, name="staff")


@staff_app.command("import")
def staff_import(
    file: Annotated[
        Path, typer.Argument(help="CSV with a header row: staff_id,name,role[,active].", exists=True, dir_okay=False)
    ],
    db: Annotated[Path | None, typer.Option(help="DuckDB file (this process writes it).", show_default=_DB)] = None,
    partial: Annotated[
        bool, typer.Option(help="Store the good rows even when some are bad (the bad ones are listed either way).")
    ] = False,
    publish: Annotated[
        bool,
        typer.Option(help="Streaming deployment: publish the changes to the staff topic (the projector stores them)."),
    ] = False,
) -> None:
    """Load the staff roster from a CSV file (Excel's CSV too: BOM, CRLF, quotes, ';', Windows-1252).

    Each new or changed row is recorded as a roster event; rows equal to the roster in force
    record nothing. A bad row gets one line on stderr; without --partial nothing is stored while
    any row is bad (exit code 1).
    """
    from dealtrail.ingest.roster import RosterFileError, plan_import

    settings = load()
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise _fail(f"cannot read {file}: {exc}") from None
    db = db or settings.db
    with _roster_target(settings, db, publish) as (current, record):
        try:
            plan = plan_import(data, current, f"import:{file.name}", "cli", datetime.now(UTC))
        except RosterFileError as exc:
            raise _fail(f"{file}: {exc}") from None
        for line in plan.errors:
            err.print(f"{file}: {line}", soft_wrap=True, markup=False, highlight=False)
        if plan.errors and not partial:
            raise _fail(
                f"{len(plan.errors)} bad row(s): nothing stored; fix them, or load the good rows with --partial", code=1
            )
        if plan.events:
            record(plan.events)
    counts = ", ".join(f"{n} {k}" for k, n in sorted(plan.counts().items())) or "no change"
    where = "published to the staff topic" if publish else f"stored in {db}"
    console.print(f"staff roster: {counts} ({plan.unchanged} unchanged) {where}", soft_wrap=True, markup=False)
    if plan.errors:
        err.print(f"{len(plan.errors)} bad row(s) not loaded (listed above)", markup=False)
        raise typer.Exit(1)


@contextlib.contextmanager
def _roster_target(
    settings: Settings, db: Path, publish: bool
) -> Iterator[tuple[dict[str, dict[str, Any]], Callable[[list[StaffMemberRecorded]], None]]]:
    """The roster in force and the function that records roster events: the store's (this
    process its writer), or, with ``publish``, the staff topic's (the projector stores them)."""
    if publish:
        from kafka.errors import KafkaError

        from streams.staff_publish import StaffPublisher, StaffPublishError, read_roster

        try:
            current = read_roster(settings.kafka, settings.topics)
        except (KafkaError, StaffPublishError) as exc:
            raise _fail(f"cannot read the staff topic at {settings.kafka.bootstrap}: {exc}", code=1) from None

        def send(events: list[StaffMemberRecorded]) -> None:
            try:
                publisher = StaffPublisher(settings.kafka, settings.topics)
                try:
                    publisher.send(events)
                finally:
                    publisher.close()
            except (KafkaError, StaffPublishError) as exc:
                raise _fail(f"the roster was not published: {exc}", code=1) from None

        yield current, send
        return
    from dealtrail.cli.console import _open_writer
    from projections.records import staff
    from projections.store.store import Store

    store = _open_writer(db, settings)
    assert isinstance(store, Store)

    def append(events: list[StaffMemberRecorded]) -> None:
        staff.append(store.con, events)

    with store:
        yield staff.current(store.con), append
