"""The staff roster: ``dealtrail staff import`` (good, Excel-saved and bad files), its events
(append-only revisions, the latest in force), the admin page (admins only, CSRF), the names
beside IDs on the console's pages, in the report, the exports and the notifications, the
supervisor on duty, and the charts over time that show empty hours as zero."""

from __future__ import annotations

import csv
import io
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.console.pages import fill_slots, period_bounds, slot_of
from dealtrail.ingest.roster import RosterFileError, plan_import
from projections.models.reviews import ReviewDue
from projections.records import staff
from projections.reports.report import time_slots, write_report
from projections.store.store import Store, connect_read_only
from schemas.staff import STAFF_ADAPTER

DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
PASSWORDS = {"ada": "ada-admin-pass", "rita": "rita-review-pass", "vic": "vic-viewer-pass"}
ROLES = {"ada": "admin", "rita": "reviewer", "vic": "viewer"}
AT = datetime(2026, 11, 1, tzinfo=UTC)


def _dealers(db: Path) -> list[str]:
    with Store(db) as s:
        return [str(r[0]) for r in s.con.execute("SELECT DISTINCT dealer_id FROM rounds ORDER BY 1").fetchall()]


def _roster_csv(dealers: list[str]) -> str:
    rows = ["staff_id,name,role"] + [f"{d},Dealer Nr {i},dealer" for i, d in enumerate(dealers)]
    return "\n".join([*rows, "FLOOR-1,Sam Super,supervisor"]) + "\n"


@pytest.fixture()
def db(audited_shift: Path, tmp_path: Path) -> Path:
    path = tmp_path / "staff.duckdb"
    shutil.copy(audited_shift, path)
    return path


@pytest.fixture()
def named(db: Path, tmp_path: Path) -> Iterator[tuple[Store, list[str]]]:
    """The audited shift with a roster imported by the command line and three console users."""
    dealers = _dealers(db)
    roster = tmp_path / "staff.csv"
    roster.write_text(_roster_csv(dealers))
    r = CliRunner().invoke(cli, ["staff", "import", str(roster), "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert f"{len(dealers) + 1} added" in r.output
    s = Store(db)
    for name, role in ROLES.items():
        auth.add_user(s.con, name, role, PASSWORDS[name], AT)
    yield s, dealers
    s.close()


def _client(store: Store) -> TestClient:
    last = store.con.execute("SELECT max(observed_at) FROM findings").fetchall()[0][0]
    return TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=lambda: last + timedelta(hours=1))))


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field in the form"
    return m.group(1)


def _login(client: TestClient, name: str) -> str:
    csrf = _csrf(client.get("/login").text)
    r = client.post("/login", data={"username": name, "password": PASSWORDS[name], "csrf": csrf, "next": "/"})
    assert r.status_code == 200
    return _csrf(r.text)


# -- names beside IDs ---------------------------------------------------------------------------


def test_names_from_an_imported_roster_appear_on_the_floor_finding_dealer_pages_and_in_the_report(
    named: tuple[Store, list[str]], tmp_path: Path
) -> None:
    store, dealers = named
    client = _client(store)
    assert "Dealer Nr" not in client.get("/login").text
    _login(client, "vic")  # a viewer: signed in, so names are shown
    floor = client.get("/").text
    assert f"Dealer Nr 0 ({dealers[0]})" in floor or any(f"Dealer Nr {i} ({d})" in floor for i, d in enumerate(dealers))
    assert "supervisor Sam Super (FLOOR-1)" in floor
    fid, dealer = store.con.execute(
        """SELECT f.finding_id, r.dealer_id FROM dim_findings f
           JOIN rounds r ON r.table_id = f.table_id AND r.round_id = f.round_id LIMIT 1"""
    ).fetchall()[0]
    i = dealers.index(dealer)
    page = client.get(f"/findings/{fid}").text
    assert f"Dealer Nr {i} ({dealer})" in page
    assert re.search(r"Supervisor on duty</dt><dd[^>]*>Sam Super \(FLOOR-1\)</dd>", page)
    listing = client.get("/findings", params={"dealer": dealer}).text
    assert f"Dealer Nr {i} ({dealer})" in listing
    dealer_page = client.get(f"/dealers/{dealer}").text
    assert f"<h1>Dealer Dealer Nr {i} ({dealer})</h1>" in dealer_page and "dealer on the roster" in dealer_page
    table = store.con.execute("SELECT table_id FROM rounds WHERE dealer_id = ? LIMIT 1", [dealer]).fetchall()[0][0]
    table_page = client.get(f"/tables/{table}").text
    assert "Supervisor on duty: Sam Super (FLOOR-1)" in table_page and f"Dealer Nr {i} ({dealer})" in table_page
    exported = list(csv.DictReader(io.StringIO(client.get("/findings.csv").text)))
    assert list(exported[0])[5:7] == ["dealer_id", "dealer_name"]
    assert {r["dealer_name"] for r in exported if r["dealer_id"] == dealer} == {f"Dealer Nr {i}"}
    files = write_report(store.con, tmp_path / "report", review_due=DUE)
    html = files.html.read_text()
    assert f"Dealer Nr {i} ({dealer})" in html
    rows = list(csv.DictReader(io.StringIO(files.csv.read_text())))
    assert {r["dealer_name"] for r in rows if r["dealer_id"] == dealer} == {f"Dealer Nr {i}"}


