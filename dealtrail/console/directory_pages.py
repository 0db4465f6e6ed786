"""The routes of signing in with the directory (:mod:`~dealtrail.console.oidc`): ``/auth/login``,
``/auth/callback``, ``/auth/code`` (the console's own one-time code, when the directory did not
check a second factor and the role needs one) and ``/auth/backchannel-logout``.

Each sign-in, refusal and logout is an access-log entry naming the directory person (issuer and
subject); a refused sign-in (no mapped group, a deactivated account, a bad token) answers 403 with
a page that says why.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from dealtrail.console import guard, totp
from dealtrail.console.deps import Console, Cursor
from dealtrail.console.oidc import (
    LOGIN_COOKIE,
    LOGIN_SECONDS,
    DirectoryError,
    Person,
    RefusedError,
    login_redirect,
    person_of,
)
from dealtrail.console.sessions import safe_next
from schemas.reviews import SignIn

CODE_SECONDS = 600
"""How long a directory sign-in waits for the console's one-time code (seconds)."""


def router(console: Console) -> APIRouter:
    """The directory's routes (none in the API's document); without a directory they answer 404."""
    routes = APIRouter()
    signer = URLSafeTimedSerializer(console.config.session_secret, salt="dealtrail-login")

    def directory() -> Any:
        if console.directory is None:
            raise HTTPException(404, "no directory is configured")
        return console.directory

    def refused(request: Request, reason: str, status: int = 403, who: str = "directory") -> HTMLResponse:
        console.access.record("login_failed", who, "refused", f"directory: {reason}"[:500])
        return console.render(request, "directory_refused.html.j2", None, status, reason=reason)

    def redirect_uri(request: Request) -> str:
        d = directory()
        if d.config.redirect_url:
            return str(d.config.redirect_url)
        if console.config.console_url:
            return console.config.console_url.rstrip("/") + "/auth/callback"
        return str(request.url_for("directory_callback"))

    def start(request: Request, person: Person) -> Response:
        """Start the session of a checked directory person (after the one-time code, if needed)."""
        how = SignIn(method="directory", issuer=person.issuer, subject=person.subject)
        target = safe_next(str(request.session.get("next_after", "/")))  # the new session starts clean
        guard.begin_session(console, request, person.user_name, how, person.sid)
        console.access.record(
            "login_succeeded", person.user_name, "ok", f"directory {person.issuer}, subject {person.subject}"
        )
        # a page of this site that goes on: the callback came from the directory's site, and a browser
        # does not send the strict session cookie along a redirect of that cross-site navigation
        return console.render(request, "directory_continue.html.j2", None, target=target)

    @routes.get("/auth/login", include_in_schema=False)
    def directory_login(request: Request, next: str = "/") -> Response:
        d = directory()
        try:
            url, pending = d.login_url(redirect_uri(request))
        except DirectoryError as exc:
            return refused(request, f"the directory cannot be reached now ({exc})", 503)
        pending["next"] = safe_next(next)
        return login_redirect(url, signer.dumps(pending), console.config.secure_cookies)

    @routes.get("/auth/callback", include_in_schema=False, name="directory_callback")
    def directory_callback(  # noqa: PLR0911 (each refusal answers on its own)
        request: Request, con: Cursor, code: str = "", state: str = "", error: str = "", error_description: str = ""
    ) -> Response:
        d = directory()
        raw = request.cookies.get(LOGIN_COOKIE, "")
        try:
            pending = signer.loads(raw, max_age=LOGIN_SECONDS) if raw else None
        except BadSignature:
            pending = None

        def done(response: Response) -> Response:
            response.delete_cookie(LOGIN_COOKIE, path="/auth/callback")
            return response

        if not isinstance(pending, dict) or not secrets.compare_digest(str(pending.get("state", "")), state):
            return done(refused(request, "the sign-in took too long or did not start here: start again", 400))
        # the directory's error answer carries the state too: only then are its words shown
        if error:
            return done(refused(request, f"the directory refused the sign-in: {error} {error_description}"[:300]))
        now = console.config.clock()
        claims: dict[str, Any] = {}
        try:
            claims = d.claims_of(code, pending, now.timestamp())
            with console.write_lock:
                person = person_of(console.store.con, d.config, claims, now)
        except DirectoryError as exc:
            return done(refused(request, f"the directory cannot be reached now ({exc})", 503))
        except RefusedError as exc:
            who = str(claims.get("preferred_username") or claims.get("sub") or "directory")
            return done(refused(request, exc.reason, who=who))
        request.session.clear()
        request.session["next_after"] = safe_next(str(pending.get("next", "/")))
        secret, required = totp.needs_code(console, con, person.user_name, person.role)
        if required and not person.second_factor:  # the console's own one-time code
            request.session["csrf"] = secrets.token_urlsafe(32)
            waiting = [person.user_name, now.timestamp(), person.issuer, person.subject, person.sid or ""]
            if secret is None:
                request.session["enrol"] = waiting
                return done(RedirectResponse("/account/totp", status_code=303))
            request.session["directory_code"] = waiting
            return done(RedirectResponse("/auth/code", status_code=303))
        return done(start(request, person))

    def waiting_person(request: Request) -> tuple[Person, float]:
        """The person waiting for the one-time code, and when the directory's sign-in came back."""
        held = request.session.get("directory_code")
        now = console.config.clock().timestamp()
        if isinstance(held, list) and len(held) == 5 and 0 <= now - float(held[1]) < CODE_SECONDS:
            return Person(str(held[2]), str(held[3]), str(held[0]), "", False, str(held[4]) or None), float(held[1])
        raise HTTPException(403, "sign in first")

    @routes.get("/auth/code", include_in_schema=False)
    def code_page(request: Request) -> Response:
        person, _ = waiting_person(request)
        return console.render(request, "directory_code.html.j2", None, name=person.user_name, error=None)

    @routes.post("/auth/code", include_in_schema=False)
    def code_check(
        request: Request, con: Cursor, csrf: Annotated[str, Form()], code: Annotated[str, Form(max_length=16)] = ""
    ) -> Response:
        console.check_csrf(request, csrf)
        person, since = waiting_person(request)
        now = console.config.clock()
        client = guard.CLIENT.get()
        refusal = console.guard.check(person.user_name, client, now)
        if refusal is not None:
            page = console.render(
                request, "directory_code.html.j2", None, 429, name=person.user_name, error=refusal.message
            )
            page.headers["Retry-After"] = str(refusal.retry_after)
            return page
        secret, _ = totp.needs_code(console, con, person.user_name, "")
        if secret is None or not console.codes.use(person.user_name, secret, code, now):
            console.access.record("login_failed", person.user_name, "refused", "wrong, used or missing one-time code")
            console.guard.failed(person.user_name, client, now)
            error = "Type the one-time code your authenticator app shows for dealtrail."
            return console.render(request, "directory_code.html.j2", None, 401, name=person.user_name, error=error)
        request.session.pop("directory_code", None)
        if directory().signed_out_since(person, since):  # while the code was awaited
            request.session.clear()
            return refused(
                request, "the directory signed you out while this sign-in waited: start again", 403, person.user_name
            )
        return start(request, person)

    @routes.post("/auth/backchannel-logout", include_in_schema=False)
    def backchannel_logout(logout_token: Annotated[str, Form(max_length=20_000)]) -> Response:
        d = directory()
        now = console.config.clock()
        try:
            claims = d.logout_claims(logout_token, now.timestamp())
        except (RefusedError, DirectoryError) as exc:
            console.access.record("directory_logout", "directory", "refused", str(exc)[:300])
            return Response(
                str(exc)[:300], status_code=400, media_type="text/plain", headers={"Cache-Control": "no-store"}
            )
        d.signed_out(claims, now.timestamp())  # a sign-in waiting for its one-time code starts no session
        from dealtrail.console.oidc import linked_name

        with console.write_lock:
            sub = claims.get("sub")
            name = linked_name(console.store.con, str(claims["iss"]), str(sub)) if isinstance(sub, str) else None
            sid = claims.get("sid")
            ended = access_log_end(console, now, name, str(sid) if isinstance(sid, str) else None)
        who = name or "directory"
        console.access.record(
            "directory_logout", who, "ok", f"subject {sub or '-'}, session {sid or '-'}: {ended} session(s) ended"
        )
        return Response(status_code=200, headers={"Cache-Control": "no-store"})

    return routes


def access_log_end(console: Console, at: Any, name: str | None, sid: str | None) -> int:
    """End the sessions a back-channel logout names (the caller holds the write lock)."""
    from projections.records import access_log

    if name is None and sid is None:
        return 0
    return len(access_log.end_sessions(console.store.con, at, "directory logout", name, sid))
