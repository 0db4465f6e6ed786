"""Time that cannot be true is refused at the edge (issue 32 item 2): an event recorded later
than the intake's own clock plus ``max_clock_skew`` is ``recorded_in_future``. The engine reads no
clock: the intake passes its reading in."""

from __future__ import annotations

import json
import pickle
from datetime import UTC, datetime, timedelta

import pytest

from dealtrail.simulator.floor import FloorSpec, simulate
from schemas.base import Envelope
from streams.clock import FixedClock, IntakeClock
from streams.engine import EventRejected, Plausibility, check_recorded

LIMITS = Plausibility(max_seq_jump=100_000, max_clock_skew=timedelta(hours=1))
NOW = datetime(2026, 11, 27, 19, 0, tzinfo=UTC)


def recorded_at(when: datetime) -> Envelope:
    """A simulated event stamped (both times) at ``when``."""
    first = next(iter(simulate(FloorSpec(tables=1, hours=0.05, seed=1, error_rate=0.0))))
    return first.model_copy(update={"occurred_at": when, "recorded_at": when})


def test_an_event_recorded_in_2099_is_refused_as_recorded_in_future() -> None:
    with pytest.raises(EventRejected) as info:
        check_recorded(recorded_at(datetime(2099, 12, 31, 12, tzinfo=UTC)), NOW, LIMITS)
    assert info.value.reason == "recorded_in_future"
    assert "2099-12-31T12:00:00+00:00" in info.value.detail and "DEALTRAIL_MAX_CLOCK_SKEW" in info.value.detail


def test_an_event_recorded_within_the_skew_after_the_clock_or_long_before_it_is_accepted() -> None:
    check_recorded(recorded_at(NOW + timedelta(hours=1)), NOW, LIMITS)
    check_recorded(recorded_at(datetime(2001, 1, 1, tzinfo=UTC)), NOW, LIMITS)  # an old file audited today
    with pytest.raises(EventRejected):
        check_recorded(recorded_at(NOW + timedelta(hours=1, seconds=1)), NOW, LIMITS)


def test_the_skew_is_the_setting_in_force() -> None:
    event = recorded_at(NOW + timedelta(minutes=10))
    check_recorded(event, NOW, LIMITS)
    with pytest.raises(EventRejected):
        check_recorded(event, NOW, Plausibility(100_000, timedelta(minutes=5)))


def test_the_intake_clock_reads_its_clock_again_before_it_refuses() -> None:
    readings = [NOW, NOW + timedelta(hours=3)]
    reads: list[datetime] = []

    def clock() -> datetime:
        reads.append(readings[min(len(reads), len(readings) - 1)])
        return reads[-1]

    intake = IntakeClock(LIMITS, clock)
    intake.check(recorded_at(NOW))  # within the first reading: the clock is not read again
    assert len(reads) == 1
    intake.check(recorded_at(NOW + timedelta(hours=2)))  # time went on: the new reading admits it
    assert len(reads) == 2
    with pytest.raises(EventRejected) as info:
        intake.check(recorded_at(datetime(2099, 12, 31, tzinfo=UTC)))
    assert info.value.reason == "recorded_in_future"


def test_a_fixed_clock_travels_to_a_worker_process() -> None:
    clock = pickle.loads(pickle.dumps(FixedClock(NOW)))
    assert clock() == NOW
    assert json.dumps(clock().isoformat())
