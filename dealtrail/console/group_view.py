"""The group view served (``dealtrail group serve``): a read-only web view of every property's exports.

It reads the export location exactly as ``dealtrail group report`` does
(:func:`dealtrail.reporting.group.read_group`: every revision verified before a figure is read;
a property that fails is shown failing with its reasons, never left out), and shows the group
floor (per property its rounds, incidents by severity and per 1,000 rounds, late remedies and
reviews, dead letters, and the freshness of its last export), the rules by property, and one
page per property with each gaming day's revision and verification.

It writes no store and opens no DuckDB file: the figures are summed by an in-memory DuckDB over
the verified Parquet files. Its accounts are therefore not a store's users but the group's
users file (``DEALTRAIL_GROUP__USERS_FILE``, JSON, owner-only; see :func:`load_group_users`):
a ``director`` sees the whole group, a ``manager`` only the properties listed for her (another
property answers 404, as an unknown one does: its existence is not disclosed). Passwords are
argon2id hashes (``dealtrail group hash-password``), checked with the console's
:func:`~dealtrail.console.auth.verify_password` behind the console's sign-in throttle and lock
(:class:`~dealtrail.console.guard.LoginGuard`). Sessions are server-side in this process (a
signed cookie carries a random session ID): they end at logout, when idle or too old, and at a
restart. Forms carry a CSRF token; every response has the console's security headers; every page
but ``/healthz`` and ``/readyz`` needs a session; page text is escaped (Jinja2 autoescape).
Sign-ins, refusals and logouts are printed as access lines on standard error (no store to keep
them in); the view's reads are figures, not findings.

With the console's directory client (:class:`GroupDirectory`), people sign in with the casino's
directory too (OpenID Connect, the console's :class:`~dealtrail.console.oidc.Directory`: the
authorization code flow with PKCE, the ID token checked), their role from their groups: a
director group's member is a director, a property's manager group's member manages it. The
directory's back-channel logout (``/auth/backchannel-logout``, OpenID Connect Back-Channel Logout
1.0, the token checked as the console checks it) ends that person's sessions here at once.

The group is read again when a page asks for a period whose reading is older than
``refresh`` (``DEALTRAIL_GROUP__REFRESH_SECONDS``), so the pages stay fast while each
revision's SHA-256s are checked at most once per refresh.
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Form, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.sessions import SessionMiddleware

from dealtrail.console import auth, health
from dealtrail.console.deps import _env, _origin, add_security_headers, own_origin, query_string
from dealtrail.console.guard import LoginGuard, SecurityPolicy
from dealtrail.console.oidc import Directory, DirectoryError, RefusedError
from dealtrail.console.sessions import safe_next
from dealtrail.reporting.group import PropertyView, chart_sections, read_group, registered_keys, rules_by_property
from dealtrail.reporting.objectstore import Location

ROLES = ("director", "manager")
"""The group view's roles: a director sees every property, a manager the properties listed for her."""

