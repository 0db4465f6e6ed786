"""The command line: scheduled period reports."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    pass

from dealtrail.cli.common import (
    _DB,
    _PERIODS,
    _TZ,
    _busy,
    _fail,
    _output_folder,
    _when,
    _zone_name,
    app,
    console,
    err,
    load,
    report_grace,
    report_signer,
    review_due,
)
from dealtrail.cli.copies import ARCHIVE_DEFAULT, ARCHIVE_HELP, announce_path


@app.command()
def schedule(
    every: Annotated[str, typer.Option(help="shift (06:00, 14:00, 22:00), day, or a cron expression.")],
    db: Annotated[Path | None, typer.Option(help="DuckDB store (opened read-only).", show_default=_DB)] = None,
    out: Annotated[
        Path | None, typer.Option(help="Folder for one sub-folder per period.", show_default=_PERIODS)
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option(help="Time zone of the periods (IANA name); the pages show times in it too.", show_default=_TZ),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Write the closed periods and exit.")] = False,
    now: Annotated[
        str | None,
        typer.Option(help="Pretend the time is this (ISO 8601), e.g. to backfill.", show_default="the clock"),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Write a new revision of every closed period, stale or not.")
    ] = False,
    poll: Annotated[float, typer.Option(min=1, help="Seconds between checks for a closed period.")] = 60.0,
    archive: Annotated[Path | None, typer.Option(help=ARCHIVE_HELP, show_default=ARCHIVE_DEFAULT)] = None,
) -> None:
    """Write the compliance report of each closed period as it closes, and a new revision of each stale one.

    Each period's folder holds one folder per revision (rev-0001, ...: report.html, CSV, Parquet,
    summary.json) and a manifest.json; older revisions stay, marked superseded. A report is as of
    the clock (or --now): reviews made later are not counted. Archived months (dealtrail archive)
    are read from their Parquet files with the live rows.
    """
    import duckdb

    from dealtrail.reporting.schedule import Schedule, ScheduleError, run_due, run_forever
    from projections.store.archive import ArchiveError

    settings = load()
    db, out = db or settings.db, out or settings.out / "periods"
    try:
        spec = Schedule(every, _zone_name(tz, settings))
    except ScheduleError as exc:
        raise _fail(str(exc)) from None
    if not db.exists():
        raise _fail(f"no dealtrail database at {db}")
    _output_folder(out, "--out")
    announce_path(db)
    fixed = _when(now, "--now")
    # what every report is written with, once or in the loop (the resolved settings)
    options: dict[str, Any] = {
        "property_name": settings.property_name,
        "review_due": review_due(settings),
        "console_url": settings.console_url,
        "grace": report_grace(settings),
        "max_listed": settings.reports.max_listed,
        "archive": archive or settings.archive.dir,
        "signer": report_signer(settings),  # each revision's manifest signed (unsigned: it says so)
        "control": settings.control.report_args,
    }
    try:
        if once or fixed is not None:
            written = run_due(
                db,
                out,
                spec,
                fixed or datetime.now(UTC),
                force=force,
                **options,
            )
            console.print(
                f"wrote {len(written)} period report revisions to {out}"
                + "".join(f"\n  {p.parent.name}/{p.name}" for p in written)
            )
            return
        console.print(f"writing a report for each closed {every} period into {out} (Ctrl-C to stop)")

        def announce(paths: list[Path]) -> None:
            for p in paths:
                console.print(f"wrote {p}")

        def busy(message: str) -> None:
            err.print(f"[yellow]{message}[/]")

        run_forever(
            db,
            out,
            spec,
            poll_seconds=poll,
            on_written=announce,
            on_busy=busy,
            **options,
        )
    except (FileNotFoundError, ArchiveError) as exc:
        raise _fail(str(exc)) from None
    except duckdb.IOException as exc:
        raise _busy(db, exc) from None
