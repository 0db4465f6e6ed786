"""Report periods follow the local wall clock across daylight-saving transitions (2026-03-08 and
2026-11-01 in America/New_York), and their folder names never collide across zones."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from dealtrail.reporting.schedule import Period, Schedule, ScheduleError

NY = ZoneInfo("America/New_York")
SPRING = datetime(2026, 3, 8, tzinfo=UTC)
AUTUMN = datetime(2026, 11, 1, tzinfo=UTC)


def _periods(every: str, tz: str, first: datetime, now: datetime) -> list[Period]:
    return list(Schedule(every, tz).periods(first, now))


def _contiguous(periods: list[Period]) -> None:
    for a, b in itertools.pairwise(periods):
        assert a.end == b.start, (a, b)
    assert all(p.end > p.start for p in periods)
    assert len({p.label for p in periods}) == len(periods)


@pytest.mark.parametrize("day", [SPRING, AUTUMN], ids=["spring-forward", "fall-back"])
def test_a_daily_cron_in_new_york_starts_at_six_local_time_on_every_day_of_a_transition(day: datetime) -> None:
    periods = _periods("0 6 * * *", "America/New_York", day - timedelta(days=2), day + timedelta(days=3))
    _contiguous(periods)
    assert len(periods) >= 4
    for p in periods:
        local = p.start.astimezone(NY)
        assert (local.hour, local.minute) == (6, 0), p
    lengths = {p.start.astimezone(NY).date().isoformat(): p.end - p.start for p in periods}
    odd = "2026-03-07" if day == SPRING else "2026-10-31"  # the day that holds the change
    assert lengths.pop(odd) == timedelta(hours=23 if day == SPRING else 25)
    assert set(lengths.values()) == {timedelta(hours=24)}


@pytest.mark.parametrize("day", [SPRING, AUTUMN], ids=["spring-forward", "fall-back"])
def test_an_hourly_cron_gives_one_hour_periods_across_a_transition(day: datetime) -> None:
    periods = _periods("0 * * * *", "America/New_York", day, day + timedelta(hours=14))
    _contiguous(periods)
    assert {p.end - p.start for p in periods} == {timedelta(hours=1)}
    starts = [p.start for p in periods]
    assert starts == [starts[0] + timedelta(hours=i) for i in range(len(starts))]  # none missing or repeated
    labels = [p.label for p in periods]
    if day == AUTUMN:  # 01:00 happens twice: both hours are periods, told apart by their offset
        assert "2026-11-01T0100-0400_America-New_York" in labels
        assert "2026-11-01T0100-0500_America-New_York" in labels
    else:  # 02:00 does not exist: 01:00 EST is followed by 03:00 EDT
        assert "2026-03-08T0100-0500_America-New_York" in labels
        assert "2026-03-08T0300-0400_America-New_York" in labels
        assert not any("T0200" in label for label in labels)


@pytest.mark.parametrize(
    ("every", "day", "hours"),
    [("day", SPRING, 23), ("day", AUTUMN, 25), ("shift", SPRING, 7), ("shift", AUTUMN, 9)],
    ids=["day-spring", "day-autumn", "shift-spring", "shift-autumn"],
)
def test_days_and_shifts_keep_their_local_start_times_and_absorb_the_changed_hour(
    every: str, day: datetime, hours: int
) -> None:
    periods = _periods(every, "America/New_York", day - timedelta(days=1), day + timedelta(days=2))
    _contiguous(periods)
    wanted = {0} if every == "day" else {6, 14, 22}
    assert {p.start.astimezone(NY).hour for p in periods} == wanted
    assert all(p.start.astimezone(NY).minute == 0 for p in periods)
    normal = timedelta(hours=24 if every == "day" else 8)
    odd = [p for p in periods if p.end - p.start != normal]
    assert [p.end - p.start for p in odd] == [timedelta(hours=hours)]


def test_a_start_in_the_skipped_hour_moves_to_the_end_of_the_gap() -> None:
    periods = _periods("30 2 * * *", "America/New_York", SPRING - timedelta(days=1), SPRING + timedelta(days=2))
    _contiguous(periods)
    moved = [p for p in periods if p.start.astimezone(NY).date().isoformat() == "2026-03-08"]
    assert [p.start.astimezone(NY).strftime("%H:%M%z") for p in moved] == ["03:00-0400"]


def test_a_utc_day_and_a_new_york_day_of_the_same_date_have_different_folders() -> None:
    first, now = datetime(2026, 11, 27, 12, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC)
    utc = {p.label: p for p in _periods("day", "UTC", first, now)}
    ny = {p.label: p for p in _periods("day", "America/New_York", first, now)}
    assert "2026-11-27_UTC" in utc and "2026-11-27_America-New_York" in ny
    assert not set(utc) & set(ny)
    assert utc["2026-11-27_UTC"].start != ny["2026-11-27_America-New_York"].start


@pytest.mark.parametrize(
    ("every", "reason"),
    [
        ("0 0 31 2 *", "never fires"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("* * * * * 0,30", "seconds field"),
        ("0 6 * * * 0", "seconds field"),
    ],
)
def test_a_cron_that_never_fires_or_has_a_seconds_field_is_refused(every: str, reason: str) -> None:
    with pytest.raises(ScheduleError, match=reason):
        Schedule(every)


def test_a_cron_that_fires_once_in_four_years_is_accepted() -> None:
    Schedule("0 0 29 2 *")
