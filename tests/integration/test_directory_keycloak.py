"""Signing in with the casino's directory against a real identity provider (issue 48, items 1 and
4): Keycloak (from Maven Central, ``ops/keycloak``), started once per test session on
``localhost`` while the console serves on ``127.0.0.1`` (two sites: the browser's SameSite rules
apply to the redirect back), driven by Debian's Chromium through Playwright.

A member of the managers' group signs in through Keycloak, lands in the console as a manager and
approves a reviewer's proposal (the approval names her as issuer + subject); a back-channel logout
from Keycloak then signs her out of the console at once; a user in no mapped group is refused
with a page that says why. The group view signs in through the same Keycloak (its own client) and
a logout there ends its session too. Skips without Keycloak, Java or Chromium unless
``DEALTRAIL_REQUIRE_KEYCLOAK=1`` (CI), which makes those a failure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.console.oidc import DirectoryConfig
from projections.models import reviews
from projections.models.reviews import FindingFilter, ReviewDue
from projections.store.store import Store
from tests.integration.test_console_browser import ARGS, CHROMIUM
from tests.integration.test_group_serve import Group, make_group

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
KEYCLOAK_PORT = int(os.environ.get("DEALTRAIL_KEYCLOAK_PORT", "28080"))
CONSOLE_PORT = 28091
"""The console's port: the test realm's redirect URI and back-channel logout URL name it."""
GROUP_PORT = 28093
"""The group view's port (the realm's ``dealtrail-group`` client names it)."""
ISSUER = f"http://localhost:{KEYCLOAK_PORT}/realms/casino"
CONSOLE = f"http://127.0.0.1:{CONSOLE_PORT}"
DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
PASSWORDS = {"meg": "meg-directory-pass", "rita": "rita-directory-pass", "carl": "carl-directory-pass"}


def need(reason: str) -> None:
    """Skip, or fail when Keycloak is required (``DEALTRAIL_REQUIRE_KEYCLOAK=1``, as in CI)."""
    if os.environ.get("DEALTRAIL_REQUIRE_KEYCLOAK") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def keycloak() -> Iterator[str]:
    """Keycloak with the test realm, once per test session (``ops/keycloak/keycloak up``; one
    already answering on the port is used as it is and left running); its issuer URL."""
    script = ROOT / "ops" / "keycloak" / "keycloak"
    env = {**os.environ, "DEALTRAIL_KEYCLOAK_PORT": str(KEYCLOAK_PORT)}
    if subprocess.run([script, "status"], env=env, check=False).returncode == 0:
        yield ISSUER
        return
    if shutil.which("java") is None:
        need("no java to run Keycloak (apt-get install default-jre-headless)")
    home = Path(env.get("DEALTRAIL_KEYCLOAK_HOME", Path.home() / ".cache" / "dealtrail" / "keycloak"))
    if not any(home.glob("keycloak-*/bin/kc.sh")):
        need(f"Keycloak is not fetched into {home} (ops/keycloak/fetch)")
    started = time.monotonic()
    up = subprocess.run([script, "up"], env=env, check=False, capture_output=True, text=True, timeout=600)
    if up.returncode != 0:
        need(f"Keycloak did not start: {up.stderr[-2000:]}")
    print(f"keycloak: started in {time.monotonic() - started:.0f} s")
    try:
        yield ISSUER
    finally:
        subprocess.run([script, "down"], env=env, check=False)


@contextlib.contextmanager
def serve(app: Any, port: int = CONSOLE_PORT) -> Iterator[None]:
    """The console (or the group view) on 127.0.0.1:``port`` (the realm's redirect and back-channel URLs)."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the console did not start"
        time.sleep(0.05)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def directory(issuer: str) -> DirectoryConfig:
    return DirectoryConfig(
        issuer=issuer,
        client_id="dealtrail",
        client_secret="dealtrail-test-client-secret",
        role_groups={"reviewer": frozenset({"dealtrail-reviewers"}), "manager": frozenset({"dealtrail-managers"})},
    )


def admin_token() -> str:
    r = httpx.post(
        f"http://localhost:{KEYCLOAK_PORT}/realms/master/protocol/openid-connect/token",
        data={"grant_type": "password", "client_id": "admin-cli", "username": "admin", "password": "admin-test-pass"},
    )
    r.raise_for_status()
    return str(r.json()["access_token"])


def logout_in_keycloak(username: str) -> None:
    """An administrator signs ``username`` out in Keycloak (which tells the console back-channel)."""
    headers = {"Authorization": f"Bearer {admin_token()}"}
    base = f"http://localhost:{KEYCLOAK_PORT}/admin/realms/casino"
    found = httpx.get(f"{base}/users", params={"username": username, "exact": "true"}, headers=headers).json()
    r = httpx.post(f"{base}/users/{found[0]['id']}/logout", headers=headers)
    assert r.status_code == 204, r.text


@pytest.fixture()
def store(audited_shift: Path, tmp_path: Path) -> Iterator[Store]:
    db = tmp_path / "directory.duckdb"
    shutil.copy(audited_shift, db)
    s = Store(db)
    yield s
    s.close()


def browser_sign_in(page: Any, username: str, site: str = CONSOLE) -> None:
    """From the console's (or ``site``'s) login page through Keycloak's form and back."""
    page.goto(site + "/login")
    page.click("#directory-sign-in")
    page.wait_for_url(f"http://localhost:{KEYCLOAK_PORT}/**")
    page.fill("#username", username)
    page.fill("#password", PASSWORDS[username])
    page.click("#kc-login")
    page.wait_for_url(site + "/**")
    page.wait_for_load_state()


def test_a_manager_signs_in_through_keycloak_approves_and_a_back_channel_logout_signs_her_out(
    keycloak: str, store: Store
) -> None:
    if not Path(CHROMIUM).exists():
        need(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    now = store.con.execute("SELECT max(observed_at) FROM findings").fetchall()[0][0]
    auth.add_user(store.con, "ron", "reviewer", "ron-local-password", now)  # a reviewer's API token proposes
    rows, _ = reviews.find(store.con, FindingFilter(severity="voiding", incident=True), DUE, now, limit=1)
    fid = str(rows[0]["finding_id"])
    app = create_app(store, ConsoleConfig(DUE, "k" * 48, directory=directory(keycloak)))
    from fastapi.testclient import TestClient

    token = auth.new_token(store.con, "ron", now)
    body = {"action": "dispose", "cause": "NOT_A_VIOLATION", "corrective_action": "none", "note": "video"}
    proposed = TestClient(app).post(
        f"/api/v1/findings/{fid}/reviews", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert proposed.status_code == 201 and proposed.json()["type"] == "FindingDispositionProposed"

    with serve(app), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            ctx = browser.new_context()
            page = ctx.new_page()
            callbacks: list[str] = []
            page.on(
                "request",
                lambda req: (
                    callbacks.append(req.all_headers().get("cookie", "")) if "/auth/callback" in req.url else None
                ),
            )
            browser_sign_in(page, "meg")
            assert page.url.startswith(CONSOLE) and "/login" not in page.url
            # the redirect back from Keycloak's site (localhost) to the console's (127.0.0.1) is
            # cross-site: the browser leaves the strict session cookie (set by the login page) out
            # and sends the login step's Lax cookie, which holds the state
            assert len(callbacks) == 1 and "dealtrail_login=" in callbacks[0]
            assert "dealtrail_session=" not in callbacks[0]
            header = page.inner_text("header")
            assert "meg" in header and "manager" in header  # landed as a manager
            cookies = {c["name"]: c for c in ctx.cookies()}
            assert cookies["dealtrail_session"]["sameSite"] == "Strict"  # the session cookie stays strict
            assert "dealtrail_login" not in cookies  # the login step's own cookie is gone

            page.goto(f"{CONSOLE}/findings/{fid}")
            page.click("button[name=action][value=approve]")
            page.wait_for_load_state()
            history = reviews.history(store.con, fid)
            assert [h["type"] for h in history] == ["FindingDispositionProposed", "FindingApproved"]
            assert history[-1]["user_name"] == "meg"
            payload = store.con.execute(
                "SELECT payload->>'$.signed_in_with.issuer', payload->>'$.signed_in_with.subject' FROM reviews "
                "WHERE type = 'FindingApproved'"
            ).fetchall()[0]
            linked = store.con.execute("SELECT issuer, subject FROM directory_accounts WHERE user_name = 'meg'")
            assert payload == linked.fetchall()[0] and payload[0] == keycloak

            logout_in_keycloak("meg")
            deadline = time.monotonic() + 20
            ended = []
            while not ended and time.monotonic() < deadline:
                ended = store.con.execute(
                    "SELECT detail FROM access_log WHERE kind = 'directory_logout' AND outcome = 'ok'"
                ).fetchall()
                time.sleep(0.2)
            assert ended and "1 session(s) ended" in ended[0][0]
            page.goto(f"{CONSOLE}/findings")
            assert "/login" in page.url  # signed out of dealtrail at once
            ctx.close()

            # a user in no mapped group is refused, with a page that says why
            ctx = browser.new_context()
            page = ctx.new_page()
            browser_sign_in(page, "carl")
            text = page.inner_text("body")
            assert "no group that dealtrail maps to a role" in text and "cafeteria" in text
            page.goto(f"{CONSOLE}/findings")
            assert "/login" in page.url
            ctx.close()
        finally:
            browser.close()


@pytest.fixture()
def group(tmp_path: Path) -> Group:
    """The small group of ``test_group_serve`` (two properties' exports, their keys)."""
    return make_group(tmp_path)


def test_the_group_view_signs_in_through_keycloak_and_a_logout_there_ends_its_session(
    keycloak: str, group: Group
) -> None:
    if not Path(CHROMIUM).exists():
        need(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    from datetime import UTC, datetime, timedelta

    from playwright.sync_api import sync_playwright

    from dealtrail.console.group_view import GroupDirectory, GroupReader, create_group_app
    from dealtrail.console.guard import SecurityPolicy
    from dealtrail.console.oidc import Directory

    site = f"http://127.0.0.1:{GROUP_PORT}"
    config = DirectoryConfig(
        issuer=keycloak, client_id="dealtrail-group", client_secret="dealtrail-group-test-client-secret"
    )
    # Keycloak's managers direct the group here; its reviewers manage one property
    directory = GroupDirectory(
        Directory(config), frozenset({"dealtrail-managers"}), {"north": frozenset({"dealtrail-reviewers"})}
    )
    reader = GroupReader(group.location, group.keys, timedelta(seconds=60), lambda: datetime.now(UTC))
    lines: list[str] = []
    app = create_group_app(reader, {}, "g" * 48, SecurityPolicy(), echo=lines.append, directory=directory)
    with serve(app, GROUP_PORT), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            ctx = browser.new_context()
            page = ctx.new_page()
            browser_sign_in(page, "meg", site)
            page.wait_for_url(site + "/")  # the callback's short page goes on to the floor
            page.goto(site + "/?from=2026-11-01&to=2026-11-02")
            html = page.content()
            assert 'href="/properties/north"' in html and 'href="/properties/river"' in html  # a director
            assert any("login_succeeded" in line and f"directory {keycloak}" in line for line in lines)

            logout_in_keycloak("meg")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not any("directory_logout" in line for line in lines):
                time.sleep(0.2)
            ended = [line for line in lines if "directory_logout" in line]
            assert ended and "1 session(s) ended" in ended[0], lines
            page.goto(site + "/")
            assert "/login" in page.url  # signed out of the group view at once
            ctx.close()
        finally:
            browser.close()