def test_a_name_a_spreadsheet_would_run_is_escaped_on_the_page_and_neutralised_in_the_export(
    named: tuple[Store, list[str]],
) -> None:
    store, dealers = named
    event = staff.revision(
        staff.current(store.con)[dealers[0]],
        change_id="01JSTAFF0000000000000000X1",
        staff_id=dealers[0],
        name="=HYPERLINK(1) <b>",
        role="dealer",
        active=True,
        recorded_by="ada",
        recorded_at=datetime.now(UTC) + timedelta(seconds=1),  # after the import's revision
        source="console",
    )
    assert event is not None and event.change == "changed"
    staff.append(store.con, [event])
    client = _client(store)
    _login(client, "rita")
    page = client.get(f"/dealers/{dealers[0]}").text
    assert "=HYPERLINK(1) &lt;b&gt;" in page and "HYPERLINK(1) <b>" not in page
    exported = list(csv.DictReader(io.StringIO(client.get("/findings.csv").text)))
    assert {r["dealer_name"] for r in exported if r["dealer_id"] == dealers[0]} == {"'=HYPERLINK(1) <b>"}


def test_without_a_roster_pages_show_ids_as_before(db: Path) -> None:
    with Store(db) as store:
        assert staff.names(store.con) == {}
        auth.add_user(store.con, "vic", "viewer", PASSWORDS["vic"], AT)
        client = _client(store)
        _login(client, "vic")
        dealer = _dealers_of(store)[0]
        assert f"<h1>Dealer {dealer}</h1>" in client.get(f"/dealers/{dealer}").text


def _dealers_of(store: Store) -> list[str]:
    return [str(r[0]) for r in store.con.execute("SELECT DISTINCT dealer_id FROM rounds ORDER BY 1").fetchall()]


def test_notifications_name_the_dealer_beside_the_id() -> None:
    from dealtrail.reporting.notify import DigestConfig, digest_text, message

    finding = {
        "severity": "voiding",
        "table_id": "T1",
        "round_id": "R1",
        "observed_at": AT,
        "message": "card exposed",
        "citation": "58 Pa. Code",
        "rule_id": "X",
        "finding_id": "ab" * 16,
    }
    assert "dealer Ann Lee (D-1)" in message(finding, None, staff.label("D-1", {"D-1": "Ann Lee"}))
    late = [{**finding, "dealer_id": "D-1", "review_due_at": AT, "review_status": "unreviewed", "assignee": None}]
    config = DigestConfig(at=datetime.min.time(), zone=ZoneInfo("UTC"), targets=(), due=DUE)
    text = digest_text(AT.date(), late, config, AT + timedelta(hours=2), None, {"D-1": "Ann Lee"})
    assert "dealer Ann Lee (D-1)" in text


# -- the import -----------------------------------------------------------------------------------


