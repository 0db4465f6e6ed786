"""Setting one's own password: ``/account/password`` (issue 48, item 3).

An admin's reset (or a new account) gives a one-time password (:func:`auth.reset_password`). A
sign-in with it starts no session: the sign-in waits here (the session cookie holds the name and
when, for ten minutes) until the user sets a password of their own, and only then does the
session start (after enrolling a one-time code, when the role needs one). So the one-time
password, which the admin knows, opens nothing else: no page, no review, no approval, no
sign-off, no API token. A signed-in user changes the password here too (the current one typed
again). Wrong current passwords count as failed sign-ins of the account (``guard.LoginGuard``);
every change and refusal is an access-log entry (never a password).
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from dealtrail.console import auth, guard, totp
from dealtrail.console.deps import Console, Cursor, User, _session_user
from projections.records import users
from schemas.access import Outcome

CHANGE_SECONDS = 600
"""How long a sign-in with a one-time password waits for the new password (seconds)."""


def wait_for_new_password(console: Console, request: Request, name: str) -> Response:
    """After a right one-time password: no session, only the wait for a new password."""
    request.session.clear()
    now = console.config.clock()
    request.session.update({"change": [name, now.timestamp()], "csrf": secrets.token_urlsafe(32)})
    console.access.record("login_one_time", name, "ok", "one-time password right; a new password must be set")
    return RedirectResponse("/account/password", status_code=303)


def router(console: Console) -> APIRouter:
    """The routes of ``/account/password`` (none in the API's document)."""
    routes = APIRouter()

    def who(request: Request, con: Cursor) -> tuple[str, User | None]:
        """The user setting a password: the signed-in user, or one who signed in with a one-time password."""
        user = _session_user(request, con)
        if user is not None:
            return user.name, user
        pending = request.session.get("change")
        now = console.config.clock().timestamp()
        if isinstance(pending, list) and len(pending) == 2 and 0 <= now - float(pending[1]) < CHANGE_SECONDS:
            return str(pending[0]), None
        request.session.pop("change", None)
        raise HTTPException(403, "sign in first: setting a password needs the one you have")

    def page(
        request: Request,
        name: str,
        user: User | None,
        status: int = 200,
        error: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        response = console.render(
            request,
            "password.html.j2",
            user,
            status,
            name=name,
            error=error,
            required=user is None,
            min_length=auth.MIN_PASSWORD,
        )
        response.headers.update(headers or {})
        return response

    @routes.get("/account/password", include_in_schema=False)
    def password_page(request: Request, con: Cursor) -> Response:
        name, user = who(request, con)
        return page(request, name, user)

    @routes.post("/account/password", include_in_schema=False)
    def password_change(
        request: Request,
        con: Cursor,
        csrf: Annotated[str, Form()],
        current: Annotated[str, Form(max_length=1024)] = "",
        new: Annotated[str, Form(max_length=1024)] = "",
        repeated: Annotated[str, Form(max_length=1024)] = "",
    ) -> Response:
        """Set the user's own password; then the session starts (or goes on, renewed)."""
        console.check_csrf(request, csrf)
        name, user = who(request, con)
        now = console.config.clock()
        client = guard.CLIENT.get()
        refusal = console.guard.check(name, client, now)
        if refusal is not None:
            outcome: Outcome = "locked" if refusal.locked else "throttled"
            console.access.record("password_changed", name, outcome, refusal.message)
            return page(request, name, user, 429, refusal.message, {"Retry-After": str(refusal.retry_after)})
        u = users.user(con, name)
        if not auth.verify_password(u["password_hash"] if u and u["active"] else None, current) or u is None:
            console.access.record("password_changed", name, "refused", "wrong current password")
            if console.guard.failed(name, client, now):
                console.access.record(
                    "login_locked", name, "locked", f"{console.config.security.lock_after} failed sign-ins in a row"
                )
            return page(request, name, user, 401, "That is not the password you signed in with.")
        try:
            with console.write_lock:
                auth.change_password(console.store.con, name, current, new, repeated, now)
        except auth.AccessError as exc:
            console.access.record("password_changed", name, "refused", str(exc))
            return page(request, name, user, 422, str(exc)[:1].upper() + str(exc)[1:] + ".")
        was_one_time = bool(u["must_change"])
        console.access.record("password_changed", name, "ok", "after a one-time password" if was_one_time else "")
        if user is None:
            secret, required = totp.needs_code(console, con, name, str(u["role"]))
            if secret is None and required:  # the role needs a second factor: enrol one before the session
                request.session.clear()
                request.session.update({"enrol": [name, now.timestamp()], "csrf": secrets.token_urlsafe(32)})
                return RedirectResponse("/account/totp", status_code=303)
        guard.begin_session(console, request, name)  # the new revision ended the old session
        if user is None:  # a sign-in that ends here
            guard.flag_break_glass(console, name)
        console.access.record("login_succeeded", name, "ok", "after setting a new password")
        return RedirectResponse("/", status_code=303)

    return routes
