"""One time formatter for people (issue 47, item 2): every surface shows a time in the casino's
zone with its offset, to the second, across both of New York's clock changes of 2026 (spring
forward on 8 March, fall back on 1 November); UTC only where a label says so."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from dealtrail.console.deps import local, local_short
from projections.display.timefmt import short, span, stamp
from projections.records.signoff import signed_shown, signer_label, signing_block

NY = ZoneInfo("America/New_York")
SPRING_BEFORE = datetime(2026, 3, 8, 6, 59, 59, 123456, tzinfo=UTC)  # 01:59:59 EST, the last second of it
SPRING_AFTER = datetime(2026, 3, 8, 7, 0, 0, tzinfo=UTC)  # 03:00:00 EDT: 02:xx never happens
FALL_FIRST = datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # the first 01:30 (EDT)
FALL_SECOND = datetime(2026, 11, 1, 6, 30, tzinfo=UTC)  # the second 01:30 (EST)


def test_a_time_is_shown_in_the_casinos_zone_to_the_second_with_its_offset_across_the_spring_change() -> None:
    assert stamp(SPRING_BEFORE, NY) == "2026-03-08 01:59:59-05:00"  # no microseconds
    assert stamp(SPRING_AFTER, NY) == "2026-03-08 03:00:00-04:00"
    assert stamp(SPRING_AFTER, UTC) == "2026-03-08 07:00:00+00:00"
    assert stamp(None, NY) == "-"


def test_the_two_0130s_of_the_night_new_york_falls_back_read_apart_in_every_format() -> None:
    assert stamp(FALL_FIRST, NY) == "2026-11-01 01:30:00-04:00"
    assert stamp(FALL_SECOND, NY) == "2026-11-01 01:30:00-05:00"
    assert short(FALL_FIRST, NY) == "11-01 01:30:00-04:00" and short(FALL_SECOND, NY) == "11-01 01:30:00-05:00"
    assert span(datetime(2026, 11, 1, 4, tzinfo=UTC), datetime(2026, 11, 1, 12, tzinfo=UTC), NY) == (
        "2026-11-01 00:00-04:00 to 07:00-05:00 America/New_York"
    )  # an 8-hour shift that holds 7 hours of wall clock


def test_the_floors_narrow_time_cells_carry_their_offset_and_the_console_uses_the_one_formatter() -> None:
    assert local_short(FALL_SECOND, NY) == "11-01 01:30:00-05:00"
    assert local_short(SPRING_AFTER, NY) == "03-08 03:00:00-04:00"
    assert local(FALL_FIRST, NY) == stamp(FALL_FIRST, NY)


def _record(**extra: str) -> dict[str, object]:
    return {
        "signed_by": "max",
        "role": "manager",
        "signed_at": "2026-11-01T06:30:00.790895+00:00",
        "statement": "I have reviewed this report and its findings.",
        "revision": 1,
        "status": "final",
        "report_digest": "ab" * 32,
        **extra,
    }


def test_the_sign_off_block_names_the_signers_full_name_and_title_and_the_local_time_of_signing() -> None:
    record = _record(signer_name="Max Keller", signer_title="Compliance Manager", zone="America/New_York")
    block = signing_block(record)
    assert "Max Keller, Compliance Manager (console user max, manager)" in block
    assert "2026-11-01 01:30:00-05:00 America/New_York" in block
    assert "+00:00" not in block and ".790895" not in block
    assert signed_shown(record) == "2026-11-01 01:30:00-05:00 America/New_York"


def test_a_sign_off_recorded_before_profiles_and_zones_shows_its_user_and_utc_labelled() -> None:
    record = _record()
    assert signer_label(record) == "max (manager)"
    assert signed_shown(record) == "2026-11-01 06:30:00+00:00 UTC"
    assert signed_shown(record, NY) == "2026-11-01 01:30:00-05:00 America/New_York"
