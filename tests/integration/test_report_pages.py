"""The compliance report as a manager hands it on: header, definitions, counts, rates, links."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from dealtrail.cli import app
from projections.reports.report import write_report
from streams.engine.catalog import RULEBOOK_REVISION

STAMP = datetime(2026, 11, 28, 6, 0, tzinfo=UTC)


def _first_last(db: Path) -> tuple[datetime, datetime]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        row = con.execute("SELECT min(occurred_at), max(occurred_at) FROM events").fetchone()
        assert row is not None
        return row[0].astimezone(UTC), row[1].astimezone(UTC)
    finally:
        con.close()


def test_report_header_names_the_property_the_real_period_the_revision_and_the_generation_time(
    audited_shift: Path, tmp_path: Path
) -> None:
    files = write_report(audited_shift, tmp_path / "r", property_name="Keystone & Sons <Casino>", generated_at=STAMP)
    html = files.html.read_text()
    first, last = _first_last(audited_shift)
    assert "beginning of the trail" not in html and "end of the trail" not in html
    assert "Keystone &amp; Sons &lt;Casino&gt;" in html
    assert f"{first:%Y-%m-%d %H:%M:%S}+00:00 UTC to {last:%Y-%m-%d %H:%M:%S}+00:00 UTC" in html
    assert f"revision {RULEBOOK_REVISION}" in html
    assert "2026-11-28 06:00:00+00:00 UTC" in html
    summary = json.loads(files.summary.read_text())
    assert summary["period"]["first_event"] == first.isoformat()
    assert summary["period"]["last_event"] == last.isoformat()
    bounded = write_report(audited_shift, tmp_path / "b", start=first, generated_at=STAMP).html.read_text()
    assert f"{first:%Y-%m-%d %H:%M:%S}+00:00 UTC to the last event" in bounded
    assert f"first {first:%Y-%m-%d %H:%M:%S}+00:00 UTC, last {last:%Y-%m-%d %H:%M:%S}+00:00 UTC" in bounded


def test_report_generation_time_is_shown_in_utc_whatever_zone_the_page_uses(
    audited_shift: Path, tmp_path: Path
) -> None:
    from zoneinfo import ZoneInfo

    ny = write_report(audited_shift, tmp_path / "ny", tz=ZoneInfo("America/New_York"), generated_at=STAMP)
    html = ny.html.read_text()
    assert "2026-11-28 06:00:00+00:00 UTC" in html and "America/New_York" in html


def test_cli_report_takes_the_property_from_the_settings_and_a_fixed_generation_time(
    audited_shift: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        result = runner.invoke(
            app,
            ["report", "--db", str(audited_shift), "--out", str(out), "--generated-at", "2026-11-28T01:00:00-05:00"],
            env={"DEALTRAIL_PROPERTY": "Riverfront Downs"},
        )
        assert result.exit_code == 0, result.output
        outs.append((out / "report.html").read_bytes())
    assert outs[0] == outs[1]
    html = outs[0].decode()
    assert "Riverfront Downs" in html and "2026-11-28 06:00:00+00:00 UTC" in html
    bad = runner.invoke(
        app, ["report", "--db", str(audited_shift), "--out", str(tmp_path / "c"), "--generated-at", "now"]
    )
    assert bad.exit_code == 2 and "ISO 8601" in bad.output


def test_report_defines_every_status_and_its_open_counts_agree_with_the_remedies(
    audited_shift: Path, tmp_path: Path
) -> None:
    files = write_report(audited_shift, tmp_path / "r", generated_at=STAMP)
    html = files.html.read_text()
    for term in ("<dt>open</dt>", "<dt>remedied</dt>", "<dt>overdue</dt>", "unreviewed", "acknowledged", "disposed"):
        assert term in html, term
    summary = json.loads(files.summary.read_text())
    f = summary["findings"]
    # every open DT-remedy-overdue record stands beside a cause counted overdue
    assert f["remedy_overdue_records"] > 0 and f["remedy_overdue_records"] <= f["by_status"]["overdue"]
    assert f["open_remedy_owed"] + f["open_no_remedy"] + f["remedy_overdue_records"] >= f["by_status"]["open"]
    assert f["open_remedy_owed"] == summary["remedies"]["open"]
    assert f["open_no_remedy"] > 0
    assert "Open, remedy owed" in html and "Open, no remedy prescribed" in html


def test_report_gives_findings_per_1000_rounds_by_game_table_and_dealer(audited_shift: Path, tmp_path: Path) -> None:
    files = write_report(audited_shift, tmp_path / "r", generated_at=STAMP)
    summary = json.loads(files.summary.read_text())
    rates = summary["findings"]["per_1000_rounds"]
    rounds = summary["rounds"]
    for game, n in rounds["by_game"].items():
        found = sum(summary["findings"]["by_game"].get(game, {}).values())
        assert rates["by_game"][game] == round(found * 1000 / n, 1)
    for table, n in rounds["by_table"].items():
        assert rates["by_table"][table] == round(summary["findings"]["by_table"].get(table, 0) * 1000 / n, 1)
    dealer = summary["dealers"][0]
    assert dealer["per_1000_rounds"] == round(dealer["findings"] * 1000 / dealer["rounds"], 1)
    html = files.html.read_text()
    assert html.count("Per 1,000 rounds") == 5  # by game, table, dealer; the top tables and dealers
    assert f'<td class="n">{dealer["per_1000_rounds"]}</td>' in html


def test_report_rule_chart_is_grouped_by_game_with_readable_rule_names(audited_shift: Path, tmp_path: Path) -> None:
    from projections.reports.report import rule_label

    html = write_report(audited_shift, tmp_path / "r", generated_at=STAMP).html.read_text()
    chart = html[html.index("Findings by rule, per game") : html.index("Regulation findings by rule")]
    for title in ("Chapter 691 games", "Pai Gow Poker", "Three Card Prime"):
        assert title in chart, title
    assert "TCP-679a.9-d-stub-count-due" not in chart  # labelled by requirement, not internal ID
    assert rule_label("TCP-679a.9-d-stub-count-due") != "TCP-679a.9-d-stub-count-due"
    assert all(len(rule_label(r)) <= 70 for r in ("TCP-679a.9-d-stub-count-due", "DT-sequence-gap"))


def test_report_counts_a_skipped_remedy_and_a_gap_with_its_chain_break_as_one_incident_each(
    audited_shift: Path, tmp_path: Path
) -> None:
    import csv

    files = write_report(audited_shift, tmp_path / "r", generated_at=STAMP)
    with files.csv.open() as fh:
        rows = {r["finding_id"]: r for r in csv.DictReader(fh)}
    summary = json.loads(files.summary.read_text())
    f, dq = summary["findings"], summary["data_quality"]
    overdue = [r for r in rows.values() if r["rule_id"] == "DT-remedy-overdue"]
    breaks = [r for r in rows.values() if r["rule_id"] == "DT-chain-broken"]
    assert overdue and breaks  # the shift has both cases
    # before: every record counted; after: each consequence under its cause
    assert f["records"] == len(rows) == files.findings
    assert f["consequences"]["DT-remedy-overdue"] == len(overdue)
    assert f["total"] == len(rows) - sum(f["consequences"].values())
    assert sum(f["by_severity"].values()) == sum(f["by_rule"].values()) == f["total"]
    assert "DT-remedy-overdue" not in f["by_rule"]
    for r in overdue:
        cause = rows[r["cause_finding_id"]]
        assert cause["severity"] == "voiding" and cause["status"] == "overdue" and cause["table_id"] == r["table_id"]
    for r in breaks:
        if r["cause_finding_id"]:
            gap = rows[r["cause_finding_id"]]
            assert gap["rule_id"] == "DT-sequence-gap" and gap["evidence_event_ids"] == r["evidence_event_ids"]
    assert dq["chain_breaks_after_gap"] == f["consequences"]["DT-chain-broken"] > 0
    assert dq["incidents"] == dq["sequence_gaps"] + dq["chain_breaks_alone"]
    assert f["by_rule"].get("DT-chain-broken", 0) == dq["chain_breaks_alone"]
    # per-1000 rates and dealers count incidents too
    assert sum(d["findings"] for d in summary["dealers"]) <= f["total"]
    html = files.html.read_text()
    assert "<dt>Incidents counted once</dt>" in html and "Data-quality incidents" in html


def test_report_lists_each_voiding_and_integrity_incident_with_links_to_its_console_page(
    audited_shift: Path, tmp_path: Path
) -> None:
    import csv
    from zoneinfo import ZoneInfo

    files = write_report(
        audited_shift,
        tmp_path / "r",
        generated_at=STAMP,
        console_url="https://console.example:8443/",
        tz=ZoneInfo("America/New_York"),
    )
    html = files.html.read_text()
    with files.csv.open() as fh:
        rows = list(csv.DictReader(fh))
    listed = [r for r in rows if r["severity"] in ("voiding", "integrity") and not r["cause_finding_id"]]
    section = html[html.index('<h2 id="findings">') : html.index("<h2>Reviews</h2>")]
    assert listed
    for r in listed:
        assert f'href="https://console.example:8443/findings/{r["finding_id"]}"' in section, r["finding_id"]
    # a consequence is not a row of its own but a line under its cause
    for r in rows:
        if r["cause_finding_id"]:
            assert f'/findings/{r["finding_id"]}"' not in section
    assert section.count("&#8627;") + section.count("\u21b3") == sum(1 for r in rows if r["cause_finding_id"])
    assert "Detected (America/New_York)" in section and "unreviewed" in section
    # procedural incidents: counted per rule, each count a link to the console's filtered list
    procedural = {r["rule_id"] for r in rows if r["severity"] == "procedural"}
    for rule in procedural:
        assert f"rule={rule}" in section
    # the top tables and dealers link to their console pages
    top = html[html.index('<h2 id="look-first">') : html.index('<h2 id="statuses">')]
    assert 'href="https://console.example:8443/tables/' in top and 'href="https://console.example:8443/dealers/' in top


def test_report_without_a_console_address_links_nowhere_and_says_so_and_the_console_gets_relative_links(
    audited_shift: Path, tmp_path: Path
) -> None:
    plain = write_report(audited_shift, tmp_path / "plain", generated_at=STAMP).html.read_text()
    assert "/findings/" not in plain and "/dealers/" not in plain and "/tables/" not in plain
    assert "DEALTRAIL_CONSOLE__URL" in plain and "Individual findings" in plain
    served = write_report(audited_shift, tmp_path / "served", generated_at=STAMP, console_url="").html.read_text()
    assert 'href="/findings/' in served and 'href="/dealers/' in served and 'href="/tables/' in served
    result = CliRunner().invoke(
        app,
        ["report", "--db", str(audited_shift), "--out", str(tmp_path / "cli"), "--generated-at", STAMP.isoformat()],
        env={"DEALTRAIL_CONSOLE__URL": "https://floor.example"},
    )
    assert result.exit_code == 0, result.output
    assert 'href="https://floor.example/findings/' in (tmp_path / "cli" / "report.html").read_text()
