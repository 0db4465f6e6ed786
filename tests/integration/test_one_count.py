"""One count for one question (issue 19, item 2): a simulated floor with every kind of finding
(voiding, integrity, procedural; consequences of both kinds; reviews on time, late and not yet
made) gives the same incident, open and late-review figures through every surface: the CLI
summary, summary.json, the report's HTML, the console's floor and findings pages, the API and
the late-review digest."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import dealtrail.cli.reports as cli_module  # where `audit` reads the clock
from dealtrail.cli import app as cli
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.reporting.notify import DigestConfig, digest_text, late_reviews
from projections.models import reviews
from projections.models.reviews import ReviewDue
from projections.reports.report import incidents as report_incidents
from projections.reports.report import query
from projections.store.store import Store
from schemas.reviews import Cause, FindingAcknowledged, FindingAssigned, FindingDisposed

DUE = ReviewDue(voiding=24, integrity=24, procedural=72)  # the settings' defaults, which the CLI reads
AS_OF = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
"""Every surface judges lateness at this instant: the shift was dealt on 2026-11-27 from 18:00, so
voiding and integrity reviews (24 h) are due by now and procedural ones (72 h) are not yet."""
NUMBER = r"([\d,]+)"


class FixedDatetime(datetime):
    """``datetime`` whose ``now`` is :data:`AS_OF` (the CLI's clock in this test)."""

    @classmethod
    def now(cls, tz: Any = None) -> FixedDatetime:  # type: ignore[override]
        return cls.fromtimestamp(AS_OF.timestamp(), tz or UTC)


def _n(text: str) -> int:
    return int(text.replace(",", ""))


def _text(html: str) -> str:
    """A page's words, tags dropped and white space collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split()).replace(" ,", ",").replace(" )", ")").replace("( ", "(")


def _review_a_mix(db: Path) -> dict[str, int]:
    """Reviews on incidents and on one consequence: disposed on time, disposed late, assigned,
    acknowledged. Chosen from the report's own finding rows (not from the read model)."""
    with Store(db) as store:
        rows = query(store.con.cursor(), "rpt_findings").to_pylist()
        found = report_incidents(rows)
        # voiding incidents first: a voiding one is among the disposed (the filters below look for one)
        urgent = [f for f in found if f["severity"] == "voiding"] + [f for f in found if f["severity"] == "integrity"]
        procedural = [f for f in found if f["severity"] == "procedural"]
        consequence = next(f for f in rows if f["cause_finding_id"])
        assert len(urgent) > 8 and len(procedural) > 2
        made = 0

        def add(event: Any) -> None:
            nonlocal made
            made += 1
            assert reviews.append_review(store.con, event)

        def dispose(f: dict[str, Any], hours: float, cause: Cause) -> None:
            at = f["detected_at"] + timedelta(hours=hours)
            add(
                FindingDisposed(
                    review_id=f"R{made}", finding_id=f["finding_id"], user="rita", reviewed_at=at, cause=cause
                )
            )

        for f in urgent[:3]:  # on time
            dispose(f, 1, Cause.DEALER_ERROR)
        for f in urgent[3:5]:  # after the 24 h due time
            dispose(f, 30, Cause.DEVICE)
        for f in urgent[5:7] + procedural[:1]:
            at = f["detected_at"] + timedelta(hours=2)
            add(
                FindingAssigned(
                    review_id=f"R{made}", finding_id=f["finding_id"], user="rita", reviewed_at=at, assignee="ada"
                )
            )
        at = procedural[1]["detected_at"] + timedelta(hours=2)
        add(FindingAcknowledged(review_id="ack", finding_id=procedural[1]["finding_id"], user="rita", reviewed_at=at))
        dispose(consequence, 1, Cause.NOT_A_VIOLATION)  # a consequence's own review is not an incident's
        auth.add_user(store.con, "vic", "viewer", "vic-viewer-pass", AS_OF - timedelta(days=3))
        return {"disposed": 5, "disposed_late": 2, "records": len(rows), "incidents": len(found)}


def test_every_surface_gives_the_same_incident_open_and_late_counts(
    small_shift: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, _ = small_shift
    db = tmp_path / "floor.duckdb"
    monkeypatch.setattr(cli_module, "datetime", FixedDatetime)
    runner = CliRunner()
    first = runner.invoke(cli, ["audit", str(events), "--db", str(db)])
    assert first.exit_code == 0, first.output
    made = _review_a_mix(db)

    # the CLI: a second audit of the same file stores nothing new and prints the store's figures
    again = runner.invoke(cli, ["audit", str(events), "--db", str(db)])
    assert again.exit_code == 0, again.output
    line = re.search(
        rf"{NUMBER} incidents \(open {NUMBER}: remedy owed {NUMBER}, no remedy prescribed {NUMBER}; "
        rf"overdue {NUMBER}; remedied {NUMBER}; reviews late {NUMBER}\) from {NUMBER} finding records "
        rf"\({NUMBER} consequences shown under their cause\)",
        " ".join(again.output.split()),
    )
    assert line, again.output
    incidents, open_, owed, no_remedy, overdue, remedied, late, records, consequences = map(_n, line.groups())
    # the figures are the report's rows counted by hand, and not trivially equal to the records
    assert (incidents, records) == (made["incidents"], made["records"]) and consequences == records - incidents > 0
    assert open_ == owed + no_remedy and incidents == open_ + overdue + remedied
    assert 0 < late < incidents - made["disposed"] + made["disposed_late"]  # procedural ones are not due yet

    # summary.json and the report
    out = tmp_path / "report"
    rep = runner.invoke(cli, ["report", "--db", str(db), "--out", str(out), "--generated-at", AS_OF.isoformat()])
    assert rep.exit_code == 0, rep.output
    figures = json.loads((out / "summary.json").read_text())
    fs, rv = figures["findings"], figures["reviews"]
    assert (fs["total"], fs["records"], fs["open"], fs["open_remedy_owed"], fs["open_no_remedy"]) == (
        incidents, records, open_, owed, no_remedy,
    )  # fmt: skip
    assert (fs["by_status"]["overdue"], fs["by_status"]["remedied"], rv["late"]) == (overdue, remedied, late)
    assert sum(rv["by_review_status"].values()) == incidents
    assert rv["by_review_status"]["disposed"] == made["disposed"]  # the consequence's review is not an incident's
    html = (out / "report.html").read_text()

    def cell(label: str) -> int:
        m = re.search(rf"<th>{re.escape(label)}[^<]*</th><td class=\"n\">{NUMBER}</td>", html)
        assert m, label
        return _n(m.group(1))

    assert cell("Incidents") == incidents and cell("Finding records") == records
    assert cell("Open, no remedy prescribed") == no_remedy and cell("Open, remedy owed") == owed
    assert cell("Remedied") == remedied and cell("Reviews late") == late

    # the console: floor, findings page, API; and the digest, all at AS_OF
    with Store(db) as store:
        client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=lambda: AS_OF)))
        page = client.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf
        r = client.post(
            "/login", data={"username": "vic", "password": "vic-viewer-pass", "csrf": csrf.group(1), "next": "/"}
        )
        assert r.status_code == 200

        floor = _text(client.get("/").text)
        m = re.search(
            rf"All tables: {NUMBER} incidents \(open {NUMBER}, overdue {NUMBER}, remedied {NUMBER}\) "
            rf"from {NUMBER} finding records, {NUMBER} of them consequences shown under their cause; "
            rf"{NUMBER} incidents not yet disposed",
            floor,
        )
        assert m, floor[-2000:]
        f_inc, f_open, f_over, f_rem, f_rec, f_cons, f_nd = map(_n, m.groups())
        assert (f_inc, f_open, f_over, f_rem, f_rec, f_cons) == (
            incidents,
            open_,
            overdue,
            remedied,
            records,
            consequences,
        )
        assert f_nd == incidents - made["disposed"]

        api_floor = client.get("/api/v1/floor").json()
        totals = api_floor["totals"]
        assert (totals["incidents"], totals["open"], totals["late"]) == (incidents, open_, late)
        by_table = {t["table_id"]: t for t in api_floor["tables"]}
        assert {t: row["incidents"] for t, row in by_table.items() if row["incidents"]} == fs["by_table"]
        assert sum(t["open_voiding"] + t["open_integrity"] + t["open_procedural"] for t in by_table.values()) == f_nd
        assert sum(t["late_reviews"] for t in by_table.values()) == totals["late_not_disposed"]
        for t, row in by_table.items():  # each table's row on the page shows the API's figures
            cells = re.search(
                rf"<tr[^>]*data-table=\"{re.escape(t)}\">(.*?)</tr>", client.get("/floor/tables").text, re.S
            )
            assert cells
            numbers = [_n(x) for x in re.findall(r">(\d+)</(?:a|span)>", cells.group(1))]
            assert numbers[-5:] == [
                row["open_voiding"], row["open_integrity"], row["open_procedural"], row["remedies_overdue"],
                row["late_reviews"],
            ]  # fmt: skip

        findings = _text(client.get("/findings").text)
        assert f"{records:,} finding records" in findings
        assert (
            f"{incidents:,} incidents in this list (open {open_:,}, overdue {overdue:,}, remedied {remedied:,}; "
            f"not yet disposed {f_nd:,}; reviews late {late:,}) and {consequences:,} consequences" in findings
        )
        only = _text(client.get("/findings", params={"kind": "incidents"}).text)
        assert f"{incidents:,} incidents in this list" in only and f"Findings {incidents:,} incidents" in only

        listed = client.get("/api/v1/findings", params={"limit": 10_000}).json()
        assert listed["total"] == records == len(listed["findings"])
        assert sum(1 for f in listed["findings"] if f["incident"]) == incidents
        assert sum(1 for f in listed["findings"] if f["incident"] and f["review_late"]) == late
        assert (listed["counts"]["incidents"], listed["counts"]["open"], listed["counts"]["late"]) == (
            incidents, open_, late,
        )  # fmt: skip

        for t, n in fs["by_table"].items():  # each table's page counts its incidents, as the report
            page = _text(client.get(f"/tables/{t}").text)
            assert re.search(rf"(?<![\d,]){n:,} incidents", page), (t, n, page[:400])

        from datetime import time
        from zoneinfo import ZoneInfo

        waiting = late_reviews(store.con.cursor(), DUE, AS_OF)
        text = digest_text(AS_OF.date(), waiting, DigestConfig(time(8), ZoneInfo("UTC"), (), DUE), AS_OF, None)
        assert len(waiting) == totals["late_not_disposed"] == late - made["disposed_late"]
        assert f"{len(waiting)} reviews late" in text


