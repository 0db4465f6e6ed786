"""Who did what on the console (issue 21, items 1-3 and part of 6): sessions that end (logout, a
user change, idle time, lifetime), API tokens that expire, sign-ins throttled and locked, the
hash-chained access log (its page, its export, ``dealtrail verify``, its topic through the
projector), one-time codes, pages instead of raw errors and the last-admin guard."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyotp
import pytest
from fastapi.testclient import TestClient
from kafka import TopicPartition
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.console.guard import LoginGuard, SecurityPolicy
from dealtrail.console.totp import resolve_totp_key
from dealtrail.ingest.projector import ProjectSummary, _write
from projections.models import reviews
from projections.models.reviews import FindingFilter, ReviewDue
from projections.records import access_log, users
from projections.store.store import BatchCounts, Store
from schemas.access import AccessEntry
from streams.topics import Topics

DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
PASSWORDS = {"ada": "ada-admin-pass", "rita": "rita-review-pass", "vic": "vic-viewer-pass"}
ROLES = {"ada": "admin", "rita": "reviewer", "vic": "viewer"}
T0 = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
POLICY = SecurityPolicy()


class Clock:
    """A settable clock (the console's ``now``)."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    """An empty store with three users (enough for sign-ins: no finding needed)."""
    s = Store(tmp_path / "access.duckdb")
    for name, role in ROLES.items():
        auth.add_user(s.con, name, role, PASSWORDS[name], T0 - timedelta(days=1))
    yield s
    s.close()


@pytest.fixture()
def clock() -> Clock:
    return Clock(T0)


def app_for(store: Store, clock: Clock, policy: SecurityPolicy = POLICY, **kw: object) -> TestClient:
    return TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock, security=policy), **kw))  # type: ignore[arg-type]


@pytest.fixture()
def client(store: Store, clock: Clock) -> TestClient:
    return app_for(store, clock)


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field in the form"
    return m.group(1)


def attempt(client: TestClient, name: str, password: str, code: str = "") -> object:
    csrf = csrf_of(client.get("/login").text)
    data = {"username": name, "password": password, "csrf": csrf, "next": "/admin/access", "code": code}
    return client.post("/login", data=data, follow_redirects=False)


def login(client: TestClient, name: str) -> None:
    r = attempt(client, name, PASSWORDS[name])
    assert r.status_code == 303, r.text  # type: ignore[attr-defined]


def signed_in(client: TestClient) -> bool:
    r = client.get("/admin/access", follow_redirects=False)
    return r.status_code != 303


def log_rows(store: Store, **where: object) -> list[dict[str, object]]:
    """The stored entries, oldest first, without the pages read (``*_viewed``: the tests here
    open the access log to see whether they are signed in; reads have test_console_reads.py)."""
    rows, _ = access_log.entries(store.con, access_log.LogFilter(**where), None)  # type: ignore[arg-type]
    return [r for r in reversed(rows) if not str(r["kind"]).endswith("_viewed")]


def admin_post(client: TestClient, **data: str) -> object:
    csrf = csrf_of(client.get("/admin/users").text)
    return client.post("/admin/users", data={"csrf": csrf, **data})


def one_time_of(html: str) -> str:
    """The one-time password an admin's reset (or new account) shows once."""
    m = re.search(r'id="one-time-password">([^<]+)<', html)
    assert m, "no one-time password shown"
    return m.group(1)


