"""The console's guards: its security policy, the sign-in throttle and lock, the access log's
recorder, and server-side sessions (start, check, end).

Sessions. The signed cookie holds the user's name, a random session ID, the CSRF token and when
the session was last used; the store holds the session's start (under the SHA-256 of its ID and
the user's revision then) and its end. A request's session is in force while the store has no end
for it, its user is active and at the same revision (a role change, a password reset or a
deactivation is a new revision of the user: every session of that user ends at once), it was used
within ``session_idle`` and started within ``session_max``. Logout writes the end. The console's
process writes the session rows through the store's connection under the write lock, as it writes
users: in the streaming deployment the console runs inside the projector's process and shares its
lock, so sessions survive a restart of either with the store (a restart with a new random
``session_secret`` signs everyone out, as before).

Sign-in throttle. Failures are counted per account (the name typed, known or not, so that the
answer tells nothing about which names exist, in its ``identity_key`` form: ``rita``, ``RITA`` and
``ｒｉｔａ`` are one count) and per client address, in the console's process.
After ``slow_after`` consecutive failures each further attempt must wait (doubling from
``delay``, at most ``max_delay``): one that comes sooner is answered 429 with ``Retry-After``
without checking the password, and no worker sleeps. After ``lock_after`` consecutive failures
of an account it is locked for ``lock_for``: every attempt, with the right password too, is
answered 429 until the lock ends or an admin unlocks it. A success resets the account's count
(unless an old store holds twins of the name: then only an unlock or the lock's end does).
The counts are rebuilt from the access log when the console starts (:meth:`LoginGuard.replay`), so
a restart neither forgets a lock nor ignores an unlock made by ``dealtrail users unlock`` while
the console was stopped.

The access log. :class:`AccessLog` makes each entry (time, user or name tried, client address,
kind, outcome, detail; never a password or token), prints one line of it when asked (``serve``),
and stores it (embedded: through the store under the write lock; streaming: to the access-log
topic, from which the projector stores it; an entry the broker did not take is kept and sent
again with the next one).
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ulid import ULID

from projections.records import access_log, users
from schemas.access import AccessEntry, Outcome, clean_name
from schemas.reviews import SignIn, identity_key

if TYPE_CHECKING:
    import duckdb
    from fastapi import Request

    from projections.store.store import Store

CLIENT: ContextVar[str] = ContextVar("dealtrail_client", default="")
"""The client address of the request being served (set by :class:`ClientMiddleware`)."""


@dataclass(frozen=True)
class SecurityPolicy:
    """The console's security settings, resolved (``DEALTRAIL_SECURITY__*``).

    Attributes:
        session_idle: a session unused this long ends.
        session_max: a session ends this long after sign-in.
        token_lifetime: an API token stops working this long after issue; None: never.
        slow_after: consecutive failures after which attempts must wait.
        delay: the first wait (doubling per further failure).
        max_delay: the longest wait.
        lock_after: consecutive failures of an account that lock it.
        lock_for: how long a lock lasts.
        totp_roles: roles that must use a one-time code at sign-in.
    """

    session_idle: timedelta = timedelta(minutes=30)
    session_max: timedelta = timedelta(hours=12)
    token_lifetime: timedelta | None = None
    slow_after: int = 5
    delay: timedelta = timedelta(seconds=2)
    max_delay: timedelta = timedelta(seconds=300)
    lock_after: int = 10
    lock_for: timedelta = timedelta(minutes=15)
    totp_roles: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Refusal:
    """Why a sign-in attempt is refused before its password is checked (HTTP 429).

    Attributes:
        locked: the account is locked (else: the attempt came too soon).
        retry_after: whole seconds until an attempt may succeed.
        message: what the login page says.
    """

    locked: bool
    retry_after: int
    message: str


@dataclass
class _Count:
    failures: int = 0
    last: datetime | None = None
    locked_until: datetime | None = None


@dataclass
class LoginGuard:
    """Consecutive failed sign-ins per account and per client address (see the module text).

    Thread-safe: the console's sync routes run in a thread pool.
    """

    policy: SecurityPolicy
    _counts: dict[str, _Count] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def _keys(name: str, client: str) -> tuple[str, str]:
        return "user:" + identity_key(name), "addr:" + client

    def _wait(self, c: _Count) -> timedelta:
        over = c.failures - self.policy.slow_after
        if over < 0 or c.last is None:
            return timedelta(0)
        wait: timedelta = min(self.policy.delay * (2 ** min(over, 30)), self.policy.max_delay)
        return wait

    def check(self, name: str, client: str, now: datetime) -> Refusal | None:
        """None if an attempt for ``name`` from ``client`` may be checked now, else the refusal."""
        with self._lock:
            account, addr = (self._counts.get(k) for k in self._keys(name, client))
            if account is not None and account.locked_until is not None:
                if now < account.locked_until:
                    left = account.locked_until - now
                    minutes = max(1, -(-int(left.total_seconds()) // 60))
                    return Refusal(
                        True,
                        max(1, int(left.total_seconds() + 0.999)),
                        f"This account is locked after {self.policy.lock_after} failed sign-ins. Try again in "
                        f"{minutes} minute{'s' if minutes != 1 else ''}, or ask an admin to unlock it.",
                    )
                account.failures, account.locked_until = 0, None  # the lock has run out: a fresh start
            ready = [c.last + self._wait(c) for c in (account, addr) if c is not None and c.last is not None]
            wait_until = max(ready, default=now)
            if now < wait_until:
                left = wait_until - now
                secs = max(1, int(left.total_seconds() + 0.999))
                return Refusal(
                    False,
                    secs,
                    f"Too many failed sign-ins. Wait {secs} second{'s' if secs != 1 else ''} and try again.",
                )
            return None

    def failed(self, name: str, client: str, now: datetime) -> bool:
        """Count a failed attempt; True if it locked the account."""
        with self._lock:
            self._prune(now)
            locked = False
            for key in self._keys(name, client):
                c = self._counts.setdefault(key, _Count())
                c.failures += 1
                c.last = now
                if key.startswith("user:") and c.failures >= self.policy.lock_after and c.locked_until is None:
                    c.locked_until = now + self.policy.lock_for
                    locked = True
            return locked

    def succeeded(self, name: str, client: str, reset_account: bool = True) -> None:
        """A right password: the account's count (and the address's) starts again.

        Args:
            name: the name signed in with.
            client: the client's address.
            reset_account: False keeps the account's count (a name with twins in an old store:
                ``rita`` and ``RITA`` share one count, and a sign-in of one must not clear the
                failures of the other).
        """
        with self._lock:
            account, addr = self._keys(name, client)
            self._counts.pop(addr, None)
            if reset_account:
                self._counts.pop(account, None)

    def unlock(self, name: str) -> bool:
        """End an account's lock and count (an admin's unlock); True if it was locked."""
        with self._lock:
            c = self._counts.pop(self._keys(name, "")[0], None)
            return c is not None and c.locked_until is not None

    def locked(self, now: datetime) -> dict[str, datetime]:
        """The accounts locked now (name as typed, case-folded) and until when."""
        with self._lock:
            return {
                k.removeprefix("user:"): c.locked_until
                for k, c in self._counts.items()
                if k.startswith("user:") and c.locked_until is not None and now < c.locked_until
            }

    def _prune(self, now: datetime) -> None:
        """Forget counts idle for longer than a lock (bounded memory under a spray of names)."""
        if len(self._counts) < 10_000:
            return
        horizon = now - self.policy.lock_for - self.policy.max_delay
        for key in [k for k, c in self._counts.items() if c.last is not None and c.last < horizon]:
            if self._counts[key].locked_until is None or self._counts[key].locked_until < now:  # type: ignore[operator]
                del self._counts[key]

    def replay(self, con: duckdb.DuckDBPyConnection, now: datetime) -> None:
        """Rebuild the counts from the access log's recent sign-in entries (at start)."""
        start = now - self.policy.lock_for - self.policy.max_delay - timedelta(days=1)
        kinds = ("login_failed", "login_succeeded", "user_unlocked")
        shared = {identity_key(names[0]) for names in users.twins(con)}
        for e in access_log.since(con, start, kinds):
            if e.kind == "login_failed" and e.outcome == "refused":
                self.failed(e.user, e.client, e.at)
            elif e.kind == "login_succeeded":
                self.succeeded(e.user, e.client, reset_account=identity_key(e.user) not in shared)
            elif e.kind == "user_unlocked":
                self.unlock(e.detail or e.user)


