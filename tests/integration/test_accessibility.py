"""Every page of the console and a report, checked by axe-core in a real browser (issue 36): no
serious or critical violation of WCAG 2.1 AA (contrast, labels, landmarks, headings, nested
interactive elements) on the floor, findings, a finding, the replay, a case, the reports page,
a period report as the console serves it, the users, staff and access-log pages, sign-in and
an error page, and on the report the console writes for a chosen span; and on every console page
no violation of axe's best-practice rules at any impact (landmarks, one top-level heading).

axe-core is the copy ``axe-playwright-python`` carries (no download); Debian's Chromium is
driven by Playwright. Screenshots of each page go to ``DEALTRAIL_SHOTS`` when that folder is
set (else the test's temporary folder). Skips without Chromium, Playwright or the axe package
unless ``DEALTRAIL_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.reporting.schedule import Schedule, run_due
from projections.models.reviews import ReviewDue
from projections.store.store import Store
from tests.helpers import need_browser, served_app

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-sync", "--no-first-run"]
PASSWORD = "ada-admin-pass"
START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
NOW = START + timedelta(hours=3)
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
BLOCKING = {"serious", "critical"}


@pytest.fixture()
def served(audited_shift: Path, tmp_path: Path) -> Iterator[tuple[str, Store, Path]]:
    """The audited small shift with an admin and its hourly period reports, served by uvicorn."""

    db = tmp_path / "a11y.duckdb"
    shutil.copy(audited_shift, db)
    periods = tmp_path / "periods"
    with Store(db) as s:
        auth.add_user(s.con, "ada", "admin", PASSWORD, datetime(2026, 11, 1, tzinfo=UTC))
    assert run_due(db, periods, Schedule("0 * * * *"), NOW)
    store = Store(db)
    config = ConsoleConfig(ReviewDue(24, 24, 72), "a" * 48, reports_dir=periods, poll_seconds=5)
    app = create_app(store, config)
    with served_app(app) as base:
        yield base, store, periods
    store.close()


def _blocking(results: dict[str, Any]) -> list[str]:
    """One line per serious or critical violation, and per violation of a best-practice rule
    whatever its impact (landmarks, one top-level heading: issue 47, item 7): rule, impact,
    count and the first targets."""
    lines = []
    for v in results.get("violations", []):
        if v.get("impact") in BLOCKING or "best-practice" in v.get("tags", []):
            nodes = v.get("nodes", [])
            targets = ", ".join(str(n.get("target")) for n in nodes[:3])
            lines.append(f"{v['id']} ({v['impact']}, {len(nodes)}): {v['help']} e.g. {targets}")
    return lines


def _pages(store: Store, periods: Path) -> list[tuple[str, str]]:
    """(name, path) of every page the test visits after signing in."""
    con = store.con
    finding_id, table_id, round_id = con.execute(
        """SELECT finding_id, table_id, round_id FROM dim_findings WHERE round_id IS NOT NULL
           ORDER BY observed_at LIMIT 1"""
    ).fetchall()[0]
    label = sorted(p.name for p in periods.iterdir() if p.is_dir())[0]
    return [
        ("floor", "/"),
        ("findings", "/findings"),
        ("finding", f"/findings/{finding_id}"),
        ("replay", f"/replay?table={table_id}&round={round_id}"),
        ("case", f"/cases/{finding_id}"),
        ("table", f"/tables/{table_id}"),
        ("reports", "/reports"),
        ("period-report", f"/reports/scheduled/{label}/rev-0001/report.html"),
        ("report", "/reports/view?from=2026-11-27T18:00:00Z&to=2026-11-27T19:00:00Z"),
        ("users", "/admin/users"),
        ("staff", "/admin/staff"),
        ("access-log", "/admin/access"),
        ("property", "/admin/property"),
        ("one-time-code", "/account/totp"),
        ("password", "/account/password"),
        ("not-found", "/findings/" + "0" * 32),
    ]


def test_axe_finds_no_serious_or_critical_violation_on_any_console_page_or_report(
    served: tuple[str, Store, Path], tmp_path: Path
) -> None:
    if not Path(CHROMIUM).exists():
        need_browser(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from axe_playwright_python.sync_playwright import Axe
        from playwright.sync_api import sync_playwright
    except ImportError:
        need_browser("Playwright or axe-playwright-python is not installed (make install)")
    base, store, periods = served
    shots = Path(os.environ.get("DEALTRAIL_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    axe = Axe()
    options = {"runOnly": {"type": "tag", "values": WCAG_AA}, "resultTypes": ["violations"]}
    found: dict[str, list[str]] = {}

    def check(page: Any, name: str) -> None:
        page.screenshot(path=str(shots / f"a11y-{name}.png"), full_page=True)
        lines = _blocking(axe.run(page, options=options).response)
        if lines:
            found[name] = lines

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            # the pages' own CSP forbids injected scripts; axe is the test's, not the page's
            page = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True).new_page()
            page.goto(base + "/login")
            check(page, "sign-in")
            page.fill("input[name=username]", "ada")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r".*/$"))
            for name, path in _pages(store, periods):
                page.goto(base + path)
                page.wait_for_load_state("networkidle" if name == "replay" else "load")
                check(page, name)
        finally:
            browser.close()
    report = "\n".join(f"{name}:\n  " + "\n  ".join(lines) for name, lines in found.items())
    assert not found, "axe-core found serious or critical violations:\n" + report
