"""The ``dealtrail`` command line (typer). Each command is a few lines over one function."""

from __future__ import annotations

import os
import sys
import threading
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, NamedTuple, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from dealtrail.settings import Settings
from dealtrail.settings import load as load_settings

if TYPE_CHECKING:
    from collections.abc import Callable

    from dealtrail.verify import ChainReport
    from projections.reviews import ReviewDue
    from projections.store import BatchCounts
    from streams.publish import PublishSummary

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


def _busy(db: Path | None, exc: Exception) -> typer.Exit:
    """The error for a store that cannot be opened read-only because a writer holds it."""
    return _fail(f"cannot open {db} read-only (is a projector or audit writing it?): {exc}")


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
) -> None:
    """Simulate a casino floor: real rounds of the three games, with injected dealing errors."""
    from dealtrail.simulator.run import write_simulation

    _output_file(out, "--out")
    _output_file(truth, "--truth")
    n, expected = write_simulation(out, tables, hours, seed, error_rate, duplicate_rate, truth, console)
    console.print(f"wrote {n:,} events to {out}" + (f" and {expected:,} expected findings to {truth}" if truth else ""))


def _summary_table(summary: object) -> Table:
    from dealtrail.audit import AuditSummary

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
) -> None:
    """Audit an event file: rebuild every round, raise findings, write the DuckDB store."""
    from dealtrail.audit import AuditWorkerError, audit_file
    from projections import incidents
    from projections.private import make_private_dirs
    from projections.store import Store
    from schemas.lines import NotEventsError
    from streams.engine.catalog import RULEBOOK_REVISION

    settings = load()
    db = db or settings.db
    dl_path = dead_letter or db.with_name(db.stem + ".rejected.jsonl")
    _output_file(db, "--db")
    _output_file(dl_path, "--dead-letter")
    try:
        store = Store(db, settings.duckdb_memory_limit)
    except Exception as exc:  # duckdb raises its own IOException when the file is locked
        raise _fail(f"cannot open {db} for writing: {exc}") from None
    make_private_dirs(dl_path.parent)
    with store, _owner_only(dl_path) as dl, _progress() as progress:
        task = progress.add_task("auditing", total=events.stat().st_size)
        try:
            summary = audit_file(
                events,
                store,
                dl,
                progress=lambda n: progress.advance(task, n),
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
    console.print(_summary_table(summary))
    by_sev: dict[str, int] = {}
    for (_g, _r, sev), n in summary.detections.items():
        by_sev[sev] = by_sev.get(sev, 0) + n
    console.print(
        f"events: {summary.events:,} accepted of {summary.lines:,} lines"
        + (f" ({summary.duplicates:,} exact duplicates ignored)" if summary.duplicates else "")
        + f", {summary.tables} tables"
        + (f" ({summary.resumed} went on from an earlier audit)" if summary.resumed else "")
        + "; "
        f"finding records raised by this run: {sum(summary.detections.values()):,} "
        f"({', '.join(f'{k} {v:,}' for k, v in sorted(by_sev.items())) or 'none'})"
    )
    console.print(f"rulebook revision {RULEBOOK_REVISION} applied")
    console.print(f"store {db}: {incidents.summary_line(counted)}")
    console.print(
        f"written: {summary.written.events:,} events, {summary.written.findings:,} finding revisions, "
        f"{summary.written.rounds:,} rounds (rows already stored are skipped)"
    )
    rejected = sum(summary.dead_letters.values())
    detail = ", ".join(f"{k} {v}" for k, v in sorted(summary.dead_letters.items()))
    console.print(f"dead letters: {rejected:,}" + (f" ({detail}) in {dl_path}" if rejected else ""))
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
) -> None:
    """Re-apply the stored events with the engine in force: a new generation of findings, and
    per rule what it added and withdrew against the previous one. The events are not altered."""
    from rich.markup import escape

    from dealtrail.reaudit import ReauditError
    from dealtrail.reaudit import reaudit as run
    from projections.store import Store

    settings = load()
    db = db or settings.db
    start, end = _period(from_, to)
    if not db.exists():
        raise _fail(f"no dealtrail database at {db}")
    try:
        store = Store(db, settings.duckdb_memory_limit)
    except Exception as exc:  # duckdb raises its own IOException when the file is locked
        raise _fail(f"cannot open {db} for writing (is a projector or audit writing it?): {exc}", code=1) from None
    with store:
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
        f"generation {result.generation}: {result.events:,} events of {result.tables} tables re-applied "
        f"(engine {result.engine_version}, rulebook revision {result.rulebook_revision}); "
        f"compared with generation {result.previous}"
    )
    for eid, why in result.rejected[:20]:
        console.print(f"  refused stored event {escape(eid)}: {escape(why)}")
    if len(result.rejected) > 20:
        console.print(f"  ... {len(result.rejected) - 20:,} more refused stored events")
    out = Table(title=f"findings by rule, generation {result.generation} against {result.previous}")
    for col in ("rule", "added", "withdrawn", "changed", "unchanged", "rounds (replay --table T --round R)"):
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


