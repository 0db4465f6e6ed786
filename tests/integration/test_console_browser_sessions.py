"""Sessions that end, in a real browser (Debian's Chromium driven by Playwright, never a downloaded
browser): a user signs in and out and the old session cookie, replayed in a fresh browser context,
no longer opens a page; the same after an admin resets the user's password and after a role
change. Then ten wrong passwords lock an account (the right one then gets 429 and the lock message
on the login page), and the admin reads the failures and the lock, with the client's address, in
the access log.

Screenshots (the login page with the lock message, the access log) go to ``DEALTRAIL_SHOTS`` when
that folder is set (else the test's temporary folder). Skips without Chromium or Playwright unless
``DEALTRAIL_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.console.guard import SecurityPolicy
from projections.models.reviews import ReviewDue
from projections.store.store import Store
from tests.helpers import need_browser, served_app
from tests.integration.test_console_browser import ARGS, CHROMIUM

pytestmark = pytest.mark.browser

PASSWORDS = {"ada": "ada-admin-pass", "rita": "rita-review-pass", "vic": "vic-viewer-pass"}
ROLES = {"ada": "admin", "rita": "reviewer", "vic": "viewer"}


@pytest.fixture()
def console(tmp_path: Path) -> Iterator[str]:
    store = Store(tmp_path / "sessions.duckdb")
    for name, role in ROLES.items():
        auth.add_user(store.con, name, role, PASSWORDS[name], datetime.now(UTC) - timedelta(minutes=1))
    policy = SecurityPolicy(delay=timedelta(0))  # no wait between failures: the lock after ten is the point here
    app = create_app(store, ConsoleConfig(ReviewDue(24, 24, 72), "c" * 48, security=policy))
    with served_app(app) as base:
        yield base
    store.close()


def test_in_chromium_an_old_session_cookie_is_refused_after_logout_password_reset_and_role_change(
    console: str, tmp_path: Path
) -> None:
    if not Path(CHROMIUM).exists():
        need_browser(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need_browser("Playwright for Python is not installed (pip install playwright; never playwright install)")
    base = console
    shots = Path(os.environ.get("DEALTRAIL_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)

    def sign_in(page: Any, name: str, password: str) -> None:
        page.goto(base + "/login")
        page.fill("input[name=username]", name)
        page.fill("input[name=password]", password)
        page.click("button[type=submit]")
        page.wait_for_load_state()

    def cookie(context: Any) -> dict[str, Any]:
        found = [c for c in context.cookies() if c["name"] == "dealtrail_session"]
        assert found, "no session cookie"
        return dict(found[0])

    def refused(browser: Any, old: dict[str, Any]) -> bool:
        """The old cookie, in a fresh context, no longer opens the findings page."""
        ctx = browser.new_context()
        try:
            ctx.add_cookies([{k: old[k] for k in ("name", "value", "domain", "path")}])
            p = ctx.new_page()
            p.goto(base + "/findings")
            return "/login" in p.url
        finally:
            ctx.close()

    def admin(page: Any, form_of: str, op: str, **fields: str) -> None:
        page.goto(base + "/admin/users")
        form = page.locator(f'tr:has(td:text-is("{form_of}")) form:has(input[name=op][value={op}])')
        for name, value in fields.items():
            if name == "role":
                form.locator("select[name=role]").select_option(value)
            else:
                form.locator(f"input[name={name}]").fill(value)
        form.locator("button[type=submit]").click()
        page.wait_for_load_state()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            rita_ctx, ada_ctx = browser.new_context(), browser.new_context()
            rita, ada = rita_ctx.new_page(), ada_ctx.new_page()
            sign_in(ada, "ada", PASSWORDS["ada"])
            assert "/login" not in ada.url

            # logout: the cookie from before it is refused
            sign_in(rita, "rita", PASSWORDS["rita"])
            assert "/login" not in rita.url
            old = cookie(rita_ctx)
            assert not refused(browser, old)  # the cookie opens pages while the session lasts
            rita.click("form.who button[type=submit]")
            rita.wait_for_url("**/login")
            assert refused(browser, old)

            # an admin resets the password: the session in use ends at once
            sign_in(rita, "rita", PASSWORDS["rita"])
            old = cookie(rita_ctx)
            admin(ada, "rita", "password")
            assert "password of rita reset" in ada.content()
            one_time = ada.inner_text("#one-time-password")
            assert refused(browser, old)
            rita.goto(base + "/findings")
            assert "/login" in rita.url

            # the one-time password leads only to setting her own
            sign_in(rita, "rita", one_time)
            assert rita.url.endswith("/account/password")
            rita.fill("input[name=current]", one_time)
            rita.fill("input[name=new]", "rita-second-pass")
            rita.fill("input[name=repeated]", "rita-second-pass")
            rita.click("button[type=submit]")
            rita.wait_for_load_state()

            # an admin changes the role: the same
            assert "/login" not in rita.url and "/account/password" not in rita.url
            old = cookie(rita_ctx)
            admin(ada, "rita", "role", role="viewer")
            assert "rita is now viewer" in ada.content()
            assert refused(browser, old)

            # ten wrong passwords lock the account; the right one then gets 429 and the message
            vic = browser.new_page()
            statuses = []
            for _ in range(10):
                with vic.expect_response(lambda r: r.url.endswith("/login") and r.request.method == "POST") as resp:
                    sign_in(vic, "vic", "not the password")
                statuses.append(resp.value.status)
            assert statuses == [401] * 9 + [429]
            with vic.expect_response(lambda r: r.url.endswith("/login") and r.request.method == "POST") as resp:
                sign_in(vic, "vic", PASSWORDS["vic"])
            assert resp.value.status == 429
            assert "This account is locked after 10 failed sign-ins" in vic.locator("p.error").inner_text()
            vic.screenshot(path=str(shots / "login-locked.png"))

            # the admin reads the failures and the lock, with the client's address
            ada.goto(base + "/admin/access?user=vic")
            text = ada.locator("table.grid").inner_text()
            assert text.count("login_failed\trefused") == 10 and "login_locked\tlocked" in text
            assert "127.0.0.1" in text
            ada.screenshot(path=str(shots / "access-log.png"), full_page=True)
        finally:
            browser.close()
