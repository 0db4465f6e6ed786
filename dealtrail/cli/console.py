"""The command line: the compliance console: serve, its notifier, and users and API tokens."""

from __future__ import annotations

import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from dealtrail.settings import Settings

if TYPE_CHECKING:
    from dealtrail.console.guard import SecurityPolicy
    from dealtrail.console.oidc import DirectoryConfig
    from projections.store.store import Store

from dealtrail.cli.common import (
    _DB,
    _fail,
    _read_store,
    app,
    cannot_write,
    console,
    err,
    is_locked,
    load,
    report_grace,
    review_due,
    serve_metrics,
)


def _open_writer(db: Path, settings: Settings, users: bool = False) -> object:
    """The store opened for writing, or a clear error when another process holds it (for the
    ``users`` commands, one line pointing to the console's admin page, without DuckDB's text)."""
    from projections.store.store import NotAStoreError, Store

    try:
        return Store(db, settings.duckdb_memory_limit)
    except NotAStoreError as exc:
        raise _fail(str(exc)) from None
    except Exception as exc:  # duckdb raises its own IOException when the file is locked
        if users and is_locked(exc):  # DuckDB: "Could not set lock on file ..."
            raise _fail(
                f"{db} is held by another process (a projector, an audit or a console (serve)?): "
                "manage users on the console's admin page (one writer per file)",
                code=1,
            ) from None
        raise cannot_write(db, exc) from None  # exit 1 when another process holds it, else 2


def _host_port(value: str) -> tuple[str, int]:
    """``--serve HOST:PORT`` as (host, port); ``[::1]:8000`` for an IPv6 address."""
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise _fail(f"--serve takes HOST:PORT, e.g. 127.0.0.1:8000 or 0.0.0.0:8000; got {value!r}")
    return host, int(port)


def security_policy(settings: Settings) -> SecurityPolicy:
    """The console's security policy (sessions, sign-in throttle and lock) from ``DEALTRAIL_SECURITY__*``;
    ``sign-report`` applies the same lock."""
    from datetime import timedelta

    from dealtrail.console.guard import SecurityPolicy

    sec = settings.security
    return SecurityPolicy(
        session_idle=timedelta(minutes=sec.session_idle_minutes),
        session_max=timedelta(hours=sec.session_max_hours),
        token_lifetime=None if sec.token_days is None else timedelta(days=sec.token_days),
        slow_after=sec.login_slow_after,
        delay=timedelta(seconds=sec.login_delay_seconds),
        max_delay=timedelta(seconds=sec.login_max_delay_seconds),
        lock_after=sec.login_lock_after,
        lock_for=timedelta(minutes=sec.login_lock_minutes),
        totp_roles=frozenset(sec.totp_roles),
    )


def totp_key(settings: Settings, db: Path) -> bytes:
    """The key of the store's one-time-code secrets (``DEALTRAIL_SECURITY__TOTP_KEY``, else its
    key file, else the one beside ``db``); a bad key or key file ends the command with one line."""
    from dealtrail.console.totp import resolve_totp_key

    sec = settings.security
    try:
        return resolve_totp_key(sec.totp_key.get_secret_value() if sec.totp_key else None, sec.totp_key_file, db)
    except ValueError as exc:
        raise _fail(str(exc), code=1) from None


