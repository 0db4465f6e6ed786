"""A property's gaming days and the figures an export holds (issue 51)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dealtrail.reporting.exports import ExportError, day_period, figure_rows
from dealtrail.reporting.objectstore import LocationError, open_location


@pytest.mark.parametrize(
    ("day", "zone", "hours", "start"),
    [
        ("2026-11-01", "America/New_York", 25, datetime(2026, 11, 1, 4, 0, tzinfo=UTC)),  # clocks go back
        ("2026-03-08", "America/New_York", 23, datetime(2026, 3, 8, 5, 0, tzinfo=UTC)),  # clocks go forward
        ("2026-11-02", "Asia/Kolkata", 24, datetime(2026, 11, 1, 18, 30, tzinfo=UTC)),
        ("2026-11-02", "UTC", 24, datetime(2026, 11, 2, tzinfo=UTC)),
    ],
)
def test_a_gaming_day_is_a_calendar_day_of_the_casinos_zone(day: str, zone: str, hours: int, start: datetime) -> None:
    period = day_period(day, zone)
    assert period.start == start and period.end - period.start == timedelta(hours=hours)


def test_a_gaming_day_that_is_not_a_date_is_refused() -> None:
    with pytest.raises(ExportError, match="YYYY-MM-DD"):
        day_period("01/11/2026", "UTC")


def test_an_exports_figures_are_the_additive_counts_of_the_days_summary() -> None:
    summary = {
        "rounds": {"total": 120, "voided": 2, "by_table": {"TCP-01": 70, "PGP-01": 50}},
        "findings": {
            "total": 7, "records": 9, "by_severity": {"voiding": 3, "integrity": 0, "procedural": 4},
            "by_status": {"open": 5, "remedied": 2}, "by_rule": {"TCP-a": 3, "PGP-b": 4},
            "by_table": {"TCP-01": 3, "PGP-01": 4}, "per_1000_rounds": {"by_game": {"TCP": 42.9}},
        },
        "period": {"events": 5000},
        "remedies": {"owed": 3, "done_on_time": 1, "done_late": 1, "open": 1, "overdue": 0, "mean_delay_seconds": 4.5},
        "reviews": {"late": 2},
        "data_quality": {"dead_letters_by_reason": {"bad_json": {"in_period": 1, "undated": 4}}},
    }  # fmt: skip
    rows = {(r["figure"], r["key"]): r["value"] for r in figure_rows(summary)}
    assert rows[("rounds", "")] == 120 and rows[("rounds_by_table", "PGP-01")] == 50
    assert rows[("incidents", "")] == 7 and rows[("incidents_by_rule", "PGP-b")] == 4
    assert rows[("remedies", "done_late")] == 1 and rows[("reviews_late", "")] == 2
    assert rows[("dead_letters", "bad_json")] == 1  # dated in the day; the undated are not the day's
    assert not any(figure.startswith("per_1000") or key == "mean_delay_seconds" for figure, key in rows)


@pytest.mark.parametrize("url", ["http://host/bucket", "s3://", "gs://bucket/x"])
def test_an_export_location_is_a_folder_or_an_s3_bucket(url: str) -> None:
    with pytest.raises(LocationError):
        open_location(url)
