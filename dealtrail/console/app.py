"""The compliance console: a FastAPI application over one dealtrail store.

Server-rendered pages (Jinja2, autoescaped) and a JSON API under ``/api/v1``. The process that
runs it is the store's one writer (``dealtrail serve``, or the projector of ``dealtrail project
--serve``): users and tokens are written through the store's connection under a lock (the
projector holds the same lock around its batches); every read takes its own cursor. Reviews are
written to the store the same way under ``serve``, and published to the reviews topic under
``project --serve`` (a review sink), from which the projector stores them. No page, asset or
API call is served without authentication. Every response carries a strict
Content-Security-Policy (scripts and styles only from the console itself); the one script,
``/static/console.js``, refreshes the floor and needs no third party.

Times are rendered in UTC with their offset. Review due times and the clock come in resolved
(:class:`ConsoleConfig`); nothing here reads the environment.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import secrets
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

import duckdb
import jinja2
from fastapi import Depends, FastAPI, Form, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from starlette.middleware.sessions import SessionMiddleware
from ulid import ULID

from dealtrail.console import auth, health
from projections import access, incidents, reviews
from projections.cards import area_name, card_face
from projections.reviews import FindingFilter, ReviewDue
from projections.spreadsheet import neutralise_cell
from projections.store import Store
from schemas.reviews import (
    Cause,
    FindingAcknowledged,
    FindingAssigned,
    FindingDisposed,
    FindingReopened,
    ReviewStatus,
)
from streams.engine.catalog import RULES_BY_ID

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; base-uri 'none'"
"""The compliance report is a self-contained page with its own inline styles and no script."""

PAGE_SIZE = 50
ACTIONS = ("acknowledge", "assign", "dispose", "reopen")
SEVERITIES = ("voiding", "integrity", "procedural")
_LABEL = re.compile(r"^[A-Za-z0-9._:+-]{1,80}$")
KINDS = {"incidents": True, "consequences": False}
"""The findings list's ``kind`` values -> ``FindingFilter.incident`` (absent: every record)."""
_REPORT_FILES = {"report.html", "summary.json", "findings.csv", "findings.parquet"}
MAX_OFFSET = 2**53
"""The largest ``offset`` the API takes (far beyond any store; a bigger one is a 422, never an
overflow of the store's 64-bit integers)."""
_REPORT_ORDER = ("report.html", "summary.json", "findings.csv", "findings.parquet")


@dataclass(frozen=True)
class ConsoleConfig:
    """What the console needs, resolved by the entry point from the settings.

    Attributes:
        review_due: review due times per severity (hours).
        session_secret: key that signs session cookies (keep it secret; never logged).
        secure_cookies: mark the session cookie ``Secure`` (served over https).
        reports_dir: folder of scheduled reports to list, or None.
        poll_seconds: how often the floor page refreshes (seconds).
        clock: the current time (timezone-aware); tests pass a fixed one.
        property_name: the casino property report headers name (resolved settings); None: none.
    """

    review_due: ReviewDue
    session_secret: str
    secure_cookies: bool = False
    reports_dir: Path | None = None
    poll_seconds: float = 2.0
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    property_name: str | None = None