def set_own_password(client: TestClient, name: str, one_time: str, new: str) -> None:
    """Sign in with a one-time password, which leads only to setting one's own; set ``new``."""
    r = attempt(client, name, one_time)
    assert r.status_code == 303 and r.headers["location"] == "/account/password"  # type: ignore[attr-defined]
    csrf = csrf_of(client.get("/account/password").text)
    form = {"csrf": csrf, "current": one_time, "new": new, "repeated": new}
    done = client.post("/account/password", data=form, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/", done.text


# -- sessions -------------------------------------------------------------------------------------


def test_logout_ends_the_session_and_the_old_cookie_is_refused(client: TestClient, store: Store) -> None:
    login(client, "ada")
    cookie = client.cookies.get("dealtrail_session")
    assert cookie and signed_in(client)
    csrf = csrf_of(client.get("/admin/access").text)
    client.post("/logout", data={"csrf": csrf}, follow_redirects=False)
    other = TestClient(client.app)
    other.cookies.set("dealtrail_session", cookie)  # the cookie copied before the logout
    r = other.get("/findings", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert other.get("/api/v1/findings").status_code == 401
    assert [(e["kind"], e["user_name"]) for e in log_rows(store)] == [("login_succeeded", "ada"), ("logout", "ada")]


@pytest.mark.parametrize("change", ["password", "role", "deactivate"])
def test_a_password_reset_a_role_change_or_a_deactivation_ends_the_users_sessions_at_once(
    store: Store, clock: Clock, change: str
) -> None:
    rita, ada = app_for(store, clock), app_for(store, clock)
    login(rita, "rita")
    assert rita.get("/findings", follow_redirects=False).status_code == 200
    login(ada, "ada")
    data = {"password": {}, "role": {"role": "viewer"}, "deactivate": {}}[change]
    r = admin_post(ada, op=change, name="rita", **data)
    assert r.status_code == 200, r.text  # type: ignore[attr-defined]
    assert rita.get("/findings", follow_redirects=False).status_code == 303
    assert signed_in(ada)  # the admin's own session goes on
    kinds = {"password": "password_reset", "role": "role_changed", "deactivate": "user_deactivated"}
    assert str(log_rows(store, kind=kinds[change])[0]["detail"]).startswith("rita")
    assert log_rows(store, kind="session_expired", user="rita")[0]["outcome"] == "expired"


def test_a_session_ends_when_idle_and_after_its_lifetime_even_in_use(store: Store, clock: Clock) -> None:
    policy = SecurityPolicy(session_idle=timedelta(minutes=30), session_max=timedelta(hours=2))
    client = app_for(store, clock, policy)
    login(client, "vic")
    clock.now += timedelta(minutes=29)
    assert client.get("/findings", follow_redirects=False).status_code == 200
    clock.now += timedelta(minutes=31)  # 31 minutes since the last use
    assert client.get("/findings", follow_redirects=False).status_code == 303
    login(client, "vic")
    used = []
    for _ in range(5):  # used every 25 minutes: never idle, but 2 hours is the most
        clock.now += timedelta(minutes=25)
        used.append(client.get("/findings", follow_redirects=False).status_code)
    assert used == [200, 200, 200, 200, 303]
    assert [e["detail"] for e in log_rows(store, kind="session_expired")] == ["idle", "lifetime"]


def test_an_api_token_expires_after_the_token_lifetime_and_never_without_one(store: Store, clock: Clock) -> None:
    token = auth.new_token(store.con, "rita", T0)
    h = {"Authorization": "Bearer " + token}
    forever = app_for(store, clock)
    expiring = app_for(store, clock, SecurityPolicy(token_lifetime=timedelta(days=30)))
    clock.now = T0 + timedelta(days=29)
    assert expiring.get("/api/v1/findings", headers=h).status_code == 200
    clock.now = T0 + timedelta(days=31)
    r = expiring.get("/api/v1/findings", headers=h)
    assert r.status_code == 401 and "expired" in r.json()["detail"]
    assert forever.get("/api/v1/findings", headers=h).status_code == 200


# -- throttle and lock ---------------------------------------------------------------------------


def test_ten_wrong_passwords_lock_the_account_and_the_right_one_then_gets_429(store: Store, clock: Clock) -> None:
    client = app_for(store, clock)
    statuses = []
    for _ in range(10):
        r = attempt(client, "rita", "wrong password!")
        statuses.append(r.status_code)  # type: ignore[attr-defined]
        clock.now += timedelta(minutes=5)  # past any wait: every attempt is a real failure
    assert statuses == [401] * 9 + [429]
    r = attempt(client, "rita", PASSWORDS["rita"])
    assert r.status_code == 429  # type: ignore[attr-defined]
    assert int(r.headers["retry-after"]) > 0  # type: ignore[attr-defined]
    assert "This account is locked after 10 failed sign-ins" in r.text  # type: ignore[attr-defined]
    assert 'value="rita"' in r.text and PASSWORDS["rita"] not in r.text  # type: ignore[attr-defined]
    rows = log_rows(store, user="rita")
    failures = [e for e in rows if e["kind"] == "login_failed" and e["outcome"] == "refused"]
    assert len(failures) == 10 and {e["client"] for e in failures} == {"testclient"}
    locked = [e for e in rows if e["kind"] == "login_locked"]
    assert len(locked) == 1 and locked[0]["client"] == "testclient"
    assert rows[-1]["kind"] == "login_failed" and rows[-1]["outcome"] == "locked"
    assert all(PASSWORDS["rita"] not in str(e) and "wrong password!" not in str(e) for e in rows)


def test_after_five_failures_an_early_attempt_waits_longer_each_time_per_account_and_per_address(
    store: Store, clock: Clock
) -> None:
    client = app_for(store, clock)
    for name in ("nobody", "someone", "vic", "x1", "x2"):  # five names from one address
        assert attempt(client, name, "wrong password!").status_code == 401  # type: ignore[attr-defined]
    r = attempt(client, "rita", PASSWORDS["rita"])  # too soon from this address, whatever the name
    assert r.status_code == 429 and r.headers["retry-after"] == "2"  # type: ignore[attr-defined]
    clock.now += timedelta(seconds=2)
    assert attempt(client, "x3", "wrong password!").status_code == 401  # type: ignore[attr-defined]
    r = attempt(client, "x3", "wrong password!")
    assert r.status_code == 429 and r.headers["retry-after"] == "4"  # type: ignore[attr-defined]
    assert "Too many failed sign-ins" in r.text  # type: ignore[attr-defined]


def test_the_guard_doubles_the_wait_and_a_success_starts_the_count_again() -> None:
    guard = LoginGuard(SecurityPolicy())
    now = T0
    for _ in range(5):
        assert guard.check("a", "1.2.3.4", now) is None
        guard.failed("a", "1.2.3.4", now)
    refusal = guard.check("a", "5.6.7.8", now)  # the account waits, from any address
    assert refusal is not None and not refusal.locked and refusal.retry_after == 2
    guard.failed("a", "1.2.3.4", now + timedelta(seconds=2))
    refusal = guard.check("a", "5.6.7.8", now + timedelta(seconds=3))
    assert refusal is not None and refusal.retry_after == 3  # 4 s after the 6th failure
    guard.succeeded("a", "1.2.3.4")
    assert guard.check("a", "1.2.3.4", now + timedelta(seconds=3)) is None


def test_an_admin_unlocks_an_account_and_the_lock_outlives_a_restart_until_users_unlock(
    clock: Clock, tmp_path: Path
) -> None:
    path = tmp_path / "unlock.duckdb"
    store = Store(path)
    for name, role in ROLES.items():
        auth.add_user(store.con, name, role, PASSWORDS[name], T0 - timedelta(days=1))
    client = app_for(store, clock)
    for _ in range(10):
        attempt(client, "vic", "wrong password!")
        clock.now += timedelta(minutes=5)
    assert attempt(client, "vic", PASSWORDS["vic"]).status_code == 429  # type: ignore[attr-defined]
    restarted = app_for(store, clock)  # a new process over the same store: still locked
    assert attempt(restarted, "vic", PASSWORDS["vic"]).status_code == 429  # type: ignore[attr-defined]
    admin = app_for(store, clock)
    login(admin, "ada")
    page = admin.get("/admin/users").text
    assert "locked</strong>" in page and 'value="unlock"' in page
    assert "vic unlocked" in admin_post(admin, op="unlock", name="vic").text  # type: ignore[attr-defined]
    assert attempt(admin, "vic", PASSWORDS["vic"]).status_code == 303  # type: ignore[attr-defined]
    unlocked = log_rows(store, kind="user_unlocked")
    assert [(e["user_name"], e["detail"]) for e in unlocked] == [("ada", "vic")]
    # locked again, the console stopped, unlocked from the command line, started again
    for _ in range(10):
        attempt(restarted, "vic", "wrong password!")
        clock.now += timedelta(minutes=5)
    store.close()
    r = CliRunner().invoke(cli, ["users", "unlock", "vic", "--db", str(path)])
    assert r.exit_code == 0, r.output
    with Store(path) as reopened:
        assert attempt(app_for(reopened, clock), "vic", PASSWORDS["vic"]).status_code == 303  # type: ignore[attr-defined]


# -- the access log ------------------------------------------------------------------------------


def test_the_access_log_page_is_for_admins_filters_pages_and_exports_neutralised_csv(
    store: Store, clock: Clock
) -> None:
    client = app_for(store, clock)
    for i in range(3):
        attempt(client, "=HYPERLINK(evil)", f"wrong {i} password")
        clock.now += timedelta(minutes=5)
    login(client, "ada")
    page = client.get("/admin/access", params={"kind": "login_failed"})
    assert page.status_code == 200 and "3 entries" in page.text and "=HYPERLINK(evil)" in page.text
    assert "login_succeeded</td>" not in page.text
    assert "0 entries" in client.get("/admin/access", params={"from": "2026-11-29"}).text
    assert "3 entries" in client.get("/admin/access", params={"user": "=HYPERLINK(evil)"}).text
    exported = client.get("/admin/access.csv", params={"kind": "login_failed"})
    client.app.state.console.access.flush()  # type: ignore[attr-defined]  # a download is stored off the request
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert len(rows) == 3 and all(r["user_name"].startswith("'=") for r in rows)
    assert log_rows(store, kind="download")[0]["detail"] == "/admin/access.csv?kind=login_failed"
    viewer = app_for(store, clock)
    login(viewer, "vic")
    denied = viewer.get("/admin/access")
    assert denied.status_code == 403 and "<html" in denied.text and "only an admin" in denied.text
    assert viewer.get("/admin/access.csv").status_code == 403


def test_the_access_log_pages_a_hundred_entries_at_a_time(store: Store, clock: Clock) -> None:
    access_log.append(
        store.con,
        [
            AccessEntry(entry_id=f"E{i:04d}", at=T0, user="u", client="c", kind="logout", outcome="ok")
            for i in range(150)
        ],
    )
    client = app_for(store, clock)
    login(client, "ada")
    first, second = client.get("/admin/access?kind=logout"), client.get("/admin/access?kind=logout&page=2")
    assert "page 1 of 2" in first.text and first.text.count("<td>logout</td>") == 100
    assert "page 2 of 2" in second.text and second.text.count("<td>logout</td>") == 50


def test_the_access_log_chain_stores_a_redelivery_once_and_names_an_altered_entry(store: Store) -> None:
    entries = [
        AccessEntry(
            entry_id=f"E{i}", at=T0 + timedelta(seconds=i), user="ada", client="10.0.0.1", kind="logout", outcome="ok"
        )
        for i in range(5)
    ]
    assert access_log.append(store.con, entries[:3]) == 3
    assert access_log.append(store.con, entries) == 2  # the first three again: skipped
    report = access_log.check_chain(store.con)
    assert report.entries == 5 and report.first_break is None
    store.con.execute("UPDATE access_log SET user_name = 'eve' WHERE seq = 3")
    assert access_log.check_chain(store.con).first_break == (3, "E2", "its hash does not match its content (altered)")
    store.con.execute("UPDATE access_log SET user_name = 'ada' WHERE seq = 3")
    store.con.execute("DELETE FROM access_log WHERE seq = 2")
    broken = access_log.check_chain(store.con).first_break
    assert broken is not None and broken[:2] == (3, "E2")


def test_dealtrail_verify_checks_the_access_log_and_names_the_altered_entry(tmp_path: Path) -> None:
    from dealtrail.ingest.audit import audit_file
    from dealtrail.simulator.run import write_simulation

    events, db = tmp_path / "clean.jsonl", tmp_path / "verify.duckdb"
    write_simulation(events, tables=1, hours=0.1, seed=3, error_rate=0.0)
    with Store(db) as s:
        audit_file(events, s)
    with Store(db) as s:
        auth.add_user(s.con, "rita", "reviewer", PASSWORDS["rita"], T0)
        client = TestClient(create_app(s, ConsoleConfig(DUE, "s" * 48, clock=lambda: T0)))
        for _ in range(3):
            attempt(client, "rita", "wrong password!")
    r = CliRunner().invoke(cli, ["verify", "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert "access log: 3 entries chained, intact" in r.output
    with Store(db) as s:
        s.con.execute("UPDATE access_log SET client = '192.0.2.9' WHERE seq = 2")
        entry = s.con.execute("SELECT entry_id FROM access_log WHERE seq = 2").fetchall()[0][0]
    r = CliRunner().invoke(cli, ["verify", "--db", str(db)])
    assert r.exit_code == 4
    assert f"access log: chain broken at entry 2 ({entry})" in " ".join(r.output.split())


def test_every_review_and_every_download_is_in_the_access_log(audited_shift: Path, tmp_path: Path) -> None:
    db = tmp_path / "reviews.duckdb"
    shutil.copy(audited_shift, db)
    with Store(db) as s:
        auth.add_user(s.con, "rita", "reviewer", PASSWORDS["rita"], T0)
        client = TestClient(create_app(s, ConsoleConfig(DUE, "s" * 48, clock=lambda: T0)))
        rows, _ = reviews.find(s.con, FindingFilter(), DUE, T0, limit=1)
        fid = str(rows[0]["finding_id"])
        h = {"Authorization": "Bearer " + auth.new_token(s.con, "rita", T0)}
        assert (
            client.post(f"/api/v1/findings/{fid}/reviews", json={"action": "acknowledge"}, headers=h).status_code == 201
        )
        login(client, "rita")
        assert client.get("/findings.csv").status_code == 200
        client.app.state.console.access.flush()  # type: ignore[attr-defined]  # a download is stored off the request
        logged = log_rows(s)
    assert [e["kind"] for e in logged] == ["review", "login_succeeded", "download"]
    assert fid in str(logged[0]["detail"]) and logged[0]["user_name"] == "rita"
    assert logged[2]["detail"] == "/findings.csv" and logged[2]["client"] == "testclient"


def test_with_a_sink_the_console_sends_entries_to_the_topic_and_the_projector_chains_them(
    store: Store, clock: Clock
) -> None:
    sent: list[AccessEntry] = []
    client = app_for(store, clock, access_sink=sent.append)
    attempt(client, "vic", "wrong password!")
    login(client, "vic")
    assert [e.kind for e in sent] == ["login_failed", "login_succeeded"] and log_rows(store) == []
    topic = Topics("ns", 3).access_log
    assert (topic.name, topic.partitions) == ("ns.access-log.v1", 1) and topic in Topics("ns", 3).all()
    names = [
        "ns.dealing-events.v1",
        "ns.findings.v1",
        "ns.rounds.v1",
        "ns.dead-letter.v1",
        "ns.reviews.v1",
        "ns.staff.v1",
        topic.name,
    ]
    tp = TopicPartition(topic.name, 0)
    records = [Record(b"access-log", e.model_dump_json().encode(), i) for i, e in enumerate(sent)]
    summary = ProjectSummary(written=BatchCounts())
    _write(store, Consumer(), "ns-projector", {tp: records}, names, summary)
    _write(store, Consumer(), "ns-projector", {tp: [*records, Record(b"access-log", b"{}", 2)]}, names, summary)
    assert [(e["seq"], e["kind"]) for e in log_rows(store)] == [(1, "login_failed"), (2, "login_succeeded")]
    assert access_log.check_chain(store.con).first_break is None
    assert summary.bad_records == 1  # the unreadable record is a dead letter, not a crash
    assert store.offsets("ns-projector")[(topic.name, 0)] == 3


def test_the_sink_keeps_an_entry_the_broker_did_not_take_and_sends_it_with_the_next(store: Store, clock: Clock) -> None:
    sent: list[AccessEntry] = []
    down = [True]

    def sink(entry: AccessEntry) -> None:
        if down[0]:
            raise RuntimeError("KafkaTimeoutError")
        sent.append(entry)

    client = app_for(store, clock, access_sink=sink)
    assert attempt(client, "vic", "wrong password!").status_code == 401  # type: ignore[attr-defined]
    down[0] = False
    login(client, "vic")
    assert [e.kind for e in sent] == ["login_failed", "login_succeeded"]


@dataclass
class Record:
    """What the projector reads of a Kafka record."""

    key: bytes | None
    value: bytes | None
    offset: int


class Consumer:
    """The consumer's one call ``_write`` makes: commit."""

    def commit(self, offsets: dict[object, object], timeout_ms: int | None = None) -> None:
        pass


# -- one-time codes ------------------------------------------------------------------------------


def test_a_role_that_needs_a_one_time_code_enrols_one_then_signs_in_with_it(store: Store, clock: Clock) -> None:
    client = app_for(store, clock, SecurityPolicy(totp_roles=frozenset({"admin"})))
    r = attempt(client, "ada", PASSWORDS["ada"])
    assert r.status_code == 303 and r.headers["location"] == "/account/totp"  # type: ignore[attr-defined]
    assert client.get("/findings", follow_redirects=False).status_code == 303  # no session yet
    page = client.get("/account/totp")
    assert page.status_code == 200 and "<svg" in page.text and "Enrol one now" in page.text
    secret = re.search(r"Key: <code>([A-Z2-7]+)</code>", page.text)
    assert secret
    bad = client.post("/account/totp", data={"csrf": csrf_of(page.text), "code": "000000"}, follow_redirects=False)
    assert bad.status_code == 422 and "not the one your app shows" in bad.text
    code = pyotp.TOTP(secret.group(1)).at(clock.now)
    ok = client.post("/account/totp", data={"csrf": csrf_of(page.text), "code": code}, follow_redirects=False)
    assert ok.status_code == 303 and signed_in(client)
    assert secret.group(1) not in str(log_rows(store))
    other = app_for(store, clock, SecurityPolicy(totp_roles=frozenset({"admin"})))
    assert attempt(other, "ada", PASSWORDS["ada"]).status_code == 401  # type: ignore[attr-defined]
    clock.now += timedelta(seconds=30)
    r = attempt(other, "ada", PASSWORDS["ada"], pyotp.TOTP(secret.group(1)).at(clock.now))
    assert r.status_code == 303  # type: ignore[attr-defined]
    assert app_for(store, clock).get("/account/totp", follow_redirects=False).status_code == 403


# -- pages, not raw errors; the last admin --------------------------------------------------------


def test_403_and_404_are_pages_for_pages_and_json_for_the_api(client: TestClient, store: Store) -> None:
    login(client, "vic")
    for path, status in (("/admin/users", 403), ("/no/such/page", 404), ("/findings/" + "0" * 32, 404)):
        r = client.get(path)
        assert r.status_code == status and r.headers["content-type"].startswith("text/html"), path
        assert "<html" in r.text and "Sign out" in r.text and '{"detail"' not in r.text
    api = client.get("/api/v1/findings/" + "0" * 32)
    assert api.status_code == 404 and api.json()["detail"]
    bad = client.get("/findings", params={"page": "x"})
    assert bad.status_code == 422 and "<html" in bad.text


def test_a_refused_sign_in_keeps_the_name_typed_never_the_password(client: TestClient) -> None:
    r = attempt(client, "rita", "not her password at all")
    assert r.status_code == 401 and 'value="rita"' in r.text  # type: ignore[attr-defined]
    assert "not her password at all" not in r.text  # type: ignore[attr-defined]
    csrf = csrf_of(client.get("/login").text)
    empty = client.post("/login", data={"csrf": csrf, "username": "rita"})
    assert empty.status_code == 422 and "Type your name and your password" in empty.text and "<html" in empty.text


def test_an_admin_cannot_demote_or_deactivate_himself_or_the_last_active_admin(
    client: TestClient, store: Store
) -> None:
    login(client, "ada")
    for op, extra in (("role", {"role": "viewer"}), ("deactivate", {})):
        r = admin_post(client, op=op, name="ada", **extra)
        assert r.status_code == 422 and "yourself" in r.text  # type: ignore[attr-defined]
    assert admin_post(client, op="add", name="ada", role="viewer").status_code == 422  # type: ignore[attr-defined]
    r = admin_post(client, op="add", name="bea", role="admin", password="bea-admin-pass")
    assert r.status_code == 422 and 'value="bea"' in r.text and "choose another person" in r.text  # type: ignore[attr-defined]
    assert "<option selected>admin</option>" in r.text  # type: ignore[attr-defined]
    r = admin_post(client, op="add", name="bea", role="admin")
    assert r.status_code == 200  # type: ignore[attr-defined]
    bea = app_for(store, Clock(T0))
    set_own_password(bea, "bea", one_time_of(r.text), "bea-admin-pass")  # type: ignore[attr-defined]
    assert admin_post(bea, op="deactivate", name="ada").status_code == 200  # type: ignore[attr-defined]
    r = admin_post(bea, op="role", name="bea", role="reviewer")
    assert r.status_code == 422 and "yourself" in r.text  # type: ignore[attr-defined]
    active = store.con.execute("SELECT name FROM dim_users WHERE role = 'admin' AND active").fetchall()
    assert active == [("bea",)]
    refused = log_rows(store, kind="admin_role")
    assert refused and refused[0]["outcome"] == "refused"


def test_a_refused_review_form_shows_the_finding_again_with_the_message_beside_the_field_and_the_values(
    audited_shift: Path, tmp_path: Path
) -> None:
    db = tmp_path / "form.duckdb"
    shutil.copy(audited_shift, db)
    with Store(db) as s:
        auth.add_user(s.con, "rita", "reviewer", PASSWORDS["rita"], T0)
        client = TestClient(create_app(s, ConsoleConfig(DUE, "s" * 48, clock=lambda: T0)))
        rows, _ = reviews.find(s.con, FindingFilter(), DUE, T0, limit=1)
        fid = str(rows[0]["finding_id"])
        login(client, "rita")
        page = client.get(f"/findings/{fid}")
        form = {"csrf": csrf_of(page.text), "action": "dispose", "cause": "", "note": "camera <checked>"}
        r = client.post(f"/findings/{fid}/reviews", data={**form, "corrective_action": "coached"})
        assert r.status_code == 422 and "<html" in r.text and '{"detail"' not in r.text
        assert re.search(r'id="err-cause">dispose needs a cause', r.text)
        assert '<option value="dispose" selected>' in r.text
        assert 'value="coached"' in r.text and "camera &lt;checked&gt;</textarea>" in r.text
        r = client.post(f"/findings/{fid}/reviews", data={**form, "action": "assign", "assignee": "nobody"})
        assert r.status_code == 422 and 'id="err-assignee"' in r.text
        assert s.con.execute("SELECT count(*) FROM reviews").fetchall() == [(0,)]


# -- the hostile tester's findings (issue 21, second round) --------------------------------------


def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy(store: Store, clock: Clock) -> None:
    import socket
    import threading
    import time

    import httpx
    import uvicorn

    from dealtrail.cli.console import uvicorn_config
    from dealtrail.settings import SecuritySettings, Settings

    console_app = create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock))
    behind = uvicorn_config(console_app, Settings(security=SecuritySettings(trusted_proxies=["10.0.0.5"])), "h", 1)
    assert isinstance(behind, uvicorn.Config)
    assert behind.proxy_headers and behind.forwarded_allow_ips == ["10.0.0.5"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn_config(console_app, Settings(), "127.0.0.1", port)
    assert isinstance(config, uvicorn.Config) and config.proxy_headers is False
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.02)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            spoof = {"X-Forwarded-For": "203.0.113.7"}
            csrf = csrf_of(http.get("/login", headers=spoof).text)
            data = {"username": "vic", "password": "wrong password!", "csrf": csrf, "next": "/"}
            assert http.post("/login", data=data, headers=spoof).status_code == 401
    finally:
        server.should_exit = True
        thread.join(10)
    assert [e["client"] for e in log_rows(store, kind="login_failed")] == ["127.0.0.1"]


def _key(html: str) -> str:
    m = re.search(r"Key: <code>([A-Z2-7]+)</code>", html)
    assert m, "no key on the enrolment page"
    return m.group(1)


def _cookie_text(client: TestClient) -> str:
    import base64

    value = client.cookies.get("dealtrail_session") or ""
    payload = value.split(".")[0]
    return base64.b64decode(payload + "=" * (-len(payload) % 4)).decode("utf-8", "replace")


def test_a_one_time_code_is_replaced_only_with_the_password_and_the_old_code_and_never_sits_in_the_cookie(
    store: Store, clock: Clock
) -> None:
    console_app = create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock))
    client = TestClient(console_app)
    login(client, "rita")
    page = client.get("/account/totp")
    first = _key(page.text)
    assert first not in _cookie_text(client) and "totp_new" not in _cookie_text(client)

    def enrol(**data: str) -> int:
        r = client.post("/account/totp", data={"csrf": csrf_of(page.text), **data}, follow_redirects=False)
        return r.status_code

    now = pyotp.TOTP(first).at(clock.now)
    assert enrol(code=now) == 401  # a session alone does not enrol a second factor
    assert enrol(code=now, password=PASSWORDS["rita"]) == 303
    key = console_app.state.console.totp_key
    assert access_log.totp_secret(store.con, "rita", key) == first
    clock.now += timedelta(seconds=30)
    page = client.get("/account/totp")
    second = _key(page.text)
    assert second != first and second not in _cookie_text(client)
    new = pyotp.TOTP(second).at(clock.now)
    assert enrol(code=new, password=PASSWORDS["rita"]) == 401  # no code of the enrolled secret
    assert enrol(code=new, old_code="123456", password=PASSWORDS["rita"]) == 401
    assert access_log.totp_secret(store.con, "rita", key) == first
    assert enrol(code=new, old_code=pyotp.TOTP(first).at(clock.now), password=PASSWORDS["rita"]) == 303
    assert access_log.totp_secret(store.con, "rita", key) == second
    refused = [e["detail"] for e in log_rows(store, kind="totp_enrolled") if e["outcome"] == "refused"]
    assert refused == ["wrong password", *["wrong, used or missing code of the enrolled secret"] * 2]
    assert first not in str(log_rows(store)) and second not in str(log_rows(store))


