"""The printed report as a regulator reads it (issue 47, items 2 and 4): a title from the
property and the period, the status in the casino's zone without a wall of UTC instants, every
table's headings (the procedural incidents' Rule ID in its own column, in print too), and a
previous period compared only when its trail covers it as this period's does.

The store is the small shift (6 tables, 2026-11-27 18:00 to 19:30 UTC: 13:00 to 14:30 in New York).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from projections.models import reviews
from projections.reports.report import write_report

START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
NOW = START + timedelta(hours=3)
NY = ZoneInfo("America/New_York")
DUE = reviews.ReviewDue(24, 24, 72)


def _summary(html: str) -> str:
    return html.split('id="executive-summary"', 1)[1].split("<h3>What needs action", 1)[0]


def test_a_previous_period_whose_trail_covers_less_of_it_is_not_compared_and_a_sentence_says_why(
    audited_shift: Path, tmp_path: Path
) -> None:
    # this hour holds an hour of dealing; the hour before it holds the shift's first 30 minutes only
    start, end = START + timedelta(minutes=30), START + timedelta(minutes=90)
    files = write_report(audited_shift, tmp_path / "r", start, end, tz=NY, generated_at=NOW, review_due=DUE)
    summary = _summary(files.html.read_text(encoding="utf-8"))
    assert "No comparison with the previous period (2026-11-27 12:30:00-05:00 America/New_York to" in summary
    assert re.search(r"its dealing events span (29|30) min of its 1 h, this period&#39;s (5\d min|1 h)", summary)
    assert "<th>Change</th>" not in summary and "Previous period" not in summary
    assert not re.search(r"\+\d", summary)  # no change against a partly covered period


def test_a_previous_period_of_the_same_coverage_is_compared_and_more_rounds_is_no_warning(
    audited_shift: Path, tmp_path: Path
) -> None:
    start, end = START + timedelta(minutes=45), START + timedelta(minutes=90)  # and the 45 minutes before it
    files = write_report(audited_shift, tmp_path / "r", start, end, tz=NY, generated_at=NOW, review_due=DUE)
    summary = _summary(files.html.read_text(encoding="utf-8"))
    assert "No comparison" not in summary and "<th>Change</th>" in summary
    rounds = re.search(r"<th>Rounds completed</th>(.*?)</tr>", summary, re.S)
    assert rounds and 'class="n up"' not in rounds.group(1) and 'class="n down"' not in rounds.group(1)


def test_the_title_names_the_property_and_the_period_in_the_casinos_zone_not_a_folder_label(
    audited_shift: Path, tmp_path: Path
) -> None:
    start, end = START, START + timedelta(hours=1)
    files = write_report(
        audited_shift, tmp_path / "r", start, end, tz=NY, generated_at=NOW, property_name="Riverside Casino"
    )
    html = files.html.read_text(encoding="utf-8")
    title = "Compliance report, Riverside Casino: 2026-11-27 13:00-05:00 to 14:00-05:00 America/New_York"
    assert f"<title>{title}</title>" in html and f"<h1>{title}</h1>" in html
    assert "_shift" not in html.split("</h1>", 1)[0]


def test_a_final_status_names_the_latest_event_in_the_casinos_zone_without_a_wall_of_utc_instants(
    audited_shift: Path, tmp_path: Path
) -> None:
    start, end = START + timedelta(minutes=15), START + timedelta(minutes=45)
    files = write_report(
        audited_shift, tmp_path / "r", start, end, tz=NY, generated_at=NOW, grace=timedelta(minutes=15)
    )
    assert files.report is not None and files.report["status"] == "final"
    reason = str(files.report["status_reason"])
    latest = r"the latest at 2026-11-27 1[34]:\d\d:\d\d-05:00$"
    assert re.search(r"made final by the last events of 6 table\(s\) \(.*\), " + latest, reason), reason
    assert "+00:00" not in reason and not re.search(r"\.\d{6}", reason)
    assert len(files.report["final_on"]) == 6  # each table's last event, UTC, stays in summary.json


def test_the_printed_procedural_table_has_a_rule_id_heading_and_each_id_in_its_own_column(
    audited_shift: Path, tmp_path: Path
) -> None:
    from dealtrail.reporting.pdf import PdfError, print_pdf
    from tests.helpers import need_browser

    files = write_report(audited_shift, tmp_path / "r", START, START + timedelta(minutes=90), tz=NY, generated_at=NOW)
    html = files.html.read_text(encoding="utf-8")
    assert '<th class="screen-only">Rule ID</th>' not in html and "<th>Rule ID</th>" in html
    if shutil.which("pdftotext") is None:
        need_browser("no pdftotext (apt-get install poppler-utils)")
    try:
        pdf = print_pdf(files.html, tmp_path / "r" / "report.pdf")
    except PdfError as exc:
        need_browser(f"no Chromium to print with: {exc}")
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    part = text.split("Procedural incidents by rule", 1)[1].split("Reviews", 1)[0]
    assert re.search(r"Rule\s{2,}Rule ID\s{2,}Incidents\s+Tables\s+First", part), part[:600]
    ids = list(re.finditer(r"(\S?)(\s*)(?:PGP|TCP|C691|DT)-", part))
    assert ids, part[:600]
    for m in ids:  # each ID stands in its own column: never run into its description ("...findingPGP-")
        assert not m.group(1) or len(m.group(2)) >= 2, part[max(0, m.start() - 80) : m.end() + 40]


def test_the_title_of_a_report_of_the_whole_trail_names_its_first_and_last_event(
    audited_shift: Path, tmp_path: Path
) -> None:
    files = write_report(audited_shift, tmp_path / "r", tz=NY, generated_at=NOW)
    html = files.html.read_text(encoding="utf-8")
    m = re.search(r"<title>(.*?)</title>", html)
    expected = r"Compliance report, property not named: every event stored, 2026-11-27 13:00-05:00 to 14:\d\d-05:00"
    assert m and re.fullmatch(expected + " America/New_York", m.group(1)), m