class LoginRequiredError(Exception):
    """A page was asked for without a session: the browser goes to the login page."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


@dataclass(frozen=True)
class User:
    """The authenticated user of a request (name and role)."""

    name: str
    role: str

    @property
    def can_review(self) -> bool:
        """Reviewers and admins review; viewers only read."""
        return self.role in ("reviewer", "admin")

    @property
    def is_admin(self) -> bool:
        """Admins also manage users."""
        return self.role == "admin"


def _unicode_text(value: str) -> str:
    """Text a store and a JSON answer can hold: no lone surrogate (U+D800 to U+DFFF alone; a form's
    fields and library callers reach the model without the JSON parser's own check)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be Unicode text (a lone surrogate such as \\ud800 is not)") from None
    return value


Text = Annotated[str, AfterValidator(_unicode_text)]

_ISO_START = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _iso_date_time(value: Any) -> Any:
    """An API time is an ISO 8601 date and time (a number of seconds or a bare date is not)."""
    if isinstance(value, str) and not _ISO_START.match(value):
        raise ValueError("must be an ISO 8601 date and time, e.g. 2026-11-27T18:00:00+00:00")
    return value


ApiTime = Annotated[datetime, BeforeValidator(_iso_date_time)]


class ErrorMessage(BaseModel):
    """An answer that refuses a request for another reason than its values (401, 403, 404, 503)."""

    detail: str = Field(description="Why, in one sentence.")


class _Open(BaseModel):
    """An answer's documented shape: the fields named are always there; more may be (so the
    document stays true when a field is added)."""

    model_config = ConfigDict(extra="allow")


class FindingRow(_Open):
    """One finding in the API's answers (times UTC with their offset)."""

    finding_id: str
    rule_id: str
    citation: str
    game: str
    severity: str
    table_id: str
    round_id: str | None
    status: str
    message: str
    detected_at: datetime
    review_status: str


class FindingsPage(_Open):
    """``GET /api/v1/findings``: ``total`` findings match; these start at ``offset``."""

    total: int
    offset: int
    findings: list[FindingRow]


class ReviewRow(_Open):
    """One review event of a finding, as stored."""

    review_id: str
    type: str
    user_name: str
    reviewed_at: datetime


class FindingDetail(FindingRow):
    """``GET /api/v1/findings/{finding_id}``: the finding and its review history."""

    reviews: list[ReviewRow]


class StoredReview(_Open):
    """``POST /api/v1/findings/{finding_id}/reviews``: the review event recorded."""

    type: str
    review_id: str
    finding_id: str
    user: str
    reviewed_at: datetime


class FloorTable(_Open):
    """One table on the floor."""

    table_id: str


class Floor(_Open):
    """``GET /api/v1/floor``: every table."""

    tables: list[FloorTable]


class ReviewRequest(BaseModel):
    """Body of ``POST /api/v1/findings/{finding_id}/reviews`` (unknown fields are refused).

    Attributes:
        action: acknowledge, assign, dispose or reopen.
        cause: with ``dispose``: DEALER_ERROR, SUPERVISOR_ERROR, DEVICE, PATRON, DATA_ERROR or
            NOT_A_VIOLATION.
        corrective_action: with ``dispose``: what was done about it.
        assignee: with ``assign``: the user the finding is assigned to.
        note: free text.
    """

    model_config = ConfigDict(extra="forbid")

    action: Literal["acknowledge", "assign", "dispose", "reopen"]
    cause: Cause | None = None
    corrective_action: Text = Field(default="", max_length=4000)
    assignee: Text | None = Field(default=None, max_length=64)
    note: Text = Field(default="", max_length=4000)


def _cursor(request: Request) -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor of the store's connection for one request (session time zone UTC)."""
    cur = request.app.state.store.con.cursor()
    cur.execute("SET TimeZone = 'UTC'").fetchall()
    try:
        yield cur
    finally:
        cur.close()


Cursor = Annotated[duckdb.DuckDBPyConnection, Depends(_cursor)]


def _session_user(request: Request, con: duckdb.DuckDBPyConnection) -> User | None:
    name = request.session.get("user")
    if not isinstance(name, str):
        return None
    u = access.user(con, name)
    if u is None or not u["active"]:
        request.session.clear()
        return None
    return User(u["name"], u["role"])


def _page_user(request: Request, con: Cursor) -> User:
    """The signed-in user of a page request; without a session the browser goes to the login page."""
    u = _session_user(request, con)
    if u is None:
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise LoginRequiredError(path)
    return u


def _api_user(request: Request, con: Cursor) -> User:
    """The user of an API request: ``Authorization: Bearer TOKEN``, or a browser session (401 without)."""
    header = request.headers.get("authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token:
            found = access.token_user(con, auth.token_hash(token.strip()))
            if found is not None:
                return User(found["name"], found["role"])
        raise HTTPException(401, "invalid or revoked token", headers={"WWW-Authenticate": "Bearer"})
    u = _session_user(request, con)
    if u is None:
        raise HTTPException(401, "authentication required", headers={"WWW-Authenticate": "Bearer"})
    return u


def _known_query(request: Request) -> None:
    """Refuse a query parameter the API operation does not have, or one given twice (422): a
    misspelt filter (``?statuss=open``) would otherwise be ignored and widen the answer without
    a word, and of ``?table=A&table=B`` only B would count."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    known: set[str] = set()
    todo = [dependant]
    while todo:  # the operation's own parameters and those of its dependencies (FastAPI's Dependant)
        d = todo.pop()
        known.update(p.alias for p in d.query_params)
        todo.extend(d.dependencies)
    unknown = sorted(k for k in request.query_params if k not in known)
    if unknown:
        raise invalid(
            ("query", unknown[0]), f"unknown query parameter {unknown[0]!r}; known: {', '.join(sorted(known))}"
        )
    names = [k for k, _ in request.query_params.multi_items()]
    twice = sorted({k for k in names if names.count(k) > 1})
    if twice:  # one value each: the last one would win without a word
        raise invalid(("query", twice[0]), f"query parameter {twice[0]!r} is given more than once")


PageUser = Annotated[User, Depends(_page_user)]
ApiUser = Annotated[User, Depends(_api_user)]


def utc(value: datetime | None) -> str:
    """A time as ``YYYY-MM-DD HH:MM:SS+00:00`` (UTC with its offset); ``-`` for None."""
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S+00:00")


def _shown(value: object) -> str | None:
    """An ISO 8601 time read from a report's files, shown as :func:`utc` does (None if unreadable)."""
    try:
        return utc(datetime.fromisoformat(str(value))) if value else None
    except ValueError:
        return None


def utc_short(value: datetime | None) -> str:
    """A time as ``MM-DD HH:MM:SS`` in UTC, for the floor's narrow columns (the column heads say
    UTC; the full time is the cell's title); ``-`` for None."""
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%m-%d %H:%M:%S")


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dealtrail.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["utc"] = utc
    env.filters["utc_short"] = utc_short
    return env


def table_layout(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Layout rows (from ``dealtrail.replay.layout``) placed as on the felt: the dealer's side
    (dealer, bank), the middle (community cards, burns, stacks) and the players' seats."""
    placed: dict[str, list[dict[str, Any]]] = {"dealer": [], "middle": [], "seats": []}
    for row in rows:
        area = row["area"]
        cards = [{**card_face(code), "face_up": face == "UP", "event_id": eid} for eid, code, face in row["cards"]]
        item = {"area": area, "name": area_name(area), "cards": cards}
        if area in ("DEALER", "BANK"):
            placed["dealer"].append(item)
        elif area.startswith("SEAT_"):
            placed["seats"].append(item)
        else:
            placed["middle"].append(item)
    placed["seats"].sort(key=lambda i: int(i["area"].split("_")[1]))
    return placed


def invalid(loc: tuple[str | int, ...], message: str) -> RequestValidationError:
    """A 422 in FastAPI's validation shape (``{"detail": [{"loc", "msg", "type"}]}``), the one
    shape every 422 of the console has, as its OpenAPI document says.

    Args:
        loc: where the value was, e.g. ``("query", "from")`` or ``("body", "cause")``.
        message: what is wrong with it.
    """
    return RequestValidationError([{"type": "value_error", "loc": loc, "msg": message}])


def _parse_time(value: str | datetime | None, name: str) -> datetime | None:
    """A filter's time: ISO 8601; without an offset it is read as UTC (the pages say so).

    Raises:
        RequestValidationError: 422, not a time, or one that is not a UTC instant (an offset
            that moves year 1 or 9999 out of range).
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        t = value
    else:
        try:
            t = datetime.fromisoformat(value)
        except ValueError:
            raise invalid(("query", name), f"{name} must be an ISO 8601 time, e.g. 2026-11-27T18:00:00+00:00") from None
    t = t if t.tzinfo is not None else t.replace(tzinfo=UTC)
    try:
        return t.astimezone(UTC)
    except OverflowError:
        raise invalid(("query", name), f"{name} is out of range once taken to UTC") from None


def _blank(value: str | None) -> str | None:
    return value or None


@dataclass(frozen=True)
class FindingsQuery:
    """A findings list's query: the filter, the query-string values as given (for links), the sort
    column and its order (``asc`` or ``desc``)."""

    flt: FindingFilter
    params: dict[str, str]
    sort: str
    order: Literal["asc", "desc"]


def filters_from(
    from_: str | datetime | None,
    to: str | datetime | None,
    game: str | None,
    table: str | None,
    dealer: str | None,
    rule: str | None,
    severity: str | None,
    status: str | None,
    review: str | None,
) -> FindingFilter:
    """The findings filter of a page's or the API's query values (blank means any).

    Raises:
        RequestValidationError: 422 for a ``from``/``to`` that is not an ISO 8601 time (no offset: UTC).
    """
    return FindingFilter(
        start=_parse_time(from_, "from"),
        end=_parse_time(to, "to"),
        game=_blank(game),
        table_id=_blank(table),
        dealer=_blank(dealer),
        rule=_blank(rule),
        severity=_blank(severity),
        status=_blank(status),
        review_status=_blank(review),
    )


def page_query(
    from_: Annotated[str | None, Query(alias="from")] = None,
    to: str | None = None,
    game: str | None = None,
    table: str | None = None,
    dealer: str | None = None,
    rule: str | None = None,
    severity: str | None = None,
    status: str | None = None,
    review: str | None = None,
    sort: str = "detected",
    order: Literal["asc", "desc"] = "desc",
    kind: str | None = None,
) -> FindingsQuery:
    """The findings page's and its CSV export's query: one filter, one order. ``kind``
    ``incidents`` keeps the incidents, ``consequences`` the consequences (anything else: every
    finding record)."""
    given = {"from": from_, "to": to, "game": game, "table": table, "dealer": dealer, "rule": rule,
             "severity": severity, "status": status, "review": review}  # fmt: skip
    flt = filters_from(from_, to, game, table, dealer, rule, severity, status, review)
    incident = KINDS.get(kind or "")
    given["kind"] = kind if incident is not None else None
    flt = replace(flt, incident=incident)
    return FindingsQuery(flt, {k: v or "" for k, v in given.items()}, sort, order)


Filters = Annotated[FindingsQuery, Depends(page_query)]


async def strict_json_body(request: Request) -> None:
    """Refuse a JSON request body that the standard parser would read loosely: a key twice in
    one object (the last would win), nesting too deep (:func:`schemas.strict_json.loads`).

    Declared once for the whole app; bodies that are not JSON (forms) pass untouched.

    Raises:
        RequestValidationError: 422 with FastAPI's list of errors, one of type
            ``json_invalid`` whose message starts with ``malformed_json`` and names the key.
    """
    if "json" not in request.headers.get("content-type", ""):
        return
    body = await request.body()
    if not body:
        return
    from fastapi.exceptions import RequestValidationError

    from schemas.strict_json import StrictJSONError, loads

    try:
        loads(body)
    except StrictJSONError as exc:
        error = {"type": "json_invalid", "loc": ("body", 0), "msg": f"malformed_json: {exc}", "input": {}}
        raise RequestValidationError([{**error, "ctx": {"error": str(exc)}}]) from None


def create_app(
    store: Store,
    config: ConsoleConfig,
    review_sink: Callable[[reviews.ReviewEvent], None] | None = None,
    write_lock: threading.Lock | None = None,
) -> FastAPI:
    """Build the console over ``store`` (this process is its one writer).

    Args:
        store: the open store; users and tokens (and, without a sink, reviews) are written
            through its connection.
        config: see :class:`ConsoleConfig`.
        review_sink: where a review event goes instead of the store (the streaming deployment:
            a producer of the reviews topic that returns once the broker has it); it raises on
            failure, which the console answers with 503. None: reviews are stored directly.
        write_lock: the lock every writer of ``store.con`` in this process holds (the projector
            shares it); None: a new one (``app.state.write_lock``).

    Returns:
        The FastAPI application (serve it with uvicorn).
    """
    app = FastAPI(
        dependencies=[Depends(strict_json_body)],
        title="dealtrail compliance console API",
        version="1",
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        description="Findings of the dealtrail audit (58 Pa. Code table-game dealing procedures) and their reviews. "
        "Authenticate with `Authorization: Bearer TOKEN` (dealtrail users token NAME).",
    )
    app.state.store = store
    app.state.config = config
    app.include_router(health.router)  # /healthz, /readyz: no login, no data (app.state.readiness)
    env = _env()
    write_lock = write_lock or threading.Lock()
    app.state.write_lock = write_lock
    store.con.execute("SET GLOBAL TimeZone = 'UTC'").fetchall()
    app.add_middleware(
        SessionMiddleware,
        secret_key=config.session_secret,
        session_cookie="dealtrail_session",
        max_age=12 * 3600,
        same_site="strict",
        https_only=config.secure_cookies,
    )

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Callable[[Request], Any]) -> Response:
        response: Response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    @app.exception_handler(LoginRequiredError)
    async def to_login(request: Request, exc: LoginRequiredError) -> Response:
        return RedirectResponse("/login?" + _query({"next": exc.next_path}), status_code=303)

    @app.exception_handler(RequestValidationError)
    async def unprocessable(request: Request, exc: RequestValidationError) -> Response:
        return JSONResponse(validation_detail(exc.errors()), status_code=422)

    def csrf_token(request: Request) -> str:
        token = request.session.get("csrf")
        if not isinstance(token, str):
            token = secrets.token_urlsafe(32)
            request.session["csrf"] = token
        return token

    def check_csrf(request: Request, token: str) -> None:
        expected = request.session.get("csrf")
        if not isinstance(expected, str) or not secrets.compare_digest(expected, token):
            raise HTTPException(403, "the form has expired or did not come from this console; reload the page")

    def render(request: Request, template: str, user: User | None, status_code: int = 200, **ctx: Any) -> HTMLResponse:
        html = env.get_template(template).render(
            user=user,
            csrf=csrf_token(request),
            now=config.clock(),
            path=request.url.path,
            **ctx,
        )
        return HTMLResponse(html, status_code=status_code)

    # -- login -----------------------------------------------------------------------------

    @app.get("/login", include_in_schema=False)
    def login_page(request: Request, next: str = "/") -> HTMLResponse:
        return render(request, "login.html.j2", None, next=_safe_next(next), error=None)

    @app.post("/login", include_in_schema=False)
    def login(
        request: Request,
        con: Cursor,
        username: Annotated[str, Form(max_length=64)],
        password: Annotated[str, Form(max_length=1024)],
        csrf: Annotated[str, Form()],
        next: Annotated[str, Form()] = "/",
    ) -> Response:
        check_csrf(request, csrf)
        u = access.user(con, username)
        ok = auth.verify_password(u["password_hash"] if u and u["active"] else None, password)
        if not ok or u is None:
            return render(request, "login.html.j2", None, 401, next=_safe_next(next), error="Wrong name or password.")
        request.session.clear()
        request.session["user"] = u["name"]
        request.session["csrf"] = secrets.token_urlsafe(32)
        return RedirectResponse(_safe_next(next), status_code=303)

    @app.post("/logout", include_in_schema=False)
    def logout(request: Request, csrf: Annotated[str, Form()]) -> Response:
        check_csrf(request, csrf)
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    # -- static assets (authenticated like everything else) ---------------------------------

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str, user: PageUser) -> Response:
        if name not in ("console.css", "console.js"):
            raise HTTPException(404)
        path = Path(str(resources.files("dealtrail.console").joinpath("static", name)))
        kind = "text/css" if name.endswith(".css") else "text/javascript"
        return FileResponse(path, media_type=kind, headers={"Cache-Control": "private, max-age=300"})

    @app.get("/login.css", include_in_schema=False)
    def login_css() -> Response:
        # the login page's style (the only asset served before login: no data in it)
        path = Path(str(resources.files("dealtrail.console").joinpath("static", "console.css")))
        return FileResponse(path, media_type="text/css", headers={"Cache-Control": "private, max-age=300"})

    # -- floor -----------------------------------------------------------------------------

    def floor_rows(con: duckdb.DuckDBPyConnection, now: datetime) -> list[dict[str, Any]]:
        """Each table's row: its devices and dealer (``con_floor.sql``) with its incidents not yet
        disposed, by severity, its overdue remedies and late reviews (the incidents read model)."""
        cur = con.execute(_sql("con_floor.sql"))
        cols = [d[0] for d in cur.description]
        fetched = cur.fetchall()
        per_table = incidents.counts_by_table(con, config.review_due, now)
        rows = []
        for r in fetched:
            row = dict(zip(cols, r, strict=True))
            rows.append({**row, **_floor_counts(per_table.get(row["table_id"], incidents.Counts()))})
        return rows

    def floor_context(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
        now = config.clock()
        return {
            "tables": floor_rows(con, now),
            "totals": incidents.counts(con, config.review_due, now),
            "as_of": now,
        }

    @app.get("/", include_in_schema=False)
    def floor(request: Request, user: PageUser, con: Cursor) -> HTMLResponse:
        return render(
            request,
            "floor.html.j2",
            user,
            **floor_context(con),
            poll_ms=int(config.poll_seconds * 1000),
            undelivered=_undelivered(con),
        )

    @app.get("/floor/tables", include_in_schema=False)
    def floor_fragment(request: Request, user: PageUser, con: Cursor) -> HTMLResponse:
        return render(request, "floor_rows.html.j2", user, **floor_context(con))

    # -- findings --------------------------------------------------------------------------

    def choices(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
        def one(sql: str) -> list[str]:
            return [str(r[0]) for r in con.execute(sql).fetchall() if r[0] is not None]

        return {
            "games": one("SELECT DISTINCT game FROM dim_findings ORDER BY 1"),
            "tables": one("SELECT DISTINCT table_id FROM dim_findings ORDER BY 1"),
            "rules": one("SELECT DISTINCT rule_id FROM dim_findings ORDER BY 1"),
            "dealers": one("SELECT DISTINCT dealer_id FROM rounds ORDER BY 1"),
            "users": one("SELECT name FROM dim_users WHERE active ORDER BY 1"),
        }

    @app.get("/findings", include_in_schema=False)
    def findings_page(
        request: Request,
        user: PageUser,
        con: Cursor,
        q: Filters,
        page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    ) -> HTMLResponse:
        now = config.clock()
        rows, total = reviews.find(
            con, q.flt, config.review_due, now, q.sort, q.order == "desc", PAGE_SIZE, (page - 1) * PAGE_SIZE
        )
        params, sort, order = q.params, q.sort, q.order
        return render(
            request,
            "findings.html.j2",
            user,
            rows=[_decorate(r) for r in rows],
            total=total,
            counted=incidents.counts(con, config.review_due, now, q.flt),
            page=page,
            pages=max(1, math.ceil(total / PAGE_SIZE)),
            params=params,
            sort=sort,
            order=order,
            query=lambda **kw: _query({**params, "sort": sort, "order": order, **kw}),
            choices=choices(con),
            severities=SEVERITIES,
            review_statuses=[s.value for s in ReviewStatus],
        )

    @app.get("/findings.csv", include_in_schema=False)
    def findings_csv(user: PageUser, con: Cursor, q: Filters) -> Response:
        rows, _ = reviews.find(con, q.flt, config.review_due, config.clock(), q.sort, q.order == "desc")
        return Response(
            _csv(rows),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": 'attachment; filename="findings.csv"'},
        )

    @app.get("/findings/{finding_id}", include_in_schema=False)
    def finding_page(request: Request, finding_id: str, user: PageUser, con: Cursor, done: str = "") -> HTMLResponse:
        f = _finding(con, finding_id, config)
        spec = RULES_BY_ID.get(f["rule_id"])
        return render(
            request,
            "finding.html.j2",
            user,
            f=_decorate(f),
            summary=spec.summary if spec else "",
            evidence=_events(con, list(f["evidence_event_ids"])),
            remedy_events=_events(con, list(f["remedy_event_ids"] or [])),
            layout=_round_layout(con, f["table_id"], f["round_id"]),
            history=reviews.history(con, finding_id),
            revisions=_revisions(con, finding_id),
            causes=[c.value for c in Cause],
            users=choices(con)["users"],
            done=done if done in ACTIONS else "",
            queued=review_sink is not None,
            error=None,
        )

    @app.post("/findings/{finding_id}/reviews", include_in_schema=False)
    def review_form(
        request: Request,
        finding_id: str,
        user: PageUser,
        con: Cursor,
        csrf: Annotated[str, Form()],
        action: Annotated[str, Form()],
        note: Annotated[str, Form(max_length=4000)] = "",
        cause: Annotated[str, Form()] = "",
        corrective_action: Annotated[str, Form(max_length=4000)] = "",
        assignee: Annotated[str, Form(max_length=64)] = "",
    ) -> Response:
        check_csrf(request, csrf)
        if not user.can_review:
            raise HTTPException(403, "a viewer cannot review findings")
        if action not in ACTIONS:
            raise invalid(("body", "action"), f"action must be one of {', '.join(ACTIONS)}")
        try:
            body = ReviewRequest.model_validate(
                {
                    "action": action,
                    "cause": cause or None,
                    "corrective_action": corrective_action,
                    "assignee": assignee or None,
                    "note": note,
                }
            )
        except ValidationError as exc:  # a form's values, refused as the API refuses them
            raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None
        record_review(con, finding_id, user, body)
        return RedirectResponse(f"/findings/{finding_id}?done={action}#reviews", status_code=303)

    def record_review(con: duckdb.DuckDBPyConnection, finding_id: str, user: User, body: ReviewRequest) -> Any:
        _finding(con, finding_id, config)  # 404 for an unknown finding
        common = {
            "review_id": str(ULID()),
            "finding_id": finding_id,
            "user": user.name,
            "reviewed_at": config.clock(),
            "note": body.note,
        }
        event: reviews.ReviewEvent
        if body.action == "acknowledge":
            event = FindingAcknowledged.model_validate(common)
        elif body.action == "assign":
            target = access.user(con, body.assignee or "")
            if target is None or not target["active"]:
                raise invalid(("body", "assignee"), "assign needs the name of an active console user as assignee")
            event = FindingAssigned.model_validate({**common, "assignee": target["name"]})
        elif body.action == "dispose":
            if body.cause is None:
                raise invalid(("body", "cause"), f"dispose needs a cause: one of {', '.join(c.value for c in Cause)}")
            event = FindingDisposed.model_validate(
                {**common, "cause": body.cause, "corrective_action": body.corrective_action}
            )
        else:
            event = FindingReopened.model_validate(common)
        if review_sink is not None:
            try:
                review_sink(event)
            except Exception as exc:  # the broker did not take it: say so, store nothing
                raise HTTPException(503, f"the review was not recorded, try again: {exc}") from None
            return event
        with write_lock:
            reviews.append_review(store.con, event)
        return event

    # -- dealers and tables ----------------------------------------------------------------

    def rates(con: duckdb.DuckDBPyConnection, dealer: str | None, table: str | None) -> dict[str, Any]:
        cur = con.execute(_sql("con_rates.sql"), {"dealer": dealer, "table_id": table})
        cols = [d[0] for d in cur.description]
        rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
        by_rule = [r for r in rows if r["kind"] == "rule"]
        hours = [r for r in rows if r["kind"] == "hour"]
        total_rounds = int(by_rule[0]["rounds"]) if by_rule else sum(int(h["rounds"]) for h in hours)
        for r in by_rule:
            r["rate"] = _rate(r["findings"], total_rounds)
            spec = RULES_BY_ID.get(r["key"])
            r["summary"] = spec.summary if spec else ""
        by_rule.sort(key=lambda r: (-r["findings"], r["key"]))
        for h in hours:
            h["rate"] = _rate(h["findings"], h["rounds"])
        findings_total = sum(int(r["findings"]) for r in by_rule)
        return {
            "rounds": total_rounds,
            "findings": findings_total,
            "rate": _rate(findings_total, total_rounds),
            "by_rule": by_rule,
            "hours": hours,
            "chart": _bars([(h["key"][11:16], h["rate"] or 0.0, h["findings"], h["rounds"]) for h in hours]),
        }

    @app.get("/dealers/{dealer_id}", include_in_schema=False)
    def dealer_page(request: Request, dealer_id: str, user: PageUser, con: Cursor) -> HTMLResponse:
        r = rates(con, dealer_id, None)
        if r["rounds"] == 0:
            raise HTTPException(404, f"no round dealt by {dealer_id}")
        tables = con.execute(
            "SELECT table_id, count(*) FROM rounds WHERE dealer_id = ? GROUP BY 1 ORDER BY 2 DESC", [dealer_id]
        ).fetchall()
        return render(request, "rates.html.j2", user, kind="Dealer", key=dealer_id, r=r, related=tables)

    @app.get("/tables/{table_id}", include_in_schema=False)
    def table_page(request: Request, table_id: str, user: PageUser, con: Cursor) -> HTMLResponse:
        r = rates(con, None, table_id)
        dealers = con.execute(
            "SELECT dealer_id, count(*) FROM rounds WHERE table_id = ? GROUP BY 1 ORDER BY 2 DESC", [table_id]
        ).fetchall()
        if r["rounds"] == 0 and not r["findings"]:
            raise HTTPException(404, f"no table {table_id}")
        return render(request, "rates.html.j2", user, kind="Table", key=table_id, r=r, related=dealers)

    # -- reports ---------------------------------------------------------------------------

    def scheduled() -> list[dict[str, Any]]:
        """Each period's revisions (``projections.period_reports.history``), latest first, newest
        period first; a revision's ``base`` is the path its files are served under."""
        from projections.period_reports import LEGACY, history

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
                revisions.append({**r, "base": base, "files": files})
            for r in revisions:
                r["as_of_shown"] = _shown(r["as_of"])
            if revisions:
                try:
                    manifest = json.loads((sub / "manifest.json").read_text(encoding="utf-8"))
                    start = datetime.fromisoformat(manifest["start"]).astimezone(UTC)
                    end = datetime.fromisoformat(manifest["end"]).astimezone(UTC)
                    to = f"{end:%H:%M}" if end.date() == start.date() else f"{end:%Y-%m-%d %H:%M}"
                    span = f"{start:%Y-%m-%d %H:%M} to {to} UTC"
                except (OSError, ValueError, KeyError, TypeError, AttributeError):
                    span = None
                out.append({"label": sub.name, "span": span, "latest": revisions[0], "older": revisions[1:]})
        return out

    @app.get("/reports", include_in_schema=False)
    def reports_page(request: Request, user: PageUser, con: Cursor) -> HTMLResponse:
        spans = con.execute("SELECT min(occurred_at), max(occurred_at) FROM events").fetchall()
        span = spans[0] if spans else None
        return render(
            request,
            "reports.html.j2",
            user,
            scheduled=scheduled(),
            reports_dir=config.reports_dir,
            first=span[0] if span else None,
            last=span[1] if span else None,
        )

    @app.get("/reports/view", include_in_schema=False)
    def report_view(
        user: PageUser,
        con: Cursor,
        from_: Annotated[str | None, Query(alias="from")] = None,
        to: str | None = None,
    ) -> Response:
        from projections.report import write_report

        start, end = _parse_time(from_, "from"), _parse_time(to, "to")
        if start is not None and end is not None and start >= end:
            raise invalid(("query", "to"), "from must be before to")
        with tempfile.TemporaryDirectory(prefix="dealtrail-console-report-") as tmp:
            span = f"{utc(start) if start else 'the first event'} to {utc(end) if end else 'the last event'}"
            title = f"Compliance report, {span}"
            files = write_report(
                con,
                Path(tmp),
                start,
                end,
                title,
                review_due=config.review_due,
                property_name=config.property_name,
                generated_at=config.clock(),
                console_url="",  # served by the console: its own paths
            )
            html = files.html.read_text(encoding="utf-8")
        return HTMLResponse(html, headers={"Content-Security-Policy": REPORT_CSP})

    @app.get("/reports/scheduled/{label}/{name}", include_in_schema=False)
    def scheduled_file(label: str, name: str, user: PageUser) -> Response:
        folder = config.reports_dir
        path = _inside(folder, label, name) if folder is not None and name in _REPORT_FILES else None
        if path is None or not _LABEL.match(label):
            raise HTTPException(404)
        headers = {"Content-Security-Policy": REPORT_CSP} if name.endswith(".html") else {}
        return FileResponse(path, headers=headers)

    @app.get("/reports/scheduled/{label}/{revision}/{name}", include_in_schema=False)
    def scheduled_revision_file(label: str, revision: str, name: str, user: PageUser) -> Response:
        from projections.period_reports import REVISION

        folder = config.reports_dir
        ok = folder is not None and _LABEL.match(label) and REVISION.match(revision) and name in _REPORT_FILES
        path = _inside(folder, label, revision, name) if ok and folder is not None else None
        if path is None:
            raise HTTPException(404)
        headers = {"Content-Security-Policy": REPORT_CSP} if name.endswith(".html") else {}
        return FileResponse(path, headers=headers)

    # -- admin -----------------------------------------------------------------------------

    @app.get("/admin/users", include_in_schema=False)
    def admin_page(request: Request, user: PageUser, con: Cursor) -> HTMLResponse:
        if not user.is_admin:
            raise HTTPException(403, "only an admin manages users")
        return render(
            request,
            "admin.html.j2",
            user,
            users=access.users(con),
            tokens=access.tokens(con),
            roles=reviews.ROLES,
            token=None,
            message=None,
        )

    @app.post("/admin/users", include_in_schema=False)
    def admin_change(
        request: Request,
        user: PageUser,
        con: Cursor,
        csrf: Annotated[str, Form()],
        op: Annotated[Literal["add", "role", "password", "deactivate", "token", "revoke"], Form()],
        name: Annotated[str, Form(max_length=64)],
        role: Annotated[str, Form()] = "viewer",
        password: Annotated[str, Form(max_length=1024)] = "",
        token_hash: Annotated[str, Form(max_length=64)] = "",
    ) -> HTMLResponse:
        check_csrf(request, csrf)
        if not user.is_admin:
            raise HTTPException(403, "only an admin manages users")
        token = None
        now = config.clock()
        try:
            with write_lock:
                if op == "add":
                    auth.add_user(store.con, name, role, password, now, by=user.name)
                    message = f"user {name} saved with role {role}"
                else:
                    current = access.user(store.con, name)
                    if current is None:
                        raise auth.AccessError(f"no user {name!r}")
                    if op == "role":
                        if role not in reviews.ROLES:
                            raise auth.AccessError(f"role must be one of {', '.join(reviews.ROLES)}")
                        access.put_user(store.con, name, role, None, bool(current["active"]), now, user.name)
                        message = f"{name} is now {role}"
                    elif op == "password":
                        auth.add_user(store.con, name, current["role"], password, now, by=user.name)
                        message = f"password of {name} reset"
                    elif op == "revoke":
                        held = [t for t in access.tokens(store.con) if t["token_hash"] == token_hash]
                        if not held or held[0]["user_name"] != name:
                            raise auth.AccessError(f"no active token {token_hash[:12]} of {name}")
                        access.put_token(store.con, token_hash, name, False, now)
                        message = f"token {token_hash[:12]} of {name} revoked: it no longer opens the API"
                    elif op == "deactivate":
                        if name == user.name:
                            raise auth.AccessError("you cannot deactivate yourself")
                        access.put_user(store.con, name, current["role"], None, False, now, user.name)
                        message = f"{name} can no longer sign in or use a token"
                    else:
                        token = auth.new_token(store.con, name, now)
                        message = f"API token for {name} (shown once, copy it now)"
        except auth.AccessError as exc:
            return render(
                request,
                "admin.html.j2",
                user,
                422,
                users=access.users(con),
                tokens=access.tokens(con),
                roles=reviews.ROLES,
                token=None,
                message=str(exc),
            )
        return render(
            request,
            "admin.html.j2",
            user,
            users=access.users(con),
            tokens=access.tokens(con),
            roles=reviews.ROLES,
            token=token,
            message=message,
        )

    # -- JSON API --------------------------------------------------------------------------

    @app.get("/api/v1/openapi.json", include_in_schema=False)
    def openapi_doc(user: ApiUser) -> JSONResponse:
        doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        doc.setdefault("components", {})["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "description": "dealtrail users token NAME"}
        }
        doc["security"] = [{"bearer": []}]
        return JSONResponse(doc)

    @app.get(
        "/api/v1/findings",
        tags=["findings"],
        operation_id="list_findings",
        response_model=None,  # the answer's shape is documented in responses (see _Open)
        dependencies=[Depends(_known_query)],
        responses={
            **_REFUSALS,
            200: {"model": FindingsPage, "description": "The findings, newest first.", "links": _LIST_LINKS},
        },
    )
    def api_findings(
        user: ApiUser,
        con: Cursor,
        status: str | None = None,
        table: str | None = None,
        rule: str | None = None,
        severity: str | None = None,
        from_: Annotated[ApiTime | None, Query(alias="from", description="ISO 8601; without offset: UTC")] = None,
        to: Annotated[ApiTime | None, Query(description="ISO 8601, exclusive; without offset: UTC")] = None,
        review_status: str | None = None,
        game: str | None = None,
        dealer: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    ) -> dict[str, Any]:
        """Finding records detected in [from, to) with their status, review status, due time and
        last reviewer; ``total`` counts the records, consequences included (a consequence names its
        cause in ``cause_finding_id``; ``incident`` is false), ``counts`` the incidents among them
        (the figures of the report and the floor: incidents, open, late reviews, ...)."""
        flt = filters_from(from_, to, game, table, dealer, rule, severity, status, review_status)
        now = config.clock()
        rows, total = reviews.find(con, flt, config.review_due, now, limit=limit, offset=offset)
        counted = incidents.counts(con, config.review_due, now, flt)
        return {
            "total": total,
            "offset": offset,
            "counts": _counts_json(counted),
            "findings": reviews.review_rows_json(rows),
        }

    @app.get(
        "/api/v1/findings/{finding_id}",
        tags=["findings"],
        operation_id="get_finding",
        response_model=None,  # the answer's shape is documented in responses (see _Open)
        dependencies=[Depends(_known_query)],
        responses={
            **_REFUSALS,
            404: {"model": ErrorMessage, "description": "No such finding."},
            200: {"model": FindingDetail, "description": "The finding and its reviews.", "links": _FINDING_LINKS},
        },
    )
    def api_finding(finding_id: str, user: ApiUser, con: Cursor) -> dict[str, Any]:
        """One finding with its review history."""
        f = _finding(con, finding_id, config)
        out = reviews.review_rows_json([f])[0]
        out["reviews"] = reviews.review_rows_json(reviews.history(con, finding_id))
        return out

    @app.post(
        "/api/v1/findings/{finding_id}/reviews",
        status_code=201,
        tags=["reviews"],
        operation_id="review_finding",
        response_model=None,  # the answer's shape is documented in responses (see _Open)
        dependencies=[Depends(_known_query)],
        responses={
            **_REFUSALS,
            **_BODY_REFUSALS,
            403: {"model": ErrorMessage, "description": "A viewer's token: viewers do not review."},
            404: {"model": ErrorMessage, "description": "No such finding."},
            503: {"model": ErrorMessage, "description": "The review was not recorded (the broker did not take it)."},
            201: {"model": StoredReview, "description": "The stored review event.", "links": _REVIEW_LINKS},
        },
    )
    def api_review(finding_id: str, body: ReviewRequest, user: ApiUser, con: Cursor) -> dict[str, Any]:
        """Record a review (reviewer or admin token): 201 with the stored review event."""
        if not user.can_review:
            raise HTTPException(403, "a viewer cannot review findings")
        event = record_review(con, finding_id, user, body)
        return dict(event.model_dump(mode="json"))

    @app.get(
        "/api/v1/floor",
        tags=["floor"],
        operation_id="get_floor",
        response_model=None,  # the answer's shape is documented in responses (see _Open)
        dependencies=[Depends(_known_query)],
        responses={**_REFUSALS, 200: {"model": Floor, "description": "Every table."}},
    )
    def api_floor(user: ApiUser, con: Cursor) -> dict[str, Any]:
        """Every table: game, dealer, rounds, device state, its incidents not yet disposed by severity
        (``open_<severity>``), overdue remedies and late reviews; ``totals``: the incident figures of
        the whole store, as the report and the findings list count them."""
        ctx = floor_context(con)
        return {"tables": reviews.review_rows_json(ctx["tables"]), "totals": _counts_json(ctx["totals"])}

    return app


def _floor_counts(c: incidents.Counts) -> dict[str, Any]:
    """A floor row's figures from the incidents read model (the keys the floor and its API use)."""
    return {
        "incidents": c.incidents,
        "not_disposed": c.not_disposed,
        **{f"open_{sev}": c.not_disposed_by_severity[sev] for sev in SEVERITIES},
        "remedies_overdue": c.overdue_not_disposed,
        "late_reviews": c.late_not_disposed,
        "last_finding_at": c.last_not_disposed_at,
    }


def _counts_json(c: incidents.Counts) -> dict[str, Any]:
    """Incident figures, JSON-ready (times in UTC, ISO 8601)."""
    return reviews.review_rows_json([c.as_dict()])[0]


_REFUSALS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorMessage, "description": "No token, or a revoked one (`Authorization: Bearer TOKEN`)."},
}
_BODY_REFUSALS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorMessage, "description": "The body cannot be read as JSON text (e.g. not UTF-8)."},
}
_FINDING_ID = "$response.body#/findings/0/finding_id"
_LIST_LINKS = {
    "GetFirstFinding": {"operationId": "get_finding", "parameters": {"finding_id": _FINDING_ID}},
    "ReviewFirstFinding": {"operationId": "review_finding", "parameters": {"finding_id": _FINDING_ID}},
}
_FINDING_LINKS = {
    "ReviewFinding": {"operationId": "review_finding", "parameters": {"finding_id": "$response.body#/finding_id"}},
}
_REVIEW_LINKS = {
    "GetReviewedFinding": {"operationId": "get_finding", "parameters": {"finding_id": "$response.body#/finding_id"}},
}
"""OpenAPI links: from the findings list to its first finding, and between a finding and its
reviews (clients and Schemathesis's stateful runs follow them)."""


