"""The compliance console over a small audited store: reviews as events, their projection (status,
due time, late flag), access (sessions, CSRF, roles, tokens), the pages and the JSON API, all
through FastAPI's TestClient (the same application ``dealtrail serve`` runs)."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, card_face, create_app
from projections.models import reviews
from projections.models.reviews import FindingFilter, ReviewDue
from projections.records import staff, users
from projections.reports.report import incidents as report_incident_rows
from projections.reports.report import query, write_report
from projections.store.store import Store
from schemas.reviews import REVIEW_ADAPTER, Cause, FindingDisposed

DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
PASSWORDS = {"ada": "ada-admin-pass", "rita": "rita-review-pass", "vic": "vic-viewer-pass"}
ROLES = {"ada": "admin", "rita": "reviewer", "vic": "viewer"}


class Clock:
    """A settable clock (the console's ``now``)."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture()
def store(audited_shift: Path, tmp_path: Path) -> Iterator[Store]:
    db = tmp_path / "console.duckdb"
    shutil.copy(audited_shift, db)
    s = Store(db)
    at = datetime(2026, 11, 1, tzinfo=UTC)
    for name, role in ROLES.items():
        auth.add_user(s.con, name, role, PASSWORDS[name], at)
    yield s
    s.close()


@pytest.fixture()
def clock(store: Store) -> Clock:
    last = store.con.execute("SELECT max(observed_at) FROM findings").fetchall()[0][0]
    return Clock(last + timedelta(hours=1))


@pytest.fixture()
def client(store: Store, clock: Clock) -> TestClient:
    return TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock)))


def login(client: TestClient, name: str) -> None:
    page = client.get("/login")
    csrf = _csrf(page.text)
    r = client.post("/login", data={"username": name, "password": PASSWORDS[name], "csrf": csrf, "next": "/"})
    assert r.status_code == 200 and "Floor" in r.text


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field in the form"
    return m.group(1)


def token(store: Store, name: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + auth.new_token(store.con, name, datetime.now(UTC))}


def first_finding(store: Store, severity: str | None = None) -> str:
    rows, _ = reviews.find(store.con, FindingFilter(severity=severity), DUE, datetime.now(UTC), limit=1)
    return str(rows[0]["finding_id"])


# -- review events and their projection ------------------------------------------------------


def test_review_events_decode_by_type_and_reject_an_unknown_cause() -> None:
    raw = {
        "type": "FindingDisposed",
        "review_id": "01J000",
        "finding_id": "ab" * 16,
        "user": "rita",
        "reviewed_at": "2026-11-27T20:00:00+00:00",
        "cause": "DEALER_ERROR",
        "corrective_action": "retrained",
    }
    event = REVIEW_ADAPTER.validate_python(raw)
    assert isinstance(event, FindingDisposed) and event.cause is Cause.DEALER_ERROR
    with pytest.raises(ValidationError):
        REVIEW_ADAPTER.validate_python({**raw, "cause": "BAD_LUCK"})
    with pytest.raises(ValidationError):  # naive times are refused at the edge
        REVIEW_ADAPTER.validate_python({**raw, "reviewed_at": "2026-11-27T20:00:00"})


def test_review_status_is_the_latest_review_event_and_the_history_keeps_every_one(
    client: TestClient, store: Store, clock: Clock
) -> None:
    fid = first_finding(store, "procedural")  # a disposition with a cause and an action alone
    headers = token(store, "rita")
    steps = [
        ({"action": "acknowledge"}, "acknowledged"),
        ({"action": "assign", "assignee": "ada"}, "assigned"),
        ({"action": "dispose", "cause": "DEALER_ERROR", "corrective_action": "dealer retrained"}, "disposed"),
        ({"action": "reopen", "note": "video shows a second exposure"}, "reopened"),
    ]
    for i, (body, status) in enumerate(steps):
        clock.now += timedelta(minutes=1)
        r = client.post(f"/api/v1/findings/{fid}/reviews", json=body, headers=headers)
        assert r.status_code == 201, r.text
        got = client.get(f"/api/v1/findings/{fid}", headers=headers).json()
        assert got["review_status"] == status
        assert len(got["reviews"]) == i + 1
    final = client.get(f"/api/v1/findings/{fid}", headers=headers).json()
    assert final["cause"] is None and final["assignee"] == "ada"  # reopened: no disposition in force
    assert [r["type"] for r in final["reviews"]] == [
        "FindingAcknowledged",
        "FindingAssigned",
        "FindingDisposed",
        "FindingReopened",
    ]
    assert all(r["user_name"] == "rita" for r in final["reviews"])