def test_an_excel_saved_roster_with_bom_crlf_quotes_and_windows_1252_reads_like_a_plain_one() -> None:
    plain = b'staff_id,name,role\nD-1,Ann Lee,dealer\nD-2,"Smith, Jos\xc3\xa9",dealer\nF-1,Sam Super,supervisor\n'
    excel = '\ufeffStaff ID,Name,Role,Active\r\nD-1,Ann Lee,Dealer,yes\r\n"D-2","Smith, José",dealer,\r\n'
    excel += 'F-1,"Sam ""Boss"" Super",SUPERVISOR,Y\r\n,,,\r\n'
    semicolons = "staff_id;name;role\r\nD-1;Ann Lee;dealer\r\nD-2;Smith, José;dealer\r\nF-1;Sam Super;supervisor\r\n"
    got = {}
    for label, data in (
        ("plain", plain),
        ("excel utf-8", excel.encode("utf-8")),
        ("excel ansi", excel.replace("\ufeff", "").encode("cp1252")),
        ("semicolons", semicolons.encode("utf-8-sig")),
    ):
        plan = plan_import(data, {}, "import:staff.csv", "cli", AT)
        assert plan.errors == [], label
        got[label] = {e.staff_id: (e.name, e.role, e.active) for e in plan.events}
    assert got["plain"]["D-2"] == ("Smith, José", "dealer", True)
    assert got["excel utf-8"] == got["excel ansi"]
    assert got["excel utf-8"]["F-1"] == ('Sam "Boss" Super', "supervisor", True)
    assert got["semicolons"] == got["plain"]


def test_bad_rows_each_get_one_line_and_nothing_is_stored_unless_partial(db: Path, tmp_path: Path) -> None:
    roster = tmp_path / "staff.csv"
    roster.write_text(
        "staff_id,name,role,active\n"
        "D-1,Ann Lee,dealer,yes\n"
        "D-2,,dealer,yes\n"  # line 3: no name
        "D-3,Bo Chan,croupier,yes\n"  # line 4: unknown role
        "D-1,Ann Again,dealer,yes\n"  # line 5: ID twice
        "D-4,Cy Dee,dealer,maybe\n"  # line 6: active
        "D-5,Di Eve\n"  # line 7: too few fields
        "F-1,Sam Super,supervisor,no\n"
    )
    r = CliRunner().invoke(cli, ["staff", "import", str(roster), "--db", str(db)])
    assert r.exit_code == 1
    lines = [ln for ln in r.stderr.splitlines() if ": line " in ln]
    assert [re.search(r"line (\d+)", ln).group(1) for ln in lines] == ["3", "4", "5", "6", "7"]  # type: ignore[union-attr]
    assert "role" in lines[1] and "already on line 2" in lines[2] and "yes or no" in lines[3] and "2 fields" in lines[4]
    assert "nothing stored" in r.stderr
    with Store(db) as s:
        assert staff.roster(s.con) == []
    r = CliRunner().invoke(cli, ["staff", "import", str(roster), "--db", str(db), "--partial"])
    assert r.exit_code == 1 and "5 bad row(s) not loaded" in r.stderr
    with Store(db) as s:
        assert {x["staff_id"]: x["active"] for x in staff.roster(s.con)} == {"D-1": True, "F-1": False}


def test_a_file_that_is_no_roster_is_refused_in_one_line(tmp_path: Path, db: Path) -> None:
    with pytest.raises(RosterFileError, match="missing column role"):
        plan_import(b"staff_id,name\nD-1,Ann\n", {}, "import:x", "cli", AT)
    with pytest.raises(RosterFileError, match="unknown column 'email'"):
        plan_import(b"staff_id,name,role,email\n", {}, "import:x", "cli", AT)
    bad = tmp_path / "x.csv"
    bad.write_bytes(b"")
    r = CliRunner().invoke(cli, ["staff", "import", str(bad), "--db", str(db)])
    assert r.exit_code == 2 and "header row" in r.stderr and "Traceback" not in r.output


