"""The command line: simulate and demo: a simulated floor, audited into a store with its report."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    pass

from dealtrail.cli.common import _fail, _output_file, _output_folder, _owner_only, app, console, load, review_due
from dealtrail.cli.reports import _progress, _summary_table


@app.command()
def simulate(
    out: Annotated[Path, typer.Option("--out", help="Event file to write (JSON Lines).")],
    tables: Annotated[int, typer.Option(min=1, max=999, help="Tables on the floor.")] = 24,
    hours: Annotated[
        float,
        typer.Option(
            min=0.05,
            max=24 * 14,
            help="Length of the shift (hours). No error is injected in its last 12 minutes, so that every "
            "remedy (or its absence) shows: a shift under about 0.2 hours has none.",
        ),
    ] = 8.0,
    seed: Annotated[int, typer.Option(help="Seed of every random choice.")] = 7,
    error_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of rounds with an injected error.")] = 0.05,
    duplicate_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of events delivered twice.")] = 0.0,
    truth: Annotated[
        Path | None, typer.Option(help="Write the expected findings here (JSON Lines).", show_default="not written")
    ] = None,
    start: Annotated[
        str | None,
        typer.Option(
            help="When the shift starts: ISO 8601 with its offset (2026-10-31T20:00-04:00), or Z for UTC.",
            show_default="2026-11-27T18:00Z",
        ),
    ] = None,
) -> None:
    """Simulate a casino floor: real rounds of the three games, with injected dealing errors."""
    from dealtrail.simulator.run import write_simulation

    began = _start_time(start)
    _output_file(out, "--out")
    _output_file(truth, "--truth")
    window = load().remedy_window  # a table closed owing a remedy stays closed past the engine's window
    n, expected = write_simulation(
        out, tables, hours, seed, error_rate, duplicate_rate, truth, console, window, start=began
    )
    console.print(f"wrote {n:,} events to {out}" + (f" and {expected:,} expected findings to {truth}" if truth else ""))


def _start_time(text: str | None) -> datetime | None:
    """The ``--start`` of ``simulate`` as an aware instant (None: the simulator's own start).

    Raises:
        typer.Exit: (2) not an ISO 8601 time, or one without its offset (which instant it
            names would depend on the machine's zone).
    """
    if text is None:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise _fail(f"--start {text!r} is not an ISO 8601 time (2026-10-31T20:00-04:00)") from None
    if at.tzinfo is None or at.utcoffset() is None:
        raise _fail(f"--start {text!r} has no offset: add one (-04:00) or Z for UTC")
    return at


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Folder for everything the demo writes.")] = Path("out"),
    seed: Annotated[int, typer.Option(help="Seed of the simulated shift.")] = 2026,
) -> None:
    """Simulate a shift (24 tables, 8 of each game, 8 hours), audit it and write the report."""
    from dealtrail.ingest.audit import audit_file
    from dealtrail.simulator.run import write_simulation
    from projections.models import incidents
    from projections.reports.report import write_report
    from projections.store.private import make_private_dirs
    from projections.store.store import Store

    _output_folder(out, "--out")
    make_private_dirs(out)
    events, truth, db = out / "events.jsonl", out / "truth.jsonl", out / "dealtrail.duckdb"
    rejected = out / "rejected.jsonl"
    kept = _set_aside(db, datetime.now(UTC))
    if kept:
        msg = f"kept the previous store (its users, reviews and reports) as {kept}; writing a new {db}"
        console.print(msg, soft_wrap=True, markup=False, highlight=False)  # one line
    settings = load()
    n, expected = write_simulation(events, 24, 8.0, seed, 0.03, 0.001, truth, console, settings.remedy_window)
    console.print(f"simulated {n:,} events at 24 tables over 8 hours ({expected:,} injected errors expected)")
    store = Store(db, settings.duckdb_memory_limit)
    with store, _owner_only(rejected) as dl, _progress() as progress:
        task = progress.add_task("auditing", total=events.stat().st_size)
        summary = audit_file(
            events,
            store,
            dl,
            progress=lambda k: progress.advance(task, k),
            max_record_bytes=settings.max_record_bytes,
            snapshot_every=settings.snapshot_every,
            limits=settings.plausibility,
            reorder=settings.reorder.limits,
        )
        now = datetime.now(UTC)  # one instant for the summary and the report: the same late reviews
        counted = incidents.counts(store.con, review_due(settings), now)
    console.print(_summary_table(summary))
    files = write_report(
        db,
        out,
        property_name=settings.property_name,
        tz=settings.zone,
        generated_at=now,
        console_url=settings.console_url,
        review_due=review_due(settings),
        max_listed=settings.reports.max_listed,
        control=settings.control.report_args,
    )
    console.print(
        f"audited {summary.events:,} events ({summary.lines:,} lines, {summary.duplicates:,} duplicate deliveries "
        f"skipped): {incidents.summary_line(counted)}",
        soft_wrap=True,
    )
    console.print(f"events:    {events}\ntruth:     {truth}\ndatabase:  {db}\nreport:    {files.html}")
    console.print(f"findings:  {files.csv}, {files.parquet}\nrejected:  {rejected}")


def _set_aside(db: Path, at: datetime) -> Path | None:
    """Move the store at ``db`` (and its write-ahead log) aside as ``<name>.<UTC time><suffix>``
    beside it, owner-only, so that a command that starts a store afresh (``demo``) never deletes
    one that holds events, users, reviews or reports.

    Args:
        db: the store's path.
        at: the time stamped into the new name (timezone-aware; shown in UTC, to the second).

    Returns:
        The path it now has, or None if there was no store at ``db``.

    Raises:
        typer.Exit: another process (a console, a projector) holds the store open for writing:
            moving it would leave that process writing a file nobody opens.
    """
    import duckdb

    from projections.store.private import make_private

    wal = db.with_name(db.name + ".wal")
    if not db.exists() and not wal.exists():
        return None
    if db.is_file():
        try:
            duckdb.connect(str(db), read_only=True).close()
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise _fail(
                    f"{db} is open in another process (dealtrail serve or project?): stop it first", code=1
                ) from None
        except duckdb.Error:
            pass  # not a DuckDB file: it is still kept, never deleted
    stamp = at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    n = 0
    while True:
        target = db.with_name(f"{db.stem}.{stamp}{f'-{n}' if n else ''}{db.suffix}")
        target_wal = target.with_name(target.name + ".wal")
        if not target.exists() and not target_wal.exists():
            break
        n += 1
    for src, dst in ((db, target), (wal, target_wal)):
        if src.exists():
            src.rename(dst)
            make_private(dst)
    return target