def _console_config(
    settings: Settings,
    db: Path,
    secure: bool = False,
    reports: Path | None = None,
    echo_access: bool = False,
) -> object:
    """The console's resolved configuration (``ConsoleConfig``) from the settings for the store
    ``db``; ``reports`` is the folder of scheduled reports to list when
    ``DEALTRAIL_CONSOLE__REPORTS_DIR`` is unset (a projector's own ``--reports``)."""
    from dealtrail.console.app import ConsoleConfig, new_session_secret
    from dealtrail.console.deps import disposition_needs_of
    from dealtrail.investigate.video import VideoLinks

    secret = settings.console.session_secret
    policy = security_policy(settings)
    return ConsoleConfig(
        review_due=review_due(settings),
        session_secret=secret.get_secret_value() if secret else new_session_secret(),
        secure_cookies=secure,
        reports_dir=settings.console.reports_dir or reports,
        poll_seconds=settings.console.poll_seconds,
        property_name=settings.property_name,
        video=VideoLinks.from_settings(settings.video),
        plausibility=settings.plausibility,
        security=policy,
        echo_access=echo_access,
        remedy_window=settings.remedy_window,
        disposition_needs=disposition_needs_of(settings.review),
        report_max_listed=settings.reports.max_listed,
        archive=settings.archive.dir,
        totp_key=totp_key(settings, db),
        signing_key=settings.signing.key_file,
        chromium=settings.reports.chromium,
        pdf_certificate=(
            (settings.signing.pdf_cert_file, settings.signing.pdf_key_file)
            if settings.signing.pdf_cert_file is not None and settings.signing.pdf_key_file is not None
            else None
        ),
        tz=settings.zone,
        report_grace=report_grace(settings),
        control=settings.control,
        directory=directory_config(settings),
        console_url=settings.console.url,
    )


def directory_config(settings: Settings) -> DirectoryConfig | None:
    """The directory the console signs people in with (``DirectoryConfig``), or None without
    ``DEALTRAIL_DIRECTORY__ISSUER``; local accounts are off with a directory unless
    ``DEALTRAIL_DIRECTORY__LOCAL_ACCOUNTS`` is true (the break-glass account)."""
    from dealtrail.console.oidc import DirectoryConfig

    d = settings.directory
    if d.issuer is None:
        return None
    return DirectoryConfig(
        issuer=d.issuer,
        client_id=d.client_id,
        client_secret=d.client_secret.get_secret_value() if d.client_secret else None,
        redirect_url=d.redirect_url,
        scopes=tuple(d.scopes),
        groups_claim=d.groups_claim,
        role_groups={
            "viewer": frozenset(d.viewer_groups),
            "reviewer": frozenset(d.reviewer_groups),
            "manager": frozenset(d.manager_groups),
            "admin": frozenset(d.admin_groups),
        },
        mfa_amr=frozenset(d.mfa_amr),
        mfa_acr=frozenset(d.mfa_acr),
        local_accounts=bool(d.local_accounts),
        timeout=d.timeout_seconds,
    )


def uvicorn_config(app_: object, settings: Settings, host: str, port: int, **extra: object) -> object:
    """The ``uvicorn.Config`` that serves the console (``serve`` and ``project --serve``).

    The client address (the sign-in throttle's per-address count, the access log's ``client``)
    is the connection's peer: ``X-Forwarded-For`` is believed only from the addresses in
    ``DEALTRAIL_SECURITY__TRUSTED_PROXIES`` (none by default; uvicorn's own default would
    believe it from 127.0.0.1, so any local process could name any address).

    Args:
        app_: the console's ASGI application.
        settings: the settings (``security.trusted_proxies``).
        host: the address to listen on.
        port: the port.
        extra: more ``uvicorn.Config`` arguments (the TLS files).

    Returns:
        The ``uvicorn.Config``.
    """
    import uvicorn

    proxies = settings.security.trusted_proxies
    return uvicorn.Config(
        app_,  # type: ignore[arg-type]
        host=host,
        port=port,
        log_level="warning",
        proxy_headers=bool(proxies),
        forwarded_allow_ips=list(proxies) if proxies else None,
        **extra,  # type: ignore[arg-type]
    )