CSP = (
    "default-src 'none'; script-src 'none'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


class GroupUsersError(ValueError):
    """The group's users file cannot be used (unreadable, readable by others, malformed)."""


@dataclass(frozen=True)
class GroupUser:
    """One account of the group view.

    Attributes:
        name: the name signed in with.
        password_hash: its argon2id hash (PHC string).
        role: ``director`` (the whole group) or ``manager`` (``properties`` only).
        properties: the property IDs a manager sees (a director's are ignored).
    """

    name: str
    password_hash: str
    role: Literal["director", "manager"]
    properties: frozenset[str] = frozenset()

    def sees(self, property_id: str) -> bool:
        """True if this user may see ``property_id``."""
        return self.role == "director" or property_id in self.properties


def load_group_users(path: Path) -> dict[str, GroupUser]:
    """Read the group's users file.

    The file is JSON: ``{"users": [{"name": "dana", "role": "director", "password_hash":
    "$argon2id$..."}, {"name": "mia", "role": "manager", "properties": ["north"],
    "password_hash": "..."}]}``.

    Args:
        path: the file; it must be readable by its owner only (it holds password hashes).

    Returns:
        The users by name.

    Raises:
        GroupUsersError: the file is missing, readable by group or others, or not as above.
    """
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GroupUsersError(f"cannot read the group's users file {path}: {exc.strerror}") from None
    if mode & 0o077:
        raise GroupUsersError(f"{path} is readable by others (mode {mode & 0o777:o}): chmod 600 it")
    try:
        rows = json.loads(text)["users"]
        out: dict[str, GroupUser] = {}
        for row in rows:
            name, role, digest = str(row["name"]), row["role"], str(row["password_hash"])
            props = row.get("properties", [])
            if role not in ROLES or not name or not digest.startswith("$argon2") or not isinstance(props, list):
                raise ValueError(f"user {name!r}: role is director or manager, password_hash an argon2 hash")
            if name in out:
                raise ValueError(f"user {name!r} twice")
            out[name] = GroupUser(name, digest, role, frozenset(str(p) for p in props))
    except (ValueError, KeyError, TypeError) as exc:
        raise GroupUsersError(f"{path}: not a group users file ({exc})") from None
    return out


@dataclass
class GroupReader:
    """The group as read from the export location, cached per period and read again in the
    background once a reading is ``refresh`` old.

    A period asked for the first time is read while the page waits. Afterwards a page never waits
    for a reading: once the period's reading is older than ``refresh``, the page is answered from
    it (the page says when it was read and verified) and one background thread reads the period
    again, which the next page shows. A new export or an altered file therefore shows within
    ``refresh`` plus the time of one reading. A reading that fails (the location unreachable)
    keeps the previous one and is tried again at the next page after ``refresh``.

    Args:
        location: the export location.
        keys_dir: the folder of registered public keys (read again at each refresh).
        refresh: how long a reading of one period is used before the group is read again.
        clock: the time now (UTC).
    """

    location: Location
    keys_dir: Path
    refresh: timedelta
    clock: Callable[[], datetime]
    _cache: dict[tuple[str, str], tuple[datetime, list[PropertyView]]] = field(default_factory=dict)
    _latest: tuple[datetime, str | None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _reading: dict[tuple[str, str], threading.Thread] = field(default_factory=dict)

    def latest_day(self) -> str | None:
        """The latest gaming day any property exported (listing only, read again after ``refresh``), or None."""
        with self._lock:
            now = self.clock()
            if self._latest is not None and now - self._latest[0] < self.refresh:
                return self._latest[1]
        days = [
            d.removeprefix("gaming_day=")
            for p in self.location.folders(self.location.root)
            if p.startswith("property=")
            for d in self.location.folders(self.location.path(p))
            if d.startswith("gaming_day=")
        ]
        latest = max(days, default=None)
        with self._lock:
            self._latest = (now, latest)
        return latest

    def views(self, first_day: str, end_day: str) -> tuple[datetime, list[PropertyView]]:
        """(when read, the properties) over the gaming days ``[first_day, end_day)``.

        Raises:
            OSError: the period's first reading failed (the location or the keys unreadable).
        """
        key = (first_day, end_day)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                if self.clock() - cached[0] >= self.refresh and key not in self._reading:
                    thread = threading.Thread(target=self._read, args=(key,), name="group-read", daemon=True)
                    self._reading[key] = thread
                    thread.start()
                return cached
        return self._read(key)

    def _read(self, key: tuple[str, str]) -> tuple[datetime, list[PropertyView]]:
        """Read and verify the period ``key`` and keep the reading (in the background: keep the
        previous one when it fails, with one line on standard error)."""
        background = threading.current_thread() is self._reading.get(key)
        try:
            now = self.clock()
            views = read_group(self.location, registered_keys(self.keys_dir), *key, now)
        except Exception as exc:
            if not background:
                raise
            print(f"group view: reading {key[0]} to {key[1]} again failed: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)  # fmt: skip
            with self._lock:
                self._reading.pop(key, None)
            return self._cache[key]
        with self._lock:
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = (now, views)
            if background:
                self._reading.pop(key, None)
        return now, views

    def settle(self, timeout: float = 60.0) -> None:
        """Wait for the background readings under way (tests and benchmarks)."""
        with self._lock:
            threads = list(self._reading.values())
        for thread in threads:
            thread.join(timeout)


@dataclass
class _Session:
    user: GroupUser
    began: datetime
    last: datetime
    subject: tuple[str, str] | None = None  # (issuer, sub) of a directory sign-in
    directory_sid: str | None = None  # the directory's session ID (``sid``) of that sign-in


@dataclass(frozen=True)
class GroupDirectory:
    """Signing in to the group view with the casino's directory (OpenID Connect, the console's
    :class:`~dealtrail.console.oidc.Directory`): the role follows the person's directory groups.

    Attributes:
        directory: the directory (issuer, client, keys).
        director_groups: groups whose members are directors (every property).
        manager_groups: per property ID, the groups whose members manage it (see it).
    """

    directory: Directory
    director_groups: frozenset[str]
    manager_groups: Mapping[str, frozenset[str]]

    def user_of(self, claims: Mapping[str, Any]) -> GroupUser | None:
        """The group user the ID token's claims make (None: no mapped group); a director group wins."""
        raw = claims.get(self.directory.config.groups_claim)
        groups = {str(g) for g in raw} if isinstance(raw, list) else set()
        name = str(claims.get("preferred_username") or claims["sub"])
        if groups & self.director_groups:
            return GroupUser(name, "", "director")
        properties = frozenset(p for p, mapped in self.manager_groups.items() if groups & mapped)
        return GroupUser(name, "", "manager", properties) if properties else None


class LoginRequiredError(Exception):
    """A page asked for without a session (answered by a redirect to ``/login``)."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


@dataclass
class GroupSessions:
    """The view's sessions, held in this process (a signed cookie carries the random ID).

    Args:
        policy: a session's idle and maximum age.
        clock: the time now (UTC).
    """

    policy: SecurityPolicy
    clock: Callable[[], datetime]
    _open: dict[str, _Session] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(
        self,
        request: Request,
        user: GroupUser,
        subject: tuple[str, str] | None = None,
        directory_sid: str | None = None,
    ) -> None:
        """Start a session for ``user``: a new cookie (no fixation of an earlier one) and CSRF token.
        ``subject`` (issuer, sub) and ``directory_sid``: the directory sign-in it came from, which a
        back-channel logout names (:meth:`end_directory`)."""
        sid, now = secrets.token_urlsafe(32), self.clock()
        with self._lock:
            self._open[sid] = _Session(user, now, now, subject, directory_sid)
        request.session.clear()
        request.session.update({"sid": sid, "csrf": secrets.token_urlsafe(32)})

    def end(self, request: Request) -> str | None:
        """End the request's session (its cookie opens nothing afterwards); the name it was, or None."""
        sid = request.session.get("sid")
        with self._lock:
            s = self._open.pop(sid, None) if isinstance(sid, str) else None
        request.session.clear()
        return s.user.name if s is not None else None

    def end_directory(self, issuer: str, sub: str | None, directory_sid: str | None) -> list[str]:
        """End every session begun by a directory sign-in of ``issuer`` whose subject is ``sub``
        or whose directory session is ``directory_sid`` (a back-channel logout names either or
        both); the names of the sessions ended (one per session)."""

        def named(s: _Session) -> bool:
            if s.subject is None or s.subject[0] != issuer:
                return False
            return (sub is not None and s.subject[1] == sub) or (
                directory_sid is not None and s.directory_sid == directory_sid
            )

        with self._lock:
            gone = [k for k, s in self._open.items() if named(s)]
            return [self._open.pop(k).user.name for k in gone]

    def user(self, request: Request) -> GroupUser | None:
        """The signed-in user of ``request``, or None (no session, ended, idle or too old)."""
        sid = request.session.get("sid")
        if not isinstance(sid, str):
            return None
        now = self.clock()
        with self._lock:
            s = self._open.get(sid)
            if s is None:
                return None
            old = now - s.last > self.policy.session_idle or now - s.began > self.policy.session_max
            if old:
                del self._open[sid]
                return None
            s.last = now
        return s.user


def _viewer(request: Request) -> GroupUser:
    """The signed-in user (a dependency of every page).

    Raises:
        LoginRequiredError: no session.
    """
    sessions: GroupSessions = request.app.state.sessions
    user = sessions.user(request)
    if user is None:
        raise LoginRequiredError(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
    return user


Viewer = Annotated[GroupUser, Depends(_viewer)]


def _day(value: str | None, name: str) -> str | None:
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%d").strftime("%Y-%m-%d")
    except ValueError:
        raise HTTPException(422, f"{name} is a gaming day (YYYY-MM-DD)") from None


def create_group_app(
    reader: GroupReader,
    users: dict[str, GroupUser],
    session_secret: str,
    policy: SecurityPolicy,
    secure_cookies: bool = False,
    echo: Callable[[str], None] | None = None,
    directory: GroupDirectory | None = None,
    control: tuple[int, float, float] = (100, 1.4427, 8.0),
) -> FastAPI:
    """Build the group view (serve it with uvicorn).

    Args:
        reader: the group's exports (:class:`GroupReader`).
        users: the accounts (:func:`load_group_users`).
        session_secret: the key that signs the session cookie.
        policy: sessions' idle and maximum age, the sign-in throttle and lock (the console's).
        secure_cookies: send the session cookie over HTTPS only.
        echo: where access lines go; None: standard error.
        directory: sign-in with the casino's directory too (``/auth/login``); None: the users file only.
        control: the control charts' minimum rounds of a point, CUSUM k and h (``DEALTRAIL_CONTROL__*``):
            each property against the properties the reader sees, by gaming day or week.

    Returns:
        The FastAPI application.
    """
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, title="dealtrail group view")
    app.include_router(health.router)  # /healthz, /readyz: no login, no data
    env = _env(UTC)
    login_guard = LoginGuard(policy)
    clock = reader.clock
    sessions = GroupSessions(policy, clock)
    app.state.sessions = sessions

    def access(kind: str, name: str, outcome: str, detail: str = "") -> None:
        from dealtrail.console.guard import CLIENT

        line = f"group access {clock().isoformat()} {kind} user={name!r} client={CLIENT.get()} {outcome} {detail}"
        (echo or (lambda s: print(s, file=sys.stderr, flush=True)))(line.rstrip())

    def csrf_token(request: Request) -> str:
        token = request.session.get("csrf")
        if not isinstance(token, str):
            token = secrets.token_urlsafe(32)
            request.session["csrf"] = token
        return token

    def check_csrf(request: Request, token: str) -> None:
        origin = _origin(request)
        if origin is not None and origin != own_origin(request):
            raise HTTPException(403, f"a form from another site ({origin[:100]}) is refused")
        expected = request.session.get("csrf")
        if not isinstance(expected, str) or not secrets.compare_digest(expected, token):
            raise HTTPException(403, "the form has expired or did not come from this view; reload the page")

    def render(request: Request, template: str, user: GroupUser | None, status: int = 200, **ctx: Any) -> HTMLResponse:
        html = env.get_template(template).render(
            user=user, csrf=csrf_token(request), now=clock(), path=request.url.path, **ctx
        )
        return HTMLResponse(html, status_code=status)

    def period(first: str | None, last: str | None) -> tuple[str, str, str]:
        """(first day, last day, the day after) of the asked period; default the latest 7 gaming days exported."""
        last_day = _day(last, "to") or reader.latest_day() or clock().strftime("%Y-%m-%d")
        last_dt = datetime.strptime(last_day, "%Y-%m-%d")
        first_day = _day(first, "from") or (last_dt - timedelta(days=6)).strftime("%Y-%m-%d")
        if first_day > last_day:
            raise HTTPException(422, "from is after to")
        return first_day, last_day, (last_dt + timedelta(days=1)).strftime("%Y-%m-%d")

    def summaries(views: list[PropertyView], read_at: datetime) -> list[dict[str, Any]]:
        out = []
        for v in views:
            s = v.summary()
            age = (read_at - v.last_export).total_seconds() / 3600 if v.last_export else None
            s["last_export_age_hours"] = round(age, 1) if age is not None else None
            s["last_export_at"] = v.last_export
            out.append(s)
        return out

    add_security_headers(app, CSP)

    app.add_middleware(
        SessionMiddleware,
        secret_key=session_secret,
        session_cookie="dealtrail_group_session",
        max_age=int(policy.session_max.total_seconds()),
        same_site="strict",
        https_only=secure_cookies,
    )
    app.add_middleware(_ClientAddress)  # the client's address, for the sign-in throttle

    @app.exception_handler(LoginRequiredError)
    async def to_login(request: Request, exc: LoginRequiredError) -> Response:
        return RedirectResponse("/login?" + query_string({"next": exc.next_path}), status_code=303)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        titles = {403: "Refused", 404: "Not found", 422: "Not understood"}
        return render(
            request,
            "group_error.html.j2",
            sessions.user(request),
            exc.status_code,
            title=titles.get(exc.status_code, "Error"),
            message=str(exc.detail),
        )

    @app.get("/login", include_in_schema=False)
    def login_page(request: Request, next: str = "/") -> HTMLResponse:
        return render(
            request,
            "login.html.j2",
            None,
            next=safe_next(next),
            error=None,
            username="",
            directory=directory is not None,
            local=bool(users),
            product="group view",
        )

    @app.post("/login", include_in_schema=False)
    def login(
        request: Request,
        csrf: Annotated[str, Form()],
        username: Annotated[str, Form(max_length=200)] = "",
        password: Annotated[str, Form(max_length=1024)] = "",
        next: Annotated[str, Form()] = "/",
    ) -> Response:
        check_csrf(request, csrf)
        from dealtrail.console.guard import CLIENT
        from schemas.access import clean_name

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
                directory=directory is not None,
                local=bool(users),
                product="group view",
            )
            page.headers.update(headers or {})
            return page

        if not typed or not password:
            return again(422, "Type your name and your password.")
        client, now = CLIENT.get(), clock()
        refusal = login_guard.check(typed, client, now)
        if refusal is not None:
            access("login_failed", typed, "locked" if refusal.locked else "throttled", refusal.message)
            return again(429, refusal.message, {"Retry-After": str(refusal.retry_after)})
        u = users.get(typed)
        if not auth.verify_password(u.password_hash if u else None, password) or u is None:
            access("login_failed", typed, "refused", "wrong name or password")
            login_guard.failed(typed, client, now)
            return again(401, "Wrong name or password.")
        login_guard.succeeded(typed, client)
        sessions.begin(request, u)
        access("login_succeeded", u.name, "ok", u.role)
        return RedirectResponse(safe_next(next), status_code=303)

    @app.post("/logout", include_in_schema=False)
    def logout(request: Request, csrf: Annotated[str, Form()]) -> Response:
        check_csrf(request, csrf)
        name = sessions.end(request)
        if name is not None:
            access("logout", name, "ok")
        return RedirectResponse("/login", status_code=303)

    @app.get("/login.css", include_in_schema=False)
    @app.get("/static/console.css", include_in_schema=False)
    def css() -> Response:
        from importlib import resources

        from fastapi.responses import FileResponse

        path = Path(str(resources.files("dealtrail.console").joinpath("static", "console.css")))
        return FileResponse(path, media_type="text/css", headers={"Cache-Control": "private, max-age=300"})

    @app.get("/", include_in_schema=False)
    def floor(
        request: Request, user: Viewer, first: Annotated[str | None, Query(alias="from")] = None, to: str | None = None
    ) -> HTMLResponse:
        first_day, last_day, end = period(first, to)
        read_at, views = reader.views(first_day, end)
        mine = [v for v in views if user.sees(v.property_id)]
        missing = sorted(user.properties - {v.property_id for v in views}) if user.role == "manager" else []
        charts = chart_sections(mine, "day", control)  # against the properties this reader sees
        return render(
            request,
            "group_floor.html.j2",
            user,
            control=charts,
            views=mine,
            summaries=summaries(mine, read_at),
            failing=[v for v in mine if not v.ok],
            missing=missing,
            rules=rules_by_property(mine),
            first_day=first_day,
            last_day=last_day,
            read_at=read_at,
            source=reader.location.url,
        )

    @app.get("/properties/{property_id}", include_in_schema=False)
    def one_property(
        request: Request,
        user: Viewer,
        property_id: str,
        first: Annotated[str | None, Query(alias="from")] = None,
        to: str | None = None,
        slot: Annotated[str, Query(max_length=10)] = "day",
    ) -> HTMLResponse:
        first_day, last_day, end = period(first, to)
        read_at, views = reader.views(first_day, end)
        view = next((v for v in views if v.property_id == property_id), None)
        if view is None or not user.sees(property_id):  # another's property is not disclosed
            raise HTTPException(404, "no such property in your view of the group")
        (summary,) = summaries([view], read_at)
        slot = slot if slot in ("day", "week") else "day"
        charts = chart_sections([v for v in views if user.sees(v.property_id)], slot, control)
        return render(
            request,
            "group_property.html.j2",
            user,
            control=charts,
            chart=next((c for c in charts["charts"] if c["property_id"] == property_id), None),
            view=view,
            s=summary,
            first_day=first_day,
            last_day=last_day,
            read_at=read_at,
            source=reader.location.url,
        )

    if directory is not None:
        _directory_routes(app, directory, session_secret, secure_cookies, sessions, render, access)
    return app


def _directory_routes(
    app: FastAPI,
    group_directory: GroupDirectory,
    session_secret: str,
    secure_cookies: bool,
    sessions: GroupSessions,
    render: Callable[..., HTMLResponse],
    access: Callable[..., None],
) -> None:
    """``/auth/login`` and ``/auth/callback``: the authorization code flow with PKCE, as the
    console runs it (:mod:`dealtrail.console.directory_pages`), the role from the groups; and
    ``/auth/backchannel-logout``, which ends a person's sessions when the directory says so."""
    from itsdangerous import BadSignature, URLSafeTimedSerializer

    from dealtrail.console.oidc import LOGIN_COOKIE, LOGIN_SECONDS, login_redirect

    d = group_directory.directory
    signer = URLSafeTimedSerializer(session_secret, salt="dealtrail-group-login")

    def refused(request: Request, reason: str, status: int = 403, who: str = "directory") -> HTMLResponse:
        access("login_failed", who, "refused", f"directory: {reason}"[:500])
        return render(request, "directory_refused.html.j2", None, status, reason=reason)

    def redirect_uri(request: Request) -> str:
        return str(d.config.redirect_url or request.url_for("group_directory_callback"))

    @app.get("/auth/login", include_in_schema=False)
    def directory_login(request: Request, next: str = "/") -> Response:
        try:
            url, pending = d.login_url(redirect_uri(request))
        except DirectoryError as exc:
            return refused(request, f"the directory cannot be reached now ({exc})", 503)
        pending["next"] = safe_next(next)
        return login_redirect(url, signer.dumps(pending), secure_cookies)

    @app.get("/auth/callback", include_in_schema=False, name="group_directory_callback")
    def directory_callback(request: Request, code: str = "", state: str = "", error: str = "") -> Response:
        raw = request.cookies.get(LOGIN_COOKIE, "")
        try:
            pending = signer.loads(raw, max_age=LOGIN_SECONDS) if raw else None
        except BadSignature:
            pending = None
        response: Response
        claims: dict[str, Any] = {}
        # the state first: a link to this callback with an error of anyone's wording, in a browser
        # that never started a sign-in here, is shown nothing of it (as the console's callback)
        if not isinstance(pending, dict) or not secrets.compare_digest(str(pending.get("state", "")), state):
            response = refused(request, "the sign-in took too long or did not start here: start again", 400)
        elif error:
            response = refused(request, f"the directory refused the sign-in: {error}"[:300])
        else:
            try:
                claims = d.claims_of(code, pending, sessions.clock().timestamp())
                user = group_directory.user_of(claims)
            except DirectoryError as exc:
                response = refused(request, f"the directory cannot be reached now ({exc})", 503)
            except RefusedError as exc:
                response = refused(request, exc.reason)
            else:
                who = str(claims.get("preferred_username") or claims.get("sub"))
                if user is None:
                    response = refused(
                        request, "none of your directory groups is mapped to the group view: ask for one", who=who
                    )
                else:
                    sid = claims.get("sid")
                    subject = (str(claims["iss"]), str(claims["sub"]))
                    sessions.begin(request, user, subject, sid if isinstance(sid, str) else None)
                    access("login_succeeded", user.name, "ok", f"directory {d.config.issuer}, subject {claims['sub']}")
                    # a page of this site that goes on: the strict session cookie is not sent along
                    # the redirect of a navigation that began at the directory's site
                    target = safe_next(str(pending.get("next", "/")))
                    response = render(request, "directory_continue.html.j2", None, target=target)
        response.delete_cookie(LOGIN_COOKIE, path="/auth/callback")
        return response

    @app.post("/auth/backchannel-logout", include_in_schema=False)
    def backchannel_logout(logout_token: Annotated[str, Form(max_length=20_000)]) -> Response:
        """The directory's back-channel logout (Back-Channel Logout 1.0): the token checked as the
        console checks it (:meth:`Directory.logout_claims`), then every session here of its
        subject or its directory session ends; 400 with the reason for a token refused."""
        now = sessions.clock().timestamp()
        try:
            claims = d.logout_claims(logout_token, now)
        except (RefusedError, DirectoryError) as exc:
            access("directory_logout", "directory", "refused", str(exc)[:300])
            return Response(
                str(exc)[:300], status_code=400, media_type="text/plain", headers={"Cache-Control": "no-store"}
            )
        d.signed_out(claims, now)
        sub, sid = claims.get("sub"), claims.get("sid")
        ended = sessions.end_directory(
            str(claims["iss"]), sub if isinstance(sub, str) else None, sid if isinstance(sid, str) else None
        )
        who = ended[0] if ended else "directory"
        detail = f"subject {sub or '-'}, session {sid or '-'}: {len(ended)} session(s) ended"
        access("directory_logout", who, "ok", detail)
        return Response(status_code=200, headers={"Cache-Control": "no-store"})


class _ClientAddress:
    """Pure ASGI middleware: sets the console's ``CLIENT`` (the peer's address) for the request."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from dealtrail.console.guard import CLIENT

        client = scope.get("client") if scope["type"] == "http" else None
        token = CLIENT.set(str(client[0]) if client else "")
        try:
            await self.app(scope, receive, send)
        finally:
            CLIENT.reset(token)