def test_the_read_model_counts_reviews_made_up_to_its_as_of_and_judges_lateness_then(
    audited_shift: Path, tmp_path: Path
) -> None:
    from projections.models import incidents
    from projections.models.reviews import FindingFilter

    db = tmp_path / "as-of.duckdb"
    shutil.copy(audited_shift, db)
    with Store(db) as store:
        con = store.con.cursor()
        first = incidents.records(con, FindingFilter(incident=True, severity="voiding"), DUE, AS_OF, sort="detected")
        f = first[0][-1]  # the earliest voiding incident
        due_at, disposed_at = f["review_due_at"], f["review_due_at"] + timedelta(hours=5)
        assert reviews.append_review(
            store.con,
            FindingDisposed(review_id="late", finding_id=f["finding_id"], user="rita", reviewed_at=disposed_at,
                            cause=Cause.DEALER_ERROR),
        )  # fmt: skip
        one = FindingFilter(finding_id=f["finding_id"])
        before_due = incidents.counts(con, DUE, due_at - timedelta(minutes=1), one, reviews_until=due_at)
        after_due = incidents.counts(
            con, DUE, due_at + timedelta(hours=1), one, reviews_until=due_at + timedelta(hours=1)
        )
        everything = incidents.counts(con, DUE, disposed_at + timedelta(days=30), one)
        assert (before_due.late, before_due.by_review_status["disposed"]) == (0, 0)
        assert (after_due.late, after_due.late_not_disposed, after_due.by_review_status["disposed"]) == (1, 1, 0)
        assert (everything.late, everything.late_not_disposed, everything.by_review_status["disposed"]) == (1, 0, 1)
        assert incidents.counts(con, None, AS_OF, one).late is None  # no due times: not judged
        # the store's view of review status says what the model says with every review counted
        rows, _ = incidents.records(con, FindingFilter(), DUE, AS_OF)
        view = dict(con.execute("SELECT finding_id, review_status FROM dim_review_status").fetchall())
        assert {r["finding_id"]: r["review_status"] for r in rows} == view


