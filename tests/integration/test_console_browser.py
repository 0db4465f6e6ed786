"""The compliance console in a real browser: Debian's Chromium driven by Playwright (never a
downloaded browser) through sign-in, filtering, opening a finding, acknowledging and disposing it,
and watching the floor pick up a finding stored while it is open. Any console message of the page
(script error, CSP violation) or any failed request or HTTP error fails the test.

The console runs in this process under uvicorn on a free loopback port, built by the same
``create_app`` that ``dealtrail serve`` runs, so that the new finding can be written through the
server's own writer (its ``Store``), as the audit or projector path would.

Screenshots of each page go to ``DEALTRAIL_SHOTS`` when that folder is set (else the test's
temporary folder). Skips without Chromium or Playwright unless ``DEALTRAIL_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from projections.models.reviews import ReviewDue
from projections.store.store import Store
from schemas.findings import Finding, finding_id_for
from tests.helpers import need_browser, served_app

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "rita-review-pass"


@pytest.fixture()
def console(audited_shift: Path, tmp_path: Path) -> Iterator[tuple[str, Store]]:
    db = tmp_path / "browser.duckdb"
    shutil.copy(audited_shift, db)
    store = Store(db)
    auth.add_user(store.con, "rita", "reviewer", PASSWORD, datetime.now(UTC))
    app = create_app(store, ConsoleConfig(ReviewDue(24, 24, 72), "b" * 48, poll_seconds=0.5))
    with served_app(app) as base:
        yield base, store
    store.close()


def _store_new_finding(store: Store, table_id: str) -> Finding:
    """A new finding at ``table_id``, written through the server's store (its one writer)."""
    cur = store.con.execute(
        """SELECT * FROM dim_findings WHERE table_id = ? AND severity = 'integrity'
           ORDER BY observed_at DESC LIMIT 1""",
        [table_id],
    )
    cols = [d[0] for d in cur.description]
    rows = cur.fetchall()
    assert rows, f"no integrity finding at {table_id} to copy"
    base: dict[str, Any] = dict(zip(cols, rows[0], strict=True))
    evidence = ("BROWSER-TEST-EVIDENCE-1",)
    finding = Finding.model_validate(
        {
            **{k: base[k] for k in ("rule_id", "citation", "game", "severity", "provisional", "table_id", "round_id")},
            "finding_id": finding_id_for(base["rule_id"], evidence),
            "revision": 0,
            "evidence_event_ids": evidence,
            "required_remedy": None,
            "status": "open",
            "message": "Stored while the floor page is open (browser test).",
            "trigger_event_id": evidence[0],
            "observed_at": base["observed_at"] + timedelta(minutes=1),
        }
    )
    store.write_batch([], findings=[finding])
    return finding


def test_console_in_chromium_login_filter_review_and_live_floor(console: tuple[str, Store], tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        need_browser(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need_browser("Playwright for Python is not installed (pip install playwright; never playwright install)")
    base, store = console
    shots = Path(os.environ.get("DEALTRAIL_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    leaving_floor = threading.Event()

    def failed(request: Any) -> None:
        # a poll of the floor still in flight when the test navigates away is cancelled by the
        # browser (net::ERR_ABORTED): that is the navigation, not a failure of the console
        if leaving_floor.is_set() and request.url.endswith("/floor/tables") and request.failure == "net::ERR_ABORTED":
            return
        problems.append(f"request failed: {request.url} {request.failure}")

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", failed)
            page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)

            # sign in: an unauthenticated visit lands on the login page
            page.goto(base + "/findings")
            assert "/login" in page.url
            page.screenshot(path=str(shots / "01-login.png"))
            page.fill("input[name=username]", "rita")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r".*/findings$"))

            # filter: one table's findings
            table = store.con.execute(
                "SELECT table_id FROM dim_findings GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
            ).fetchall()[0][0]
            page.select_option("select[name=table]", table)
            page.click("form.filters button[type=submit]")
            page.wait_for_url(re.compile(rf".*table={table}.*"))
            cells = page.locator("table.findings tbody tr td:nth-child(3)").all_inner_texts()  # after the bulk tick box
            assert cells and set(cells) == {table}
            page.screenshot(path=str(shots / "02-findings.png"), full_page=True)

            # open a finding, acknowledge it, then dispose it
            page.locator("table.findings tbody tr td.t a").first.click()
            page.wait_for_url(re.compile(r".*/findings/[0-9a-f]{32}$"))
            assert page.locator("h2", has_text="The rule").count() == 1
            page.select_option("select[name=action]", "acknowledge")
            page.fill("textarea[name=note]", "Seen on the floor camera.")
            page.click("form.review button[type=submit]")
            page.wait_for_url(re.compile(r".*done=acknowledge.*"))
            page.select_option("select[name=action]", "dispose")
            page.select_option("select[name=cause]", "DEALER_ERROR")
            page.fill("input[name=corrective_action]", "Dealer coached on the stub count.")
            page.fill("textarea[name=note]", "Stub recounted with the floor.")  # a voiding or integrity one needs it
            page.click("form.review button[type=submit]")
            page.wait_for_url(re.compile(r".*done=dispose.*"))
            history = page.locator("ol.timeline").inner_text()
            assert "Acknowledged by rita" in history and "Disposed by rita" in history and "DEALER_ERROR" in history
            assert page.locator(".badge.rv-disposed").count() >= 1
            page.screenshot(path=str(shots / "03-finding.png"), full_page=True)

            # the floor picks up a finding stored while it is open
            page.goto(base + "/")
            cell = page.locator(f'tr[data-table="{table}"] td:nth-child(7)')
            before = int(cell.inner_text().strip())
            _store_new_finding(store, table)
            page.wait_for_function(
                """([t, n]) => {
                       const c = document.querySelector(`tr[data-table="${t}"] td:nth-child(7)`);
                       return c && parseInt(c.innerText.trim(), 10) === n;
                   }""",
                arg=[table, before + 1],
                timeout=15_000,
            )
            assert "Updated" in page.locator("#floor-updated").inner_text()
            page.screenshot(path=str(shots / "04-floor.png"), full_page=True)

            leaving_floor.set()
            page.goto(base + f"/tables/{table}")
            assert "per 1,000 rounds" in page.content()
            page.screenshot(path=str(shots / "05-table.png"), full_page=True)
        finally:
            browser.close()
    assert problems == []