class OneTimeCodes:
    """The one-time codes' state in the console's process (thread-safe).

    A code is good once: the time step (30 s) of every code accepted for a user is remembered, and
    a code of the same or an earlier step is refused (RFC 6238 section 5.2), so a code seen over a
    shoulder or replayed from a second client does not sign in again. A secret being enrolled
    waits here, under a random key the session cookie holds (the signed cookie is readable by its
    holder: the secret never goes into it), for ``hold``. A restart forgets both: a pending
    enrolment starts again with a new secret, and the codes of the last 90 seconds could be used
    once more.

    Args:
        hold: how long a secret waits for its first code.
    """

    def __init__(self, hold: timedelta = timedelta(minutes=10)) -> None:
        self.hold = hold
        self._last: dict[str, int] = {}
        self._pending: dict[str, tuple[str, str, datetime]] = {}  # key -> (user, secret, made)
        self._lock = threading.Lock()

    def use(self, name: str, secret: str, code: str, now: datetime) -> bool:
        """True if ``code`` is ``secret``'s code at ``now`` or one step either side (clock drift)
        and no code of that step or a later one was accepted for ``name`` before; that step is
        then used."""
        import pyotp

        code = code.strip().replace(" ", "")
        if not (code.isdigit() and len(code) == 6):
            return False
        totp = pyotp.TOTP(secret)
        step = totp.timecode(now)
        with self._lock:
            for s in (step - 1, step, step + 1):
                if secrets.compare_digest(totp.generate_otp(s), code):
                    if s <= self._last.get(name, -1):
                        return False
                    self._last[name] = s
                    return True
        return False

    def pending(self, key: str, name: str, now: datetime, make: bool = False) -> str | None:
        """The secret waiting under ``key`` for ``name`` (None: none, or older than ``hold``); with
        ``make``, a new random one is made and kept if none waits."""
        import pyotp

        with self._lock:
            for k in [k for k, (_, _, made) in self._pending.items() if now - made > self.hold]:
                del self._pending[k]
            held = self._pending.get(key)
            if held is not None and held[0] == name:
                return held[1]
            if not make:
                return None
            if len(self._pending) >= 10_000:  # bounded: the oldest waits go first
                del self._pending[min(self._pending, key=lambda k: self._pending[k][2])]
            secret = pyotp.random_base32()
            self._pending[key] = (name, secret, now)
            return secret

    def drop(self, key: str) -> None:
        """Forget the secret waiting under ``key`` (enrolled)."""
        with self._lock:
            self._pending.pop(key, None)