def _owner_only(path: Path) -> IO[str]:
    """Open ``path`` for writing text, readable by its owner only (dead letters hold raw input,
    like the database); a file that was there before is emptied and made owner-only too."""
    from projections.private import open_private

    return open_private(path)


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
        str, typer.Option(help="Show times in the HTML in this zone (IANA name); CSV, Parquet and JSON stay UTC.")
    ] = "UTC",
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
) -> None:
    """Write the compliance report (HTML, CSV, Parquet, summary.json) for a period.

    With --to, the report says whether it is final or provisional (see DEALTRAIL_REPORTS__GRACE_MINUTES).
    """
    from projections.report import write_report

    settings = load()
    db, out = db or settings.db, out or settings.out
    import duckdb

    zone = _zone(tz)
    _output_folder(out, "--out")
    period = _period(from_, to)
    stamp = _when(generated_at, "--as-of") or datetime.now(UTC)
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
        )
    except (FileNotFoundError, LookupError) as exc:
        raise _fail(str(exc)) from None
    except duckdb.IOException as exc:
        raise _busy(db, exc) from None
    console.print(f"report: {files.html} ({files.findings:,} findings); data: {files.csv}, {files.parquet}")


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Folder for everything the demo writes.")] = Path("out"),
    seed: Annotated[int, typer.Option(help="Seed of the simulated shift.")] = 2026,
) -> None:
    """Simulate a shift (24 tables, 8 of each game, 8 hours), audit it and write the report."""
    from dealtrail.audit import audit_file
    from dealtrail.simulator.run import write_simulation
    from projections import incidents
    from projections.private import make_private_dirs
    from projections.report import write_report
    from projections.store import Store

    _output_folder(out, "--out")
    make_private_dirs(out)
    events, truth, db = out / "events.jsonl", out / "truth.jsonl", out / "dealtrail.duckdb"
    rejected = out / "rejected.jsonl"
    kept = _set_aside(db, datetime.now(UTC))
    if kept:
        msg = f"kept the previous store (its users, reviews and reports) as {kept}; writing a new {db}"
        console.print(msg, soft_wrap=True, markup=False, highlight=False)  # one line
    n, expected = write_simulation(events, 24, 8.0, seed, 0.03, 0.001, truth, console)
    console.print(f"simulated {n:,} events at 24 tables over 8 hours ({expected:,} injected errors expected)")
    settings = load()
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
        generated_at=now,
        console_url=settings.console_url,
        review_due=review_due(settings),
    )
    console.print(f"audited {summary.events:,} events: {incidents.summary_line(counted)}")
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

    from projections.private import make_private

    wal = db.with_name(db.name + ".wal")
    if not db.exists() and not wal.exists():
        return None
    if db.is_file():
        try:
            duckdb.connect(str(db), read_only=True).close()
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise _fail(f"{db} is open in another process (dealtrail serve or project?): stop it first") from None
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


topics_app = typer.Typer(help="Kafka topics of this namespace.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")


@topics_app.command("create")
def topics_create() -> None:
    """Create the events, findings, rounds, dead-letter, chain-heads and reviews topics (idempotent)."""
    from streams.kafka import create_topics

    settings = load()
    try:
        done = create_topics(settings.kafka, settings.topics)
    except Exception as exc:
        raise _fail(f"cannot create topics at {settings.kafka.bootstrap}: {type(exc).__name__}: {exc}") from None
    console.print(f"Kafka at {done.bootstrap} (brokers: {', '.join(done.brokers) or 'none listed'})")
    for t in settings.topics.all():
        console.print(
            f"{t.name}: {t.partitions} partitions" + (" (created)" if t.name in done.created else " (exists)")
        )


@topics_app.command("list")
def topics_list() -> None:
    """Print the topic names of this namespace."""
    for t in load().topics.all():
        console.print(t.name)


@app.command()
def publish(
    events: Annotated[Path, typer.Argument(help="Event file (JSON Lines).", exists=True, dir_okay=False)],
    rate: Annotated[
        float | None, typer.Option(min=1, help="Send at most this many lines per second (default: no limit).")
    ] = None,
    chain: Annotated[
        bool, typer.Option("--chain/--no-chain", help="Stamp the per-table hash chain on events that carry none.")
    ] = True,
) -> None:
    """Validate events and publish them to the events topic; invalid lines go to the dead-letter topic."""
    from streams.publish import Publisher, PublishError, publish_file

    settings = load()
    try:
        publisher = Publisher(settings.kafka, settings.topics, chain=chain, limits=settings.plausibility)
    except Exception as exc:
        raise _fail(f"cannot reach Kafka at {settings.kafka.bootstrap}: {type(exc).__name__}") from None
    try:
        with _progress() as progress:
            task = progress.add_task("publishing", total=events.stat().st_size)
            summary = publish_file(
                events,
                publisher,
                lambda n: progress.advance(task, n),
                rate=rate,
                max_record_bytes=settings.max_record_bytes,
            )
    except PublishError as exc:
        raise _fail(str(exc)) from None
    finally:
        publisher.close()
    for line in publish_report(summary, settings.topics.events.name, settings.topics.dead_letter.name):
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def publish_report(summary: PublishSummary, events_topic: str, dead_letter_topic: str) -> list[str]:
    """The lines ``publish`` prints: events sent, events already on the topic and skipped
    (copies of recent events, and older ones found on the topic: nothing recorded for either),
    and rejected lines by reason (each in the dead-letter topic)."""
    rejected = sum(summary.rejected.values())
    reasons = ", ".join(f"{k} {v:,}" for k, v in sorted(summary.rejected.items()))
    return [
        f"published {summary.sent:,} events to {events_topic}",
        f"already on the topic, not sent again: {summary.copies + summary.already_published:,} "
        f"({summary.copies:,} exact copies of recent events; {summary.already_published:,} already_published, "
        "older events found on the topic unchanged)",
        f"rejected: {rejected:,} lines to {dead_letter_topic}" + (f" ({reasons})" if rejected else ""),
    ]


@app.command()
def worker() -> None:
    """Run a Faust worker: events topic -> rule engine -> findings and rounds topics."""
    from streams.app import run_worker

    run_worker(load())


