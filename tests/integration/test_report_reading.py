"""Reports that read well (issue 36): the executive summary says "no data" for a previous period
without any event (never "+572 rounds" against zeros), and the scheduled reports'
``findings.csv`` carries the review columns the console's export has."""

from __future__ import annotations

import csv
import re
import shutil
import unicodedata
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dealtrail.reporting.schedule import Schedule, run_due
from projections.models import reviews
from projections.store.store import Store
from schemas.reviews import FindingAcknowledged

START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
NOW = START + timedelta(hours=3)


def test_the_executive_summary_says_no_data_for_a_previous_period_without_events(
    audited_shift: Path, tmp_path: Path
) -> None:
    out = tmp_path / "periods"
    run_due(audited_shift, out, Schedule("0 * * * *"), NOW)
    first = (out / "2026-11-27T1800+0000_UTC" / "rev-0001" / "report.html").read_text(encoding="utf-8")
    summary = first.split('id="executive-summary"', 1)[1].split("</section>", 1)[0]
    assert "no data" in summary and "no dealing event in the previous period" in summary
    assert "+5" not in summary.split("<thead>", 1)[1]  # no change against an empty hour
    second = (out / "2026-11-27T1900+0000_UTC" / "rev-0001" / "report.html").read_text(encoding="utf-8")
    assert "no data" not in second.split('id="executive-summary"', 1)[1].split("</section>", 1)[0]


def test_scheduled_findings_csv_and_parquet_carry_review_status_disposed_by_and_approved_by(
    audited_shift: Path, tmp_path: Path
) -> None:
    db = tmp_path / "s.duckdb"
    shutil.copy(audited_shift, db)
    with Store(db) as store:
        finding = store.con.execute(
            "SELECT finding_id FROM dim_findings WHERE observed_at >= ? AND observed_at < ? LIMIT 1",
            [START, START + timedelta(hours=1)],
        ).fetchall()[0][0]
        ack = FindingAcknowledged(
            review_id="csv-ack-1", finding_id=finding, user="rita", reviewed_at=START + timedelta(hours=2), note="seen"
        )
        assert reviews.append_review(store.con, ack)
    out = tmp_path / "periods"
    run_due(db, out, Schedule("0 * * * *"), NOW)
    rev = out / "2026-11-27T1800+0000_UTC" / "rev-0001"
    with (rev / "findings.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {"review_status", "disposed_by", "approved_by"} <= set(rows[0])
    by_id = {r["finding_id"]: r for r in rows}
    assert by_id[finding]["review_status"] == "acknowledged"
    assert {r["review_status"] for r in rows if r["finding_id"] != finding} <= {"unreviewed"}
    assert pq.read_table(rev / "findings.parquet").column("review_status").to_pylist().count("acknowledged") >= 1


@pytest.fixture(scope="module")
def busy_shift(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A busy shift: nine tables for an hour with an error in 70 % of rounds (about 450 finding
    records, 350 of them voiding or integrity), audited into a store."""
    from dealtrail.ingest.audit import audit_file
    from dealtrail.simulator.floor import FloorSpec, simulate
    from schemas.codec import encode

    folder = tmp_path_factory.mktemp("busy")
    events, db = folder / "events.jsonl", folder / "busy.duckdb"
    spec = FloorSpec(tables=9, hours=1.0, seed=3, error_rate=0.7)
    events.write_bytes(b"".join(encode(e) + b"\n" for e in simulate(spec)))
    with Store(db) as store:
        audit_file(events, store)
    return db


def test_a_busy_shifts_pdf_has_at_most_12_pages_grouped_by_rule_and_findings_csv_keeps_every_record(
    busy_shift: Path, tmp_path: Path
) -> None:
    from pypdf import PdfReader

    from dealtrail.reporting.pdf import PdfError, print_pdf
    from projections.reports.report import PRINT_EXAMPLES, write_report
    from projections.store.store import connect_read_only
    from tests.helpers import need_browser

    files = write_report(busy_shift, tmp_path / "r", generated_at=NOW, review_due=reviews.ReviewDue(24, 24, 72))
    con = connect_read_only(busy_shift)
    try:
        records = con.execute("SELECT count(*) FROM dim_findings").fetchall()[0][0]
    finally:
        con.close()
    with files.csv.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    listed = sum(r["severity"] in ("voiding", "integrity") and not r["cause_finding_id"] for r in rows)
    assert listed > 300  # busy: the page used to print one row per incident (36 pages)
    assert len(rows) == records == files.findings and len({r["finding_id"] for r in rows}) == records
    try:
        pdf = print_pdf(files.html, tmp_path / "r" / "report.pdf")
    except PdfError as exc:
        need_browser(f"no Chromium to print with: {exc}")
    # the PDF's text as read: ligatures ("ﬁ") undone and lines joined
    pages = [re.sub(r"\s+", " ", unicodedata.normalize("NFKC", p.extract_text())) for p in PdfReader(str(pdf)).pages]
    assert len(pages) <= 12, len(pages)
    text = " ".join(pages)
    assert "Executive summary" in pages[0] and "What needs action" in pages[0]
    assert "Voiding and integrity incidents by rule" in text and "findings.csv beside this report holds every" in text
    assert re.search(r"and \d+ more: findings\.csv, rule_id [A-Z0-9]", text)
    assert f"{listed} voiding and integrity incident(s) under" in text
    html = files.html.read_text(encoding="utf-8")  # on screen the page still lists each incident
    assert html.count('<td class="t">') > listed and f"its first {PRINT_EXAMPLES}" in html
