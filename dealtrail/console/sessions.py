"""Signing in and out: the login page and form, logout, the login page's style (the one asset
served before login), and the session key of a console started without one.

A sign-in is checked against the throttle and lock first (``guard.LoginGuard``: 429 with
``Retry-After`` and the reason on the page, the password not even checked), then the password;
a success starts a server-side session (``guard.begin_session``), except with a one-time password
from an admin's reset, which leads only to setting a new one (:mod:`~dealtrail.console.password`);
a logout ends it in the store (the old cookie no longer opens anything). Each attempt, lock and
logout is an access-log entry.
"""

from __future__ import annotations

import secrets
from importlib import resources
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from dealtrail.console import auth, guard, totp
from dealtrail.console.deps import Console, Cursor
from dealtrail.console.password import wait_for_new_password
from projections.records import users
from schemas.access import clean_name


def router(console: Console) -> APIRouter:
    """The routes of ``/login``, ``/logout`` and ``/login.css`` (none in the API's document)."""
    r = APIRouter()
    render, check_csrf = console.render, console.check_csrf

    directory, local = console.config.directory is not None, console.config.local_sign_in

    @r.get("/login", include_in_schema=False)
    def login_page(request: Request, next: str = "/") -> HTMLResponse:
        return render(
            request,
            "login.html.j2",
            None,
            next=safe_next(next),
            error=None,
            username="",
            directory=directory,
            local=local,
        )

    @r.post("/login", include_in_schema=False)
    def login(  # noqa: PLR0911 (each refusal answers the form on its own)
        request: Request,
        con: Cursor,
        csrf: Annotated[str, Form()],
        username: Annotated[str, Form(max_length=200)] = "",
        password: Annotated[str, Form(max_length=1024)] = "",
        next: Annotated[str, Form()] = "/",
        code: Annotated[str, Form(max_length=16)] = "",
    ) -> Response:
        check_csrf(request, csrf)
        typed = clean_name(username.strip(), 64)

        def again(status: int, error: str, headers: dict[str, str] | None = None) -> Response:
            page = render(
                request,
                "login.html.j2",
                None,
                status,
                next=safe_next(next),
                error=error,
                username=typed,
                directory=directory,
                local=local,
            )
            page.headers.update(headers or {})
            return page

        if not local:  # a directory is configured and the break-glass account is off
            console.access.record("login_failed", typed or "-", "refused", "local accounts are off (directory)")
            return again(403, "Local accounts are off: sign in with your directory.")

        if not typed or not password:
            return again(422, "Type your name and your password.")
        client = guard.CLIENT.get()
        now = console.config.clock()
        refusal = console.guard.check(typed, client, now)
        if refusal is not None:
            console.access.record("login_failed", typed, "locked" if refusal.locked else "throttled", refusal.message)
            return again(429, refusal.message, {"Retry-After": str(refusal.retry_after)})
        u = users.user(con, typed)
        if u is None:  # "RITA" signs in as rita: one person, one account (schemas.reviews.identity_key)
            same = users.same_person(con, typed)
            u = users.user(con, same[0]) if len(same) == 1 else None
        ok = auth.verify_password(u["password_hash"] if u and u["active"] else None, password)
        if not ok or u is None:
            console.access.record("login_failed", typed, "refused", "wrong name or password")
            if console.guard.failed(typed, client, now):
                console.access.record(
                    "login_locked", typed, "locked", f"{console.config.security.lock_after} failed sign-ins in a row"
                )
                locked = console.guard.check(typed, client, now)
                assert locked is not None
                return again(429, locked.message, {"Retry-After": str(locked.retry_after)})
            return again(401, "Wrong name or password.")
        secret, required = totp.needs_code(console, con, u["name"], u["role"])
        if secret is not None and not console.codes.use(u["name"], secret, code, now):
            console.access.record("login_failed", typed, "refused", "wrong, used or missing one-time code")
            if console.guard.failed(typed, client, now):
                console.access.record("login_locked", typed, "locked", "failed sign-ins in a row")
            return again(401, "Type the one-time code your authenticator app shows for dealtrail.")
        console.guard.succeeded(typed, client, reset_account=len(users.same_person(con, u["name"])) == 1)
        if u["must_change"]:  # an admin's reset: the one-time password only sets a new one
            return wait_for_new_password(console, request, u["name"])
        if secret is None and required:  # the role needs a second factor: enrol one before the session
            request.session.clear()
            request.session.update({"enrol": [u["name"], now.timestamp()], "csrf": secrets.token_urlsafe(32)})
            console.access.record(
                "login_failed", u["name"], "refused", "password right; a one-time code must be enrolled"
            )
            return RedirectResponse("/account/totp", status_code=303)
        guard.begin_session(console, request, u["name"])
        guard.flag_break_glass(console, u["name"])  # beside a directory: every use is flagged for review
        console.access.record("login_succeeded", u["name"], "ok")
        return RedirectResponse(safe_next(next), status_code=303)

    @r.post("/logout", include_in_schema=False)
    def logout(request: Request, csrf: Annotated[str, Form()]) -> Response:
        check_csrf(request, csrf)
        name = guard.end_session(console, request, "logout")
        if name is not None:
            console.access.record("logout", name, "ok")
        return RedirectResponse("/login", status_code=303)

    @r.get("/login.css", include_in_schema=False)
    def login_css() -> Response:
        # the login page's style (the only asset served before login: no data in it)
        path = Path(str(resources.files("dealtrail.console").joinpath("static", "console.css")))
        return FileResponse(path, media_type="text/css", headers={"Cache-Control": "private, max-age=300"})

    return r


def safe_next(path: str) -> str:
    """Only a path on this console (``/...``, not ``//host``) is a place to go after login; one
    with a backslash, a space or a control character is not (a browser drops tabs and line
    breaks from a URL, so ``/<TAB>/host`` would lead to ``//host``, another site)."""
    clean = path.startswith("/") and not path.startswith("//")
    return path if clean and not any(c == "\\" or c.isspace() or not c.isprintable() for c in path) else "/"


def new_session_secret() -> str:
    """A random session key for a console started without ``DEALTRAIL_CONSOLE__SESSION_SECRET``."""
    return secrets.token_urlsafe(48)
