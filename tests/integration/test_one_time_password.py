"""No one acts as another person (issue 48, item 3): an admin's password reset gives a one-time
password that serves only to set a new one; with it, no review, approval, sign-off or API token
is possible; an admin never chooses another person's password; reviews, approvals and sign-offs
record how their person signed in."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.reporting.schedule import Schedule, run_due
from projections.models import reviews
from projections.models.reviews import FindingFilter, ReviewDue
from projections.records import users
from projections.records.signoff import SIGNOFF, signer_label
from projections.store.store import Store

START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
LABEL = "2026-11-27T1800+0000_UTC"
NOW = START + timedelta(hours=3)
DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
ROLES = {"ada": "admin", "bea": "admin", "rita": "reviewer"}
AT = datetime(2026, 11, 1, tzinfo=UTC)
FULL = {"corrective_action": "none needed", "note": "video shows the cut card"}


def password_of(name: str) -> str:
    return f"{name}-long-password"


@pytest.fixture(scope="module")
def base(audited_shift: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The audited shift with two admins and a reviewer, and its hourly period reports (final)."""
    folder = tmp_path_factory.mktemp("one-time")
    db = folder / "s.duckdb"
    shutil.copy(audited_shift, db)
    with Store(db) as s:
        for name, role in ROLES.items():
            auth.add_user(s.con, name, role, password_of(name), AT)
    assert len(run_due(db, folder / "periods", Schedule("0 * * * *"), NOW)) == 2
    return db, folder / "periods"


@pytest.fixture()
def setup(base: tuple[Path, Path], tmp_path: Path) -> Iterator[tuple[Store, Path]]:
    db, periods = tmp_path / "s.duckdb", tmp_path / "periods"
    shutil.copy(base[0], db)
    shutil.copytree(base[1], periods)
    s = Store(db)
    yield s, periods
    s.close()


@pytest.fixture()
def store(setup: tuple[Store, Path]) -> Store:
    return setup[0]


@pytest.fixture()
def periods(setup: tuple[Store, Path]) -> Path:
    return setup[1]


class Clock:
    def __init__(self) -> None:
        self.now = NOW + timedelta(minutes=10)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture()
def console(store: Store, periods: Path) -> TestClient:
    return TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, reports_dir=periods, clock=Clock())))


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field"
    return m.group(1)


def sign_in(client: TestClient, name: str, password: str) -> object:
    csrf = csrf_of(client.get("/login").text)
    data = {"username": name, "password": password, "csrf": csrf, "next": "/"}
    return client.post("/login", data=data, follow_redirects=False)


def reset_by_ada(console: TestClient, name: str) -> str:
    """ada resets ``name``'s password on the admin page; the one-time password it shows."""
    admin = TestClient(console.app)
    assert sign_in(admin, "ada", password_of("ada")).status_code == 303  # type: ignore[attr-defined]
    csrf = csrf_of(admin.get("/admin/users").text)
    r = admin.post("/admin/users", data={"csrf": csrf, "op": "password", "name": name})
    assert r.status_code == 200, r.text
    m = re.search(r'id="one-time-password">([^<]+)<', r.text)
    assert m and m.group(1) not in (password_of(name), password_of("ada"))
    return m.group(1)