@app.command()
def project(
    db: Annotated[
        Path | None, typer.Option(help="DuckDB file to write (this process is its only writer).", show_default=_DB)
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Exit when caught up with the end of the topics.")] = False,
    timeout: Annotated[
        float | None, typer.Option(help="Give up after this many seconds.", show_default="no limit")
    ] = None,
    report_every: Annotated[
        str | None,
        typer.Option(help="Also write each closed period's report: shift, day or cron.", show_default="none"),
    ] = None,
    reports: Annotated[
        Path | None, typer.Option(help="Folder of the scheduled reports.", show_default=_PERIODS)
    ] = None,
    tz: Annotated[str, typer.Option(help="Time zone of the report periods.")] = "UTC",
    batch: Annotated[
        int, typer.Option(min=1, max=1_000_000, help="Records per DuckDB transaction at most (records).")
    ] = 20_000,
    serve: Annotated[
        str | None,
        typer.Option(
            "--serve",
            metavar="HOST:PORT",
            help="Also run the compliance console on HOST:PORT in this process (reviews go through the reviews topic).",
            show_default="no console",
        ),
    ] = None,
) -> None:
    """Project the events, findings, rounds, dead-letter and reviews topics into DuckDB.

    With --report-every, the projector (the file's only writer) also writes each closed
    period's report from its own connection, since no other process may open the file then,
    and a new revision of each report that events, reviews or a re-audit made stale (checked
    every DEALTRAIL_REPORTS__CHECK_SECONDS).
    With --serve, it also runs the console (and the notifications, when configured) over the
    same DuckDB database: reviews made there are published to the reviews topic and stored
    by this projector; users are managed on the console's admin page.
    """
    from projections.discard import remove_if_empty
    from projections.projector import KafkaUnreachableError
    from projections.projector import project as run
    from projections.store import Store
    from streams.link import KafkaLink

    settings = load()
    spec = None
    if report_every is not None:
        from dealtrail.schedule import Schedule, ScheduleError

        try:
            spec = Schedule(report_every, tz)
        except ScheduleError as exc:
            raise _fail(str(exc)) from None
    address = _host_port(serve) if serve is not None else None
    db = db or settings.db
    _output_file(db, "--db")
    if spec is not None:
        _output_folder(reports or settings.out / "periods", "--reports")
    created = not db.exists()
    try:
        store = Store(db, settings.duckdb_memory_limit)
    except Exception as exc:
        raise _fail(f"cannot open {db} for writing: {exc}") from None

    def say(line: str) -> None:
        # --once is a command a user waits on: a broker that never answered is its one error line
        if not once or link.ever_connected:
            err.print(line, soft_wrap=True, markup=False, highlight=False)

    link = KafkaLink(settings.kafka.bootstrap, say)
    stop = _stop_on_signals()
    lock = threading.Lock()
    hosted: _HostedConsole | None = None
    health: object | None = None
    unreachable: KafkaUnreachableError | None = None
    failed = True
    try:
        with store:
            if address is not None:
                hosted = _host_console(settings, store, lock, address, db, link, stop)
            elif settings.health.port is not None and not once:
                health = _serve_health(settings, link)
            try:
                summary = run(
                    settings,
                    store,
                    once=once,
                    max_seconds=timeout,
                    max_records=batch,
                    schedule=spec,
                    reports=reports or settings.out / "periods",
                    write_lock=lock,
                    on_batch=hosted.batch_stored if hosted is not None else None,
                    property_name=settings.property_name,
                    review_due=review_due(settings),
                    console_url=settings.console_url,
                    report_grace=report_grace(settings),
                    report_check_seconds=settings.reports.check_seconds,
                    link=link,
                    stop=stop,
                )
            except TimeoutError as exc:
                raise _fail(str(exc), code=1) from None
            except KafkaUnreachableError as exc:
                unreachable = exc
            finally:
                if hosted is not None:
                    hosted.stop()
                if health is not None:
                    health.should_exit = True  # type: ignore[attr-defined]
        failed = unreachable is not None
    finally:
        _restore_signals(stop)
        if created and failed:
            remove_if_empty(db)  # a store this run made and that holds nothing: no empty file left
    if unreachable is not None:
        if link.ever_connected:
            raise _fail(f"lost Kafka at {settings.kafka.bootstrap} ({unreachable}); {db} keeps what was projected")
        raise _unreachable(settings, unreachable) from None
    w = summary.written
    console.print(
        ("stopped: " if stop.is_set() else "")
        + f"projected {summary.records:,} records in {summary.batches} batches into {db}: "
        f"{w.events:,} events, {w.findings:,} finding revisions, {w.rounds:,} rounds, {w.dead_letters:,} dead letters, "
        f"{w.reviews:,} reviews"
    )


@app.command()
def replay(
    table: Annotated[str, typer.Option("--table", help="The table to replay.")],
    db: Annotated[
        Path | None, typer.Option(help="DuckDB store (read-only) with the stored trail and findings.", show_default=_DB)
    ] = None,
    round_: Annotated[str | None, typer.Option("--round", help="Show one round.", show_default="every round")] = None,
    from_: Annotated[
        str | None,
        typer.Option("--from", help="Show events from this instant (ISO 8601).", show_default="the first event"),
    ] = None,
    to: Annotated[
        str | None, typer.Option("--to", help="... up to this instant, exclusive.", show_default="after the last event")
    ] = None,
    at: Annotated[
        str | None, typer.Option(help="Show the state as of this event ID or instant.", show_default="the end")
    ] = None,
    html: Annotated[
        Path | None, typer.Option(help="Write the incident report page here.", show_default="not written")
    ] = None,
    source: Annotated[str, typer.Option(help="Where the trail comes from: db or kafka.")] = "db",
    bootstrap: Annotated[
        str | None, typer.Option(help="Kafka bootstrap servers (with --source kafka).", show_default=_BOOTSTRAP)
    ] = None,
    tz: Annotated[str, typer.Option(help="Show times in this zone (IANA name), labelled.")] = "UTC",
) -> None:
    """Replay one table's stored events through the engine; show each event, state and finding."""
    import duckdb

    from dealtrail.replay import (
        ReplayError,
        SnapshotStart,
        Window,
        kafka_events,
        snapshot_start,
        stored_events,
        stored_findings,
    )
    from dealtrail.replay import replay as run
    from streams.kafka import unreachable_errors

    if round_ and (from_ or to):
        raise _fail("use --round or --from/--to, not both")
    zone = _zone(tz)
    _output_file(html, "--html")
    settings = load()
    settings = settings.with_bootstrap(bootstrap)
    start, end = _period(from_, to)
    window = Window(round_id=round_, start=start, end=end)
    db = db or (settings.db if source == "db" else None)
    con = None
    try:
        if db is not None:
            from projections.store import connect_read_only

            con = connect_read_only(db)
        begin = SnapshotStart()
        if source == "db" and con is not None:
            begin = snapshot_start(con, table, window, at)
            for line in begin.skipped:
                err.print(f"note: {line}")
        stored = stored_findings(con, table, begin.last_seq) if con is not None else None
        if source == "kafka":
            trail = list(kafka_events(settings, table))
        elif source == "db" and con is not None:
            trail = list(stored_events(con, table, begin.last_seq))
        else:
            raise _fail("--source must be db or kafka")
        result = run(
            table, trail, stored, window, at, begin if begin.state is not None else None, settings.plausibility
        )
    except (ReplayError, FileNotFoundError, TimeoutError) as exc:
        raise _fail(str(exc)) from None
    except duckdb.IOException as exc:
        raise _busy(db, exc) from None
    except unreachable_errors() as exc:
        raise _unreachable(settings, exc) from None
    finally:
        if con is not None:
            con.close()
    _print_replay(result, zone)
    if html is not None:
        from projections.incident import write_incident

        write_incident(result, html, f"Incident replay: table {table}", zone, stored or ())
        console.print(f"incident report: {html}")
    if stored is not None and not result.matches:
        raise typer.Exit(3)


def _print_replay(result: object, tz: tzinfo) -> None:
    from rich.markup import escape

    from dealtrail.replay import ReplayResult, describe_state, layout
    from projections.timefmt import clock, show, zone_name

    assert isinstance(result, ReplayResult)
    current = None
    table: Table | None = None
    rows: list[dict[str, object]] = []

    def add_layout() -> None:
        assert table is not None
        for row in rows:
            cards = " ".join(f"{c}{'^' if face == 'UP' else ''}" for _e, c, face in row["cards"])  # type: ignore[attr-defined]
            table.add_row("", "", escape(str(row["area"])), escape(cards))

    for step in result.steps:
        rid = step.event.round_id or "between rounds"
        if rid != current:
            if table is not None:
                add_layout()
                console.print(table)
            rows = []
            current = rid
            table = Table(title=f"{escape(result.table_id)} / {escape(rid)}", show_lines=False)
            for col in ("seq", f"time ({zone_name(tz)})", "event", "findings"):
                table.add_column(col)
        assert table is not None
        found = "; ".join(f"{f.rule_id} [{f.status.value}]" for f in step.findings)
        table.add_row(
            str(step.event.seq),
            clock(step.event.occurred_at, tz),
            escape(step.event.type),
            f"[red]{escape(found)}[/]" if found else "",
        )
        rows = layout(step.state, result.cards) or rows
    if table is not None:
        add_layout()
        console.print(table)
    if result.state_at is not None and result.at_event is not None:
        console.print(f"state as of {escape(result.at_event.event_id)} ({show(result.at_event.occurred_at, tz)}):")
        for k, v in describe_state(result.state_at).items():
            console.print(f"  {k}: {escape(str(v))}")
        for row in layout(result.state_at, result.cards):
            cards = " ".join(f"{c}{'^' if face == 'UP' else ''}" for _e, c, face in row["cards"])
            console.print(f"  {escape(row['area'])}: {escape(cards)}")
    began = (
        f" from the snapshot after seq {result.start.last_seq} ({escape(str(result.start.last_event_id))})"
        if result.start is not None and result.start.state is not None
        else ""
    )
    console.print(
        f"replayed {result.events_total:,} events of {escape(result.table_id)}{began}; {len(result.steps):,} shown"
    )
    if result.compared:
        if result.matches:
            console.print(f"[green]replay matches the stored findings ({len(result.stored)} revisions)[/]")
        else:
            console.print("[bold red]REPLAY DIFFERS FROM THE STORED FINDINGS[/] (a changed rule or an altered store)")
            for d in result.differences:
                console.print(
                    f"  [red]{d.side}[/]: {d.rule_id} rev {d.revision} {d.status} at event {escape(d.trigger_event_id)}"
                    f" (round {escape(str(d.round_id))})"
                )
            for eid, why in result.unreadable:
                console.print(f"  [red]unreadable stored event[/] {escape(eid)}: {escape(why)}")
            console.print(f"  first difference at event {escape(str(result.first_difference_event()))}")


@app.command()
def schedule(
    every: Annotated[str, typer.Option(help="shift (06:00, 14:00, 22:00), day, or a cron expression.")],
    db: Annotated[Path | None, typer.Option(help="DuckDB store (opened read-only).", show_default=_DB)] = None,
    out: Annotated[
        Path | None, typer.Option(help="Folder for one sub-folder per period.", show_default=_PERIODS)
    ] = None,
    tz: Annotated[
        str, typer.Option(help="Time zone of the periods (IANA name); the pages show times in it too.")
    ] = "UTC",
    once: Annotated[bool, typer.Option("--once", help="Write the closed periods and exit.")] = False,
    now: Annotated[
        str | None,
        typer.Option(help="Pretend the time is this (ISO 8601), e.g. to backfill.", show_default="the clock"),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Write a new revision of every closed period, stale or not.")
    ] = False,
    poll: Annotated[float, typer.Option(min=1, help="Seconds between checks for a closed period.")] = 60.0,
) -> None:
    """Write the compliance report of each closed period as it closes, and a new revision of each stale one.

    Each period's folder holds one folder per revision (rev-0001, ...: report.html, CSV, Parquet,
    summary.json) and a manifest.json; older revisions stay, marked superseded. A report is as of
    the clock (or --now): reviews made later are not counted.
    """
    from datetime import UTC

    import duckdb

    from dealtrail.schedule import Schedule, ScheduleError, run_due, run_forever

    settings = load()
    db, out = db or settings.db, out or settings.out / "periods"
    try:
        spec = Schedule(every, tz)
    except ScheduleError as exc:
        raise _fail(str(exc)) from None
    if not db.exists():
        raise _fail(f"no dealtrail database at {db}")
    _output_folder(out, "--out")
    fixed = _when(now, "--now")
    try:
        if once or fixed is not None:
            written = run_due(
                db,
                out,
                spec,
                fixed or datetime.now(UTC),
                force=force,
                property_name=settings.property_name,
                review_due=review_due(settings),
                console_url=settings.console_url,
                grace=report_grace(settings),
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
            property_name=settings.property_name,
            review_due=review_due(settings),
            console_url=settings.console_url,
            grace=report_grace(settings),
        )
    except FileNotFoundError as exc:
        raise _fail(str(exc)) from None
    except duckdb.IOException as exc:
        raise _busy(db, exc) from None


class _Checked(NamedTuple):
    """What ``verify`` checks: each table's chain, and stored rows whose columns no longer match
    their payload (event ID, table, seq, the columns that differ)."""

    reports: list[ChainReport]
    mismatches: list[tuple[str, str, int, str]]


def _chains(db: Path | None, table: str | None, source: str, bootstrap: str | None, columns: bool = True) -> _Checked:
    import duckdb

    from dealtrail.replay import kafka_events, stored_events
    from dealtrail.verify import check_chain, column_mismatches, tables
    from projections.store import connect_read_only

    settings = load()
    settings = settings.with_bootstrap(bootstrap)
    if source == "kafka":
        if table is None:
            raise _fail("--source kafka needs --table")
        from dealtrail.replay import ReplayError
        from streams.kafka import unreachable_errors

        try:
            report = check_chain(table, kafka_events(settings, table))
        except unreachable_errors() as exc:
            raise _unreachable(settings, exc) from None
        except (ReplayError, TimeoutError) as exc:
            raise _fail(f"{exc} (is the broker at {settings.kafka.bootstrap} reachable?)") from None
        if report.events == 0:
            raise _fail(f"the events topic holds no event of table {table!r}: there is nothing to verify", code=1)
        return _Checked([report], [])
    if source != "db":
        raise _fail("--source must be db or kafka")
    db = db or settings.db
    try:
        con = connect_read_only(db)
    except FileNotFoundError as exc:
        raise _fail(str(exc)) from None
    except duckdb.IOException as exc:
        raise _busy(db, exc) from None
    try:
        known = tables(con)
        if table is not None and table not in known:
            raise _fail(f"no stored event for table {table!r} in {db}")
        if not known:
            raise _fail(f"{db} holds no event: there is nothing to verify", code=1)
        names = [table] if table else known
        return _Checked(
            [check_chain(t, stored_events(con, t)) for t in names],
            column_mismatches(con, table) if columns else [],
        )
    finally:
        con.close()


@app.command()
def verify(
    db: Annotated[Path | None, typer.Option(help="DuckDB store (read-only).", show_default=_DB)] = None,
    table: Annotated[str | None, typer.Option(help="Check one table only.", show_default="every table")] = None,
    against: Annotated[
        Path | None, typer.Option(help="A digest saved earlier by dealtrail digest --out.", show_default="none")
    ] = None,
    source: Annotated[str, typer.Option(help="db or kafka (with --table).")] = "db",
    bootstrap: Annotated[
        str | None, typer.Option(help="Kafka bootstrap servers (with --source kafka).", show_default=_BOOTSTRAP)
    ] = None,
) -> None:
    """Recompute every table's hash chain; report the first broken link per table (exit 4 if any).

    Exit 1 with one line when there is nothing to check (an empty store, a table the store or
    topic does not hold, a digest without tables or without the --table asked for).
    """
    from dealtrail.verify import check_against, load_digest

    saved = None
    if against is not None:  # read before the chains are checked, which can take a while
        _output_file(against, "--against")
        try:
            saved = load_digest(against)
        except FileNotFoundError:
            raise _fail(f"--against {against}: no such file") from None
        except (OSError, ValueError) as exc:
            raise _fail(f"cannot read digest {against}: {exc}") from None
        if not saved:
            raise _fail(f"digest {against} holds no table: there is nothing to check against", code=1)
        if table is not None:
            if table not in saved:
                raise _fail(f"digest {against} holds no head for table {table!r}", code=1)
            saved = {table: saved[table]}
    checked = _chains(db, table, source, bootstrap)
    reports = checked.reports
    bad = 0
    for r in reports:
        if r.first_break is None:
            state = "not chained" if r.head_hash is None else f"intact, head seq {r.head_seq}"
            console.print(f"{r.table_id}: {r.chained:,} of {r.events:,} events chained, {state}")
        else:
            bad += 1
            b = r.first_break
            console.print(
                f"[bold red]{r.table_id}: chain broken at seq {b.seq}, event {b.event_id}[/]"
                f" (after {b.previous_event_id}): {b.problem}"
            )
    for event_id, table_id, seq, columns in checked.mismatches:
        bad += 1
        console.print(
            f"[bold red]{table_id}: stored columns differ from the event's payload at seq {seq}, "
            f"event {event_id}[/]: {columns} (altered in the store)"
        )
    if against is not None and saved is not None:
        problems = check_against(reports, saved)
        for p in problems:
            console.print(f"[bold red]{p}[/]")
        bad += len(problems)
        if not problems:
            console.print(f"every table still passes through the heads of {against}")
    if bad:
        raise typer.Exit(4)


@app.command()
def digest(
    db: Annotated[Path | None, typer.Option(help="DuckDB store (read-only).", show_default=_DB)] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Also write the digest here (JSON), to keep elsewhere.", show_default="printed only"),
    ] = None,
) -> None:
    """Print each table's chain head (seq, hash) and event count: a digest to keep elsewhere."""
    import json

    from dealtrail.verify import digest as make
    from projections.private import make_private_dirs, write_private_text

    _output_file(out, "--out")
    reports = _chains(db, None, "db", None, columns=False).reports
    data = make([r for r in reports if r.intact])
    if not data and reports:
        err.print("[yellow]no table of this store is chained: the digest is empty (see dealtrail verify)[/]")
    for table_id, head in data.items():
        console.print(f"{table_id}  seq {head['head_seq']}  events {head['events']}  {head['head_hash']}")
    broken = [r.table_id for r in reports if not r.intact]
    if broken:
        err.print(f"[red]not in the digest, chain broken: {', '.join(broken)} (run dealtrail verify)[/]")
    if out is not None:
        make_private_dirs(out.parent)
        write_private_text(out, json.dumps({"tables": data}, indent=2, sort_keys=True) + "\n")
        console.print(f"digest written to {out}")


