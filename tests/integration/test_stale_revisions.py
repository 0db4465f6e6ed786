"""A report is signed current, or knowingly (issue 36): the Reports page says whether a period's
latest revision is current (no event or review since its as-of); a manager writes a new revision
from the console, whose process holds the store; signing a stale revision needs a confirmation,
recorded in the sign-off. In Chromium (the browser test) and through the HTTP routes."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.reporting.schedule import Schedule, run_due, stale_since
from projections.models.reviews import ReviewDue
from projections.store.store import Store
from tests.helpers import served_app

START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
NOW = START + timedelta(hours=3)
LABEL = "2026-11-27T1800+0000_UTC"
PASSWORD = "meg-manager-pass"
CHROMIUM = "/usr/bin/chromium"
DUE = ReviewDue(24, 24, 72)


@pytest.fixture
def db(audited_shift: Path, tmp_path: Path) -> Path:
    """The audited small shift with a manager, and its hourly reports written as of NOW."""
    path = tmp_path / "s.duckdb"
    shutil.copy(audited_shift, path)
    with Store(path) as s:
        auth.add_user(s.con, "meg", "manager", PASSWORD, datetime(2026, 11, 1, tzinfo=UTC))
    assert len(run_due(path, tmp_path / "periods", Schedule("0 * * * *"), NOW)) == 2
    return path


def _finding_of_the_hour(store: Store) -> str:
    rows = store.con.execute(
        "SELECT finding_id FROM dim_findings WHERE observed_at >= ? AND observed_at < ? ORDER BY observed_at LIMIT 1",
        [START, START + timedelta(hours=1)],
    ).fetchall()
    return str(rows[0][0])


def _login(client: TestClient) -> str:
    csrf = _csrf(client.get("/login").text)
    client.post("/login", data={"username": "meg", "password": PASSWORD, "csrf": csrf, "next": "/reports"})
    return _csrf(client.get("/reports").text)


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m
    return m.group(1)


def _row(html: str) -> str:
    return next(r for r in html.split("<tr>") if f'id="{LABEL}"' in r)


def test_a_review_after_the_as_of_makes_the_revision_stale_and_signing_it_needs_a_recorded_confirmation(
    db: Path, tmp_path: Path
) -> None:
    periods = tmp_path / "periods"
    with Store(db) as store:
        clock = lambda: NOW + timedelta(minutes=10)  # noqa: E731
        client = TestClient(create_app(store, ConsoleConfig(DUE, "m" * 48, reports_dir=periods, clock=clock)))
        csrf = _login(client)
        assert "current" in _row(client.get("/reports").text)
        finding = _finding_of_the_hour(store)
        done = client.post(f"/findings/{finding}/reviews", data={"action": "acknowledge", "note": "seen", "csrf": csrf})
        assert done.status_code == 200
        row = _row(client.get("/reports").text)
        assert "stale" in row and "1 review(s) since its as-of" in row and "Write a new revision" in row
        assert stale_since(store.con, periods / LABEL, clock()) == "1 review(s) since its as-of"
        url = f"/reports/scheduled/{LABEL}/rev-0001/sign"
        refused = client.post(url, data={"statement": "Reviewed.", "csrf": csrf})
        assert refused.status_code == 409 and "not current" in refused.text
        assert not (periods / LABEL / "rev-0001" / "signoff.json").exists()
        signed = client.post(url, data={"statement": "Reviewed.", "csrf": csrf, "stale_ok": "yes"})
        assert signed.status_code == 200
    record = json.loads((periods / LABEL / "rev-0001" / "signoff.json").read_text())
    assert record["signed_stale"] == "1 review(s) since its as-of" and record["signed_by"] == "meg"


def test_a_reviewer_cannot_write_a_new_revision(db: Path, tmp_path: Path) -> None:
    with Store(db) as store:
        auth.add_user(store.con, "rita", "reviewer", "rita-review-pass", datetime(2026, 11, 1, tzinfo=UTC))
        client = TestClient(create_app(store, ConsoleConfig(DUE, "m" * 48, reports_dir=tmp_path / "periods")))
        csrf = _csrf(client.get("/login").text)
        client.post("/login", data={"username": "rita", "password": "rita-review-pass", "csrf": csrf, "next": "/"})
        csrf = _csrf(client.get("/reports").text)
        assert client.post(f"/reports/scheduled/{LABEL}/revise", data={"csrf": csrf}).status_code == 403
    assert not (tmp_path / "periods" / LABEL / "rev-0002").exists()


@pytest.fixture
def served(db: Path, tmp_path: Path) -> Iterator[tuple[str, Store, Path]]:
    periods = tmp_path / "periods"
    store = Store(db)  # serve holds the store: no other process may write it
    clock = lambda: NOW + timedelta(minutes=10)  # noqa: E731
    app = create_app(store, ConsoleConfig(DUE, "m" * 48, reports_dir=periods, clock=clock))
    with served_app(app) as base:
        yield base, store, periods
    store.close()


@pytest.mark.browser
def test_in_chromium_a_manager_sees_a_stale_revision_writes_a_new_one_while_serve_holds_the_store_and_signs_it(
    served: tuple[str, Store, Path], tmp_path: Path
) -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("DEALTRAIL_REQUIRE_BROWSER") == "1":
            pytest.fail(f"no Chromium at {CHROMIUM}")
        pytest.skip(f"no Chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    base, store, periods = served
    shots = Path(os.environ.get("DEALTRAIL_SHOTS") or tmp_path)
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.goto(base + "/login")
            page.fill("input[name=username]", "meg")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r".*/$"))
            # a review made after the revision's as-of
            page.goto(base + f"/findings/{_finding_of_the_hour(store)}")
            page.select_option("select[name=action]", "acknowledge")
            page.fill("textarea[name=note]", "Seen after the report was written.")
            page.click("form.review button[type=submit]")
            page.wait_for_url(re.compile(r".*done=acknowledge.*"))
            page.goto(base + "/reports")
            cell = page.locator(f'td[id="{LABEL}"]')
            assert "stale" in cell.inner_text() and "1 review(s) since its as-of" in cell.inner_text()
            page.screenshot(path=str(shots / "reports-stale.png"), full_page=True)
            cell.locator("button", has_text="Write a new revision").click()
            page.wait_for_url(re.compile(r".*/reports\?revised=yes.*"))
            cell = page.locator(f'td[id="{LABEL}"]')
            assert "revision 2" in cell.inner_text() and "current" in cell.inner_text()
            cell.locator("button", has_text="Sign revision 2").click()
            page.wait_for_url(re.compile(r".*/reports#.*"))
            cell = page.locator(f'td[id="{LABEL}"]')
            assert "signed by meg" in cell.inner_text() and "knowing it was stale" not in cell.inner_text()
            page.screenshot(path=str(shots / "reports-signed.png"), full_page=True)
        finally:
            browser.close()
    assert problems == []
    record: dict[str, Any] = json.loads((periods / LABEL / "rev-0002" / "signoff.json").read_text())
    assert record["revision"] == 2 and "signed_stale" not in record
