"""The access log's pages (admins only) and the console's error pages.

``/admin/access`` lists the access log newest first, filtered by user, kind and period, a page
at a time; ``/admin/access.csv`` exports the same selection (spreadsheet-neutralised). Errors of
the pages (403, 404, a form the validation refused) are pages in the console's look; under
``/api/`` they stay JSON.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from dealtrail.console.deps import Console, Cursor, PageUser, User, query_string
from projections.records import access_log
from projections.records.users import role_at_least

PAGE = 100
"""Entries per page of the access log."""


def _day(value: str, field: str) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise HTTPException(422, f"{field} is a date YYYY-MM-DD (got {value[:20]!r})") from None


def router(console: Console) -> APIRouter:
    """The routes of ``/admin/access`` and ``/admin/access.csv`` (none in the API's document)."""
    routes = APIRouter()

    def selection(user: User, who: str, kind: str, since: str, until: str) -> access_log.LogFilter:
        if not role_at_least(user.role, "admin"):
            raise HTTPException(403, "only an admin reads the access log")
        end = _day(until, "to")
        return access_log.LogFilter(who or None, kind or None, _day(since, "from"), end and end + timedelta(days=1))

    @routes.get("/admin/access", include_in_schema=False)
    def access_page(
        request: Request,
        user: PageUser,
        con: Cursor,
        who: Annotated[str, Query(alias="user", max_length=200)] = "",
        kind: Annotated[str, Query(max_length=40)] = "",
        since: Annotated[str, Query(alias="from", max_length=10)] = "",
        until: Annotated[str, Query(alias="to", max_length=10)] = "",
        page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    ) -> HTMLResponse:
        where = selection(user, who, kind, since, until)
        rows, total = access_log.entries(con, where, PAGE, (page - 1) * PAGE)
        params = {"user": who, "kind": kind, "from": since, "to": until}
        shown = query_string(params)
        console.access.record_read(
            "access_log_viewed", user.name, f"access log page {page}" + (f" ({shown})" if shown else "")
        )
        return console.render(
            request,
            "access.html.j2",
            user,
            entries=rows,
            total=total,
            page=page,
            pages=max(1, -(-total // PAGE)),
            kinds=access_log.kinds(con),
            q=params,
            qs=query_string(params),
        )

    @routes.get("/admin/access.csv", include_in_schema=False)
    def access_csv(
        user: PageUser,
        con: Cursor,
        who: Annotated[str, Query(alias="user", max_length=200)] = "",
        kind: Annotated[str, Query(max_length=40)] = "",
        since: Annotated[str, Query(alias="from", max_length=10)] = "",
        until: Annotated[str, Query(alias="to", max_length=10)] = "",
    ) -> Response:
        rows, _ = access_log.entries(con, selection(user, who, kind, since, until), None)
        return Response(
            log_csv(rows),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": 'attachment; filename="access-log.csv"'},
        )

    return routes


def log_csv(rows: list[dict[str, Any]]) -> str:
    """Access-log rows as CSV (every column; times in UTC with their offset), each cell a
    spreadsheet would run quoted as text (``projections.display.spreadsheet.neutralise_cell``)."""
    import csv
    import io

    from dealtrail.console.deps import utc
    from projections.display.spreadsheet import neutralise_cell

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(access_log.COLUMNS)
    for r in rows:
        cells = [r.get(c) for c in access_log.COLUMNS]
        w.writerow(neutralise_cell(utc(v) if isinstance(v, datetime) else "" if v is None else str(v)) for v in cells)
    return buf.getvalue()


def _request_user(request: Request, console: Console) -> User | None:
    """The request's user as its route found it, else from its session (a page no route has)."""
    state: Any = request.state
    name, role = getattr(state, "user_name", None), getattr(state, "user_role", None)
    if isinstance(name, str) and isinstance(role, str):
        return User(name, role)
    if "session" not in request.scope:
        return None
    from dealtrail.console import guard

    cur = console.store.con.cursor()
    try:
        found = guard.session_user(console, request, cur)
    finally:
        cur.close()
    return None if found is None else User(*found)


def install_error_pages(app: FastAPI, console: Console) -> None:
    """Answer the pages' errors with a page (the API's stay JSON), keeping their headers."""

    def is_api(request: Request) -> bool:
        return request.url.path.startswith("/api/")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        headers = dict(exc.headers or {})
        if is_api(request) or exc.status_code < 400:
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)
        titles = {403: "Not allowed", 404: "Not found", 405: "Not allowed here", 429: "Too many attempts"}
        response = console.render(
            request,
            "error.html.j2",
            _request_user(request, console),
            exc.status_code,
            title=titles.get(exc.status_code, "Something is wrong"),
            message=str(exc.detail),
        )
        response.headers.update(headers)
        return response

    @app.exception_handler(RequestValidationError)
    async def unprocessable(request: Request, exc: RequestValidationError) -> Response:
        from dealtrail.console.app import validation_detail

        detail = validation_detail(exc.errors())
        if is_api(request):
            return JSONResponse(detail, status_code=422)
        lines = [f"{'.'.join(str(x) for x in e['loc'][1:]) or 'form'}: {e['msg']}" for e in detail["detail"]]
        return console.render(
            request,
            "error.html.j2",
            _request_user(request, console),
            422,
            title="The form was not accepted",
            message="; ".join(lines),
        )