def test_each_change_is_a_new_revision_and_the_same_file_twice_records_nothing(db: Path, tmp_path: Path) -> None:
    roster = tmp_path / "staff.csv"
    roster.write_text("staff_id,name,role\nD-1,Ann Lee,dealer\n")
    for _ in range(2):
        assert CliRunner().invoke(cli, ["staff", "import", str(roster), "--db", str(db)]).exit_code == 0
    roster.write_text("staff_id,name,role,active\nD-1,Ann Lee-Park,dealer,yes\n")
    r = CliRunner().invoke(cli, ["staff", "import", str(roster), "--db", str(db)])
    assert "1 changed" in r.output
    roster.write_text("staff_id,name,role,active\nD-1,Ann Lee-Park,dealer,no\n")
    CliRunner().invoke(cli, ["staff", "import", str(roster), "--db", str(db)])
    with Store(db) as s:
        history = staff.history(s.con, "D-1")
        assert [(h["change"], h["name"], h["active"]) for h in reversed(history)] == [
            ("added", "Ann Lee", True),
            ("changed", "Ann Lee-Park", True),
            ("deactivated", "Ann Lee-Park", False),
        ]
        assert all(h["recorded_by"] == "cli" and h["source"] == "import:staff.csv" for h in history)
        assert staff.names(s.con) == {"D-1": "Ann Lee-Park"}  # a deactivated dealer keeps a name beside old rounds
        payload = s.con.execute("SELECT payload FROM staff_changes LIMIT 1").fetchall()[0][0]
        assert STAFF_ADAPTER.validate_json(payload).staff_id == "D-1"
        assert staff.append(s.con, [STAFF_ADAPTER.validate_json(payload)]) == 0  # a redelivery adds nothing


# -- the admin page -------------------------------------------------------------------------------


def test_staff_admin_page_is_for_admins_only_needs_csrf_and_records_each_change(
    named: tuple[Store, list[str]],
) -> None:
    store, _ = named
    for who in ("vic", "rita"):
        c = _client(store)
        csrf = _login(c, who)
        assert c.get("/admin/staff").status_code == 403
        r = c.post("/admin/staff", data={"csrf": csrf, "op": "save", "staff_id": "D-9", "name": "X", "role": "dealer"})
        assert r.status_code == 403
    c = _client(store)
    _login(c, "ada")
    page = c.get("/admin/staff")
    assert page.status_code == 200 and "Sam Super" in page.text
    csrf = _csrf(page.text)
    r = c.post("/admin/staff", data={"csrf": "forged", "op": "save", "staff_id": "D-9", "name": "X", "role": "dealer"})
    assert r.status_code == 403
    nia = {"csrf": csrf, "op": "save", "staff_id": "D-9", "name": "Nia Ode"}
    r = c.post("/admin/staff", data={**nia, "role": "dealer"})
    assert r.status_code == 200 and "Nia Ode (D-9): added" in r.text
    r = c.post("/admin/staff", data={"csrf": csrf, "op": "save", "staff_id": "D-9", "name": "", "role": "croupier"})
    assert r.status_code == 422 and 'value="D-9"' in r.text and "role" in r.text  # the typed values kept
    c.post("/admin/staff", data={**nia, "role": "supervisor"})
    r = c.post("/admin/staff", data={"csrf": csrf, "op": "deactivate", "staff_id": "D-9"})
    assert "deactivated" in r.text
    history = staff.history(store.con, "D-9")
    assert [(h["change"], h["role"], h["active"], h["recorded_by"]) for h in reversed(history)] == [
        ("added", "dealer", True, "ada"),
        ("changed", "supervisor", True, "ada"),
        ("deactivated", "supervisor", False, "ada"),
    ]
    assert c.post("/admin/staff", data={"csrf": csrf, "op": "deactivate", "staff_id": "nobody"}).status_code == 422


def test_in_the_streaming_deployment_the_admin_page_publishes_the_change(named: tuple[Store, list[str]]) -> None:
    store, _ = named
    sent: list[object] = []
    client = _client(store)
    client.app.state.staff_sink = sent.extend  # type: ignore[attr-defined]
    _login(client, "ada")
    csrf = _csrf(client.get("/admin/staff").text)
    r = client.post(
        "/admin/staff", data={"csrf": csrf, "op": "save", "staff_id": "D-9", "name": "Nia Ode", "role": "dealer"}
    )
    assert r.status_code == 200 and "sent to the staff topic" in r.text
    assert [getattr(e, "staff_id", None) for e in sent] == ["D-9"]
    assert "D-9" not in staff.names(store.con)  # the projector stores it, not the console


def test_the_projector_reads_a_staff_record_keyed_by_its_id_and_refuses_another_key() -> None:
    from dealtrail.ingest.projector import _staff_event

    event = staff.revision(
        None,
        change_id="01JSTAFF0000000000000000X2",
        staff_id="D-1",
        name="Ann",
        role="dealer",
        active=True,
        recorded_by="ada",
        recorded_at=AT,
        source="console",
    )
    assert event is not None
    raw = event.model_dump_json().encode()
    assert _staff_event(b"D-1", raw) == event
    with pytest.raises(ValueError, match="staff_key_mismatch"):
        _staff_event(b"D-2", raw)


