"""Reports that read well (issue 36): the executive summary says "no data" for a previous period
without any event (never "+572 rounds" against zeros), and the scheduled reports'
``findings.csv`` carries the review columns the console's export has."""

from __future__ import annotations

import csv
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq

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