class AccessLog:
    """Makes, prints and stores access entries (see the module text).

    Args:
        store: the store (written directly when there is no sink).
        write_lock: the store's write lock.
        sink: where an entry goes instead of the store (the access-log topic's producer); it
            raises on failure. None: stored directly.
        clock: the current time.
        echo: print one line per entry to standard error (``dealtrail serve``).
    """

    def __init__(
        self,
        store: Store,
        write_lock: threading.Lock,
        sink: Callable[[AccessEntry], None] | None,
        clock: Callable[[], datetime],
        echo: bool = False,
    ) -> None:
        self.store, self.write_lock, self.sink, self.clock, self.echo = store, write_lock, sink, clock, echo
        self._pending: list[AccessEntry] = []
        self._send_lock = threading.Lock()
        self._reads: list[AccessEntry] = []  # reads recorded, not yet stored (the recorder thread's)
        self._reads_lock = threading.Lock()  # guards _reads only: a request never waits on the store
        self._order_lock = threading.RLock()  # held while storing: entries are chained in recorded order
        self._wake = threading.Event()
        self._recorder: threading.Thread | None = None

    def record(
        self, kind: str, user: str, outcome: Outcome, detail: str = "", client: str | None = None
    ) -> AccessEntry:
        """Record one security event.

        Args:
            kind: what happened (see :class:`schemas.access.AccessEntry`).
            user: the user, or the name typed at a sign-in (never a password).
            outcome: how it ended.
            detail: a few words more (never a secret).
            client: the client's address; None: the current request's.

        Returns:
            The entry (stored, or sent or queued for the topic).
        """
        entry = self._entry(kind, user, outcome, detail, client)
        with self._order_lock:  # reads recorded before it are chained before it
            with self._reads_lock:
                batch, self._reads = [*self._reads, entry], []
            try:
                self._store(batch)
            except BaseException:
                with self._reads_lock:  # the reads wait for the next try; the caller hears of its own
                    self._reads[:0] = batch[:-1]
                raise
        return entry

    def record_read(self, kind: str, user: str, detail: str = "", client: str | None = None) -> AccessEntry:
        """Record that ``user`` read something (a finding, a case, a replay, a report, the access
        log, a download), without making the request wait for the store or the broker.

        The entry is made now (its time and the request's client address) and stored by the
        recorder thread within milliseconds, in the order recorded, before any entry recorded
        after it with :meth:`record`; :meth:`flush` waits for it. An entry the store or the broker
        did not take is kept and tried again (one line on standard error); one still queued when
        the process is killed outright is lost (a stop of the console flushes them).

        Args:
            kind: ``finding_viewed``, ``case_viewed``, ``replay_viewed``, ``report_viewed``,
                ``access_log_viewed`` or ``download``.
            user: who read it.
            detail: what was read (never a secret).
            client: the client's address; None: the current request's.

        Returns:
            The entry (queued).
        """
        entry = self._entry(kind, user, "ok", detail, client)
        with self._reads_lock:
            self._reads.append(entry)
            if self._recorder is None:
                self._recorder = threading.Thread(target=self._record_reads, name="dealtrail-access-reads", daemon=True)
                self._recorder.start()
        self._wake.set()
        return entry

    def flush(self) -> None:
        """Store the reads recorded so far (the recorder thread does it on its own; a test or a
        stopping console waits for it here).

        Raises:
            Exception: the store's write failed (the reads stay queued).
        """
        with self._order_lock:
            with self._reads_lock:
                batch, self._reads = self._reads, []
            if not batch:
                return
            try:
                self._store(batch)
            except BaseException:
                with self._reads_lock:
                    self._reads[:0] = batch
                raise

    def _record_reads(self) -> None:
        """The recorder thread: store queued reads as they come; after a failure, one line and a
        new try a second later; once the store is closed (the process is ending), one line naming
        the reads left unstored, and the thread ends."""
        import duckdb

        while True:
            self._wake.wait()
            self._wake.clear()
            try:
                self.flush()
            except Exception as exc:
                with self._reads_lock:
                    n = len(self._reads)
                closed = isinstance(exc, duckdb.ConnectionException)
                print(
                    f"access log: {n} read{'' if n == 1 else 's'} not "
                    + ("stored: the store is closed" if closed else "yet stored")
                    + f" ({type(exc).__name__}: {exc})"
                    + ("" if closed else "; trying again"),
                    file=sys.stderr,
                    flush=True,
                )
                if closed:
                    return
                time.sleep(1.0)
                self._wake.set()

    def _entry(self, kind: str, user: str, outcome: Outcome, detail: str, client: str | None) -> AccessEntry:
        entry = AccessEntry(
            entry_id=str(ULID()),
            at=self.clock().astimezone(UTC),
            user=clean_name(user),
            client=clean_name(client if client is not None else CLIENT.get(), 100),
            kind=kind,
            outcome=outcome,
            detail=clean_name(detail, 500),
        )
        if self.echo:
            print(
                f"access {entry.at.isoformat()} {entry.kind} {entry.outcome} user={entry.user!r} "
                f"client={entry.client} {entry.detail!r}",
                file=sys.stderr,
                flush=True,
            )
        return entry

    def _store(self, entries: list[AccessEntry]) -> None:
        """Store ``entries`` in order (embedded), or send them to the sink (streaming: one the
        broker did not take is kept and sent with the next)."""
        if self.sink is None:
            with self.write_lock:
                # its own cursor: a thread that reads through the store's connection is not
                # refused as "busy"; one transaction for the batch
                cur = self.store.con.cursor()
                try:
                    cur.execute("BEGIN TRANSACTION")
                    try:
                        access_log.append(cur, entries)
                        cur.execute("COMMIT")
                    except BaseException:
                        cur.execute("ROLLBACK")
                        raise
                finally:
                    cur.close()
            return
        with self._send_lock:
            self._pending.extend(entries)
            try:
                while self._pending:
                    self.sink(self._pending[0])
                    self._pending.pop(0)
            except Exception as exc:  # the broker is away: keep it, send it with the next entry
                print(
                    f"access log: {len(self._pending)} entr{'y' if len(self._pending) == 1 else 'ies'} not yet "
                    f"in the access-log topic ({type(exc).__name__}); sent with the next one",
                    file=sys.stderr,
                    flush=True,
                )


