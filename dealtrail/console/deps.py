"""What the console's routers share: the resolved configuration, the request's user and cursor
(FastAPI dependencies), the 422 every refusal of a value takes, and :class:`Console`, built once
by ``create_app`` and handed to each router: the store, the configuration, the templates, the
write lock, the review sink and the methods more than one router uses (rendering a page, the
CSRF token, the floor's figures, a finding, recording a review).
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Annotated, Any

import duckdb
import jinja2
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from ulid import ULID

from dealtrail.console import auth, guard
from dealtrail.console.api_models import ReviewRequest
from dealtrail.console.oidc import Directory, DirectoryConfig
from dealtrail.investigate.video import VideoLinks
from dealtrail.settings import ControlSettings, ReviewSettings
from projections.display.timefmt import NO_OFFSET_HELP, short, stamp, zone_name
from projections.models import incidents, reviews
from projections.models.device_state import floor_device_states
from projections.models.reviews import DispositionNeeds, FindingFilter, ReviewDue
from projections.records import access_log, staff, users
from projections.records.users import MANAGER_ROLES, REVIEWER_ROLES
from projections.store import summaries
from projections.store.sql_files import read_sql
from projections.store.store import Store
from schemas.access import AccessEntry
from schemas.reviews import (
    Cause,
    FindingAcknowledged,
    FindingApproved,
    FindingAssigned,
    FindingDisposed,
    FindingDispositionProposed,
    FindingEvidenceAttached,
    FindingRejected,
    FindingReopened,
    SignIn,
    identity_key,
)
from streams.engine import Plausibility

SEVERITIES = ("voiding", "integrity", "procedural")


def disposition_needs_of(review: ReviewSettings) -> DispositionNeeds:
    """What a disposition must carry per severity, from the review settings
    (``DEALTRAIL_REVIEW__DISPOSITION_NEEDS_<SEVERITY>``)."""
    return DispositionNeeds(
        tuple(review.disposition_needs_voiding),
        tuple(review.disposition_needs_integrity),
        tuple(review.disposition_needs_procedural),
    )


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
        video: the tables' cameras and the clip links of the video management system
            (:class:`dealtrail.investigate.video.VideoLinks`, from ``settings.video``); default: none.
        plausibility: the limits of rulebook 10.3.4 the audit applies (``settings.plausibility``),
            for the evidence packages the finding page downloads; None: none checked.
        security: sessions, sign-in throttle, token lifetime (resolved ``DEALTRAIL_SECURITY__*``).
        echo_access: print one line per access-log entry to standard error (``serve``).
        remedy_window: how long the engine awaits an owed remedy (``DEALTRAIL_REMEDY_WINDOW``):
            a finding page lists the remedies recorded after it (rulebook 10.3.5).
        disposition_needs: what a disposition must carry besides its cause, per severity
            (resolved settings; by default the settings' defaults).
        report_max_listed: how many voiding and integrity incidents the Reports page's report
            lists (``settings.reports.max_listed``); None: every one.
        archive: the folder of the store's archived months the Reports page's report reads
            (``settings.archive.dir``); None: the folder the store's manifest names.
        tz: the casino's time zone the pages show times in, labelled (``settings.zone``, from
            ``DEALTRAIL_TIMEZONE``); filters typed without an offset are read in it, as the forms say.
        report_grace: when a period's report is final (``DEALTRAIL_REPORTS__GRACE_MINUTES``),
            for the revisions the Reports page writes; None: the schedule's default.
        control: the control charts' minimum rounds of a point and CUSUM (``DEALTRAIL_CONTROL__*``).
        directory: the directory people sign in with (OpenID Connect,
            :class:`dealtrail.console.oidc.DirectoryConfig` from ``DEALTRAIL_DIRECTORY__*``);
            None: local accounts only.
        console_url: the console's URL as people reach it (``DEALTRAIL_CONSOLE__URL``), for the
            directory's callback when ``DEALTRAIL_DIRECTORY__REDIRECT_URL`` is unset.
        totp_key: the Fernet key of the one-time-code secrets (``DEALTRAIL_SECURITY__TOTP_KEY`` or
            its key file, resolved); None: the key file beside the store, as the settings'
            default (``dealtrail.console.totp.resolve_totp_key``).
        signing_key: the file of the property's signing key (``DEALTRAIL_SIGNING__KEY_FILE``):
            evidence packages made in the console are signed with it, and its Sign button then
            also makes the report's signed PDF; None: not signed, no PDF.
        chromium: the Chromium that prints the signed PDF (``settings.reports.chromium``);
            None: the first found on ``PATH``.
        pdf_certificate: the casino's own certificate and key files for the signed PDF
            (``DEALTRAIL_SIGNING__PDF_CERT_FILE``, ``DEALTRAIL_SIGNING__PDF_KEY_FILE``); None: the
            certificate the property's key issues itself.
    """

    review_due: ReviewDue
    session_secret: str
    secure_cookies: bool = False
    reports_dir: Path | None = None
    poll_seconds: float = 2.0
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    property_name: str | None = None
    video: VideoLinks = field(default_factory=VideoLinks)
    plausibility: Plausibility | None = None
    security: guard.SecurityPolicy = field(default_factory=guard.SecurityPolicy)
    echo_access: bool = False
    remedy_window: timedelta = timedelta(hours=24)
    disposition_needs: DispositionNeeds = field(default_factory=lambda: disposition_needs_of(ReviewSettings()))
    report_max_listed: int | None = None
    archive: Path | None = None
    totp_key: bytes | None = field(default=None, repr=False)
    signing_key: Path | None = None
    chromium: str | None = None
    pdf_certificate: tuple[Path, Path] | None = None
    tz: tzinfo = UTC
    report_grace: timedelta | None = None
    control: ControlSettings = field(default_factory=ControlSettings)
    directory: DirectoryConfig | None = None
    console_url: str | None = None

    @property
    def local_sign_in(self) -> bool:
        """Whether local accounts sign in with a password: always without a directory; with one,
        only when ``DEALTRAIL_DIRECTORY__LOCAL_ACCOUNTS`` allows the break-glass account."""
        return self.directory is None or self.directory.local_accounts


