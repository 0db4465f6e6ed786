"""The command line: audit, re-audit, report and the JSON Schema export."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table

if TYPE_CHECKING:
    from dealtrail.ingest.audit import AuditSummary
    from dealtrail.settings import Settings
    from projections.models.incidents import Counts as IncidentCounts
    from projections.store.replica import ReplicaTimer

from dealtrail.cli.common import (
    _DB,
    _DUCKDB_INTERRUPTED,
    _INTERRUPTED,
    _OUT,
    _TZ,
    _busy,
    _fail,
    _output_file,
    _output_folder,
    _owner_only,
    _period,
    _when,
    _zone,
    app,
    cannot_write,
    command_line,
    console,
    err,
    load,
    open_writer,
    report_grace,
    review_due,
    writing,
)
from dealtrail.cli.copies import (
    ARCHIVE_DEFAULT,
    ARCHIVE_HELP,
    EVERY_HELP,
    REPLICA_DEFAULT,
    REPLICA_HELP,
    announce_path,
    read_archive,
    replica_timer,
)


def _advance(progress: Progress, task: TaskID, n: int, store: object, copies: ReplicaTimer | None) -> None:
    """Advance the audit's progress bar; copy the store to its replica when due (between batches)."""
    from projections.store.store import Store

    progress.advance(task, n)
    if copies is not None and copies.due():
        assert isinstance(store, Store)
        copies.copy(store.con, store.path)


def _summary_table(summary: object) -> Table:
    from dealtrail.ingest.audit import AuditSummary

    assert isinstance(summary, AuditSummary)
    t = Table(title="Findings detected (by game, rule, severity)")
    for col in ("game", "rule", "severity", "findings"):
        t.add_column(col, justify="right" if col == "findings" else "left")
    for (game, rule, sev), n in sorted(summary.detections.items()):
        t.add_row(game, rule, sev, f"{n:,}")
    return t


@app.command()
def audit(
    events: Annotated[Path, typer.Argument(help="Event file (JSON Lines).", exists=True, dir_okay=False)],
    db: Annotated[Path | None, typer.Option(help="DuckDB file to write.", show_default=_DB)] = None,
    dead_letter: Annotated[
        Path | None,
        typer.Option(
            help="Rejected lines go here (JSON Lines), as well as to the store's dead_letters table.",
            show_default="<db name>.rejected.jsonl beside the database",
        ),
    ] = None,
    chain: Annotated[
        bool, typer.Option("--chain/--no-chain", help="Stamp the per-table hash chain on events that carry none.")
    ] = True,
    replica: Annotated[Path | None, typer.Option(help=REPLICA_HELP, show_default=REPLICA_DEFAULT)] = None,
    replica_every: Annotated[
        str | None, typer.Option(help=EVERY_HELP, show_default="$DEALTRAIL_REPLICA__EVERY seconds, else 5m")
    ] = None,
) -> None:
    """Audit an event file: rebuild every round, raise findings, write the DuckDB store.

    Exit 5 when the store cannot be written (a full disk, a read-only or vanished store): one
    line says what it kept and how to resume (the same command again: nothing is stored twice).
    """
    settings = load()
    db = db or settings.db
    dl_path = dead_letter or db.with_name(db.stem + ".rejected.jsonl")
    _output_file(db, "--db")
    _output_file(dl_path, "--dead-letter")
    copies = replica_timer(settings, replica, replica_every, db, wait_first=True)
    resume = command_line(
        "dealtrail", "audit", events, "--db", db, *(("--dead-letter", dead_letter) if dead_letter else ()),
        None if chain else "--no-chain",
    ) + ("" if events.is_file() else " (with the same input)")  # fmt: skip
    with writing(db, resume):
        summary, counted = _audit_into(events, db, dl_path, settings, chain, copies)
    _report_audit(summary, counted, db, dl_path, events)