class ClientMiddleware:
    """Pure ASGI middleware: sets :data:`CLIENT` for the request, and records an access entry
    for every file a signed-in user takes: ``download`` for a response with
    ``Content-Disposition: attachment`` and a report's file under ``/reports/`` (PDF, JSON),
    ``report_viewed`` for a report's page (``/reports/view``, a scheduled ``report.html``);
    recorded without making the response wait (:meth:`AccessLog.record_read`)."""

    def __init__(self, app: Any, log: Callable[[], AccessLog]) -> None:
        self.app, self.log = app, log

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve one ASGI connection (HTTP requests get the client and the download entry)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        scope.setdefault("state", {})  # shared with the routes' request.state (the user's name)
        token = CLIENT.set(str(client[0]) if client else "")
        path = str(scope.get("path", ""))

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 200:
                headers = {k.lower(): v for k, v in message.get("headers", [])}
                attachment = b"attachment" in headers.get(b"content-disposition", b"")
                user = scope.get("state", {}).get("user_name")
                if user and (attachment or (path.startswith("/reports/") and scope.get("method") == "GET")):
                    query = scope.get("query_string", b"").decode("latin-1")
                    page = not attachment and (path == "/reports/view" or path.endswith(".html"))
                    kind = "report_viewed" if page else "download"
                    self.log().record_read(kind, user, path + (f"?{query}" if query else ""))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            CLIENT.reset(token)