def test_a_finding_disposed_as_not_a_violation_stays_in_every_list_shown_apart(
    client: TestClient, store: Store
) -> None:
    fid = first_finding(store, "procedural")
    before = client.get("/api/v1/findings", headers=token(store, "vic")).json()["total"]
    r = client.post(
        f"/api/v1/findings/{fid}/reviews",
        json={"action": "dispose", "cause": "NOT_A_VIOLATION", "note": "card was a cut card"},
        headers=token(store, "rita"),
    )
    assert r.status_code == 201
    listed = client.get("/api/v1/findings", headers=token(store, "vic")).json()
    assert listed["total"] == before
    row = next(f for f in listed["findings"] if f["finding_id"] == fid)
    assert row["review_status"] == "disposed" and row["cause"] == "NOT_A_VIOLATION"
    login(client, "vic")
    page = client.get("/findings").text
    assert "not a violation" in page and 'class="nav-row"' in page


def test_review_is_late_after_the_due_time_of_its_severity(store: Store) -> None:
    rows, _ = reviews.find(store.con, FindingFilter(), DUE, datetime(1970, 1, 1, tzinfo=UTC))
    assert rows and not any(r["review_late"] for r in rows)
    for r in rows:
        hours = 72 if r["severity"] == "procedural" else 24
        assert r["review_due_at"] - r["detected_at"] == timedelta(hours=hours)
    proc = next(r for r in rows if r["severity"] == "procedural")
    # 25 hours on: voiding and integrity findings are late, procedural ones not yet
    at = proc["detected_at"] + timedelta(hours=25)
    later, _ = reviews.find(store.con, FindingFilter(finding_id=proc["finding_id"]), DUE, at)
    assert later[0]["review_late"] is False
    voiding = next((r for r in rows if r["severity"] != "procedural"), None)
    assert voiding is not None
    late, _ = reviews.find(
        store.con, FindingFilter(finding_id=voiding["finding_id"]), DUE, voiding["detected_at"] + timedelta(hours=25)
    )
    assert late[0]["review_late"] is True
    # a disposition in time is never late, however late the clock
    reviews.append_review(
        store.con,
        FindingDisposed(
            review_id="R1",
            finding_id=voiding["finding_id"],
            user="rita",
            reviewed_at=voiding["detected_at"] + timedelta(hours=2),
            cause=Cause.DEVICE,
        ),
    )
    done, _ = reviews.find(
        store.con, FindingFilter(finding_id=voiding["finding_id"]), DUE, datetime(2100, 1, 1, tzinfo=UTC)
    )
    assert done[0]["review_late"] is False and done[0]["review_status"] == "disposed"


def test_a_review_stored_twice_is_stored_once(store: Store) -> None:
    fid = first_finding(store)
    ev = FindingDisposed(
        review_id="R-dup", finding_id=fid, user="rita", reviewed_at=datetime.now(UTC), cause=Cause.PATRON
    )
    assert reviews.append_review(store.con, ev) is True
    assert reviews.append_review(store.con, ev) is False
    assert len(reviews.history(store.con, fid)) == 1


def test_report_and_summary_json_give_review_status(store: Store, tmp_path: Path) -> None:
    fid = first_finding(store)
    reviews.append_review(
        store.con,
        FindingDisposed(
            review_id="R2", finding_id=fid, user="rita", reviewed_at=datetime.now(UTC), cause=Cause.NOT_A_VIOLATION
        ),
    )
    files = write_report(store.con, tmp_path / "r", review_due=DUE)
    figures = json.loads(files.summary.read_text())
    rv = figures["reviews"]
    assert rv["by_review_status"]["disposed"] == 1
    assert rv["not_a_violation"] == 1
    assert sum(rv["by_review_status"].values()) == figures["findings"]["total"]  # review statuses count incidents
    assert isinstance(rv["late"], int)
    html = files.html.read_text()
    assert "<h2>Reviews</h2>" in html and "Disposed as not a violation" in html