# -- charts over time -----------------------------------------------------------------------------


def test_hourly_rates_show_an_hour_without_rounds_as_zero() -> None:
    hours = [
        {"kind": "slot", "key": "2026-11-27 18:00", "severity": None, "findings": 2, "rounds": 40},
        {"kind": "slot", "key": "2026-11-27 21:00", "severity": None, "findings": 1, "rounds": 30},
    ]
    filled = fill_slots(hours)
    assert [h["key"][11:] for h in filled] == ["18:00", "19:00", "20:00", "21:00"]
    assert [(h["findings"], h["rounds"]) for h in filled] == [(2, 40), (0, 0), (0, 0), (1, 30)]
    assert fill_slots([]) == []
    days = [{**hours[0], "key": "2026-11-27 00:00"}, {**hours[1], "key": "2026-11-30 00:00"}]
    assert [h["key"][:10] for h in fill_slots(days, "day")] == ["2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30"]


def test_a_dealer_or_table_page_shows_a_period_ending_with_its_last_activity_in_slots_that_fit_it() -> None:
    last = datetime(2026, 3, 14, 21, 40, tzinfo=UTC)  # a dealer who left months ago: his last days
    start, end = period_bounds("7d", last)
    assert end == datetime(2026, 3, 14, 22, 0, tzinfo=UTC) and start == end - timedelta(days=7)
    assert period_bounds("all", last) == (None, end)
    assert slot_of(*period_bounds("1d", last), None) == "hour"
    assert slot_of(start, end, None) == "day"
    assert slot_of(start, end, end - timedelta(hours=20)) == "hour"  # 7 days asked, one day dealt
    assert slot_of(None, end, end - timedelta(hours=8)) == "hour"  # all of one shift
    assert slot_of(None, end, end - timedelta(days=365)) == "week"


def test_the_reports_chart_over_time_has_a_zero_slot_for_an_hour_without_findings() -> None:
    rows = [
        {"detected_at": datetime(2026, 11, 27, 18, 5, tzinfo=UTC), "severity": "voiding"},
        {"detected_at": datetime(2026, 11, 28, 1, 40, tzinfo=UTC), "severity": "procedural"},
    ]
    minutes, slots = time_slots(rows, UTC)
    assert minutes == 60 and len(slots) == 8
    assert slots[datetime(2026, 11, 27, 20)] == Counter()
    assert list(slots) == sorted(slots)


def test_a_version_1_roster_event_decodes_and_refuses_a_naive_time_or_an_unknown_field() -> None:
    golden = (
        b'{"type":"StaffMemberRecorded","change_id":"01JSTAFFGOLDEN0000000000X1","staff_id":"D-C691-04-3",'
        b'"name":"Lee, Ann","role":"dealer","active":true,"change":"added","recorded_by":"cli",'
        b'"recorded_at":"2026-11-27T18:00:00Z","source":"import:staff.csv","schema_version":1}'
    )
    event = STAFF_ADAPTER.validate_json(golden)
    assert (event.staff_id, event.name, event.role, event.active) == ("D-C691-04-3", "Lee, Ann", "dealer", True)
    assert STAFF_ADAPTER.validate_json(event.model_dump_json()) == event
    with pytest.raises(ValueError):
        STAFF_ADAPTER.validate_json(golden.replace(b"18:00:00Z", b"18:00:00"))
    with pytest.raises(ValueError):
        STAFF_ADAPTER.validate_json(golden.replace(b'"schema_version":1', b'"schema_version":1,"email":"x"'))


def test_the_supervisor_of_a_finding_is_the_same_looked_for_near_it_or_in_the_whole_history(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    con = connect_read_only(db)
    try:
        rows = con.execute(
            "SELECT table_id, round_id, observed_at FROM dim_findings ORDER BY observed_at, finding_id"
        ).fetchall()
        near = [staff.supervisor_on_duty(con, t, r, at) for t, r, at in rows]
        assert any(near) and len(rows) > 5
        monkeypatch.setattr(staff, "SUPERVISOR_NEAR", timedelta(0))  # the first look finds nobody: the history
        assert [staff.supervisor_on_duty(con, t, r, at) for t, r, at in rows] == near
    finally:
        con.close()