def _audit_into(
    events: Path, db: Path, dl_path: Path, settings: Settings, chain: bool, copies: ReplicaTimer | None
) -> tuple[AuditSummary, IncidentCounts]:
    """Audit ``events`` into the store ``db`` (its writer closed on return, also on an error)."""
    from dealtrail.ingest.audit import AuditWorkerError, audit_file
    from projections.models import incidents
    from projections.store.private import make_private_dirs
    from projections.store.store import Store
    from schemas.lines import NotEventsError

    try:
        store = Store(db, settings.duckdb_memory_limit)
    except Exception as exc:  # duckdb raises its own IOException when the file is locked
        from projections.store.failures import write_failure

        if write_failure(exc, db) is not None:
            raise  # a read-only store, a full disk: said by writing()
        raise cannot_write(db, exc) from None
    make_private_dirs(dl_path.parent)
    with store, _owner_only(dl_path) as dl, _progress() as progress:
        task = progress.add_task("auditing", total=events.stat().st_size)
        try:
            summary = audit_file(
                events,
                store,
                dl,
                progress=lambda n: _advance(progress, task, n, store, copies),
                chain=chain,
                max_record_bytes=settings.max_record_bytes,
                snapshot_every=settings.snapshot_every,
                limits=settings.plausibility,
                reorder=settings.reorder.limits,
            )
        except NotEventsError as exc:
            raise _fail(str(exc)) from None
        except AuditWorkerError as exc:
            raise _fail(
                f"{exc}\nthe store keeps the batches committed before; audit the file again to complete it "
                "(nothing is stored twice)",
                code=1,
            ) from None
        except KeyboardInterrupt:  # typer would end the run with a bare newline
            raise _fail(_INTERRUPTED, code=130) from None
        except RuntimeError as exc:
            if str(exc) != _DUCKDB_INTERRUPTED:
                raise
            raise _fail(_INTERRUPTED, code=130) from None
        counted = incidents.counts(store.con, review_due(settings), datetime.now(UTC))
        if copies is not None:
            copies.copy(store.con, store.path)  # what this audit stored, at its end
    return summary, counted


def _report_audit(summary: AuditSummary, counted: IncidentCounts, db: Path, dl_path: Path, events: Path) -> None:
    """Print what the audit found and stored."""
    from projections.models import incidents
    from projections.store.store import dead_letter_log
    from streams.engine.catalog import RULEBOOK_REVISION

    console.print(_summary_table(summary))
    by_sev: dict[str, int] = {}
    for (_g, _r, sev), n in summary.detections.items():
        by_sev[sev] = by_sev.get(sev, 0) + n
    console.print(
        f"events: {summary.events:,} accepted of {summary.lines:,} lines, "
        f"{summary.duplicates:,} duplicate deliveries skipped"
        + f", {summary.tables} tables"
        + (f" ({summary.resumed} went on from an earlier audit)" if summary.resumed else "")
        + "; "
        f"finding records raised by this run: {sum(summary.detections.values()):,} "
        f"({', '.join(f'{k} {v:,}' for k, v in sorted(by_sev.items())) or 'none'})"
    )
    console.print(f"rulebook revision {RULEBOOK_REVISION} applied")
    console.print(f"store {db}: {incidents.summary_line(counted)}", soft_wrap=True)
    console.print(
        f"written: {summary.written.events:,} events, {summary.written.findings:,} finding revisions, "
        f"{summary.written.rounds:,} rounds (rows already stored are skipped)"
    )
    rejected = sum(summary.dead_letters.values())
    detail = ", ".join(f"{k} {v}" for k, v in sorted(summary.dead_letters.items()))
    console.print(
        f"dead letters: {rejected:,}"
        + (f" ({detail}) in {dl_path}; the store keeps their raw lines in {dead_letter_log(db)}" if rejected else ""),
        soft_wrap=True,
    )
    if summary.dead_letters.get("does_not_continue"):
        console.print(
            "note: the store holds tables this file does not take up where a stored audit left them; "
            f"each of their dead letters in {dl_path} says how far the store holds the table and what to audit"
        )
    if summary.dead_letters.get("unconfigured_table"):
        console.print(
            "note: a table starts from its TableConfigured event unless the store holds the state an earlier "
            "audit left where this file takes up the table; audit the file before this one into the same --db "
            "first, then this one again"
        )
    if not summary.events:
        what = "holds no line" if not summary.lines else "has no line that could be audited (see the dead letters)"
        raise _fail(f"{events} {what}: nothing was accepted", code=1)