# -- sessions -------------------------------------------------------------------------------------


def begin_session(
    console: Any, request: Request, name: str, signed_in_with: SignIn | None = None, idp_sid: str | None = None
) -> None:
    """Start a session of ``name`` (after a successful sign-in): a new session ID in the cookie,
    its start in the store with how the person signed in (``signed_in_with``; None: a local
    account's password) and the directory's session ID (``idp_sid``), a new CSRF token."""
    sid = secrets.token_urlsafe(32)
    now = console.config.clock()
    how = (signed_in_with or SignIn(method="local")).model_dump_json()
    with console.write_lock:
        access_log.start_session(console.store.con, sid, name, now, how, idp_sid)
    request.session.clear()
    request.session.update({"user": name, "sid": sid, "csrf": secrets.token_urlsafe(32), "seen": now.timestamp()})


def flag_break_glass(console: Any, name: str) -> None:
    """Record a local account's sign-in beside a configured directory (the break-glass account)
    as an access entry flagged for review (``login_break_glass``, forwarded like every entry),
    whatever step the sign-in ended with (password, new password, one-time code enrolment)."""
    if console.config.directory is not None:
        console.access.record(
            "login_break_glass", name, "ok", "local account signed in beside the directory: review this"
        )


def end_session(console: Any, request: Request, reason: str) -> str | None:
    """End the request's session (its end in the store, the cookie cleared); its user's name."""
    sid, name = request.session.get("sid"), request.session.get("user")
    request.session.clear()
    if isinstance(sid, str) and isinstance(name, str):
        with console.write_lock:
            access_log.end_session(console.store.con, sid, name, console.config.clock(), reason)
        return name
    return None


def session_user(console: Any, request: Request, con: duckdb.DuckDBPyConnection) -> tuple[str, str, SignIn] | None:
    """The ``(name, role, signed_in_with)`` of the request's session if it is in force (see the module text),
    else None; a session found idle, past its lifetime or of a changed user is ended (and an
    access entry ``session_expired`` recorded)."""
    sid, name = request.session.get("sid"), request.session.get("user")
    if not isinstance(sid, str) or not isinstance(name, str):
        return None  # no session (the session may hold a sign-in waiting for its one-time code)
    s = access_log.session(con, sid)
    if s is None or s["ended"] or s["user_name"] != name:
        request.session.clear()
        return None
    now = console.config.clock()
    policy: SecurityPolicy = console.config.security
    seen = request.session.get("seen")
    reason = None
    if not s["current"]:
        reason = "the user was changed (role, password or deactivation)"
    elif now - s["started_at"] > policy.session_max:
        reason = "lifetime"
    elif not isinstance(seen, int | float) or now.timestamp() - seen > policy.session_idle.total_seconds():
        reason = "idle"
    if reason is not None:
        end_session(console, request, reason)
        console.access.record("session_expired", name, "expired", reason)
        return None
    request.session["seen"] = now.timestamp()
    request.state.user_name, request.state.user_role = name, str(s["role"])
    how = SignIn.model_validate_json(s["signed_in_with"]) if s["signed_in_with"] else SignIn(method="local")
    return name, str(s["role"]), how
