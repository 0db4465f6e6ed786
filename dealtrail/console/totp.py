"""One-time codes (TOTP, RFC 6238) as a second sign-in factor: the enrolment page.

A user enrols on ``/account/totp``: the page shows a new secret as a QR code (an SVG drawn here by
the ``qrcode`` package: no image service sees the secret) and as text, and the secret is stored
once the user types a code it makes (``pyotp``, 30-second steps, one step of clock drift either
way). From then on the sign-in form needs the code as well, and each code is good once
(``guard.OneTimeCodes``). A user of a role named in ``DEALTRAIL_SECURITY__TOTP_ROLES`` who has
not enrolled is sent here after the password (a session for enrolment only, ten minutes) and
signed in once the code is right. A signed-in user confirms with the password, and replacing an
enrolled code needs a current code of it too. The new secret waits in the console's process
(``guard.OneTimeCodes``), never in the session cookie, until it is confirmed. The store keeps
each secret encrypted (Fernet) with a key kept apart from it (:func:`resolve_totp_key`).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import pyotp
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from dealtrail.console import auth, guard
from dealtrail.console.deps import Console, Cursor, User, _session_user
from dealtrail.console.oidc import Person
from projections.records import access_log, users
from schemas.access import Outcome
from schemas.reviews import SignIn

ENROL_SECONDS = 600
"""How long a password-checked user of a TOTP role has to enrol (seconds)."""


def key_file_beside(store: Path) -> Path:
    """The default key file of a store's one-time-code secrets: ``<store>.totp.key`` beside it."""
    return store.with_name(store.name + ".totp.key")