@app.command()
def reaudit(
    db: Annotated[
        Path | None, typer.Option(help="DuckDB file to re-audit (opened for writing).", show_default=_DB)
    ] = None,
    table: Annotated[
        str | None, typer.Option("--table", help="Re-apply one table.", show_default="every table")
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option(
            "--from", help="Re-evaluate findings from this instant (ISO 8601).", show_default="the first event"
        ),
    ] = None,
    to: Annotated[
        str | None, typer.Option("--to", help="... up to this instant, exclusive.", show_default="after the last event")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, max=256, help="Processes applying events.", show_default="one per core")
    ] = None,
    archive: Annotated[Path | None, typer.Option(help=ARCHIVE_HELP, show_default=ARCHIVE_DEFAULT)] = None,
) -> None:
    """Re-apply the stored events with the engine in force: a new generation of findings, and
    per rule what it added and withdrew against the previous one. The events are not altered.

    Exit 5 when the store cannot be written (a full disk, a read-only store): one line says what
    it kept and how to resume."""
    from rich.markup import escape

    from dealtrail.ingest.reaudit import ReauditError
    from dealtrail.ingest.reaudit import reaudit as run

    settings = load()
    db = db or settings.db
    start, end = _period(from_, to)
    resume = command_line(
        "dealtrail", "reaudit", "--db", db, *(("--table", table) if table else ()),
        *(("--from", from_) if from_ else ()), *(("--to", to) if to else ()),
        *(("--archive", archive) if archive else ()),
    )  # fmt: skip
    opened: list[int] = []  # the latest generation when the writer opened

    def generations() -> str:
        from projections.store.failures import latest_generation

        now = latest_generation(db)
        if opened and now is not None and now > opened[0]:
            return f"; generation {now} was stored whole before it failed (a re-run adds one more)"
        return "; no new generation was stored (one is stored whole or not at all)"

    with writing(db, resume, note=generations):
        store = open_writer(db, settings, resume)
        opened.append(store.generation)
        with store:
            read_archive(store.con, archive, settings, snapshots=False)  # it writes snapshots into the store
            try:
                result = run(
                    store,
                    table,
                    start,
                    end,
                    workers,
                    settings.snapshot_every,
                    settings.reorder.limits,
                    settings.plausibility,
                )
            except ReauditError as exc:
                raise _fail(str(exc), code=1) from None
            except KeyboardInterrupt:
                raise _fail("interrupted: no generation was written", code=130) from None
    console.print(
        f"generation {result.generation}: {result.events:,} events of {result.tables} tables re-applied, "
        f"{result.duplicates:,} duplicate deliveries skipped "
        f"(engine {result.engine_version}, rulebook revision {result.rulebook_revision}); "
        f"compared with generation {result.previous}"
        + (
            f" (judged under rulebook revision {', '.join(map(str, result.previous_revisions))})"
            if result.previous_revisions
            else ""
        )
    )
    for eid, why in result.rejected[:20]:
        console.print(f"  refused stored event {escape(eid)}: {escape(why)}")
    if len(result.rejected) > 20:
        console.print(f"  ... {len(result.rejected) - 20:,} more refused stored events")
    title = f"findings by rule, generation {result.generation} against {result.previous}"
    if result.previous_revisions and result.previous_revisions != [result.rulebook_revision]:
        old = ", ".join(map(str, result.previous_revisions))
        title += f": what rulebook revision {result.rulebook_revision} adds and withdraws against revision {old}"
    out = Table(title=title)
    out.add_column("rule", no_wrap=True)  # a rule ID is read whole, never cut to the terminal's width
    for col in ("added", "withdrawn", "changed", "unchanged", "rounds (replay --table T --round R)"):
        out.add_column(col)
    moved = [d for d in result.diff if d.added or d.withdrawn or d.changed]
    for d in moved:
        links = "; ".join(
            f"{kind} {', '.join(rounds)}"
            for kind, rounds in (("+", d.rounds_added), ("-", d.rounds_withdrawn), ("~", d.rounds_changed))
            if rounds
        )
        out.add_row(escape(d.rule_id), str(d.added), str(d.withdrawn), str(d.changed), str(d.unchanged), escape(links))
    if moved:
        console.print(out)
    kept = [d for d in result.diff if d not in moved]
    console.print(
        f"{len(kept)} rules unchanged ({sum(d.unchanged for d in kept):,} finding revisions)"
        + (f": {', '.join(d.rule_id for d in kept)}" if kept and moved else "")
    )
    if result.no_change:
        console.print(
            f"no change: generation {result.generation} holds the same findings as generation {result.previous}"
        )
    else:
        added, withdrawn = sum(d.added for d in result.diff), sum(d.withdrawn for d in result.diff)
        console.print(
            f"changed: {added:,} added, {withdrawn:,} withdrawn, "
            f"{sum(d.changed for d in result.diff):,} changed (reports read generation {result.generation} now; "
            f"report --generation {result.previous} shows the one before)"
        )