def test_a_one_time_code_signs_in_once_and_an_admin_reset_removes_the_enrolment(store: Store, clock: Clock) -> None:
    console_app = create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock))
    secret = pyotp.random_base32()
    access_log.put_totp(store.con, "rita", secret, clock.now, console_app.state.console.totp_key)
    code = pyotp.TOTP(secret).at(clock.now)
    one, two = TestClient(console_app), TestClient(console_app)
    assert attempt(one, "rita", PASSWORDS["rita"], code).status_code == 303  # type: ignore[attr-defined]
    assert attempt(two, "rita", PASSWORDS["rita"], code).status_code == 401  # type: ignore[attr-defined]
    clock.now += timedelta(seconds=30)
    assert attempt(two, "rita", PASSWORDS["rita"], pyotp.TOTP(secret).at(clock.now)).status_code == 303  # type: ignore[attr-defined]
    admin = TestClient(console_app)
    login(admin, "ada")
    reset = admin_post(admin, op="password", name="rita")
    assert not access_log.has_totp(store.con, "rita")
    detail = "rita; one-time code removed; one-time password, to be changed at first sign-in"
    assert log_rows(store, kind="password_reset")[-1]["detail"] == detail
    three = TestClient(console_app)
    set_own_password(three, "rita", one_time_of(reset.text), "rita-new-password")  # type: ignore[attr-defined]