def test_a_page_of_the_read_model_counts_every_record_that_passed_the_filters(audited_shift: Path) -> None:
    from projections.models import incidents
    from projections.models.reviews import FindingFilter

    con = duckdb.connect(str(audited_shift), read_only=True)
    try:
        every, total = incidents.records(con, FindingFilter(), DUE, AS_OF)
        assert total == len(every) > 3
        page, counted = incidents.records(con, FindingFilter(), DUE, AS_OF, limit=2, offset=1)
        assert counted == total and [r["finding_id"] for r in page] == [r["finding_id"] for r in every[1:3]]
        assert set(page[0]) == set(every[0]), "the page's rows have the model's columns, no more"
        past, still = incidents.records(con, FindingFilter(), DUE, AS_OF, limit=5, offset=total + 10)
        assert (past, still) == ([], total), "a page past the last one still says how many there are"
        table = every[0]["table_id"]
        _, of_table = incidents.records(con, FindingFilter(table_id=table), DUE, AS_OF, limit=1)
        assert of_table == sum(1 for r in every if r["table_id"] == table)
        assert incidents.records(con, FindingFilter(table_id="no-such-table"), DUE, AS_OF, limit=1) == ([], 0)
    finally:
        con.close()


def test_a_case_filter_keeps_a_cause_and_its_consequences_only(audited_shift: Path) -> None:
    from projections.models import incidents
    from projections.models.reviews import FindingFilter

    con = duckdb.connect(str(audited_shift), read_only=True)
    try:
        every, _ = incidents.records(con, FindingFilter(), DUE, AS_OF)
        causes = {r["cause_finding_id"] for r in every if r["cause_finding_id"]}
        assert causes, "the shift has a consequence"
        for root in sorted(causes)[:3]:
            case, n = incidents.records(con, FindingFilter(case_of=root), DUE, AS_OF)
            expected = {r["finding_id"] for r in every if root in (r["finding_id"], r["cause_finding_id"])}
            assert {r["finding_id"] for r in case} == expected and n == len(expected) > 1
    finally:
        con.close()


