"""The command line: forwarding the access log to a SIEM (``access-log forward``) and the
forwarder the store's writers (``serve``, ``project``) start from the settings."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dealtrail.cli.common import _DB, _fail, app, err, load
from dealtrail.settings import AccessForwardSettings

if TYPE_CHECKING:
    import duckdb

    from dealtrail.reporting.access_forward import AccessForwarder, ForwardLoop


def access_forwarder(
    forward: AccessForwardSettings, con: duckdb.DuckDBPyConnection, db: Path, property_name: str | None = None
) -> AccessForwarder | None:
    """The forwarder of the store ``db``'s access log to the targets of ``forward``
    (``DEALTRAIL_ACCESS_FORWARD__*``), or None when none is set.

    Each target's cursor is ``<cursor_dir or the store's folder>/<store name>.access-forward.<target>.cursor``;
    each message names ``property_name`` (``DEALTRAIL_PROPERTY``; ``-`` when unset) and the
    store's absolute path.
    """
    from dealtrail.reporting.access_forward import (
        AccessForwarder,
        Cursor,
        JsonLinesSender,
        Origin,
        RelpSender,
        RelpTarget,
        Sender,
        SyslogSender,
        SyslogTarget,
    )

    if not forward.enabled:
        return None
    folder = forward.cursor_dir or db.parent
    origin = Origin(property_name or "-", str(db.resolve()))
    routes: list[tuple[Sender, Cursor]] = []
    if forward.syslog_host is not None:
        target = SyslogTarget(
            forward.syslog_host,
            forward.syslog_port,
            forward.syslog_tls,
            forward.syslog_ca,
            forward.syslog_cert,
            forward.syslog_key,
            forward.syslog_hostname,
            forward.timeout_seconds,
            forward.syslog_resend_window,
        )
        routes.append((SyslogSender(target, origin), Cursor(folder / f"{db.name}.access-forward.syslog.cursor")))
    if forward.relp_host is not None:
        relp = RelpTarget(forward.relp_host, forward.relp_port, forward.syslog_hostname, forward.timeout_seconds)
        routes.append((RelpSender(relp, origin), Cursor(folder / f"{db.name}.access-forward.relp.cursor")))
    if forward.jsonl_path is not None:
        jsonl = JsonLinesSender(forward.jsonl_path, origin)
        routes.append((jsonl, Cursor(folder / f"{db.name}.access-forward.jsonl.cursor")))
    return AccessForwarder(con, routes, say=lambda line: err.print(line, soft_wrap=True, markup=False))


def start_access_forward(
    forward: AccessForwardSettings, con: duckdb.DuckDBPyConnection, db: Path, property_name: str | None = None
) -> ForwardLoop | None:
    """Forward the access log from a background thread of the store's writer process, if a
    target is set (one line says where to); None otherwise. Stop it with ``.stop()``."""
    from dealtrail.reporting.access_forward import ForwardLoop

    forwarder = access_forwarder(forward, con, db, property_name)
    if forwarder is None:
        return None
    names = ", ".join(r.sender.name for r in forwarder.routes)
    err.print(f"access log: forwarded to {names} as it is written", soft_wrap=True, markup=False)
    return ForwardLoop(forwarder, forward.poll_seconds, forward.retry_max_seconds)


access_app = typer.Typer(help="The access log: forward it to a SIEM (syslog, JSON lines).")
app.add_typer(access_app, name="access-log")


@access_app.command("forward")
def forward_command(
    db: Annotated[Path | None, typer.Option(help="DuckDB file.", show_default=_DB)] = None,
    follow: Annotated[
        bool, typer.Option("--follow", help="Keep forwarding as entries come (until Ctrl-C), not only up to now.")
    ] = False,
) -> None:
    """Forward the access log's entries not yet sent to the targets of DEALTRAIL_ACCESS_FORWARD__*
    (a syslog receiver, a JSON-lines file), from each target's cursor; for a store no console or
    projector holds (they forward it themselves while they run). Exit 1 when a target fails."""
    from projections.store.store import Store

    settings = load()
    db = db or settings.db
    if not db.exists():
        raise _fail(f"no dealtrail database at {db}", code=1)
    if not settings.access_forward.enabled:
        raise _fail("no target: set DEALTRAIL_ACCESS_FORWARD__SYSLOG_HOST or DEALTRAIL_ACCESS_FORWARD__JSONL_PATH")
    try:
        store = Store(db, settings.duckdb_memory_limit)
    except Exception as exc:  # DuckDB: the file is held by its writer, which forwards itself
        raise _fail(
            f"cannot open {db} (a console or projector holds it, and forwards its log itself): {exc}", 1
        ) from None
    with store:
        forwarder = access_forwarder(settings.access_forward, store.con, db, settings.property_name)
        assert forwarder is not None
        try:
            while True:
                sent, ok = forwarder.run_once()
                err.print(f"access log: {sent} entries forwarded", markup=False)
                if not follow:
                    if not ok:
                        raise _fail("a target did not take every entry; run again to resume from its cursor", 1)
                    return
                time.sleep(settings.access_forward.poll_seconds if ok else settings.access_forward.retry_max_seconds)
        finally:
            forwarder.close()