def test_users_add_of_an_existing_user_removes_the_one_time_code(tmp_path: Path) -> None:
    db = tmp_path / "users.duckdb"
    with Store(db) as s:
        auth.add_user(s.con, "rita", "reviewer", PASSWORDS["rita"], T0)
        access_log.put_totp(s.con, "rita", pyotp.random_base32(), T0, resolve_totp_key(None, None, db))
    r = CliRunner().invoke(cli, ["users", "add", "rita", "--role", "reviewer", "--db", str(db)], input="new pass 123\n")
    assert r.exit_code == 0, r.output
    with Store(db) as s:
        assert not access_log.has_totp(s.con, "rita")
        detail = "rita as reviewer; one-time code removed; one-time password, to be changed at first sign-in"
        assert log_rows(s, kind="password_reset")[-1]["detail"] == detail
        assert users.user(s.con, "rita")["must_change"]  # type: ignore[index]


def test_a_digest_keeps_the_access_logs_head_and_verify_against_it_names_a_truncated_tail(tmp_path: Path) -> None:
    from dealtrail.ingest.audit import audit_file
    from dealtrail.simulator.run import write_simulation

    events, db, digest = tmp_path / "clean.jsonl", tmp_path / "verify.duckdb", tmp_path / "digest.json"
    write_simulation(events, tables=1, hours=0.1, seed=3, error_rate=0.0)
    with Store(db) as s:
        audit_file(events, s)
    with Store(db) as s:
        auth.add_user(s.con, "rita", "reviewer", PASSWORDS["rita"], T0)
        client = TestClient(create_app(s, ConsoleConfig(DUE, "s" * 48, clock=lambda: T0)))
        for _ in range(3):
            attempt(client, "rita", "wrong password!")
        head = s.con.execute("SELECT hash FROM access_log WHERE seq = 3").fetchall()[0][0]
    r = CliRunner().invoke(cli, ["digest", "--db", str(db), "--out", str(digest)])
    assert r.exit_code == 0, r.output
    assert f"access log seq 3 entries 3 {head}" in " ".join(r.output.split())
    saved = json.loads(digest.read_text())
    assert saved["access_log"] == {"head_seq": 3, "head_hash": head, "entries": 3}
    r = CliRunner().invoke(cli, ["verify", "--db", str(db), "--against", str(digest)])
    assert r.exit_code == 0, r.output
    assert "access log: still holds the digest head, entry 3" in r.output
    with Store(db) as s:
        s.con.execute("DELETE FROM access_log WHERE seq > 1")
    r = CliRunner().invoke(cli, ["verify", "--db", str(db)])
    assert r.exit_code == 0 and "access log: 1 entries chained, intact" in r.output  # no gap to see
    r = CliRunner().invoke(cli, ["verify", "--db", str(db), "--against", str(digest)])
    assert r.exit_code == 4
    assert "access log: the digest head, entry 3, is missing (the log was truncated)" in " ".join(r.output.split())
    with Store(db) as s:  # a tail rewritten with a consistent new chain: entry 3 is another one
        entries = [
            AccessEntry(entry_id=f"F{i}", at=T0, user="eve", client="10.0.0.9", kind="logout", outcome="ok")
            for i in range(2)
        ]
        access_log.append(s.con, entries)
    r = CliRunner().invoke(cli, ["verify", "--db", str(db), "--against", str(digest)])
    assert r.exit_code == 4 and "access log: entry 3 is not the digest head (the log was rewritten)" in r.output