@app.command("export-schemas")
def export_schemas(
    out: Annotated[Path, typer.Option(help="Folder for the JSON Schema files.")] = Path("schemas/json"),
) -> None:
    """Write the JSON Schema of every event, the finding and the table configuration."""
    from schemas.export import write_schemas

    written = write_schemas(out)
    console.print(f"wrote {len(written)} JSON Schema files to {out}")


_INTERRUPTED = "interrupted (a store keeps every batch committed before; run the command again to complete it)"
_DUCKDB_INTERRUPTED = "Query interrupted"
"""How DuckDB's Python client reports Ctrl-C inside a query (a plain RuntimeError)."""


def _open_writer(db: Path, settings: Settings, users: bool = False) -> object:
    """The store opened for writing, or a clear error when another process holds it (for the
    ``users`` commands, one line pointing to the console's admin page, without DuckDB's text)."""
    from projections.store import NotAStoreError, Store

    try:
        return Store(db, settings.duckdb_memory_limit)
    except NotAStoreError as exc:
        raise _fail(str(exc)) from None
    except Exception as exc:  # duckdb raises its own IOException when the file is locked
        if users and "lock" in str(exc).lower():  # DuckDB: "Could not set lock on file ..."
            raise _fail(
                f"{db} is held by another process (the projector?): manage users on the console's admin page "
                "(one writer per file)",
                code=1,
            ) from None
        raise _fail(
            f"cannot open {db} for writing (a projector, audit or console holds it; one writer per file: "
            f"manage users on the console's admin page instead): {exc}",
            code=1,
        ) from None


