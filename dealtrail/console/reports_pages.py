"""The reports pages: the list of scheduled reports and their revisions, a report of any span
made on request, and the scheduled reports' files (only those named, only inside their folder)."""

from __future__ import annotations

import json
import re
import tempfile
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import duckdb
from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from dealtrail.console.deps import Console, ConsoleConfig, Cursor, PageUser, invalid, local
from dealtrail.console.filters import parse_time
from projections.display.timefmt import span
from projections.records.signoff import (
    SIGNER_ROLE,
    SIGNOFF,
    SignOffError,
    block_html,
    check_anchor,
    signer_label,
    verify,
    with_block,
)
from projections.records.users import role_at_least

REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; base-uri 'none'"
"""The compliance report is a self-contained page with its own inline styles and no script."""

_LABEL = re.compile(r"^[A-Za-z0-9._:+-]{1,80}$")
_REPORT_ORDER = (
    "report.html",
    "summary.json",
    "findings.csv",
    "findings.parquet",
    "report.pdf",
    "signoff.json",
    "report-signed.pdf",
)
_REPORT_FILES = set(_REPORT_ORDER)


def router(console: Console) -> APIRouter:
    """The routes under ``/reports`` (none in the API's document)."""
    routes = APIRouter()
    config, render = console.config, console.render

    @routes.get("/reports", include_in_schema=False)
    def reports_page(request: Request, user: PageUser, con: Cursor) -> HTMLResponse:
        from projections.store.archive import ArchiveError, reading_archive

        sql = "SELECT min(occurred_at), max(occurred_at) FROM events"
        try:
            with reading_archive(con, config.archive) as reader:  # the archived months are reported too
                spans = reader.execute(sql).fetchall()
        except ArchiveError:  # their folder is missing: the live months (a report says why)
            spans = con.execute(sql).fetchall()
        span = spans[0] if spans else None
        return render(
            request,
            "reports.html.j2",
            user,
            scheduled=_scheduled(config, con),
            reports_dir=config.reports_dir,
            first=span[0] if span else None,
            last=span[1] if span else None,
            can_sign=role_at_least(user.role, SIGNER_ROLE),
        )

    @routes.get("/reports/view", include_in_schema=False)
    def report_view(
        user: PageUser,
        con: Cursor,
        from_: Annotated[str | None, Query(alias="from")] = None,
        to: str | None = None,
    ) -> Response:
        from projections.reports.report import write_report
        from projections.store.archive import ArchiveError

        start, end = parse_time(from_, "from", config.tz), parse_time(to, "to", config.tz)
        if start is not None and end is not None and start >= end:
            raise invalid(("query", "to"), "from must be before to")
        with tempfile.TemporaryDirectory(prefix="dealtrail-console-report-") as tmp:
            try:
                files = write_report(
                    con,
                    Path(tmp),
                    start,
                    end,
                    None,  # the title from the property and the period (report_title)
                    tz=config.tz,
                    review_due=config.review_due,
                    property_name=config.property_name,
                    generated_at=config.clock(),
                    console_url="",  # served by the console: its own paths
                    max_listed=config.report_max_listed,
                    archive=config.archive,
                    control=config.control.report_args,
                )
            except ArchiveError as exc:  # the archived months' folder is missing: no report without them
                raise HTTPException(503, str(exc)) from None
            html = files.html.read_text(encoding="utf-8")
        return HTMLResponse(html, headers={"Content-Security-Policy": REPORT_CSP})

    @routes.get("/reports/scheduled/{label}/{name}", include_in_schema=False)
    def scheduled_file(label: str, name: str, user: PageUser) -> Response:
        folder = config.reports_dir
        path = _inside(folder, label, name) if folder is not None and name in _REPORT_FILES else None
        if path is None or not _LABEL.match(label):
            raise HTTPException(404)
        headers = {"Content-Security-Policy": REPORT_CSP} if name.endswith(".html") else {}
        return FileResponse(path, headers=headers)

    @routes.get("/reports/scheduled/{label}/{revision}/{name}", include_in_schema=False)
    def scheduled_revision_file(label: str, revision: str, name: str, user: PageUser, con: Cursor) -> Response:
        from projections.records.report_revisions import REVISION

        folder = config.reports_dir
        ok = folder is not None and _LABEL.match(label) and REVISION.match(revision) and name in _REPORT_FILES
        path = _inside(folder, label, revision, name) if ok and folder is not None else None
        if path is None:
            raise HTTPException(404)
        headers = {"Content-Security-Policy": REPORT_CSP} if name.endswith(".html") else {}
        if name == "report.html":  # with its sign-off block (the file itself stays as signed)
            signed = (path.parent / SIGNOFF).exists()
            unanchored = check_anchor(con, path.parent, chain=False).problems() if signed else None
            html = with_block(path.read_text(encoding="utf-8"), block_html(path.parent, unanchored))
            return HTMLResponse(html, headers=headers)
        return FileResponse(path, headers=headers)

    return routes