class LoginRequiredError(Exception):
    """A page was asked for without a session: the browser goes to the login page."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


@dataclass(frozen=True)
class User:
    """The authenticated user of a request (name and role) and the credential used.

    Attributes:
        name: the user.
        role: the user's role.
        token: the first 12 hex digits of the API token's SHA-256; None for a session.
        signed_in_with: how the person signed in (a session: local password or directory;
            ``token`` for an API token), recorded with their reviews, approvals and sign-offs.
        issued_by: who made that token (None: a session, or no record says); a token made by
            someone else than its user (an admin, before tokens were each user's own) acts, but
            does not approve or reject (four eyes are two people).
    """

    name: str
    role: str
    signed_in_with: SignIn = field(default_factory=lambda: SignIn(method="local"))
    token: str | None = None
    issued_by: str | None = None

    @property
    def credential(self) -> str:
        """The credential in words, for the access log: ``session (local account)``, ``session
        (directory https://idp/realms/casino, subject 3f2a...)``, or ``token 0f3a... issued by max``."""
        if self.token is None:
            return f"session ({self.signed_in_with.label})"
        return f"token {self.token} issued by {self.issued_by or 'an unrecorded issuer'}"

    @property
    def can_review(self) -> bool:
        """Reviewers, managers and admins review; viewers only read."""
        return self.role in REVIEWER_ROLES

    @property
    def can_approve(self) -> bool:
        """Managers and admins approve or reject a disposition someone else proposed (four eyes)."""
        return self.role in MANAGER_ROLES

    @property
    def is_admin(self) -> bool:
        """Admins also manage users."""
        return self.role == "admin"


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
    """The user of the request's session while it is in force (``guard.session_user``)."""
    found = guard.session_user(request.app.state.console, request, con)
    return None if found is None else User(*found)


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
            digest = auth.token_hash(token.strip())
            found = users.token_user(con, digest)
            if found is not None and _token_expired(request, con, digest):
                found = None
            if found is not None:
                request.state.user_name, request.state.user_role = found["name"], found["role"]
                return User(found["name"], found["role"], SignIn(method="token"), digest[:12], found["issued_by"])
        raise HTTPException(401, "invalid, revoked or expired token", headers={"WWW-Authenticate": "Bearer"})
    u = _session_user(request, con)
    if u is None:
        raise HTTPException(401, "authentication required", headers={"WWW-Authenticate": "Bearer"})
    if request.method not in SAFE_METHODS:
        check_origin(request, request.headers.get(CSRF_HEADER))
    return u


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing; every other one, made with a session cookie, checks its origin."""

CSRF_HEADER = "X-CSRF-Token"
"""The header in which a script sends the session's CSRF token with a cookie-authenticated API
request (the token the console's forms carry as ``csrf``)."""


def _origin(request: Request) -> str | None:
    """The request's ``Origin`` header, lower-cased; None without one, and for ``null`` (an opaque
    origin: Chromium sends it with every form of a page served with ``Referrer-Policy:
    no-referrer``, as the console's are), which then needs the CSRF token."""
    origin = request.headers.get("origin")
    return None if origin is None or origin.strip().lower() == "null" else origin.strip().lower()


def add_security_headers(app: FastAPI, csp: str) -> None:
    """Give every response of ``app`` (a FastAPI app: the console, the group view) the security
    headers: ``csp`` as its Content-Security-Policy unless the route set its own, ``nosniff``,
    no referrer, no framing, and ``Cache-Control: no-store`` unless the route set one."""

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Callable[[Request], Any]) -> Response:
        response: Response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", csp)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers.setdefault("Cache-Control", "no-store")
        return response


def own_origin(request: Request) -> str:
    """The console's origin as this request reached it: ``scheme://host[:port]``."""
    return f"{request.url.scheme}://{request.url.netloc}".lower()


def check_origin(request: Request, token: str | None) -> None:
    """Refuse a state-changing request made with the session cookie that may come from another
    site: one whose ``Origin`` is not the console's own, or one with no ``Origin`` and no CSRF
    token of the session (a bearer token is not sent by a browser on its own: unaffected).

    Raises:
        HTTPException: 403 with the reason.
    """
    origin = _origin(request)
    if origin is not None and origin != own_origin(request):
        raise HTTPException(403, f"a request from another site ({origin[:100]}) is refused: use a token")
    if origin is not None:
        return
    expected = request.session.get("csrf")
    if token is None or not isinstance(expected, str) or not secrets.compare_digest(expected, token):
        raise HTTPException(
            403,
            f"a request made with the session cookie needs the page's CSRF token ({CSRF_HEADER}) or "
            "this console's Origin; scripts use an API token (Authorization: Bearer)",
        )


def _token_expired(request: Request, con: duckdb.DuckDBPyConnection, digest: str) -> bool:
    """True if the token has outlived ``token_lifetime`` (never, when that is None)."""
    config: ConsoleConfig = request.app.state.config
    lifetime = config.security.token_lifetime
    issued = users.token_issued_at(con, digest) if lifetime is not None else None
    return lifetime is not None and (issued is None or config.clock() - issued >= lifetime)


def known_query(request: Request) -> None:
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


def invalid(loc: tuple[str | int, ...], message: str) -> RequestValidationError:
    """A 422 in FastAPI's validation shape (``{"detail": [{"loc", "msg", "type"}]}``), the one
    shape every 422 of the console has, as its OpenAPI document says.

    Args:
        loc: where the value was, e.g. ``("query", "from")`` or ``("body", "cause")``.
        message: what is wrong with it.
    """
    return RequestValidationError([{"type": "value_error", "loc": loc, "msg": message}])


class StateRefusal(RequestValidationError):
    """A refusal that depends on what the store holds, not on the request's shape: an assignee
    who is not an active user who can review, a disposition without what the finding's severity
    needs (``ConsoleConfig.disposition_needs``). A form shows it as any 422 (the page again, with
    the reason and the typed values); the API answers 409, since its document states every
    constraint a request's shape can carry and a schema-valid request is not a 422 (issue 47,
    item 7).

    Attributes:
        reason: ``"<field>: <message>"``, for the 409's detail.
    """

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__([{"type": "value_error", "loc": loc, "msg": message}])
        self.reason = f"{loc[-1]}: {message}"


def local(value: datetime | None, tz: tzinfo = UTC) -> str:
    """A time as ``YYYY-MM-DD HH:MM:SS-05:00`` in ``tz`` with its offset (the page labels the
    zone: the offset alone tells the two 01:30s of a night that falls back apart); ``-`` for None
    (:func:`projections.display.timefmt.stamp`)."""
    return stamp(value, tz)


def utc(value: datetime | None) -> str:
    """A time as ``YYYY-MM-DD HH:MM:SS+00:00`` (UTC with its offset); ``-`` for None."""
    return stamp(value, UTC)


def local_short(value: datetime | None, tz: tzinfo = UTC) -> str:
    """A time as ``MM-DD HH:MM:SS-05:00`` in ``tz`` with its offset, for the floor's narrow
    columns (the column heads name the zone); ``-`` for None
    (:func:`projections.display.timefmt.short`)."""
    return short(value, tz)


def _env(tz: tzinfo = UTC) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dealtrail.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["local"] = lambda value: local(value, tz)  # the casino's zone (DEALTRAIL_TIMEZONE)
    env.filters["local_short"] = lambda value: local_short(value, tz)
    env.globals["zone_label"] = zone_name(tz)
    env.globals["no_offset_help"] = NO_OFFSET_HELP.format(zone=zone_name(tz))
    env.filters["person"] = _person
    return env


@jinja2.pass_context
def _person(ctx: jinja2.runtime.Context, staff_id: str | None) -> str:
    """The template filter ``person``: ``Name (ID)`` from the roster the page was rendered with
    (:func:`projections.records.staff.label`), the ID alone without a name."""
    return staff.label(staff_id, ctx.get("staff_names") or {})


def sql(name: str) -> str:
    """The text of the read model's query ``projections/store/sql/<name>`` (includes spliced in)."""
    return read_sql(name)


def query_string(params: dict[str, Any]) -> str:
    """``params`` as a URL query string, blank values left out."""
    from urllib.parse import urlencode

    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


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


class Console:
    """The console's state and the methods its routers share, built once per app.

    Args:
        store: the open store; users and tokens (and, without a sink, reviews) are written
            through its connection.
        config: see :class:`ConsoleConfig`.
        review_sink: where a review event goes instead of the store (see ``create_app``); None:
            reviews are stored directly.
        write_lock: the lock every writer of ``store.con`` in this process holds.
        access_sink: where an access-log entry goes instead of the store (the access-log topic's
            producer); None: stored directly.
    """

    def __init__(
        self,
        store: Store,
        config: ConsoleConfig,
        review_sink: Callable[[reviews.ReviewEvent], None] | None,
        write_lock: threading.Lock,
        access_sink: Callable[[AccessEntry], None] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.review_sink = review_sink
        self.write_lock = write_lock
        self.env = _env(config.tz)
        self.access = guard.AccessLog(store, write_lock, access_sink, config.clock, config.echo_access)
        self.guard = guard.LoginGuard(config.security)
        self.codes = guard.OneTimeCodes()  # one-time codes used, and secrets being enrolled
        self.directory = Directory(config.directory) if config.directory is not None else None
        from dealtrail.console.totp import resolve_totp_key

        self.totp_key = config.totp_key or resolve_totp_key(None, None, store.path)
        with write_lock:  # an older store's clear-text secrets: encrypted on the first start
            sealed = access_log.seal_clear_totp(store.con, self.totp_key)
        if sealed:
            self.access.record("totp_sealed", "console", "ok", f"{sealed} one-time-code secrets encrypted at rest")
        with store.con.cursor() as cur:  # the sign-in counts as the access log left them (a restart)
            self.guard.replay(cur, config.clock())

    def csrf_token(self, request: Request) -> str:
        """The session's CSRF token (made on first use), for the forms of a page."""
        token = request.session.get("csrf")
        if not isinstance(token, str):
            token = secrets.token_urlsafe(32)
            request.session["csrf"] = token
        return token

    def check_csrf(self, request: Request, token: str) -> None:
        """Refuse a form whose CSRF token is not the session's, or that names another site as its
        ``Origin``.

        Raises:
            HTTPException: 403.
        """
        origin = _origin(request)
        if origin is not None and origin != own_origin(request):
            raise HTTPException(403, f"a form from another site ({origin[:100]}) is refused")
        expected = request.session.get("csrf")
        if not isinstance(expected, str) or not secrets.compare_digest(expected, token):
            raise HTTPException(403, "the form has expired or did not come from this console; reload the page")

    def render(
        self, request: Request, template: str, user: User | None, status_code: int = 200, **ctx: Any
    ) -> HTMLResponse:
        """A page: ``template`` rendered with the user, the CSRF token, the time, the path, the
        roster's names (``staff_names``, for the ``person`` filter; only for a signed-in user:
        names are personal data) and ``ctx``."""
        if user is not None and "staff_names" not in ctx:
            cur = self.store.con.cursor()
            try:
                ctx["staff_names"] = staff.names(cur)
            finally:
                cur.close()
        html = self.env.get_template(template).render(
            user=user,
            csrf=self.csrf_token(request),
            now=self.config.clock(),
            path=request.url.path,
            property_label=self.property_name(),
            **ctx,
        )
        return HTMLResponse(html, status_code=status_code)

    def property_name(self) -> str | None:
        """The property's name: recorded in the store by an admin, else ``DEALTRAIL_PROPERTY``,
        else None (:func:`projections.records.property.resolve`)."""
        from projections.records import property as stored_property

        cur = self.store.con.cursor()
        try:
            return stored_property.resolve(cur, self.config.property_name)
        finally:
            cur.close()

    def floor_rows(
        self, con: duckdb.DuckDBPyConnection, now: datetime, per_table: dict[str, incidents.Counts] | None = None
    ) -> list[dict[str, Any]]:
        """Each table's row: its dealer and supervisor on duty (the ``sum_floor`` summary,
        :mod:`projections.store.summaries`; in a store without it ``con_floor.sql`` and
        :func:`projections.records.staff.supervisors_by_table`), its devices' state as the engine holds it
        (``device_state`` and ``device_since``: :func:`projections.models.device_state.floor_device_states`)
        with its incidents not yet disposed, by severity, its overdue remedies and late reviews
        (the incidents read model; ``per_table``: its figures by table, when already read)."""
        cur = con.execute(summaries.floor_query(con))  # sum_floor.sql, or con_floor.sql without the summary
        cols = [d[0] for d in cur.description]
        fetched = cur.fetchall()
        if per_table is None:
            per_table = incidents.counts_by_table(con, self.config.review_due, now)
        # the summary has each table's supervisor; else the latest floorperson in its events
        supervisors = None if "supervisor_id" in cols else staff.supervisors_by_table(con)
        devices = floor_device_states(con)
        rows = []
        for r in fetched:
            row = dict(zip(cols, r, strict=True))
            if supervisors is not None:
                row["supervisor_id"] = supervisors.get(row["table_id"])
            dev = devices.get(row["table_id"])
            row["device_state"] = dev["status"] if dev is not None else "unknown"  # no engine state stored yet
            row["device_since"] = dev["since"] if dev is not None else None
            rows.append({**row, **_floor_counts(per_table.get(row["table_id"], incidents.Counts()))})
        return rows

    def floor_context(self, con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
        """The floor now: every table's row, the store's incident totals and the time."""
        now = self.config.clock()
        per_table = incidents.counts_by_table(con, self.config.review_due, now)
        return {
            "tables": self.floor_rows(con, now, per_table),
            # every finding has a table: the store's totals are the tables' figures added up
            "totals": incidents.total(per_table.values(), judge_late=True),
            "as_of": now,
        }

    def finding(self, con: duckdb.DuckDBPyConnection, finding_id: str) -> dict[str, Any]:
        """One finding's row (``reviews.find``).

        Raises:
            HTTPException: 404, no such finding.
        """
        if not re.fullmatch(r"[0-9a-f]{1,64}", finding_id):
            raise HTTPException(404, f"no finding {finding_id}")
        rows, _ = reviews.find(con, FindingFilter(finding_id=finding_id), self.config.review_due, self.config.clock())
        if not rows:
            raise HTTPException(404, f"no finding {finding_id}")
        return rows[0]

    def finding_case(
        self, con: duckdb.DuckDBPyConnection, finding_id: str
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """One finding's row and the rows of its case (its cause, itself if it is an incident, and
        the cause's consequences), from the read model run once for an incident, twice for a
        consequence (its own case first names its cause).

        Returns:
            ``(finding, case_rows)``: the rows as :meth:`finding` gives them; ``case_rows``
            includes the finding itself.

        Raises:
            HTTPException: 404, no such finding.
        """
        if not re.fullmatch(r"[0-9a-f]{1,64}", finding_id):
            raise HTTPException(404, f"no finding {finding_id}")
        due, now = self.config.review_due, self.config.clock()
        rows, _ = reviews.find(con, FindingFilter(case_of=finding_id), due, now)
        f = next((r for r in rows if r["finding_id"] == finding_id), None)
        if f is None:
            raise HTTPException(404, f"no finding {finding_id}")
        if f.get("cause_finding_id"):  # a consequence: the case is its cause's
            rows, _ = reviews.find(con, FindingFilter(table_id=f["table_id"], case_of=f["cause_finding_id"]), due, now)
            f = next((r for r in rows if r["finding_id"] == finding_id), f)
        return f, [r for r in rows if r["table_id"] == f["table_id"]]  # a case lies within one table

    def record_finding_read(self, kind: str, user: User, f: dict[str, Any], more: str = "") -> None:
        """Record that ``user`` opened a finding (``finding_viewed``) or its case (``case_viewed``):
        an access entry naming the finding, its rule, table and round, so that "who looked at this
        incident?" has an answer; the response does not wait for it
        (:meth:`guard.AccessLog.record_read`).

        Args:
            kind: ``finding_viewed`` or ``case_viewed``.
            user: who opened it.
            f: the finding's row as the page read it (the case's cause for a case).
            more: words appended to the detail (the API, the finding a case was opened from).
        """
        label = "case of finding" if kind == "case_viewed" else "finding"
        where = f"{f.get('rule_id')}, table {f.get('table_id')}, round {f.get('round_id') or '-'}"
        self.access.record_read(kind, user.name, f"{label} {f.get('finding_id')} ({where}){more}")

    @contextmanager
    def review_refusals(self, user: User, action: str, what: str) -> Iterator[None]:
        """Record a refused review action in the access log, then let the refusal go on: a 4xx
        (``HTTPException``: 403 a viewer, a proposer approving, a reviewer approving, a stale
        form; 404; 409 nothing to approve) or a 422 (``RequestValidationError``) raised inside is
        an entry of kind ``review``, outcome ``refused``, with the status and the reason (the
        messages only, never the typed values).

        Args:
            user: who tried.
            action: the review action asked for (cut to 40 characters).
            what: what it was for, e.g. ``finding 0f3a...``.
        """
        try:
            yield
        except HTTPException as exc:
            if 400 <= exc.status_code < 500:
                self.access.record(
                    "review", user.name, "refused", f"{action[:40]} of {what} ({exc.status_code}): {exc.detail}"
                )
            raise
        except RequestValidationError as exc:
            reasons = "; ".join(
                f"{'.'.join(str(x) for x in e.get('loc', ())[1:]) or 'form'}: {e.get('msg', '')}" for e in exc.errors()
            )
            self.access.record("review", user.name, "refused", f"{action[:40]} of {what} (422): {reasons}")
            raise

    def record_review(self, con: duckdb.DuckDBPyConnection, finding_id: str, user: User, body: ReviewRequest) -> Any:
        """Record a review of a finding: to the review sink if there is one, else to the store.

        ``attach`` records a note or video references as evidence (``FindingEvidenceAttached``),
        which changes no review status, cause, assignee or approval. A disposition needs a cause,
        and per the finding's severity a corrective action and a
        note (``ConsoleConfig.disposition_needs``). A ``NOT_A_VIOLATION`` disposition of a
        voiding or integrity finding is recorded as a proposal (``FindingDispositionProposed``:
        the finding stays open, ``pending_approval``) until a manager other than the proposer
        approves it (``approve``) or rejects it with a note (``reject``).

        Returns:
            The review event recorded.

        Raises:
            HTTPException: 403 for a viewer, and for an approval or rejection by someone who is
                not a manager or who proposed the disposition; 404 for an unknown finding; 409
                for an approval or rejection with no proposal pending; 503 when the sink did not
                take it.
            RequestValidationError: 422, a disposition without cause, a rejection without
                note, an attachment of nothing; :class:`StateRefusal` (a subclass) for an
                assignee who cannot review or a disposition without what its severity needs.
        """
        if not user.can_review:
            raise HTTPException(403, "a viewer cannot review findings")
        if body.action in ("approve", "reject") and not user.can_approve:
            raise HTTPException(403, f"only a manager can {body.action} a proposed disposition")
        f = self.finding(con, finding_id)  # 404 for an unknown finding
        common = {
            "review_id": str(ULID()),
            "finding_id": finding_id,
            "user": user.name,
            "reviewed_at": self.config.clock(),
            "note": body.note,
            "references": tuple(body.references),
            "signed_in_with": user.signed_in_with,
        }
        event: reviews.ReviewEvent
        if body.action == "attach":  # evidence, not a decision: the review status stays as it was
            if not body.note.strip() and not body.references:
                raise invalid(("body", "note"), "attach needs a note or a video reference")
            event = FindingEvidenceAttached.model_validate(common)
        elif body.action == "acknowledge":
            event = FindingAcknowledged.model_validate(common)
        elif body.action == "assign":
            if not body.assignee:  # the document says an assignment names one: the request's shape
                raise invalid(("body", "assignee"), "assign needs an assignee: the name of a user who can review")
            target = users.user(con, body.assignee)
            if target is None or not target["active"] or target["role"] not in REVIEWER_ROLES:
                raise StateRefusal(
                    ("body", "assignee"), "assign needs the name of an active user who can review (not a viewer)"
                )
            event = FindingAssigned.model_validate({**common, "assignee": target["name"]})
        elif body.action == "dispose":
            event = self._disposition(f, common, body)
        elif body.action in ("approve", "reject"):
            event = self._decision(con, finding_id, user, common, body)
        else:
            event = FindingReopened.model_validate(common)
        if self.review_sink is not None:
            try:
                self.review_sink(event)
            except Exception as exc:  # the broker did not take it: say so, store nothing
                raise HTTPException(503, f"the review was not recorded, try again: {exc}") from None
        else:
            with self.write_lock:
                reviews.append_review(self.store.con, event)
        self.access.record(
            "review",
            user.name,
            "ok",
            f"{event.type} of finding {finding_id} ({event.review_id}) by {user.name} with {user.credential}",
        )
        return event

    def _disposition(
        self, f: dict[str, Any], common: dict[str, Any], body: ReviewRequest
    ) -> FindingDisposed | FindingDispositionProposed:
        """A disposition of finding ``f``, or a proposal when it needs a manager's approval."""
        if body.cause is None:
            raise invalid(("body", "cause"), f"dispose needs a cause: one of {', '.join(c.value for c in Cause)}")
        missing = self.config.disposition_needs.missing(str(f["severity"]), body.corrective_action, body.note)
        if missing:
            names = " and ".join(m.replace("_", " ") for m in missing)
            raise StateRefusal(("body", missing[0]), f"a disposition of a {f['severity']} finding needs a {names}")
        fields = {**common, "cause": body.cause, "corrective_action": body.corrective_action}
        if reviews.needs_approval(str(f["severity"]), body.cause.value):
            return FindingDispositionProposed.model_validate(fields)
        return FindingDisposed.model_validate(fields)

    def _decision(
        self,
        con: duckdb.DuckDBPyConnection,
        finding_id: str,
        user: User,
        common: dict[str, Any],
        body: ReviewRequest,
    ) -> FindingApproved | FindingRejected:
        """A manager's approval or rejection of the finding's pending proposal (four eyes)."""
        decisions = [r for r in reviews.history(con, finding_id) if r["type"] in reviews.DECISION_TYPES]
        last = decisions[-1] if decisions else None  # acknowledgements and assignments leave a proposal pending
        if last is None or last["type"] != "FindingDispositionProposed":
            raise HTTPException(409, f"no proposed disposition of this finding waits for approval to {body.action}")
        proposer = identity_key(str(last["user_name"]))
        if proposer == identity_key(user.name):  # rita and Rita are one person
            raise HTTPException(403, f"you proposed this disposition: another manager must {body.action} it")
        if user.token is not None:  # the human behind a token is whoever made it
            issuer = user.issued_by
            if issuer is not None and identity_key(issuer) == proposer:
                raise HTTPException(
                    403,
                    f"this token of {user.name} was issued by {issuer}, who proposed this disposition: "
                    f"another manager must {body.action} it with their own credential",
                )
            if issuer is None or identity_key(issuer) != identity_key(user.name):
                raise HTTPException(
                    403,
                    f"this token of {user.name} was issued by {issuer or 'someone not recorded'}, not by "
                    f"{user.name}: to {body.action}, {user.name} signs in or uses a token of their own",
                )
        if body.action == "approve":
            return FindingApproved.model_validate({**common, "proposal_id": last["review_id"], "cause": last["cause"]})
        if not body.note.strip():
            raise invalid(("body", "note"), "a rejection needs a note saying why")
        return FindingRejected.model_validate({**common, "proposal_id": last["review_id"]})