def _host_port(value: str) -> tuple[str, int]:
    """``--serve HOST:PORT`` as (host, port); ``[::1]:8000`` for an IPv6 address."""
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise _fail(f"--serve takes HOST:PORT, e.g. 127.0.0.1:8000 or 0.0.0.0:8000; got {value!r}")
    return host, int(port)


def _console_config(settings: Settings, secure: bool = False) -> object:
    """The console's resolved configuration (``ConsoleConfig``) from the settings."""
    from dealtrail.console.app import ConsoleConfig, new_session_secret

    secret = settings.console.session_secret
    return ConsoleConfig(
        review_due=review_due(settings),
        session_secret=secret.get_secret_value() if secret else new_session_secret(),
        secure_cookies=secure,
        reports_dir=settings.console.reports_dir,
        poll_seconds=settings.console.poll_seconds,
        property_name=settings.property_name,
    )


class _Stop(threading.Event):
    """Set by SIGTERM or SIGINT (:func:`_stop_on_signals`); remembers the handlers it replaced."""

    previous: dict[int, object]


def _stop_on_signals() -> _Stop:
    """An event set by the first SIGTERM or SIGINT, so that a long-running command ends its work
    in progress, writes its state and exits within seconds (compose's grace is 10 s), even while
    Kafka is away; a second signal interrupts at once."""
    import signal

    stop = _Stop()

    def on_signal(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    stop.previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            stop.previous[sig] = signal.signal(sig, on_signal)
    return stop


def _restore_signals(stop: _Stop) -> None:
    import signal

    for sig, handler in stop.previous.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]


