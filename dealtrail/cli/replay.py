"""The command line: incident replay."""

from __future__ import annotations

from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

if TYPE_CHECKING:
    pass

from dealtrail.cli.common import (
    _BOOTSTRAP,
    _DB,
    _TZ,
    _busy,
    _fail,
    _output_file,
    _period,
    _unreachable,
    _zone,
    app,
    console,
    err,
    load,
)
from dealtrail.cli.copies import ARCHIVE_DEFAULT, ARCHIVE_HELP, announce, read_archive


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
        Path | None,
        typer.Option(
            help="Write the incident page here (a long replay: an index here, part pages beside it, each under 1 MB).",
            show_default="not written",
        ),
    ] = None,
    source: Annotated[str, typer.Option(help="Where the trail comes from: db or kafka.")] = "db",
    bootstrap: Annotated[
        str | None, typer.Option(help="Kafka bootstrap servers (with --source kafka).", show_default=_BOOTSTRAP)
    ] = None,
    tz: Annotated[
        str | None, typer.Option(help="Show times in this zone (IANA name), labelled.", show_default=_TZ)
    ] = None,
    archive: Annotated[Path | None, typer.Option(help=ARCHIVE_HELP, show_default=ARCHIVE_DEFAULT)] = None,
) -> None:
    """Replay one table's stored events through the engine; show each event, state and finding."""
    import duckdb

    from dealtrail.investigate.replay import (
        ReplayError,
        SnapshotStart,
        Window,
        kafka_events,
        snapshot_start,
        stored_events,
        stored_findings,
    )
    from dealtrail.investigate.replay import replay as run
    from streams.kafka import unreachable_errors

    if round_ and (from_ or to):
        raise _fail("use --round or --from/--to, not both")
    settings = load()
    zone = _zone(tz, settings)
    _output_file(html, "--html")
    settings = settings.with_bootstrap(bootstrap)
    start, end = _period(from_, to)
    window = Window(round_id=round_, start=start, end=end)
    db = db or (settings.db if source == "db" else None)
    con = None
    try:
        if db is not None:
            from projections.store.store import connect_read_only

            con = connect_read_only(db)
            announce(con, db)
            read_archive(con, archive, settings)
        begin = SnapshotStart()
        if source == "db" and con is not None:
            begin = snapshot_start(con, table, window, at)
            for line in begin.skipped:
                err.print(f"note: {line}")
        stored = stored_findings(con, table, begin.last_seq) if con is not None else None
        if source == "kafka":
            trail = list(
                kafka_events(settings, table, lambda line: err.print(f"note: {line}", markup=False, highlight=False))
            )
        elif source == "db" and con is not None:
            trail = list(stored_events(con, table, begin.last_seq))
        else:
            raise _fail("--source must be db or kafka")
        result = run(
            table, trail, stored, window, at, begin if begin.state is not None else None, settings.plausibility
        )
        if con is not None:
            from projections.models.conflicts import conflicting_copies

            shown = sorted({s.event.event_id for s in result.steps})
            result.conflicts = [c.as_json() for c in conflicting_copies(con, table, shown)]
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
        from dealtrail.investigate.incident_page import write_incident

        written = write_incident(result, html, f"Incident replay: table {table}", zone, stored or ())
        console.print(f"incident report: {html}")
        if len(written) > 1:
            console.print(f"  its rounds are in {len(written) - 1} part pages beside it ({written[1].name} ...)")
    if stored is not None and not result.matches:
        raise typer.Exit(3)


def _print_replay(result: object, tz: tzinfo) -> None:
    from rich.markup import escape

    from dealtrail.investigate.replay import ReplayResult, describe_state, layout, shown_rounds
    from projections.display.timefmt import clock, show, zone_name

    assert isinstance(result, ReplayResult)
    current = None
    table: Table | None = None
    rows: list[dict[str, object]] = []

    def add_layout() -> None:
        assert table is not None
        for row in rows:
            cards = " ".join(f"{c}{'^' if face == 'UP' else ''}" for _e, c, face in row["cards"])  # type: ignore[attr-defined]
            table.add_row("", "", escape(str(row["area"])), escape(cards))

    # a shuffle between two events of one round is shown inside it: the round is not split
    for step, rid in zip(result.steps, shown_rounds([s.event.round_id for s in result.steps]), strict=True):
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
        f"replayed {result.events_total:,} events of {escape(result.table_id)}{began} to its last stored event "
        f"(a finding of the window may be raised after it); {len(result.steps):,} shown"
    )
    for c in result.conflicts:
        console.print(f"[bold yellow]conflicting copy[/]: {escape(c['message'])}")
    if result.compared:
        if result.matches:
            n, plural = len(result.stored), "" if len(result.stored) == 1 else "s"
            console.print(f"[green]replay matches the stored findings ({n:,} finding revision{plural})[/]")
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