def resolve_totp_key(key: str | None, key_file: Path | None, store: Path) -> bytes:
    """The Fernet key that encrypts the store's one-time-code secrets at rest.

    ``key`` (``DEALTRAIL_SECURITY__TOTP_KEY``) wins; else the key file ``key_file``
    (``DEALTRAIL_SECURITY__TOTP_KEY_FILE``), else :func:`key_file_beside` the store. A key file
    that does not exist is made, owner-only (0600), with a new random key; one that group or
    others may read is refused (a key everyone reads protects nothing).

    Args:
        key: a Fernet key (32 bytes, URL-safe base64), or None.
        key_file: the key file, or None for the one beside the store.
        store: the store's path.

    Returns:
        The key (URL-safe base64 bytes, as Fernet takes it).

    Raises:
        ValueError: the key is not a Fernet key; the key file is readable by others, or cannot
            be read or made.
    """
    import os

    from cryptography.fernet import Fernet

    def checked(value: bytes, where: str) -> bytes:
        try:
            Fernet(value)
        except ValueError:
            raise ValueError(f"{where} is not a Fernet key (32 bytes, URL-safe base64)") from None
        return value

    if key:
        return checked(key.strip().encode(), "DEALTRAIL_SECURITY__TOTP_KEY")
    path = key_file or key_file_beside(store)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ValueError(f"cannot make the one-time-code key file {path}: {exc.strerror}") from None
    else:
        with os.fdopen(fd, "wb") as fh:
            fh.write(Fernet.generate_key() + b"\n")
    try:
        if path.stat().st_mode & 0o077:
            raise ValueError(f"the one-time-code key file {path} is readable by others: chmod 600 {path}")
        return checked(path.read_bytes().strip(), f"the key file {path}")
    except OSError as exc:
        raise ValueError(f"cannot read the one-time-code key file {path}: {exc.strerror}") from None


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
        if isinstance(pending, list) and len(pending) in (2, 5) and 0 <= now - float(pending[1]) < ENROL_SECONDS:
            return str(pending[0]), None
        request.session.pop("enrol", None)
        raise HTTPException(403, "sign in first: enrolling a one-time code needs your password")

    def waiting(request: Request, name: str, make: bool) -> str | None:
        """The secret waiting for this session's enrolment (kept in the console: the cookie holds
        only a random key to it)."""
        request.session.pop("totp_new", None)  # a cookie of an older console held the secret itself
        key = request.session.get("totp_key")
        if not isinstance(key, str):
            if not make:
                return None
            key = secrets.token_urlsafe(24)
            request.session["totp_key"] = key
        return console.codes.pending(key, name, console.config.clock(), make)

    def page(
        request: Request,
        con: Cursor,
        name: str,
        user: User | None,
        status: int = 200,
        error: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        secret = waiting(request, name, make=True)
        assert secret is not None
        uri = pyotp.TOTP(secret).provisioning_uri(name=name, issuer_name="dealtrail")
        enrolled = access_log.has_totp(con, name)
        response = console.render(
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
            ask_password=user is not None,
        )
        response.headers.update(headers or {})
        return response

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
        password: Annotated[str, Form(max_length=1024)] = "",
        old_code: Annotated[str, Form(max_length=16)] = "",
    ) -> Response:
        """Enrol the waiting secret once ``code`` is its current code. A signed-in user types the
        password too (a session alone does not change the second factor), and when a code is
        enrolled already, a current code of it as well (lost it: an admin resets the password,
        which removes the enrolment). Wrong passwords and wrong old codes count as failed
        sign-ins of the account (``guard.LoginGuard``)."""
        console.check_csrf(request, csrf)
        name, user = who(request, con)
        now = console.config.clock()
        client = guard.CLIENT.get()
        old = access_log.totp_secret(con, name, console.totp_key)

        def refused(status: int, why: str, message: str, count: bool) -> Response:
            console.access.record("totp_enrolled", name, "refused", why)
            if count and console.guard.failed(name, client, now):
                console.access.record(
                    "login_locked", name, "locked", f"{console.config.security.lock_after} failed sign-ins in a row"
                )
            return page(request, con, name, user, status, message)

        if user is not None or old is not None:
            refusal = console.guard.check(name, client, now)
            if refusal is not None:
                outcome: Outcome = "locked" if refusal.locked else "throttled"
                console.access.record("totp_enrolled", name, outcome, refusal.message)
                return page(request, con, name, user, 429, refusal.message, {"Retry-After": str(refusal.retry_after)})
        if user is not None:
            u = users.user(con, name)
            if not auth.verify_password(u["password_hash"] if u and u["active"] else None, password):
                message = "That is not your password: type it to change your one-time code."
                return refused(401, "wrong password", message, True)
        if old is not None and not console.codes.use(name, old, old_code, now):
            return refused(
                401,
                "wrong, used or missing code of the enrolled secret",
                "Type the current code of the one-time code enrolled now (the old entry in your app) as well.",
                True,
            )
        secret = waiting(request, name, make=False)
        if secret is None or not code_ok(secret, code, now.timestamp()):
            message = "That code is not the one your app shows now: type the current one."
            if secret is None:
                message = "The key shown had expired: scan this new one and type its code."
            return refused(422, "wrong code of the new secret", message, False)
        with console.write_lock:
            access_log.put_totp(console.store.con, name, secret, now, console.totp_key)
        console.codes.drop(str(request.session.pop("totp_key", "")))
        console.codes.use(name, secret, code, now)  # the confirming code signs in nowhere after
        console.access.record("totp_enrolled", name, "ok", "replaced" if old is not None else "")
        if user is None:  # enrolment after the password (or the directory): now the session starts
            held = request.session.get("enrol")
            how, sid = None, None
            if isinstance(held, list) and len(held) == 5:  # a directory sign-in: issuer, subject, its sid
                how, sid = SignIn(method="directory", issuer=str(held[2]), subject=str(held[3])), str(held[4]) or None
                person = Person(how.issuer, how.subject, name, "", False, sid)
                if console.directory is not None and console.directory.signed_out_since(person, float(held[1])):
                    request.session.clear()
                    console.access.record("login_failed", name, "refused", "directory: signed out while enrolling")
                    raise HTTPException(403, "the directory signed you out while this sign-in waited: start again")
            guard.begin_session(console, request, name, how, sid)
            if how is None:  # a local account's sign-in
                guard.flag_break_glass(console, name)
            console.access.record("login_succeeded", name, "ok", "after enrolling a one-time code")
        return RedirectResponse("/", status_code=303)

    return routes


def needs_code(console: Console, con: Cursor, name: str, role: str) -> tuple[str | None, bool]:
    """The user's TOTP secret (None: not enrolled) and whether the role requires one."""
    return access_log.totp_secret(con, name, console.totp_key), role in console.config.security.totp_roles
