"""The control chart on the console's dealer and table pages (issue 50, items 2 to 4): the picture,
the signals list linked to the findings behind each signal, signals reviewed (acknowledge, note,
close) and baselines frozen from the page, each with its role check, CSRF and access-log entry."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from fastapi.testclient import TestClient

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.simulator.month import MonthSpec, Raise, write_month
from projections.models.reviews import ReviewDue
from projections.records import access_log, baselines
from projections.store.store import Store

START = datetime(2026, 11, 2, tzinfo=UTC)
RAISED = Raise("D-TCP-01-2", START + timedelta(days=7), START + timedelta(days=14), 5.0)
NOW = START + timedelta(days=22)
PASSWORD = "control-chart-pass"


@pytest.fixture(scope="module")
def month_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("control-pages") / "month.duckdb"
    write_month(str(db), MonthSpec(tables=3, days=21, start=START, seed=3, raises=(RAISED,)))
    with Store(db) as store:
        for name, role in (("mona", "manager"), ("rob", "reviewer"), ("vic", "viewer")):
            auth.add_user(store.con, name, role, PASSWORD, START)
    return db


@pytest.fixture()
def store(month_db: Path, tmp_path: Path) -> Iterator[Store]:
    db = tmp_path / "pages.duckdb"
    db.write_bytes(month_db.read_bytes())
    s = Store(db)
    yield s
    s.close()


def _client(store: Store, name: str) -> TestClient:
    client = TestClient(create_app(store, ConsoleConfig(ReviewDue(24, 24, 72), "k" * 48, clock=lambda: NOW)))
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
    assert csrf
    data = {"username": name, "password": PASSWORD, "csrf": csrf.group(1), "next": "/", "code": ""}
    assert client.post("/login", data=data, follow_redirects=False).status_code == 303
    return client


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found
    return found.group(1)


def _logged(store: Store, client: TestClient, kind: str) -> list[dict[str, object]]:
    client.app.state.console.access.flush()  # type: ignore[attr-defined]
    rows, _ = access_log.entries(store.con, access_log.LogFilter(kind=kind), None)
    return list(reversed(rows))


def test_the_dealer_page_shows_the_chart_and_each_signal_linked_to_its_findings(store: Store) -> None:
    client = _client(store, "rob")
    page = client.get(f"/dealers/{RAISED.dealer_id}?period=30d")
    assert page.status_code == 200
    src = re.search(r'<img class="control-chart" src="data:image/svg\+xml;base64,([^"]+)"', page.text)
    assert src
    svg = base64.b64decode(src.group(1))
    assert svg.startswith(b"<svg") and b"<script" not in svg
    assert "no baseline frozen" in page.text
    assert '<b aria-current="true">by week</b>' in page.text  # a dealer is judged by week unless set
    rows = re.findall(r"<tr><td>(\d+)</td><td>([0-9-]+ [0-9:]+)</td>", page.text)
    assert rows and all(datetime(2026, 11, 9) <= datetime.fromisoformat(when) < datetime(2026, 11, 17)
                        for _, when in rows)  # fmt: skip
    link = re.search(r'<a href="(/findings\?[^"]+)">(\d+) findings</a>', page.text)
    assert link
    query = parse_qs(urlparse(link.group(1).replace("&amp;", "&")).query)
    assert query["dealer"] == [RAISED.dealer_id]
    listed = client.get(link.group(1).replace("&amp;", "&"))
    assert listed.status_code == 200 and RAISED.dealer_id in listed.text
    # another dealer of the same table: a chart, no signal
    quiet = client.get("/dealers/D-TCP-01-1?period=30d")
    assert "No signal in the period." in quiet.text and 'class="control-chart"' in quiet.text
    table = client.get("/tables/TCP-01?period=30d&slot=week")
    assert table.status_code == 200 and "by week" in table.text and 'class="control-chart"' in table.text


def test_the_dealer_slot_setting_chooses_the_dealer_page_s_first_chart(store: Store) -> None:
    from dealtrail.settings import ControlSettings

    client = _client(store, "rob")
    config = client.app.state.console.config  # type: ignore[attr-defined]
    client.app.state.console.config = replace(config, control=ControlSettings(dealer_slot="shift"))  # type: ignore[attr-defined]
    page = client.get(f"/dealers/{RAISED.dealer_id}?period=30d").text
    assert '<b aria-current="true">by shift</b>' in page and 'href="?period=30d&amp;slot=week">by week</a>' in page
    shifts = re.findall(r"<tr><td>(\d+)</td><td>([0-9-]+ [0-9:]+)</td>", page)
    assert len(shifts) >= 4  # the raised week's shifts
    assert all(datetime(2026, 11, 9) <= datetime.fromisoformat(when) < datetime(2026, 11, 16) for _, when in shifts)
    # a table's page offers no shift chart
    assert "by shift" not in client.get("/tables/TCP-01?period=30d&slot=shift").text


def test_a_signal_is_reviewed_like_a_finding_with_roles_csrf_and_the_access_log(store: Store) -> None:
    rob = _client(store, "rob")
    page = rob.get(f"/dealers/{RAISED.dealer_id}?period=30d").text
    signal = re.search(r'name="signal" value="([^"]+)"', page)
    assert signal
    back = f"/dealers/{RAISED.dealer_id}?period=30d"
    form = {"csrf": _csrf(page), "signal": signal.group(1), "back": back}
    done = rob.post("/control/signals", data={**form, "action": "acknowledge"}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].startswith(back)
    refused = rob.post("/control/signals", data={**form, "action": "close", "note": ""}, follow_redirects=False)
    assert refused.status_code == 422  # a close says what was looked at
    rob.post("/control/signals", data={**form, "action": "close", "note": "new shuffler; talked it over"})
    assert rob.post("/control/signals", data={**form, "csrf": "forged", "action": "reopen"}).status_code == 403
    after = rob.get(back).text
    assert "closed" in after and "new shuffler; talked it over" in after and "acknowledge by rob" in after
    vic = _client(store, "vic")
    vpage = vic.get(back).text
    assert 'action="/control/signals"' not in vpage  # a viewer gets no form
    assert vic.post("/control/signals", data={**form, "csrf": _csrf(vpage), "action": "reopen"}).status_code == 403
    entries = _logged(store, rob, "signal_review")
    assert [(e["user_name"], e["outcome"]) for e in entries] == [("rob", "ok"), ("rob", "refused"), ("rob", "ok"),
                                                                  ("vic", "refused")]  # fmt: skip
    history = store.con.execute("SELECT action FROM signal_reviews ORDER BY reviewed_at, rowid").fetchall()
    assert [a for (a,) in history] == ["acknowledge", "close"]  # appended, never changed


def test_a_manager_freezes_the_period_shown_as_a_baseline_the_page_then_names(store: Store) -> None:
    mona = _client(store, "mona")
    back = f"/dealers/{RAISED.dealer_id}?period=7d"
    page = mona.get(back).text
    fields = dict(re.findall(r'<input type="hidden" name="(kind|slot|start|end)" value="([^"]+)"', page))
    form = {"csrf": _csrf(page), "back": back, "note": "a quiet week", **fields}
    rob = _client(store, "rob")
    assert rob.post("/control/baselines", data={**form, "csrf": _csrf(rob.get(back).text)}).status_code == 403
    done = mona.post("/control/baselines", data=form, follow_redirects=False)
    assert done.status_code == 303
    frozen = baselines.history(store.con)
    assert len(frozen) == 1 and frozen[0].frozen_by == "mona" and frozen[0].note == "a quiet week"
    assert f"baseline {frozen[0].baseline_id} frozen by mona" in mona.get(back).text
    entries = _logged(store, mona, "baseline_frozen")
    assert [(e["user_name"], e["outcome"]) for e in entries] == [("rob", "refused"), ("mona", "ok")]


def test_the_period_report_draws_the_chart_of_the_dealer_that_signalled_and_names_the_baseline(
    month_db: Path, tmp_path: Path
) -> None:
    from projections.reports.report import write_report

    week = (RAISED.start, RAISED.end)
    files = write_report(month_db, tmp_path / "report", *week, generated_at=NOW, control=(100, 1.4427, 8.0, "week"))
    html = files.html.read_text(encoding="utf-8")
    assert 'id="control-charts"' in html and "no baseline frozen" in html
    charts = re.findall(r'<img src="data:image/svg\+xml;base64,[^"]+" alt="Control chart of (\w+) ([^"]+)"', html)
    assert ("dealer", RAISED.dealer_id) in charts
    assert all(subject in (RAISED.dealer_id, "TCP-01") for _, subject in charts)  # the dealer, or its table
    # a week before the raise: nothing signalled, said in words
    quiet = write_report(month_db, tmp_path / "quiet", START, START + timedelta(days=7), generated_at=NOW)
    assert "No dealer's or table's chart signalled in the period (9 dealers and 3 tables charted)" in (
        quiet.html.read_text(encoding="utf-8")
    )
