"""The compliance console: a FastAPI application over one dealtrail store.

Server-rendered pages (Jinja2, autoescaped) and a JSON API under ``/api/v1``. The process that
runs it is the store's one writer (``dealtrail serve``, or the projector of ``dealtrail project
--serve``): users and tokens are written through the store's connection under a lock (the
projector holds the same lock around its batches); every read takes its own cursor. Reviews are
written to the store the same way under ``serve``, and published to the reviews topic under
``project --serve`` (a review sink), from which the projector stores them. No page, asset or
API call is served without authentication. Every response carries a strict
Content-Security-Policy (scripts and styles only from the console itself); the scripts,
``/static/console.js`` (refreshes the floor) and ``/replay-assets/replay.js`` (steps through a
replay, :mod:`~dealtrail.console.replay_pages`), need no third party.

Times are rendered in UTC with their offset. Review due times and the clock come in resolved
(:class:`ConsoleConfig`); nothing here reads the environment.

The app is put together here (:func:`create_app`: the middleware, the exception handlers and the
routers); the routes live by concern in :mod:`~dealtrail.console.sessions` (login, logout),
:mod:`~dealtrail.console.pages` (the floor, findings, dealers and tables, static assets),
:mod:`~dealtrail.console.reports_pages`, :mod:`~dealtrail.console.admin` (users and tokens) and
:mod:`~dealtrail.console.api` (the JSON API), each built over one
:class:`~dealtrail.console.deps.Console`; what they share is in :mod:`~dealtrail.console.deps`,
:mod:`~dealtrail.console.filters` and :mod:`~dealtrail.console.api_models`.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from starlette.middleware.sessions import SessionMiddleware

from dealtrail.console import (
    admin,
    api,
    bulk,
    control_pages,
    directory_pages,
    guard,
    health,
    pages,
    password,
    replay_pages,
    reports_pages,
    security,
    sessions,
    signoff_pages,
    staff_admin,
    totp,
    workbench,
)
from dealtrail.console.deps import Console, ConsoleConfig, LoginRequiredError, User, add_security_headers, query_string
from dealtrail.console.pages import _csv, table_layout
from dealtrail.console.sessions import new_session_secret
from projections.display.cards import card_face
from projections.models import reviews
from projections.store.store import Store
from schemas.access import AccessEntry
from streams.metrics import CONSOLE_REQUESTS, CONSOLE_SECONDS

__all__ = [
    "CSP",
    "ConsoleConfig",
    "User",
    "_csv",
    "card_face",
    "create_app",
    "new_session_secret",
    "strict_json_body",
    "table_layout",
    "validation_detail",
]
"""This module's names and those that moved out of it but are still imported from here (the CLI,
the tests, ``ops/screenshots.py``): ``ConsoleConfig``, ``User``, ``card_face``, ``_csv``,
``new_session_secret``, ``table_layout``."""

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


async def strict_json_body(request: Request) -> None:
    """Refuse a JSON request body that the standard parser would read loosely: a key twice in
    one object (the last would win), nesting too deep (:func:`schemas.strict_json.loads`).

    Declared once for the whole app; forms pass untouched. Every other body is checked, whatever
    the case of its ``Content-Type`` or without one: FastAPI reads such a body as JSON.

    Raises:
        RequestValidationError: 422 with FastAPI's list of errors, one of type
            ``json_invalid`` whose message starts with ``malformed_json`` and names the key.
    """
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
        return
    body = await request.body()
    if not body:
        return

    from schemas.strict_json import StrictJSONError, loads

    try:
        loads(body)
    except StrictJSONError as exc:
        error = {"type": "json_invalid", "loc": ("body", 0), "msg": f"malformed_json: {exc}", "input": {}}
        raise RequestValidationError([{**error, "ctx": {"error": str(exc)}}]) from None


_heap_frozen = threading.Event()


def freeze_startup_heap() -> None:
    """Move every object alive when the console starts (the application, its modules, the
    store's connection) into the garbage collector's permanent generation (:func:`gc.freeze`),
    once per process. A request makes many short-lived objects (the floor parses each table's
    engine state, hundreds of KB at a month of history; a finding page replays its round), and
    each full collection they trigger would otherwise walk that whole heap too: at a month of
    history the floor's p95 was 100 ms with collections walking it and 59 ms with it frozen
    (``make bench-history``). Called by the application's lifespan, so ``dealtrail serve`` and
    the streaming console do it as they start; later calls in the same process do nothing."""
    if _heap_frozen.is_set():
        return
    _heap_frozen.set()
    gc.collect()
    gc.freeze()


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    freeze_startup_heap()
    yield
    console = getattr(app.state, "console", None)
    if console is not None:  # the reads recorded last are stored before the console stops
        try:
            console.access.flush()
        except Exception as exc:
            import sys

            print(f"access log: reads not stored at shutdown ({type(exc).__name__}: {exc})", file=sys.stderr)


def create_app(
    store: Store,
    config: ConsoleConfig,
    review_sink: Callable[[reviews.ReviewEvent], None] | None = None,
    write_lock: threading.Lock | None = None,
    access_sink: Callable[[AccessEntry], None] | None = None,
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
        access_sink: where an access-log entry goes instead of the store (the streaming
            deployment: a producer of the access-log topic); None: stored directly.

    Returns:
        The FastAPI application (serve it with uvicorn).
    """
    app = FastAPI(
        lifespan=_lifespan,
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
    write_lock = write_lock or threading.Lock()
    app.state.write_lock = write_lock
    store.con.execute("SET GLOBAL TimeZone = 'UTC'").fetchall()
    console = Console(store, config, review_sink, write_lock, access_sink)
    app.state.console = console
    app.add_middleware(
        SessionMiddleware,
        secret_key=config.session_secret,
        session_cookie="dealtrail_session",
        max_age=int(config.security.session_max.total_seconds()),
        same_site="strict",
        https_only=config.secure_cookies,
    )

    @app.middleware("http")
    async def count_requests(request: Request, call_next: Callable[[Request], Any]) -> Response:
        # the route's template (/findings/{finding_id}), never the path: no ID in a metric label
        began = time.perf_counter()
        response: Response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", None) or "unmatched"
        CONSOLE_REQUESTS.labels(request.method, route, f"{response.status_code // 100}xx").inc()
        CONSOLE_SECONDS.observe(time.perf_counter() - began)
        return response

    add_security_headers(app, CSP)

    @app.exception_handler(LoginRequiredError)
    async def to_login(request: Request, exc: LoginRequiredError) -> Response:
        return RedirectResponse("/login?" + query_string({"next": exc.next_path}), status_code=303)

    security.install_error_pages(app, console)  # pages get pages; /api/ keeps JSON
    app.add_middleware(guard.ClientMiddleware, log=lambda: console.access)  # outermost: the client's address

    for router in (sessions.router, pages.router, reports_pages.router, admin.router, api.router, signoff_pages.router):
        app.include_router(router(console))
    app.include_router(workbench.router(console))  # video clips and references, evidence packages
    app.include_router(staff_admin.router(console))  # the staff roster (/admin/staff)
    app.include_router(security.router(console))  # the access log (admins)
    app.include_router(totp.router(console))  # one-time code enrolment
    app.include_router(password.router(console))  # setting one's own password (after a reset)
    app.include_router(directory_pages.router(console))  # signing in with the directory (OpenID Connect)
    app.include_router(replay_pages.router(console))  # the investigator's replay, its API, the case page
    app.include_router(bulk.router(console))  # bulk acknowledge / assign from the findings list
    app.include_router(control_pages.router(console))  # control charts: signal reviews, baselines (issue 50)
    return app


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