def proposal(store: Store, client: TestClient) -> str:
    """rita proposes NOT_A_VIOLATION for a voiding finding (waits for a manager's approval)."""
    rows, _ = reviews.find(store.con, FindingFilter(severity="voiding", incident=True), DUE, NOW, limit=1)
    fid = str(rows[0]["finding_id"])
    token = auth.new_token(store.con, "rita", AT)
    body = {"action": "dispose", "cause": "NOT_A_VIOLATION", **FULL}
    r = client.post(f"/api/v1/findings/{fid}/reviews", json=body, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 201 and r.json()["type"] == "FindingDispositionProposed"
    return fid


def status_of(store: Store, fid: str) -> str:
    rows, _ = reviews.find(store.con, FindingFilter(finding_id=fid), DUE, NOW)
    return str(rows[0]["review_status"])


def test_an_admin_cannot_set_a_known_password_for_another_account(console: TestClient, store: Store) -> None:
    admin = TestClient(console.app)
    sign_in(admin, "ada", password_of("ada"))
    before = users.user(store.con, "bea")
    for op in ("password", "add"):
        csrf = csrf_of(admin.get("/admin/users").text)
        form = {"csrf": csrf, "op": op, "name": "bea", "role": "admin", "password": "ada-knows-this-one"}
        r = admin.post("/admin/users", data=form)
        assert r.status_code == 422 and "does not choose another person" in r.text
    assert users.user(store.con, "bea") == before
    assert sign_in(TestClient(console.app), "bea", "ada-knows-this-one").status_code == 401  # type: ignore[attr-defined]


@pytest.mark.parametrize("action", ["approve", "acknowledge", "sign", "token"])
def test_a_reset_password_only_sets_a_new_one_and_cannot_approve_review_or_sign(
    console: TestClient, store: Store, periods: Path, action: str
) -> None:
    fid = proposal(store, console)
    one_time = reset_by_ada(console, "bea")
    ada_as_bea = TestClient(console.app)
    r = sign_in(ada_as_bea, "bea", one_time)
    assert r.status_code == 303 and r.headers["location"] == "/account/password"  # type: ignore[attr-defined]
    assert "Set your password" in ada_as_bea.get("/account/password").text
    origin = {"Origin": "http://testserver"}
    if action in ("approve", "acknowledge"):
        url = f"/api/v1/findings/{fid}/reviews"
        refused = ada_as_bea.post(url, json={"action": action, "note": "as bea"}, headers=origin)
        assert refused.status_code == 401
        assert status_of(store, fid) == "pending_approval"
        assert [r["type"] for r in reviews.history(store.con, fid)] == ["FindingDispositionProposed"]
    elif action == "sign":
        csrf = csrf_of(ada_as_bea.get("/account/password").text)
        url = f"/reports/scheduled/{LABEL}/rev-0001/sign"
        refused = ada_as_bea.post(url, data={"statement": "as bea", "csrf": csrf}, follow_redirects=False)
        assert refused.status_code == 303 and refused.headers["location"].startswith("/login")
        assert not (periods / LABEL / "rev-0001" / SIGNOFF).exists()
        args = ["sign-report", str(periods / LABEL), "--user", "bea", "--statement", "as bea", "--db", str(store.path)]
        store.con.close()  # the command line opens the store itself
        out = CliRunner().invoke(cli, args, input=one_time + "\n")
        assert out.exit_code == 1 and "one-time password" in out.output, out.output
        assert not (periods / LABEL / "rev-0001" / SIGNOFF).exists()
        store.con = Store(store.path).con
    else:
        with pytest.raises(auth.AccessError, match="one-time password"):
            auth.new_token(store.con, "bea", NOW)
        assert ada_as_bea.get("/findings", follow_redirects=False).status_code == 303  # no page either


def test_after_setting_her_own_password_the_person_approves_and_the_approval_says_how_she_signed_in(
    console: TestClient, store: Store
) -> None:
    fid = proposal(store, console)
    one_time = reset_by_ada(console, "bea")
    bea = TestClient(console.app)
    sign_in(bea, "bea", one_time)
    csrf = csrf_of(bea.get("/account/password").text)
    same = {"csrf": csrf, "current": one_time, "new": one_time, "repeated": one_time}
    assert bea.post("/account/password", data=same).status_code == 422  # a new one, not the one ada knows
    wrong = {"csrf": csrf, "current": "a guess at it", "new": "bea-own-password", "repeated": "bea-own-password"}
    assert bea.post("/account/password", data=wrong).status_code == 401
    good = {"csrf": csrf, "current": one_time, "new": "bea-own-password", "repeated": "bea-own-password"}
    done = bea.post("/account/password", data=good, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/"
    u = users.user(store.con, "bea")
    assert u is not None and not u["must_change"]
    assert sign_in(TestClient(console.app), "bea", one_time).status_code == 401  # type: ignore[attr-defined]
    r = bea.post(f"/api/v1/findings/{fid}/reviews", json={"action": "approve"}, headers={"Origin": "http://testserver"})
    assert r.status_code == 201, r.text
    assert r.json()["user"] == "bea" and r.json()["signed_in_with"] == {"method": "local", "issuer": "", "subject": ""}
    logged = store.con.execute(
        "SELECT detail FROM access_log WHERE kind = 'review' AND outcome = 'ok' ORDER BY seq DESC LIMIT 1"
    ).fetchall()[0][0]
    assert logged.endswith("by bea with session (local account)")
    ok = "SELECT kind FROM access_log WHERE user_name = 'bea' AND outcome = 'ok' ORDER BY seq"
    assert [k for (k,) in store.con.execute(ok).fetchall()] == [
        "login_one_time",
        "password_changed",
        "login_succeeded",
        "review",
    ]


def test_a_sign_off_records_how_its_signer_signed_in(console: TestClient, periods: Path) -> None:
    bea = TestClient(console.app)
    sign_in(bea, "bea", password_of("bea"))
    csrf = csrf_of(bea.get("/reports").text)
    url = f"/reports/scheduled/{LABEL}/rev-0001/sign"
    assert bea.post(url, data={"statement": "Reviewed.", "csrf": csrf}, follow_redirects=False).status_code == 303
    record = json.loads((periods / LABEL / "rev-0001" / SIGNOFF).read_text())
    assert record["signed_in_with"] == {"method": "local"}
    assert signer_label(record) == "bea (admin, signed in with a local account)"
    assert signer_label({"signed_by": "max", "role": "manager"}) == "max (manager)"  # a record from before


def test_a_sign_off_block_names_a_directory_signer_by_issuer_and_subject() -> None:
    record = {
        "signed_by": "meg",
        "role": "manager",
        "signer_name": "Meg Ortiz",
        "signer_title": "Compliance Manager",
        "signed_in_with": {"method": "directory", "issuer": "https://sso.casino.test/realms/casino", "subject": "3f2a"},
    }
    assert signer_label(record) == (
        "Meg Ortiz, Compliance Manager (console user meg, manager, signed in through the directory "
        "https://sso.casino.test/realms/casino as subject 3f2a)"
    )
