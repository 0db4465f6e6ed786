"""A newcomer's path through the console with ``DEALTRAIL_TIMEZONE=America/New_York`` (issue 47,
item 2), in Debian's Chromium: every page (the floor, the findings, a finding and its case, the
step-through replay once its script has drawn a step, the dealers, the tables, the Reports page
with a signed period, the staff, the access log, the users, the property) shows its times in New
York with their offset and to the second: no UTC instant (``+00:00``, ``Z``), no microseconds.

The console is built from the settings as ``dealtrail serve`` builds it (``_console_config``).
Screenshots go to ``DEALTRAIL_SHOTS`` when set (else the test's temporary folder). Skips without
Chromium or Playwright unless ``DEALTRAIL_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ulid import ULID

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.reporting.schedule import Schedule, run_due
from projections.records import access_log, users
from projections.records.report_revisions import latest
from projections.records.signoff import logged_detail, record_sha256, sign
from projections.store.store import Store
from schemas.access import AccessEntry
from tests.helpers import need_browser, served_app

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
NY = "America/New_York"
PASSWORD = "ada-admin-local-times"
NOW = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)
UTC_TIME = re.compile(r"\d\d:\d\d(:\d\d)?(\.\d+)?(\+00:00|Z\b)|\d\d:\d\d:\d\d\.\d{3,}")
"""A time of day shown in UTC, or with a fraction of a second."""


@pytest.fixture()
def console(audited_shift: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Store]]:
    from dealtrail.cli.console import _console_config
    from dealtrail.settings import load

    for key in list(os.environ):
        if key.upper().startswith("DEALTRAIL_") and key not in (
            "DEALTRAIL_PYTHON",
            "DEALTRAIL_SHOTS",
            "DEALTRAIL_REQUIRE_BROWSER",
        ):
            monkeypatch.delenv(key)
    monkeypatch.setenv("DEALTRAIL_TIMEZONE", NY)
    db = tmp_path / "local.duckdb"
    shutil.copy(audited_shift, db)
    periods = tmp_path / "periods"
    store = Store(db)
    auth.add_user(store.con, "ada", "admin", PASSWORD, NOW - timedelta(days=30))
    users.put_profile(store.con, "ada", "Ada Lindqvist", "Director of Compliance", NOW - timedelta(days=30), "cli")
    written = run_due(store.con, periods, Schedule("shift", NY), NOW)
    assert written, "no shift report written"
    period = written[0].parent if written[0].name.startswith("rev-") else written[0]
    rev = period / str(latest(period)["folder"])  # type: ignore[index]
    sign(rev, "ada", "admin", "Reviewed.", NOW, profile=users.profile(store.con, "ada"), zone=NY)
    digest = record_sha256(rev)
    assert digest is not None  # recorded in the access log, as the console and sign-report record it
    entry = AccessEntry(
        entry_id=str(ULID()), at=NOW, user="ada", client="cli", kind="report_signed", outcome="ok",
        detail=logged_detail(rev, digest),
    )  # fmt: skip
    access_log.append(store.con, [entry])
    config = _console_config(load(), db)
    assert isinstance(config, ConsoleConfig)
    config = dataclasses.replace(config, reports_dir=periods, clock=lambda: NOW, poll_seconds=60)
    with served_app(create_app(store, config)) as base:
        yield base, store
    store.close()


def test_every_page_of_the_tour_shows_new_york_times_with_their_offset_and_no_utc_instant(
    console: tuple[str, Store], tmp_path: Path
) -> None:
    if not Path(CHROMIUM).exists():
        need_browser(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need_browser("no playwright")
    base, store = console
    shots = Path(os.environ.get("DEALTRAIL_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    f = store.con.execute(
        """SELECT f.finding_id, f.table_id, f.round_id, r.dealer_id FROM dim_findings f
           JOIN rounds r USING (table_id, round_id) WHERE r.dealer_id IS NOT NULL ORDER BY f.observed_at LIMIT 1"""
    ).fetchall()[0]
    pages = {
        "floor": "/",
        "findings": "/findings",
        "finding": f"/findings/{f[0]}",
        "case": f"/cases/{f[0]}",
        "replay": f"/replay?table={f[1]}&round={f[2]}&finding={f[0]}",
        "dealer": f"/dealers/{f[3]}",
        "table": f"/tables/{f[1]}",
        "reports": "/reports",
        "staff": "/admin/staff",
        "access": "/admin/access",
        "users": "/admin/users",
        "property": "/admin/property",
    }
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(base + "/login")
        page.fill("input[name=username]", "ada")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")
        seen: dict[str, str] = {}
        for name, path in pages.items():
            page.goto(base + path)
            page.wait_for_load_state("networkidle")
            if name == "replay":
                page.wait_for_function("document.body.innerText.includes('-05:00')", timeout=30_000)
            values = page.eval_on_selector_all("input", "els => els.map(e => e.placeholder + ' ' + e.value).join(' ')")
            text = page.inner_text("body") + "\n" + values  # what a form offers as an example too
            page.screenshot(path=str(shots / f"local-{name}.png"), full_page=False)
            seen[name] = text
            shown = [m.group(0) for m in UTC_TIME.finditer(text)]
            assert not shown, f"{name} ({path}) shows UTC or fractional times: {shown[:5]}"
            assert "times in America/New_York" in text, name
        browser.close()
    assert re.search(r"2026-11-27 1\d:\d\d:\d\d-05:00", seen["replay"])  # the step's time, to the second
    assert "Ada Lindqvist, Director of Compliance (console user ada, admin)" in seen["reports"]
    assert "2026-11-27 18:00:00-05:00" in seen["reports"]  # signed at NOW, in New York