# -- access ----------------------------------------------------------------------------------


def test_no_page_asset_or_api_call_without_authentication(client: TestClient, store: Store) -> None:
    fid = first_finding(store)
    pages = ["/", "/findings", f"/findings/{fid}", "/findings.csv", "/reports", "/admin/users", "/static/console.js"]
    for path in [*pages, "/tables/TCP-01", "/floor/tables"]:
        r = client.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/login"), path
    for path in ("/api/v1/findings", f"/api/v1/findings/{fid}", "/api/v1/openapi.json", "/api/v1/floor"):
        assert client.get(path).status_code == 401, path
    r = client.post(f"/api/v1/findings/{fid}/reviews", json={"action": "acknowledge"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert client.get("/api/v1/findings", headers={"Authorization": "Bearer dt_not-a-token"}).status_code == 401


def test_api_review_contract_401_403_201_and_the_review_is_listed_with_its_user(
    client: TestClient, store: Store
) -> None:
    fid = first_finding(store)
    body = {
        "action": "dispose",
        "cause": "DEALER_ERROR",
        "note": "dealer exposed the card",
        "corrective_action": "coached",
    }
    assert client.post(f"/api/v1/findings/{fid}/reviews", json=body).status_code == 401
    assert client.post(f"/api/v1/findings/{fid}/reviews", json=body, headers=token(store, "vic")).status_code == 403
    r = client.post(f"/api/v1/findings/{fid}/reviews", json=body, headers=token(store, "rita"))
    assert r.status_code == 201
    assert r.json()["type"] == "FindingDisposed" and r.json()["user"] == "rita"
    listed = client.get("/api/v1/findings", params={"review_status": "disposed"}, headers=token(store, "vic")).json()
    assert [(f["finding_id"], f["last_reviewed_by"], f["cause"]) for f in listed["findings"]] == [
        (fid, "rita", "DEALER_ERROR")
    ]
    # a dispose without a cause, an assignment to nobody, an unknown finding
    h = token(store, "rita")
    assert client.post(f"/api/v1/findings/{fid}/reviews", json={"action": "dispose"}, headers=h).status_code == 422
    assert (
        client.post(
            f"/api/v1/findings/{fid}/reviews", json={"action": "assign", "assignee": "nobody"}, headers=h
        ).status_code
        == 409  # a well-formed request: who can be assigned is the store's to say (issue 47, item 7)
    )
    assert client.post(f"/api/v1/findings/{fid}/reviews", json={"action": "shrug"}, headers=h).status_code == 422
    assert (
        client.post("/api/v1/findings/" + "0" * 32 + "/reviews", json={"action": "acknowledge"}, headers=h).status_code
        == 404
    )


def test_api_findings_filters_by_status_table_rule_severity_and_period(client: TestClient, store: Store) -> None:
    h = token(store, "vic")
    everything = client.get("/api/v1/findings", headers=h).json()["findings"]
    assert everything
    f = everything[len(everything) // 2]
    for key, value, field in (("table", f["table_id"], "table_id"), ("rule", f["rule_id"], "rule_id"),
                              ("severity", f["severity"], "severity"), ("status", f["status"], "status")):  # fmt: skip
        got = client.get("/api/v1/findings", params={key: value}, headers=h).json()["findings"]
        assert got and all(g[field] == value for g in got)
        assert len(got) == sum(1 for e in everything if e[field] == value)
    t = f["detected_at"]
    after = (datetime.fromisoformat(t) + timedelta(microseconds=1)).isoformat()
    window = client.get("/api/v1/findings", params={"from": t, "to": after}, headers=h)
    assert f["finding_id"] in [g["finding_id"] for g in window.json()["findings"]]
    assert all(g["detected_at"] == t for g in window.json()["findings"])
    assert client.get("/api/v1/findings", params={"from": "yesterday"}, headers=h).status_code == 422
    one = client.get(f"/api/v1/findings/{f['finding_id']}", headers=h).json()
    assert one["citation"] and one["evidence_event_ids"] and one["reviews"] == []


def test_openapi_document_describes_the_api(client: TestClient, store: Store) -> None:
    doc = client.get("/api/v1/openapi.json", headers=token(store, "vic")).json()
    assert {"/api/v1/findings", "/api/v1/findings/{finding_id}", "/api/v1/findings/{finding_id}/reviews"} <= set(
        doc["paths"]
    )
    assert "/findings" not in doc["paths"]  # pages are not API


def test_login_refuses_a_wrong_password_and_sets_a_strict_httponly_cookie(store: Store, clock: Clock) -> None:
    client = TestClient(create_app(store, ConsoleConfig(DUE, "k" * 48, clock=clock)))
    csrf = _csrf(client.get("/login").text)
    bad = client.post("/login", data={"username": "ada", "password": "wrong password", "csrf": csrf})
    assert bad.status_code == 401 and "Wrong name or password" in bad.text
    r = client.post(
        "/login", data={"username": "ada", "password": PASSWORDS["ada"], "csrf": csrf}, follow_redirects=False
    )
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "secure" not in cookie
    https = TestClient(
        create_app(store, ConsoleConfig(DUE, "k" * 48, secure_cookies=True, clock=clock)), base_url="https://testserver"
    )
    csrf = _csrf(https.get("/login").text)
    r = https.post(
        "/login", data={"username": "ada", "password": PASSWORDS["ada"], "csrf": csrf}, follow_redirects=False
    )
    assert "secure" in r.headers["set-cookie"].lower()


def test_every_form_needs_its_csrf_token_and_a_viewer_cannot_review(client: TestClient, store: Store) -> None:
    fid = first_finding(store)
    login(client, "rita")
    r = client.post(f"/findings/{fid}/reviews", data={"action": "acknowledge", "csrf": "forged"})
    assert r.status_code == 403
    assert client.post("/logout", data={"csrf": "forged"}).status_code == 403
    csrf = _csrf(client.get(f"/findings/{fid}").text)
    r = client.post(
        f"/findings/{fid}/reviews", data={"action": "acknowledge", "csrf": csrf, "note": "<script>alert(1)</script>"}
    )
    assert r.status_code == 200 and "Review recorded: acknowledge" in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text and "<script>alert(1)" not in r.text
    viewer = TestClient(client.app)
    login(viewer, "vic")
    page = viewer.get(f"/findings/{fid}").text
    assert "Add a review" not in page
    r = viewer.post(f"/findings/{fid}/reviews", data={"action": "acknowledge", "csrf": _csrf(page)})
    assert r.status_code == 403


def test_every_response_carries_a_strict_content_security_policy(client: TestClient) -> None:
    r = client.get("/login")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe" not in csp
    assert "frame-ancestors 'none'" in csp and r.headers["x-content-type-options"] == "nosniff"
    assert "<script" not in r.text.replace('<script src="/static/console.js"', "")


def test_admin_page_manages_users_and_only_an_admin_sees_it(client: TestClient, store: Store) -> None:
    login(client, "ada")
    page = client.get("/admin/users")
    csrf = _csrf(page.text)
    r = client.post(
        "/admin/users",
        data={"csrf": csrf, "op": "add", "name": "sam", "role": "reviewer"},
    )
    assert r.status_code == 200 and "user sam saved" in r.text
    one_time = re.search(r'id="one-time-password">([^<]+)<', r.text)
    assert one_time  # shown once; sam sets his own with it
    with store.con.cursor() as cur:
        added = users.user(cur, "sam")
        assert added is not None and added["must_change"]  # the console's clock, not the wall's
        auth.change_password(cur, "sam", one_time.group(1), "sam-password-1", "sam-password-1", added["changed_at"])
    r = client.post("/admin/users", data={"csrf": csrf, "op": "token", "name": "sam"})
    assert r.status_code == 422 and "a token acts only as the user who made it" in r.text  # sam makes his own
    sam = auth.new_token(store.con, "sam", datetime.now(UTC))
    assert client.get("/api/v1/findings", headers={"Authorization": "Bearer " + sam}).status_code == 200
    r = client.post("/admin/users", data={"csrf": csrf, "op": "deactivate", "name": "sam"})
    assert client.get("/api/v1/findings", headers={"Authorization": "Bearer " + sam}).status_code == 401
    chosen = client.post(
        "/admin/users", data={"csrf": csrf, "op": "add", "name": "tom", "role": "viewer", "password": "tom-password-1"}
    )
    assert chosen.status_code == 422 and "does not choose another person" in chosen.text
    assert users.user(store.con, "tom") is None
    stored = store.con.execute("SELECT password_hash FROM dim_users WHERE name = 'sam'").fetchall()[0][0]
    assert stored.startswith("$argon2id$") and "sam-password-1" not in stored
    viewer = TestClient(client.app)
    login(viewer, "vic")
    assert viewer.get("/admin/users").status_code == 403
    assert "/admin/users" not in viewer.get("/").text


# -- pages -----------------------------------------------------------------------------------


def test_floor_lists_every_table_with_open_findings_by_severity(client: TestClient, store: Store) -> None:
    login(client, "vic")
    floor = client.get("/api/v1/floor").json()
    tables = floor["tables"]
    stored = {r[0] for r in store.con.execute("SELECT DISTINCT table_id FROM events").fetchall()}
    assert {t["table_id"] for t in tables} == stored
    open_total = sum(t["open_voiding"] + t["open_integrity"] + t["open_procedural"] for t in tables)
    # nothing is disposed here: every incident is open on the floor, each consequence under its cause
    report_incidents = report_incident_rows(query(store.con, "rpt_findings").to_pylist())
    assert open_total == len(report_incidents) == floor["totals"]["incidents"]
    assert floor["totals"]["records"] == store.con.execute("SELECT count(*) FROM dim_findings").fetchall()[0][0]
    assert all(t["dealer_id"] and t["rounds"] > 0 for t in tables)
    page = client.get("/").text
    assert 'data-refresh="/floor/tables"' in page and all(t["table_id"] in page for t in tables)


def test_findings_page_filters_sorts_paginates_and_exports_the_filtered_view_as_csv(
    client: TestClient, store: Store
) -> None:
    login(client, "vic")
    total = store.con.execute("SELECT count(*) FROM dim_findings").fetchall()[0][0]
    page = client.get("/findings").text
    assert f">{total:,} finding records<" in page
    table = store.con.execute("SELECT table_id FROM dim_findings GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchall()[
        0
    ][0]
    n = store.con.execute("SELECT count(*) FROM dim_findings WHERE table_id = ?", [table]).fetchall()[0][0]
    rows = list(
        csv.DictReader(
            io.StringIO(client.get("/findings.csv", params={"table": table, "sort": "rule", "order": "asc"}).text)
        )
    )
    assert len(rows) == n and {r["table_id"] for r in rows} == {table}
    assert [r["rule_id"] for r in rows] == sorted(r["rule_id"] for r in rows)
    assert all(r["detected_at"].endswith("+00:00") for r in rows)
    if total > 50:
        second = client.get("/findings", params={"page": 2}).text
        assert "page 2 of" in second


def test_csv_export_quotes_cells_a_spreadsheet_would_run() -> None:
    from dealtrail.console.app import _csv

    text = _csv([{"finding_id": "f1", "dealer_id": '=HYPERLINK("http://x")', "message": "+1 card", "table_id": "T1"}])
    row = next(csv.DictReader(io.StringIO(text)))
    assert row["dealer_id"] == '\'=HYPERLINK("http://x")' and row["message"] == "'+1 card" and row["table_id"] == "T1"


def test_finding_page_shows_rule_evidence_remedy_and_the_round_as_a_table_layout(
    client: TestClient, store: Store
) -> None:
    row = store.con.execute(
        "SELECT finding_id FROM dim_findings WHERE round_id IS NOT NULL AND required_remedy IS NOT NULL LIMIT 1"
    ).fetchall()
    assert row
    login(client, "vic")
    html = client.get(f"/findings/{row[0][0]}").text
    assert 'class="felt"' in html and 'class="pc' in html
    assert "58 Pa. Code" in html and "Required:" in html and "Evidence" in html
    assert re.search(r"<details class=\"ids\"><summary>IDs and hashes</summary>", html)  # hashes folded away


def test_card_faces_have_suit_symbols_and_red_for_hearts_and_diamonds() -> None:
    assert card_face("KH") == {"rank": "K", "suit": "♥", "red": True, "label": "K♥"}
    assert card_face("TC")["label"] == "10♣" and card_face("TC")["red"] is False
    assert card_face("JK")["label"] == "Joker"
    assert card_face("UNKNOWN")["label"] == "unknown card"


def test_dealer_and_table_pages_give_findings_per_1000_rounds(client: TestClient, store: Store) -> None:
    login(client, "vic")
    dealer, rounds = store.con.execute(
        "SELECT dealer_id, count(*) FROM rounds GROUP BY 1 ORDER BY 2 DESC LIMIT 1"
    ).fetchall()[0]
    html = client.get(f"/dealers/{dealer}").text
    assert f"<b>{rounds:,}</b><span>rounds dealt</span>" in html and "per 1,000 rounds" in html and "<svg" in html
    table = store.con.execute("SELECT table_id FROM rounds LIMIT 1").fetchall()[0][0]
    html = client.get(f"/tables/{table}").text
    n = store.con.execute("SELECT count(*) FROM rounds WHERE table_id = ?", [table]).fetchall()[0][0]
    # incidents, as the report and the floor count them (a consequence is counted under its cause)
    from projections.models import incidents

    f = incidents.counts(store.con, DUE, datetime.now(UTC), FindingFilter(table_id=table)).incidents
    assert f"<b>{round(1000 * f / n, 1)}</b>" in html
    assert client.get("/dealers/nobody").status_code == 404


def test_dealer_and_table_rates_from_the_summary_equal_those_from_every_revision(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rates pages count incidents from ``sum_findings``; a store without it counts them from
    the detections less the read model's consequences: both give the same figures."""
    from dealtrail.console import pages
    from projections.store import summaries

    con = store.con
    dealer = con.execute("SELECT dealer_id FROM rounds GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchall()[0][0]
    table = con.execute("SELECT table_id FROM findings GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchall()[0][0]
    last = con.execute("SELECT max(completed_at) FROM rounds").fetchall()[0][0]
    scopes = [(dealer, None, None, None), (None, table, None, None), (dealer, None, last - timedelta(hours=3), last)]
    from_summary = [pages._rates(con, *scope) for scope in scopes]
    assert any(r["findings"] for r in from_summary)
    real = summaries.has_summary
    monkeypatch.setattr(summaries, "has_summary", lambda c, name: False if name == "sum_findings" else real(c, name))
    assert [pages._rates(con, *scope) for scope in scopes] == from_summary


def test_reports_page_writes_the_report_of_any_period_and_lists_scheduled_ones(
    store: Store, clock: Clock, tmp_path: Path
) -> None:
    periods = tmp_path / "periods"
    write_report(store.con, periods / "2026-11-27T18", review_due=DUE)
    client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, reports_dir=periods, clock=clock)))
    login(client, "vic")
    assert "2026-11-27T18" in client.get("/reports").text
    r = client.get("/reports/scheduled/2026-11-27T18/report.html")
    assert r.status_code == 200 and "style-src 'unsafe-inline'" in r.headers["content-security-policy"]
    assert client.get("/reports/scheduled/..%2F..%2Fetc/passwd").status_code == 404
    view = client.get("/reports/view", params={"from": "2000-01-01T00:00:00+00:00", "to": "2100-01-01T00:00:00+00:00"})
    assert (
        view.status_code == 200
        and "<h2>Reviews</h2>" in view.text
        and "script-src" not in view.headers["content-security-policy"]
    )


# -- the user commands -----------------------------------------------------------------------


def test_users_commands_store_hashes_print_the_token_last_and_refuse_a_held_store(
    audited_shift: Path, tmp_path: Path
) -> None:
    db = tmp_path / "u.duckdb"
    shutil.copy(audited_shift, db)
    runner = CliRunner()
    r = runner.invoke(cli, ["users", "add", "rita", "--role", "reviewer", "--db", str(db)], input="a long password\n")
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["users", "add", "x", "--role", "boss", "--db", str(db)], input="a long password\n")
    assert r.exit_code == 2 and "error:" in r.output and "Traceback" not in r.output
    r = runner.invoke(cli, ["users", "token", "rita", "--db", str(db)], input="a long password\n")
    assert r.exit_code == 0
    tok = r.output.split()[-1]
    assert tok.startswith("dt_") and len(tok) > 40
    with Store(db) as s:
        found = users.token_user(s.con, auth.token_hash(tok))
        assert found == {"name": "rita", "role": "reviewer", "issued_by": "rita"}
        text = (
            s.con.execute("SELECT * FROM api_tokens").fetchall().__repr__()
            + s.con.execute("SELECT * FROM console_users").fetchall().__repr__()
        )
        assert tok not in text and "a long password" not in text
        held = runner.invoke(cli, ["users", "token", "rita", "--db", str(db)], input="a long password\n")
        assert held.exit_code == 1 and "one writer per file" in held.output and "Traceback" not in held.output
    r = runner.invoke(cli, ["users", "token", "nobody", "--db", str(db)], input="a long password\n")
    assert r.exit_code == 1 and "no active user" in r.output


def test_floor_device_state_is_the_engines_a_fault_cleared_by_a_good_shuffle_is_not_shown(
    client: TestClient, store: Store
) -> None:
    """The floor's device column is the engine's own stored state (rulebook 10.3.1: a fault ends
    with a clearing shuffle of its deck), read by projections.models.device_state, not SQL beside it."""
    from projections.models.device_state import device_state

    login(client, "vic")
    tables = {t["table_id"]: t for t in client.get("/api/v1/floor").json()["tables"]}
    faults = store.con.execute("SELECT DISTINCT table_id FROM events WHERE type = 'ShufflerFaulted'").fetchall()
    assert faults, "the shift should have shuffler faults"
    for table_id, text in store.con.execute(
        """SELECT table_id, state::VARCHAR FROM table_states
           QUALIFY row_number() OVER (PARTITION BY table_id ORDER BY last_seq DESC) = 1"""
    ).fetchall():
        state = json.loads(text)
        assert tables[table_id]["device_state"] == device_state(state)["status"], table_id
        if not state["shuffler_fault"] and not state["unusable"]:
            assert all(d["fault_event_id"] is None for d in state["decks"].values()) is (
                tables[table_id]["device_state"] == "in service"
            )


@pytest.mark.parametrize(
    ("body", "named", "kind"),
    [
        (b'{"action": "acknowledge", "action": "dispose"}', "'action'", "application/json"),
        (b'{"action": "acknowledge", "action": "dispose"}', "'action'", "APPLICATION/JSON"),
        (b'{"action": "acknowledge", "action": "dispose"}', "'action'", "text/plain"),
        (
            b'{"action": "acknowledge", "note": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "nest deeper",
            "application/json",
        ),
    ],
)
def test_a_json_body_with_a_key_twice_or_nested_too_deep_is_refused_with_a_reason(
    client: TestClient, store: Store, body: bytes, named: str, kind: str
) -> None:
    # whatever the case of the Content-Type (FastAPI reads the body as JSON all the same)
    fid = first_finding(store)
    headers = {**token(store, "rita"), "content-type": kind}
    r = client.post(f"/api/v1/findings/{fid}/reviews", content=body, headers=headers)
    if named == "nest deeper":  # FastAPI's own parser gives up first: a 400 with its reason, never a 500
        assert r.status_code == 400 and "parsing the body" in r.text
    elif kind == "text/plain":  # not read as JSON at all: refused, and nothing recorded
        assert r.status_code == 422, r.text
    else:
        assert r.status_code == 422
        detail = r.json()["detail"]
        assert isinstance(detail, list) and detail[0]["msg"].startswith("malformed_json") and named in detail[0]["msg"]
    with store.con.cursor() as cur:
        assert cur.execute("SELECT count(*) FROM reviews").fetchone() == (0,)  # nothing recorded


def test_a_finding_page_replays_its_round_once_and_within_a_bound_it_names(
    client: TestClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dealtrail.investigate.replay_view as replay_view

    login(client, "vic")
    fid = store.con.execute(
        "SELECT finding_id FROM dim_findings WHERE severity = 'voiding' AND round_id IS NOT NULL ORDER BY 1 LIMIT 1"
    ).fetchall()[0][0]
    calls: list[str] = []
    real = replay_view.replay_window

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(str(args[2]))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(replay_view, "replay_window", counted)
    html = client.get(f"/findings/{fid}").text
    assert "The round as it lay" in html and "is not drawn" not in html
    assert len(calls) == 1, "the layout and the picture share one replay of the round"
    # snapshots of another engine (before an upgrade): the page says why, instead of replaying the history
    monkeypatch.setattr(replay_view, "PAGE_REPLAY_EVENTS", 0)
    html = client.get(f"/findings/{fid}").text
    assert "The round as it lay" not in html
    assert "The round is not drawn: the window lies" in html and "dealtrail reaudit" in html
    assert "not in this store's trail" not in html, "the evidence is stored: the page must not say it is not"
    assert len(calls) == 2, "the picture is not attempted again after the page's replay was refused"


def test_a_findings_evidence_far_from_its_detection_is_still_shown(
    client: TestClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dealtrail.console import pages

    login(client, "vic")
    fid, ids = store.con.execute(
        """SELECT finding_id, evidence_event_ids FROM dim_findings WHERE len(evidence_event_ids) > 1
           ORDER BY observed_at LIMIT 1"""
    ).fetchall()[0]
    near = _evidence_ids(client.get(f"/findings/{fid}").text)
    monkeypatch.setattr(pages, "EVENTS_NEAR", timedelta(0))  # every evidence event outside the first look
    far = _evidence_ids(client.get(f"/findings/{fid}").text)
    assert near == far and sorted(near) == sorted(ids)


def _evidence_ids(html: str) -> list[str]:
    """The evidence table's event IDs, in the page's order (seq)."""
    section = html.split("<h2>Evidence</h2>", 1)[1].split("</table>", 1)[0]
    return re.findall(r"<code>event ([^<]+)</code>", section)


def test_a_rounds_first_and_last_seq_are_the_same_looked_for_near_it_or_anywhere(store: Store) -> None:
    from dealtrail.investigate.replay import round_seqs

    rows = store.con.execute(
        """SELECT table_id, round_id, min(seq), max(seq), min(occurred_at) FROM events WHERE round_id IS NOT NULL
           GROUP BY ALL ORDER BY 1, 2 LIMIT 20"""
    ).fetchall()
    assert rows
    for table, round_id, first, last, at in rows:
        for near in (None, at, at - timedelta(days=3)):  # near it, or so far that the first look finds nothing
            assert round_seqs(store.con, table, round_id, near=near) == (first, last)
    assert round_seqs(store.con, rows[0][0], "no-such-round", near=rows[0][4]) is None


def test_the_supervisor_on_duty_is_the_same_given_the_rounds_last_seq_or_looking_for_it(store: Store) -> None:
    """The finding page hands the round's last seq it read for the replay to the supervisor on
    duty: the answer is the one the supervisor's own look gives, near the detection or far from it."""
    from dealtrail.investigate.replay import round_seqs

    rows = store.con.execute(
        """SELECT table_id, round_id, max(observed_at) FROM findings WHERE round_id IS NOT NULL
           GROUP BY ALL ORDER BY 1, 2 LIMIT 25"""
    ).fetchall()
    assert rows
    named = 0
    for table, round_id, at in rows:
        bounds = round_seqs(store.con, table, round_id, near=at)
        assert bounds is not None
        for when in (at, at + timedelta(days=3)):
            looked = staff.supervisor_on_duty(store.con, table, round_id, when)
            assert staff.supervisor_on_duty(store.con, table, round_id, when, bounds[1]) == looked
            named += looked is not None
    assert named  # the trail names floorpersons: the comparison is not of two Nones


def test_the_console_freezes_its_start_up_heap_once_per_process(
    store: Store, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As it starts (its lifespan: `dealtrail serve`, the streaming console), the console moves
    what is alive into the collector's permanent generation, once per process."""
    import threading

    from dealtrail.console import app as app_module

    frozen: list[int] = []
    monkeypatch.setattr(app_module, "_heap_frozen", threading.Event())
    monkeypatch.setattr(app_module.gc, "freeze", lambda: frozen.append(1))
    for _ in range(2):
        with TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock))) as started:
            assert started.get("/healthz").status_code == 200
    assert frozen == [1]