def _scheduled(config: ConsoleConfig, con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Each period's revisions (``projections.records.report_revisions.history``), latest first, newest
    period first; a revision's ``base`` is the path its files are served under; the latest
    revision's sign-off is checked against its access-log entry in the store (``con``), and its
    ``stale`` says why it is no longer current (None: current; :func:`dealtrail.reporting.schedule.stale_since`)."""
    from dealtrail.reporting.schedule import stale_since
    from projections.records.report_revisions import LEGACY, history

    folder = config.reports_dir
    if folder is None or not folder.is_dir():
        return []
    out = []
    for sub in sorted(folder.iterdir(), reverse=True):
        if not (sub.is_dir() and _LABEL.match(sub.name)):
            continue
        revisions = []
        for r in reversed(history(sub)):
            where = sub if r["folder"] == LEGACY else sub / r["folder"]
            base = f"/reports/scheduled/{quote(sub.name)}" + ("" if r["folder"] == LEGACY else f"/{r['folder']}")
            files = [name for name in _REPORT_ORDER if (where / name).is_file()]
            revisions.append({**r, "base": base, "files": files, "signoff": None, "stale": None})
        for r in revisions:
            r["as_of_shown"] = _shown(r["as_of"], config.tz)
        if revisions and revisions[0]["folder"] != LEGACY:
            revisions[0]["signoff"] = _signoff(sub / revisions[0]["folder"], con, config.tz)
            revisions[0]["stale"] = stale_since(con, sub, config.clock())  # an event or review since its as-of
        if revisions:
            try:
                manifest = json.loads((sub / "manifest.json").read_text(encoding="utf-8"))
                # in the casino's zone, each end with its offset (a night that falls back has two 01:30s)
                start, end = datetime.fromisoformat(manifest["start"]), datetime.fromisoformat(manifest["end"])
                shown: str | None = span(start, end, config.tz)
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                shown = None
            out.append({"label": sub.name, "span": shown, "latest": revisions[0], "older": revisions[1:]})
    return out


def _signoff(folder: Path, con: duckdb.DuckDBPyConnection, tz: tzinfo = UTC) -> dict[str, Any] | None:
    """The sign-off of the revision in ``folder`` for the Reports page: ``record`` (None: not
    signed), ``intact``, ``problems``, ``signed_shown`` and ``anchor_problems`` (why
    ``signoff.json`` is not the one the access log recorded at signing; the chain itself is
    checked by ``dealtrail verify``); None when its record is unreadable."""
    try:
        check = verify(folder)
    except SignOffError:
        return None
    record = check.record
    shown = _shown(record.get("signed_at"), tz) if record else None
    anchored = check_anchor(con, folder, chain=False).problems() if record else []
    return {
        "record": record,
        "intact": check.intact,
        "problems": check.problems(),
        "signed_shown": shown,
        "signer": signer_label(record) if record else None,
        "anchor_problems": anchored,
    }


def _shown(value: object, tz: tzinfo = UTC) -> str | None:
    """An ISO 8601 time read from a report's files, shown in ``tz`` with its offset as
    :func:`~dealtrail.console.deps.local` does (None if unreadable)."""
    try:
        return local(datetime.fromisoformat(str(value)), tz) if value else None
    except ValueError:
        return None


def _inside(root: Path, *names: str) -> Path | None:
    """The file ``root/names...`` if it lies inside ``root`` once resolved, else None.

    Each name must be one plain path component: not empty, ``.`` or ``..``, and without a slash,
    a backslash or NUL, however many times the server decoded it (``%2e%2e`` and a double-encoded
    ``%252e%252e`` both arrive here as ``..``). The path is then resolved (symbolic links
    followed) and must still be a regular file under ``root`` resolved: a link that points out
    of the folder is not followed out.

    Args:
        root: the folder served from.
        names: the path components below it, as the route received them.

    Returns:
        The resolved path of a regular file inside ``root``, or None (the caller answers 404).
    """
    if any(n in ("", ".", "..") or any(c in n for c in "/\\\0") for n in names):
        return None
    try:
        base = root.resolve(strict=True)
        path = base.joinpath(*names).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, a link loop, a name the OS refuses
        return None
    return path if path.is_relative_to(base) and path.is_file() else None
