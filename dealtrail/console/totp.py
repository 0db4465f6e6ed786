"""One-time codes (TOTP, RFC 6238) as a second sign-in factor: the enrolment page.

A user enrols on ``/account/totp``: the page shows a new secret as a QR code (an SVG drawn here by
the ``qrcode`` package: no image service sees the secret) and as text, and the secret is stored
once the user types a code it makes (``pyotp``, 30-second steps, one step of clock drift either
way). From then on the sign-in form needs the code as well. A user of a role named in
``DEALTRAIL_SECURITY__TOTP_ROLES`` who has not enrolled is sent here after the password (a session
for enrolment only, ten minutes) and signed in once the code is right. The new secret waits in
the signed session cookie until it is confirmed.
"""

from __future__ import annotations

from typing import Annotated

import pyotp
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from dealtrail.console import guard
from dealtrail.console.deps import Console, Cursor, User, _session_user
from projections import access_log

ENROL_SECONDS = 600
"""How long a password-checked user of a TOTP role has to enrol (seconds)."""


def code_ok(secret: str, code: str, at: float) -> bool:
    """True if ``code`` is the TOTP of ``secret`` at ``at`` (Unix seconds) or one step either side."""
    code = code.strip().replace(" ", "")
    return code.isdigit() and len(code) == 6 and pyotp.TOTP(secret).verify(code, for_time=at, valid_window=1)


def _qr_svg(uri: str) -> str:
    """The QR code of ``uri`` as inline SVG markup."""
    import qrcode
    import qrcode.image.svg

    image = qrcode.make(uri, image_factory=qrcode.image.svg.SvgPathImage, box_size=8, border=2)
    text: str = image.to_string(encoding="unicode")
    return text


def router(console: Console) -> APIRouter:
    """The routes of ``/account/totp`` (none in the API's document)."""
    routes = APIRouter()

    def who(request: Request, con: Cursor) -> tuple[str, User | None]:
        """The user enrolling: the signed-in user, or one sent here after the password."""
        user = _session_user(request, con)
        if user is not None:
            return user.name, user
        pending = request.session.get("enrol")
        now = console.config.clock().timestamp()
        if isinstance(pending, list) and len(pending) == 2 and 0 <= now - float(pending[1]) < ENROL_SECONDS:
            return str(pending[0]), None
        request.session.pop("enrol", None)
        raise HTTPException(403, "sign in first: enrolling a one-time code needs your password")

    def page(
        request: Request, con: Cursor, name: str, user: User | None, status: int = 200, error: str | None = None
    ) -> Response:
        secret = request.session.get("totp_new")
        if not isinstance(secret, str):
            secret = pyotp.random_base32()
            request.session["totp_new"] = secret
        uri = pyotp.TOTP(secret).provisioning_uri(name=name, issuer_name="dealtrail")
        enrolled = access_log.totp_secret(con, name) is not None
        return console.render(
            request,
            "totp.html.j2",
            user,
            status,
            name=name,
            secret=secret,
            qr=_qr_svg(uri),
            enrolled=enrolled,
            error=error,
            required=user is None,
        )

    @routes.get("/account/totp", include_in_schema=False)
    def totp_page(request: Request, con: Cursor) -> Response:
        name, user = who(request, con)
        return page(request, con, name, user)

    @routes.post("/account/totp", include_in_schema=False)
    def totp_enrol(
        request: Request,
        con: Cursor,
        csrf: Annotated[str, Form()],
        code: Annotated[str, Form(max_length=16)] = "",
    ) -> Response:
        console.check_csrf(request, csrf)
        name, user = who(request, con)
        secret = request.session.get("totp_new")
        now = console.config.clock()
        if not isinstance(secret, str) or not code_ok(secret, code, now.timestamp()):
            console.access.record("totp_enrolled", name, "refused", "wrong code")
            return page(
                request, con, name, user, 422, "That code is not the one your app shows now: type the current one."
            )
        with console.write_lock:
            access_log.put_totp(console.store.con, name, secret, now)
        request.session.pop("totp_new", None)
        console.access.record("totp_enrolled", name, "ok")
        if user is None:  # enrolment after the password: now the session starts
            guard.begin_session(console, request, name)
            console.access.record("login_succeeded", name, "ok", "after enrolling a one-time code")
        return RedirectResponse("/", status_code=303)

    return routes


def needs_code(console: Console, con: Cursor, name: str, role: str) -> tuple[str | None, bool]:
    """The user's TOTP secret (None: not enrolled) and whether the role requires one."""
    return access_log.totp_secret(con, name), role in console.config.security.totp_roles
