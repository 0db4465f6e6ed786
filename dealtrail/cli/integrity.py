"""The command line: the hash chain: verify and digest."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer

if TYPE_CHECKING:
    from dealtrail.ingest.verify import ChainReport

from dealtrail.cli.common import (
    _BOOTSTRAP,
    _DB,
    _busy,
    _fail,
    _output_file,
    _read_store,
    _unreachable,
    app,
    console,
    err,
    load,
)
from dealtrail.cli.copies import ARCHIVE_DEFAULT, ARCHIVE_HELP, announce, read_archive


class _Checked(NamedTuple):
    """What ``verify`` checks: each table's chain, and stored rows whose columns no longer match
    their payload (event ID, table, seq, the columns that differ)."""

    reports: list[ChainReport]
    mismatches: list[tuple[str, str, int, str]]


def _chains(
    db: Path | None,
    table: str | None,
    source: str,
    bootstrap: str | None,
    columns: bool = True,
    archive: Path | None = None,
) -> _Checked:

    from dealtrail.ingest.verify import check_chain, column_mismatches, tables
    from dealtrail.investigate.replay import kafka_events, stored_events

    settings = load()
    settings = settings.with_bootstrap(bootstrap)
    if source == "kafka":
        if table is None:
            raise _fail("--source kafka needs --table")
        from dealtrail.investigate.replay import ReplayError
        from streams.kafka import unreachable_errors

        try:
            report = check_chain(
                table, kafka_events(settings, table, lambda line: err.print(line, markup=False, highlight=False))
            )
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
    con = _read_store(db)
    try:
        announce(con, db)
        read_archive(con, archive, settings)
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
    archive: Annotated[Path | None, typer.Option(help=ARCHIVE_HELP, show_default=ARCHIVE_DEFAULT)] = None,
) -> None:
    """Recompute every table's hash chain and the access log's; report the first broken link
    per table and the first altered access-log entry (exit 4 if any).

    Exit 1 with one line when there is nothing to check (an empty store, a table the store or
    topic does not hold, a digest without tables or without the --table asked for).
    """
    from dealtrail.ingest.verify import check_against, load_access_head, load_digest

    saved = None
    access_head = None
    if against is not None:  # read before the chains are checked, which can take a while
        _output_file(against, "--against")
        try:
            saved = load_digest(against)
            access_head = load_access_head(against)
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
    checked = _chains(db, table, source, bootstrap, archive=archive)
    reports = checked.reports
    bad = 0
    for r in reports:
        if r.first_break is None:
            state = "not chained" if r.head_hash is None else f"intact, head seq {r.head_seq}"
            console.print(f"{r.table_id}: {r.chained:,} of {r.events:,} events chained, {state}")
            if r.copies:
                err.print(f"{r.table_id}: {r.copies:,} exact copies of chained events read again (redeliveries)")
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
    if source == "db" and table is None:
        bad += _access_log(db or load().db, access_head)
    if against is not None and saved is not None:
        problems = check_against(reports, saved)
        for p in problems:
            console.print(f"[bold red]{p}[/]")
        bad += len(problems)
        if not problems:
            console.print(f"every table still passes through the heads of {against}")
        if access_head is None and source == "db" and table is None:
            console.print(f"{against} holds no access-log head (an older digest): the log's tail is not checked")
    if bad:
        raise typer.Exit(4)


def _access_log(db: Path, saved: dict[str, Any] | None = None) -> int:
    """Check the store's access-log chain and print one line; with ``saved`` (the head a digest
    kept), also that the log still holds that entry (a truncated tail leaves no gap to see).
    Returns the number of problems (0, 1 or 2)."""
    import duckdb

    from dealtrail.cli.common import _busy
    from dealtrail.ingest.verify import check_access_head
    from projections.records.access_log import check_chain, hash_at
    from projections.store.store import connect_read_only

    try:
        con = connect_read_only(db)
    except duckdb.IOException as exc:
        raise _busy(db, exc) from None
    try:
        report = check_chain(con)
        at_head = hash_at(con, int(saved["head_seq"])) if saved is not None else None
    finally:
        con.close()
    bad = 0
    if report.first_break is None:
        if report.entries:
            console.print(f"access log: {report.entries:,} entries chained, intact")
    else:
        seq, entry_id, problem = report.first_break
        console.print(f"[bold red]access log: chain broken at entry {seq} ({entry_id})[/]: {problem}")
        bad += 1
    if saved is not None:
        problem_ = check_access_head(at_head, saved)
        if problem_ is None:
            console.print(f"access log: still holds the digest head, entry {saved['head_seq']}")
        else:
            console.print(f"[bold red]{problem_}[/]")
            bad += 1
    return bad


@app.command()
def digest(
    db: Annotated[Path | None, typer.Option(help="DuckDB store (read-only).", show_default=_DB)] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Also write the digest here (JSON), to keep elsewhere.", show_default="printed only"),
    ] = None,
) -> None:
    """Print each table's chain head (seq, hash) and event count, and the access log's head (its
    last entry's seq and hash): a digest to keep elsewhere (``verify --against`` then finds a
    rewritten trail and a truncated access log)."""
    import json

    from dealtrail.ingest.verify import digest as make
    from projections.store.private import make_private_dirs, write_private_text

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
    access_head = _access_head(db or load().db)
    saved: dict[str, object] = {"tables": data}
    if access_head is not None:
        saved["access_log"] = access_head
    if out is not None:
        make_private_dirs(out.parent)
        write_private_text(out, json.dumps(saved, indent=2, sort_keys=True) + "\n")
        console.print(f"digest written to {out}")


def _access_head(db: Path) -> dict[str, object] | None:
    """The access log's head for a digest (``head_seq``, ``head_hash``), printed; None (and
    said) when the log is empty or its chain is broken."""
    import duckdb

    from projections.records.access_log import check_chain, head
    from projections.store.store import connect_read_only

    try:
        con = connect_read_only(db)
    except duckdb.IOException as exc:
        raise _busy(db, exc) from None
    try:
        report, last = check_chain(con), head(con)
    finally:
        con.close()
    if report.first_break is not None:
        err.print("[red]access log not in the digest: its chain is broken (run dealtrail verify)[/]")
        return None
    if last is None:
        return None
    console.print(f"access log  seq {last[0]}  entries {report.entries}  {last[1]}")
    return {"head_seq": last[0], "head_hash": last[1], "entries": report.entries}