@app.command()
def serve(
    db: Annotated[
        Path | None, typer.Option(help="DuckDB file (this process becomes its writer).", show_default=_DB)
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
    certfile: Annotated[
        Path | None, typer.Option(help="TLS certificate (PEM): serve https, cookies marked Secure.", exists=True)
    ] = None,
    keyfile: Annotated[Path | None, typer.Option(help="TLS private key (PEM) for --certfile.", exists=True)] = None,
) -> None:
    """Run the compliance console (floor, findings, reviews, reports, JSON API) over one store."""
    import uvicorn

    from dealtrail.console.app import ConsoleConfig, create_app
    from projections.store.store import Store

    settings = load()
    db = db or settings.db
    if not db.exists():
        raise _fail(f"no dealtrail database at {db} (run dealtrail audit or demo first)", code=1)
    if (certfile is None) != (keyfile is None):
        raise _fail("--certfile and --keyfile go together")
    store = _open_writer(db, settings)
    assert isinstance(store, Store)
    config = _console_config(settings, db, secure=certfile is not None, echo_access=True)
    assert isinstance(config, ConsoleConfig)
    scheme = "https" if certfile else "http"
    err.print(f"console: {scheme}://{host}:{port}/ over {db} (sign in with a user of: dealtrail users add)")
    console_app = create_app(store, config)
    notifier = _start_notifier(settings, store, console_app.state.write_lock, config.poll_seconds)
    from dealtrail.cli.access import start_access_forward

    # a thread: requests never wait
    forward = start_access_forward(settings.access_forward, store.con, db, settings.property_name)
    metrics = serve_metrics(settings, db)
    with store:
        server_config = uvicorn_config(
            console_app,
            settings,
            host,
            port,
            ssl_certfile=str(certfile) if certfile else None,
            ssl_keyfile=str(keyfile) if keyfile else None,
        )
        assert isinstance(server_config, uvicorn.Config)
        try:
            uvicorn.Server(server_config).run()
        finally:
            if notifier is not None:  # its round in progress is recorded before the store closes
                notifier.stop()
            if forward is not None:  # what was written last goes out before the store closes
                forward.stop()
            if metrics is not None:
                metrics.stop()


class _NotifyLoop:
    """The notifier's background thread: it runs every ``every`` seconds (for retries), and at
    once when :attr:`wake` is set (a projector batch stored findings)."""

    def __init__(self, notifier: object, every: float) -> None:
        self.wake = threading.Event()
        self._stopped = threading.Event()
        self._notifier, self._every = notifier, every
        self._thread = threading.Thread(target=self._loop, name="dealtrail-notify", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                self._notifier.run_once()  # type: ignore[attr-defined]
            except Exception as exc:  # one line, and go on: a delivery is retried, never dropped
                err.print(f"notifications: {type(exc).__name__}: {exc}")
            self.wake.wait(self._every)
            self.wake.clear()

    def stop(self) -> None:
        """Let the round in progress finish, end the thread and close the notifier's connections."""
        self._stopped.set()
        self.wake.set()
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self._notifier.close()  # type: ignore[attr-defined]


def _start_notifier(settings: Settings, store: object, lock: object, every: float) -> _NotifyLoop | None:
    """Send notifications (the daily digest of late reviews, control-chart signals) from a
    background thread of the console's process, if rules, a digest or signal targets are set."""
    from dealtrail.reporting.notify import Notifier, NotifyRule, SignalConfig, SmtpConfig, digest_target

    n = settings.notify
    digest = None
    if n.digest_at is not None and n.digest_to:
        from zoneinfo import ZoneInfo

        from dealtrail.reporting.notify import DigestConfig

        digest = DigestConfig(
            n.digest_at,
            ZoneInfo(n.digest_tz or settings.timezone),
            tuple(digest_target(t) for t in n.digest_to),
            review_due(settings),
            settings.property_name,
        )
    signals = None
    if n.signals_to:
        signals = SignalConfig(
            tuple(digest_target(t) for t in n.signals_to),
            settings.control.report_args,
            settings.timezone,
            n.signals_lookback_days,
            settings.property_name,
        )
    if not n.rules and digest is None and signals is None:
        return None
    smtp = (
        SmtpConfig(
            n.smtp_host,
            n.smtp_port,
            n.smtp_sender,
            n.smtp_starttls,
            n.smtp_username,
            n.smtp_password.get_secret_value() if n.smtp_password else None,
        )
        if n.smtp_host
        else None
    )
    rules = [
        NotifyRule(
            frozenset(r.severities),
            frozenset(r.rules),
            frozenset(r.games),
            frozenset(r.tables),
            r.webhook,
            tuple(r.emails),
        )
        for r in n.rules
    ]
    notifier = Notifier(
        store.con,  # type: ignore[attr-defined]
        rules,
        smtp,
        settings.console_url,
        lock,  # type: ignore[arg-type]
        lambda: datetime.now(UTC),
        n.max_attempts,
        n.backoff_seconds,
        digest=digest,
        tz=settings.zone,
        signals=signals,
    )
    return _NotifyLoop(notifier, every)


users_app = typer.Typer(help="Console users and API tokens (stored hashed in the store).")
app.add_typer(users_app, name="users")


@users_app.callback(invoke_without_command=True)
def users_main(
    ctx: typer.Context,
    db: Annotated[Path | None, typer.Option(help="DuckDB file.", show_default=_DB)] = None,
) -> None:
    """Without a command: list the users, and the twins an older store may hold (see ``users list``)."""
    if ctx.invoked_subcommand is None:
        users_list(db)


@users_app.command("list")
def users_list(db: Annotated[Path | None, typer.Option(help="DuckDB file.", show_default=_DB)] = None) -> None:
    """List the users (name, role, state) and, first, any names that are one person (``rita``
    and ``RITA`` in a store from before names were unique in case-folded form): exit code 3 while
    such twins remain, for an admin to resolve (deactivate all but one of each)."""
    from projections.records import users

    settings = load()
    db = db or settings.db
    con = _read_store(db)  # one line for a store missing, held (exit 1) or unreadable
    try:
        rows, twins = users.users(con), users.twins(con)
    finally:
        con.close()
    for group in twins:
        print(f"twins (one person, several users; deactivate all but one): {', '.join(group)}")
    for u in rows:
        print(f"{u['name']}\t{u['role']}\t{'active' if u['active'] else 'deactivated'}")
    if twins:
        raise typer.Exit(3)


@users_app.command("add")
def users_add(
    name: Annotated[str, typer.Argument(help="The user's name (letters, digits, ._@-).")],
    role: Annotated[
        str,
        typer.Option(
            help="viewer (reads), reviewer (also reviews), manager (also approves dispositions) "
            "or admin (also manages users)."
        ),
    ],
    db: Annotated[Path | None, typer.Option(help="DuckDB file.", show_default=_DB)] = None,
) -> None:
    """Add a user, or set an existing user's role and password (which removes the user's one-time
    code, so that the user enrols again, and revokes the user's API tokens); the password is read
    from stdin. A password set for an existing user is a one-time password: it serves only to set
    a new one at the first sign-in (whoever typed it here knows it)."""
    from datetime import UTC

    from dealtrail.console.auth import AccessError, add_user, password_reset_note

    store, password = _users_writer(db)
    with store:
        try:
            from projections.records import users

            existing = users.user(store.con, name) is not None
            new = add_user(store.con, name, role, password, datetime.now(UTC), one_time=existing)
        except AccessError as exc:
            raise _fail(str(exc)) from None
        ended = "" if new else password_reset_note(store.con, name, datetime.now(UTC), "cli")  # a lost phone
        ended += "" if new else "; one-time password, to be changed at first sign-in"
        _log(store, "user_added" if new else "password_reset", f"{name} as {role}{ended}")
    console.print(
        f"user {name} {'added' if new else 'updated'} with role {role}"
        + ("" if new else f" (the password is one-time: {name} sets their own at the first sign-in)")
    )


@users_app.command("profile")
def users_profile(
    name: Annotated[str, typer.Argument(help="The console user.")],
    full_name: Annotated[str, typer.Option("--full-name", help="Their full name, e.g. 'Max Keller'.")],
    title: Annotated[str, typer.Option(help="Their job title, e.g. 'Compliance Manager'.")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file.", show_default=_DB)] = None,
) -> None:
    """Record a user's full name and title, printed with their sign-offs: a new revision of the
    profile (the earlier ones stay; a report signed before keeps the name it was signed under)."""
    from projections.records import users
    from projections.store.store import Store

    settings = load()
    store = _open_writer(db or settings.db, settings, users=True)
    assert isinstance(store, Store)
    with store:
        try:
            users.put_profile(store.con, name, full_name, title, datetime.now(UTC), "cli")
        except ValueError as exc:
            raise _fail(str(exc)) from None
        _log(store, "user_profile", f"{name}: {' '.join(full_name.split())}, {' '.join(title.split())}")
    console.print(f"profile of {name}: {' '.join(full_name.split())}, {' '.join(title.split())}", markup=False)


@users_app.command("token")
def users_token(
    name: Annotated[str, typer.Argument(help="The user the token acts as (who types their password on stdin).")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file.", show_default=_DB)] = None,
) -> None:
    """Make an API token of a user, for themselves: the user's password is read from stdin (a token
    acts only as the user who made it); it is printed once, as the last word of the output."""
    from datetime import UTC

    from dealtrail.console.auth import AccessError, new_token, verify_password
    from projections.records import users

    store, password = _users_writer(db)
    with store:
        u = users.user(store.con, name)
        if u is not None and u["active"] and not verify_password(u["password_hash"], password):
            _log(store, "token_issued", f"refused for {name}: wrong password", outcome="refused")
            raise _fail(f"wrong password of {name}: a token is made by its user, with their password", code=1)
        try:
            token = new_token(store.con, name, datetime.now(UTC))
        except AccessError as exc:
            raise _fail(str(exc), code=1) from None
        from dealtrail.console.auth import token_hash

        _log(store, "token_issued", f"token {token_hash(token)[:12]} of {name}")
    # plain print: rich would wrap or style the token
    print(f"API token for {name} (stored hashed; it cannot be shown again): {token}")


def _users_writer(db: Path | None) -> tuple[Store, str]:
    """The store (``db``, else the settings' one) opened for writing its users, and the password
    the caller typed on stdin (one line, its line end taken off)."""
    from projections.store.store import Store

    settings = load()
    password = sys.stdin.readline().rstrip("\r\n")
    store = _open_writer(db or settings.db, settings, users=True)
    assert isinstance(store, Store)
    return store, password


def _log(store: object, kind: str, detail: str, outcome: Literal["ok", "refused"] = "ok") -> None:
    """Record a change made from the command line in the access log (user ``cli``)."""
    from ulid import ULID

    from projections.records import access_log
    from schemas.access import AccessEntry

    entry = AccessEntry(
        entry_id=str(ULID()), at=datetime.now(UTC), user="cli", client="cli", kind=kind, outcome=outcome, detail=detail
    )
    access_log.append(store.con, [entry])  # type: ignore[attr-defined]


@users_app.command("unlock")
def users_unlock(
    name: Annotated[str, typer.Argument(help="The user (or name typed at sign-in) locked after failed sign-ins.")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file.", show_default=_DB)] = None,
) -> None:
    """End the sign-in lock of an account (recorded in the access log; the console reads it when it
    starts: run this while the console is stopped, or use the Unlock button of its Users page)."""
    from projections.store.store import Store

    settings = load()
    db = db or settings.db
    if not db.exists():  # an unlock never makes a store: there is no account in one that is not there
        raise _fail(f"no dealtrail database at {db}: nothing to unlock")
    store = _open_writer(db, settings, users=True)
    assert isinstance(store, Store)
    with store:
        _log(store, "user_unlocked", name)
    console.print(f"{name} unlocked: the console lets it sign in again from its next start")