def test_the_tables_figures_add_up_to_the_stores_and_every_filter_gives_the_live_models_rows(
    audited_shift: Path, tmp_path: Path
) -> None:
    """The floor's totals are its tables' figures added up (:func:`incidents.total`): equal to the
    model's own count of the store, reviews of every kind included. And each filter, applied to
    the summary before the model's review joins, keeps the rows the live model keeps."""
    from projections.models import incidents
    from projections.models.reviews import FindingFilter

    db = tmp_path / "store.duckdb"
    shutil.copy(audited_shift, db)
    _review_a_mix(db)
    with Store(db) as store:
        con = store.con
        for due in (DUE, None):
            per_table = incidents.counts_by_table(con, due, AS_OF)
            assert len(per_table) > 1
            assert incidents.total(per_table.values(), judge_late=due is not None) == incidents.counts(con, due, AS_OF)
        assert incidents.total([], judge_late=True) == incidents.Counts()

        every, _ = incidents.records(con, FindingFilter(), DUE, AS_OF)
        one = every[len(every) // 2]
        cause = next(r["cause_finding_id"] for r in every if r["cause_finding_id"])
        filters = [
            FindingFilter(game=one["game"]),
            FindingFilter(rule=one["rule_id"]),
            FindingFilter(severity=one["severity"]),
            FindingFilter(status=one["status"]),
            FindingFilter(dealer=one["dealer_id"]),
            FindingFilter(incident=True),
            FindingFilter(incident=False),
            FindingFilter(finding_id=one["finding_id"]),
            FindingFilter(case_of=cause),
            FindingFilter(review_status="disposed", severity="voiding"),
        ]

        def rows(flt: FindingFilter, live: bool) -> list[tuple[Any, ...]]:
            sql = f"SELECT * FROM ({incidents.model_sql(con, live=live)}) ORDER BY finding_id"
            return con.execute(sql, incidents._params(flt, DUE, AS_OF, None)).fetchall()

        for flt in filters:
            summary, live = rows(flt, live=False), rows(flt, live=True)
            assert summary == live and summary, flt


def test_a_page_and_its_figures_from_one_run_equal_the_records_and_counts_apart(
    audited_shift: Path, tmp_path: Path
) -> None:
    """:func:`incidents.page` (the findings list and API: keys and figures from the model's narrow
    columns, then the page's wide rows) gives the rows of
    :func:`incidents.records` and the figures of :func:`incidents.counts`, reviews included,
    for any filter, sort and page, and a page past the last one still has the figures."""
    from projections.models import incidents
    from projections.models.reviews import FindingFilter

    db = tmp_path / "store.duckdb"
    shutil.copy(audited_shift, db)
    _review_a_mix(db)
    with Store(db) as store:
        con = store.con
        every, total = incidents.records(con, FindingFilter(), DUE, AS_OF)
        table = every[0]["table_id"]
        cases = [
            (FindingFilter(), "detected", True, 5, 0),
            (FindingFilter(), "severity", False, 5, 5),
            (FindingFilter(table_id=table), "rule", True, 3, 1),
            (FindingFilter(review_status="disposed"), "detected", False, 50, 0),
            (FindingFilter(), "dealer", True, 7, 3),  # findings without a round have no dealer: NULLs last
            (FindingFilter(), "status", False, 1000, 0),
            (FindingFilter(incident=True), "due", True, 4, total),  # past the last page
        ]
        for flt, sort, desc, limit, offset in cases:
            rows, counted = incidents.page(con, flt, DUE, AS_OF, sort, desc, limit, offset)
            expected, n = incidents.records(con, flt, DUE, AS_OF, sort, desc, limit, offset)
            assert rows == expected and counted == incidents.counts(con, DUE, AS_OF, flt) and counted.records == n
        assert incidents.page(con, FindingFilter(table_id="no-such-table"), DUE, AS_OF) == ([], incidents.Counts())
        # its own transaction is closed after it: a new one begins
        con.execute("BEGIN TRANSACTION")
        con.execute("ROLLBACK")