def _progress() -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )


@app.command()
def report(
    db: Annotated[Path | None, typer.Option(help="DuckDB file to read (opened read-only).", show_default=_DB)] = None,
    out: Annotated[
        Path | None, typer.Option(help="Folder for report.html, findings.csv, findings.parquet.", show_default=_OUT)
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option("--from", help="Start of the period (ISO 8601, inclusive).", show_default="the first event"),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option("--to", help="End of the period (ISO 8601, exclusive).", show_default="after the last event"),
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option(
            help="Show times in the HTML and findings.csv in this zone (IANA name); Parquet and JSON stay UTC.",
            show_default=_TZ,
        ),
    ] = None,
    generation: Annotated[
        int | None, typer.Option(min=1, help="Generation of findings to report.", show_default="the latest")
    ] = None,
    generated_at: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            "--generated-at",
            help="The report's as-of time (ISO 8601): reviews made later are not counted; the same store and"
            " the same as-of time give the same files.",
            show_default="now",
        ),
    ] = None,
    pdf: Annotated[
        bool,
        typer.Option("--pdf", help="Also print report.pdf with the system Chromium (DEALTRAIL_REPORTS__CHROMIUM)."),
    ] = False,
    archive: Annotated[Path | None, typer.Option(help=ARCHIVE_HELP, show_default=ARCHIVE_DEFAULT)] = None,
) -> None:
    """Write the compliance report (HTML, CSV, Parquet, summary.json) for a period.

    With --to, the report says whether it is final or provisional (see DEALTRAIL_REPORTS__GRACE_MINUTES).
    Archived months (dealtrail archive) are read from their Parquet files with the live rows.
    """
    from projections.reports.report import write_report
    from projections.store.archive import ArchiveError

    settings = load()
    db, out = db or settings.db, out or settings.out
    import duckdb

    zone = _zone(tz, settings)
    _output_folder(out, "--out")
    period = _period(from_, to)
    stamp = _when(generated_at, "--as-of") or datetime.now(UTC)
    announce_path(db)
    try:
        files = write_report(
            db,
            out,
            *period,
            tz=zone,
            generation=generation,
            review_due=review_due(settings),
            property_name=settings.property_name,
            generated_at=stamp,
            console_url=settings.console_url,
            grace=report_grace(settings),
            max_listed=settings.reports.max_listed,
            archive=archive or settings.archive.dir,
            control=settings.control.report_args,
        )
    except (FileNotFoundError, LookupError, ArchiveError) as exc:
        raise _fail(str(exc)) from None
    except duckdb.IOException as exc:
        raise _busy(db, exc) from None
    console.print(f"report: {files.html} ({files.findings:,} findings); data: {files.csv}, {files.parquet}")
    if pdf:
        from dealtrail.reporting.pdf import PdfError, print_pdf

        try:
            console.print(f"printed: {print_pdf(files.html, out / 'report.pdf', settings.reports.chromium)}")
        except PdfError as exc:
            raise _fail(str(exc), code=1) from None


@app.command("export-schemas")
def export_schemas(
    out: Annotated[Path, typer.Option(help="Folder for the JSON Schema files.")] = Path("schemas/json"),
) -> None:
    """Write the JSON Schema of every event, the finding and the table configuration."""
    from schemas.export import write_schemas

    written = write_schemas(out)
    console.print(f"wrote {len(written)} JSON Schema files to {out}")
