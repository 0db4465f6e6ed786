"""Signing in and out: the login page and form, logout, the login page's style (the one asset
served before login), and the session key of a console started without one."""

from __future__ import annotations

import secrets
from importlib import resources
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from dealtrail.console import auth
from dealtrail.console.deps import Console, Cursor
from projections import access


def router(console: Console) -> APIRouter:
    """The routes of ``/login``, ``/logout`` and ``/login.css`` (none in the API's document)."""
    r = APIRouter()
    render, check_csrf = console.render, console.check_csrf

    @r.get("/login", include_in_schema=False)
    def login_page(request: Request, next: str = "/") -> HTMLResponse:
        return render(request, "login.html.j2", None, next=_safe_next(next), error=None)

    @r.post("/login", include_in_schema=False)
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

    @r.post("/logout", include_in_schema=False)
    def logout(request: Request, csrf: Annotated[str, Form()]) -> Response:
        check_csrf(request, csrf)
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    @r.get("/login.css", include_in_schema=False)
    def login_css() -> Response:
        # the login page's style (the only asset served before login: no data in it)
        path = Path(str(resources.files("dealtrail.console").joinpath("static", "console.css")))
        return FileResponse(path, media_type="text/css", headers={"Cache-Control": "private, max-age=300"})

    return r


def _safe_next(path: str) -> str:
    """Only a path on this console (``/...``, not ``//host``) is a place to go after login."""
    return path if path.startswith("/") and not path.startswith("//") and "\\" not in path else "/"


def new_session_secret() -> str:
    """A random session key for a console started without ``DEALTRAIL_CONSOLE__SESSION_SECRET``."""
    return secrets.token_urlsafe(48)