def validation_detail(errors: Sequence[Any]) -> dict[str, Any]:
    """FastAPI's 422 body (``{"detail": [{"loc", "msg", "type"}]}``) made safe to send: the
    refused input and its context are left out (they may hold NaN, a lone surrogate, or the
    attacker's text), and text that is not Unicode is replaced.

    Args:
        errors: the validation errors (``RequestValidationError.errors()``).
    """

    def text(value: Any) -> Any:
        return value.encode("utf-8", "replace").decode("utf-8") if isinstance(value, str) else value

    return {
        "detail": [
            {
                "loc": [text(x) if isinstance(x, str) else int(x) for x in e.get("loc", ())],
                "msg": text(str(e.get("msg", ""))),
                "type": text(str(e.get("type", "value_error"))),
            }
            for e in errors
        ]
    }


def _undelivered(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Notifications still failing or given up (none when notifications never ran on this store)."""
    from dealtrail.notify import failures

    views = con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'dim_notifications'").fetchall()
    return failures(con) if views and views[0][0] else []


def _sql(name: str) -> str:
    return resources.files("projections").joinpath("sql", name).read_text(encoding="utf-8")


def _query(params: dict[str, Any]) -> str:
    from urllib.parse import urlencode

    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


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


def _safe_next(path: str) -> str:
    """Only a path on this console (``/...``, not ``//host``) is a place to go after login."""
    return path if path.startswith("/") and not path.startswith("//") and "\\" not in path else "/"


def _rate(findings: int | None, rounds: int | None) -> float | None:
    return round(1000 * (findings or 0) / rounds, 1) if rounds else None


def _decorate(row: dict[str, Any]) -> dict[str, Any]:
    spec = RULES_BY_ID.get(row["rule_id"])
    return {**row, "rule_summary": spec.summary if spec else ""}


def _finding(con: duckdb.DuckDBPyConnection, finding_id: str, config: ConsoleConfig) -> dict[str, Any]:
    if not re.fullmatch(r"[0-9a-f]{1,64}", finding_id):
        raise HTTPException(404, f"no finding {finding_id}")
    rows, _ = reviews.find(con, FindingFilter(finding_id=finding_id), config.review_due, config.clock())
    if not rows:
        raise HTTPException(404, f"no finding {finding_id}")
    return rows[0]


def _events(con: duckdb.DuckDBPyConnection, ids: list[str]) -> list[dict[str, Any]]:
    if not ids:
        return []
    import json

    cur = con.execute(
        """SELECT event_id, seq, type, occurred_at, actor_role, actor_id, payload::VARCHAR
           FROM events WHERE event_id IN (SELECT unnest($ids)) ORDER BY seq, arrival""",
        {"ids": ids},
    )
    out = []
    skip = {"event_id", "table_id", "game", "round_id", "deck_id", "seq", "occurred_at", "recorded_at", "source",
            "actor", "schema_version", "type", "prev_hash", "hash"}  # fmt: skip
    for event_id, seq, type_, at, role, actor, payload in cur.fetchall():
        data = json.loads(payload)
        details = ", ".join(f"{k}={v}" for k, v in data.items() if k not in skip and v is not None)
        out.append(
            {
                "event_id": event_id,
                "seq": seq,
                "type": type_,
                "occurred_at": at,
                "actor": f"{(role or '').lower()} {actor or ''}".strip(),
                "details": details,
                "hash": data.get("hash"),
                "prev_hash": data.get("prev_hash"),
            }
        )
    return out


def _revisions(con: duckdb.DuckDBPyConnection, finding_id: str) -> list[dict[str, Any]]:
    cur = con.execute(
        """SELECT revision, status, observed_at, trigger_event_id, remedy_delay_seconds, late
           FROM findings WHERE finding_id = ? ORDER BY revision""",
        [finding_id],
    )
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _round_layout(con: duckdb.DuckDBPyConnection, table_id: str, round_id: str | None) -> dict[str, Any] | None:
    """The round as it lay when it ended (or when the trail stops): cards per area."""
    if round_id is None:
        return None
    from dealtrail.replay import ReplayError, Window, layout, replay, stored_events

    try:
        result = replay(table_id, stored_events(con, table_id), None, Window(round_id=round_id))
    except ReplayError:
        return None
    rows: list[dict[str, Any]] = []
    dealer = None
    for step in result.steps:
        found = layout(step.state, result.cards)
        if found:
            rows = found
        if step.state.round is not None:
            dealer = step.state.round.dealer_id
    if not rows:
        return None
    return {"dealer_id": dealer, "areas": table_layout(rows)}


def _bars(points: list[tuple[str, float, int, int]]) -> dict[str, Any]:
    """Bar chart geometry (SVG attributes, no inline style): label, rate, findings, rounds."""
    if not points:
        return {"bars": [], "width": 0, "height": 0, "max": 0}
    top = max(p[1] for p in points) or 1.0
    width = 44
    bars = []
    for i, (label, rate, n, rounds) in enumerate(points):
        h = round(150 * rate / top, 1)
        bars.append({"x": 40 + i * width, "y": round(170 - h, 1), "h": h, "w": width - 6, "label": label, "rate": rate,
                     "findings": n, "rounds": rounds})  # fmt: skip
    return {"bars": bars, "width": 60 + len(points) * width, "height": 200, "max": top}


def _csv(rows: list[dict[str, Any]]) -> str:
    cols = [
        "finding_id", "detected_at", "game", "table_id", "round_id", "dealer_id", "rule_id", "citation", "severity",
        "status", "review_status", "review_due_at", "review_late", "last_reviewed_by", "last_reviewed_at", "assignee",
        "cause", "required_remedy", "message",
    ]  # fmt: skip
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(cols)
    for r in rows:
        line = []
        for c in cols:
            v = r.get(c)
            text = utc(v) if isinstance(v, datetime) else "" if v is None else str(v)
            line.append(neutralise_cell(text))  # a cell a spreadsheet would run is quoted as text
        w.writerow(line)
    return buf.getvalue()


def new_session_secret() -> str:
    """A random session key for a console started without ``DEALTRAIL_CONSOLE__SESSION_SECRET``."""
    return secrets.token_urlsafe(48)