def _readiness(settings: Settings, link: object) -> Callable[[], dict[str, object]]:
    """The ``/readyz`` body of a process whose Kafka connection ``link`` (a ``KafkaLink``) follows."""
    from streams.link import KafkaLink

    assert isinstance(link, KafkaLink)
    bound = settings.health.max_lag_seconds
    return lambda: link.status().as_json(bound)


def _serve_health(settings: Settings, link: object) -> object:
    """Serve ``/healthz`` and ``/readyz`` on ``health.host:health.port`` (uvicorn in a thread).

    Returns:
        The uvicorn server (set ``should_exit`` to stop it).
    """
    import time

    import uvicorn

    from dealtrail.console.health import health_app

    host, port = settings.health.host, settings.health.port
    assert port is not None
    server = uvicorn.Server(
        uvicorn.Config(health_app(_readiness(settings, link)), host=host, port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="dealtrail-health", daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.05)
    if not server.started:
        raise _fail(f"cannot serve the health endpoints on {host}:{port} (DEALTRAIL_HEALTH__PORT in use?)", code=1)
    return server


class _HostedConsole:
    """The console (uvicorn in a thread), its review producer and its notifier, in the projector's
    process (``dealtrail project --serve``)."""

    def __init__(
        self, server: object, thread: threading.Thread, producer: list[object], notifier: _NotifyLoop | None
    ) -> None:
        self.server, self.thread, self.producer, self.notifier = server, thread, producer, notifier

    def batch_stored(self, added: BatchCounts) -> None:
        """After each projector batch: wake the notifier when the batch stored findings."""
        if self.notifier is not None and added.findings:
            self.notifier.wake.set()

    def stop(self) -> None:
        """Stop serving (requests in flight finish), then the notifier and the producer (within
        seconds, even while Kafka is away)."""
        self.server.should_exit = True  # type: ignore[attr-defined]
        self.thread.join(timeout=5)
        if self.notifier is not None:
            self.notifier.stop()
        for p in self.producer:
            p.close(timeout=1)  # type: ignore[attr-defined]


def _host_console(
    settings: Settings,
    store: object,
    lock: threading.Lock,
    address: tuple[str, int],
    db: Path,
    link: object,
    stop: threading.Event,
) -> _HostedConsole:
    """Start the console over the projector's store: reviews to the reviews topic, users and
    notifications through the store's connection under the projector's write lock.

    The console serves at once, whether Kafka answers or not: its review producer connects in
    the background (a review is answered 503 until it has, and while the cluster is away), and
    its ``/readyz`` follows the projector's connection (``link``)."""
    import time

    import uvicorn

    from dealtrail.console.app import ConsoleConfig, create_app
    from projections.reviews import ReviewEvent
    from projections.store import Store
    from streams.link import Backoff
    from streams.review_publish import ReviewPublisher, ReviewPublishError

    assert isinstance(store, Store)
    config = _console_config(settings)
    assert isinstance(config, ConsoleConfig)
    producer: list[ReviewPublisher] = []

    def publish(review: ReviewEvent) -> None:
        if not producer:
            raise ReviewPublishError("the console is still connecting to Kafka")
        producer[0].send(review)

    def connect() -> None:
        backoff = Backoff(first=0.5, cap=5.0)
        while not stop.is_set():
            try:
                publisher = ReviewPublisher(settings.kafka, settings.topics)
            except Exception:  # the projector's link says that Kafka is away; retry quietly
                stop.wait(backoff.next())
                continue
            if stop.is_set():
                publisher.close(timeout=1)
            else:
                producer.append(publisher)
            return

    console_app = create_app(store, config, review_sink=publish, write_lock=lock)
    console_app.state.readiness = _readiness(settings, link)
    host, port = address
    server = uvicorn.Server(uvicorn.Config(console_app, host=host, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="dealtrail-console", daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.05)
    if not server.started:
        raise _fail(f"cannot serve the console on {host}:{port} (is the address in use or not this host's?)", code=1)
    threading.Thread(target=connect, name="dealtrail-review-producer", daemon=True).start()
    notifier = _start_notifier(settings, store, lock, config.poll_seconds)
    shown = f"[{host}]" if ":" in host else host
    err.print(
        f"console: http://{shown}:{port}/ in the projector's process over {db} "
        "(reviews go through the reviews topic; users on its admin page)",
        soft_wrap=True,
    )
    return _HostedConsole(server, thread, producer, notifier)  # type: ignore[arg-type]


@app.command()
def serve(
    db: Annotated[
        Path | None, typer.Option(help="DuckDB file (this process becomes its writer).", show_default=_DB)
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
    certfile: Annotated[
        Path | None, typer.Option(help="TLS certificate (PEM): serve https, cookies marked Secure.", exists=True)
    ] = None,
    keyfile: Annotated[Path | None, typer.Option(help="TLS private key (PEM) for --certfile.", exists=True)] = None,
) -> None:
    """Run the compliance console (floor, findings, reviews, reports, JSON API) over one store."""
    import uvicorn

    from dealtrail.console.app import ConsoleConfig, create_app
    from projections.store import Store

    settings = load()
    db = db or settings.db
    if not db.exists():
        raise _fail(f"no dealtrail database at {db} (run dealtrail audit or demo first)", code=1)
    if (certfile is None) != (keyfile is None):
        raise _fail("--certfile and --keyfile go together")
    store = _open_writer(db, settings)
    assert isinstance(store, Store)
    config = _console_config(settings, secure=certfile is not None)
    assert isinstance(config, ConsoleConfig)
    scheme = "https" if certfile else "http"
    err.print(f"console: {scheme}://{host}:{port}/ over {db} (sign in with a user of: dealtrail users add)")
    console_app = create_app(store, config)
    _start_notifier(settings, store, console_app.state.write_lock, config.poll_seconds)
    with store:
        uvicorn.run(
            console_app,
            host=host,
            port=port,
            log_level="warning",
            ssl_certfile=str(certfile) if certfile else None,
            ssl_keyfile=str(keyfile) if keyfile else None,
        )


class _NotifyLoop:
    """The notifier's background thread: it runs every ``every`` seconds (for retries), and at
    once when :attr:`wake` is set (a projector batch stored findings)."""

    def __init__(self, notifier: object, every: float) -> None:
        self.wake = threading.Event()
        self._stopped = threading.Event()
        self._notifier, self._every = notifier, every
        self._thread = threading.Thread(target=self._loop, name="dealtrail-notify", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                self._notifier.run_once()  # type: ignore[attr-defined]
            except Exception as exc:  # one line, and go on: a delivery is retried, never dropped
                err.print(f"notifications: {type(exc).__name__}: {exc}")
            self.wake.wait(self._every)
            self.wake.clear()

    def stop(self) -> None:
        """Let the round in progress finish and end the thread."""
        self._stopped.set()
        self.wake.set()
        self._thread.join(timeout=30)


def _start_notifier(settings: Settings, store: object, lock: object, every: float) -> _NotifyLoop | None:
    """Send notifications (and the daily digest of late reviews) from a background thread of the
    console's process, if rules or a digest are set."""
    from dealtrail.notify import Notifier, NotifyRule, SmtpConfig

    n = settings.notify
    digest = None
    if n.digest_at is not None and n.digest_to:
        from zoneinfo import ZoneInfo

        from dealtrail.notify import DigestConfig, digest_target

        digest = DigestConfig(
            n.digest_at,
            ZoneInfo(n.digest_tz),
            tuple(digest_target(t) for t in n.digest_to),
            review_due(settings),
            settings.property_name,
        )
    if not n.rules and digest is None:
        return None
    smtp = (
        SmtpConfig(
            n.smtp_host,
            n.smtp_port,
            n.smtp_sender,
            n.smtp_starttls,
            n.smtp_username,
            n.smtp_password.get_secret_value() if n.smtp_password else None,
        )
        if n.smtp_host
        else None
    )
    rules = [
        NotifyRule(
            frozenset(r.severities),
            frozenset(r.rules),
            frozenset(r.games),
            frozenset(r.tables),
            r.webhook,
            tuple(r.emails),
        )
        for r in n.rules
    ]
    notifier = Notifier(
        store.con,  # type: ignore[attr-defined]
        rules,
        smtp,
        settings.console_url,
        lock,  # type: ignore[arg-type]
        lambda: datetime.now(UTC),
        n.max_attempts,
        n.backoff_seconds,
        digest=digest,
    )
    return _NotifyLoop(notifier, every)


users_app = typer.Typer(help="Console users and API tokens (stored hashed in the store).", no_args_is_help=True)
app.add_typer(users_app, name="users")


@users_app.command("add")
def users_add(
    name: Annotated[str, typer.Argument(help="The user's name (letters, digits, ._@-).")],
    role: Annotated[str, typer.Option(help="viewer (reads), reviewer (also reviews) or admin (also manages users).")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file.", show_default=_DB)] = None,
) -> None:
    """Add a user, or set an existing user's role and password; the password is read from stdin."""
    from datetime import UTC

    from dealtrail.console.auth import AccessError, add_user
    from projections.store import Store

    settings = load()
    db = db or settings.db
    password = sys.stdin.readline().rstrip("\r\n")
    store = _open_writer(db, settings, users=True)
    assert isinstance(store, Store)
    with store:
        try:
            new = add_user(store.con, name, role, password, datetime.now(UTC))
        except AccessError as exc:
            raise _fail(str(exc)) from None
    console.print(f"user {name} {'added' if new else 'updated'} with role {role}")


@users_app.command("token")
def users_token(
    name: Annotated[str, typer.Argument(help="The user the token acts for.")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file.", show_default=_DB)] = None,
) -> None:
    """Make an API token for a user; it is printed once, as the last word of the output."""
    from datetime import UTC

    from dealtrail.console.auth import AccessError, new_token
    from projections.store import Store

    settings = load()
    db = db or settings.db
    store = _open_writer(db, settings, users=True)
    assert isinstance(store, Store)
    with store:
        try:
            token = new_token(store.con, name, datetime.now(UTC))
        except AccessError as exc:
            raise _fail(str(exc), code=1) from None
    # plain print: rich would wrap or style the token
    print(f"API token for {name} (stored hashed; it cannot be shown again): {token}")


def _interrupted() -> NoReturn:
    err.print(_INTERRUPTED)
    raise SystemExit(130) from None


def main() -> None:
    """Entry point of the ``dealtrail`` console script.

    Sets the process umask to 077 before any command runs, so that files libraries create
    themselves (DuckDB's write-ahead log and spill files) are owner-only from their first byte;
    dealtrail's own writers also set 0600/0700 explicitly, and the store chmods its log after
    each commit, for callers that do not come through here.
    """
    import duckdb

    os.umask(0o077)
    try:
        app()
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
    except (KeyboardInterrupt, duckdb.InterruptException):  # Ctrl-C, in Python or inside a query
        _interrupted()
    except RuntimeError as exc:
        if str(exc) != _DUCKDB_INTERRUPTED:
            raise
        _interrupted()
    except OSError as exc:  # an output path that is a folder, a file where a folder must be, no permission
        err.print(f"[bold red]error:[/] {exc}")
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
