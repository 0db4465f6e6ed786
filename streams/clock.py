"""The intake's own clock, read at the edge: the audit, the publisher, the worker and the
projector refuse an event recorded after it (:func:`streams.engine.check_recorded`). Imports the
standard library and :mod:`streams.engine` only; the engine itself never reads a clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from schemas.base import Envelope
from streams.engine.engine import Plausibility, check_recorded


def utc_now() -> datetime:
    """The system clock, in UTC (timezone-aware): the default clock of every intake."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class FixedClock:
    """A clock that always reads ``instant`` (timezone-aware): for tests, and for a run that
    must judge as of a given time. Picklable, so it reaches the audit's worker processes."""

    instant: datetime

    def __call__(self) -> datetime:
        """The fixed instant."""
        return self.instant


class IntakeClock:
    """Refuses events recorded after an intake's clock plus ``max_clock_skew`` (issue 32).

    The clock is read once at the start and again only for an event that would be refused by
    the last reading (the clock only moves on, so an event within the last reading is within
    any later one): a clock read per event would cost more than the check.

    Args:
        limits: the resolved ``settings.plausibility`` (``max_clock_skew``).
        clock: the intake's clock (timezone-aware); the system clock by default.
    """

    def __init__(self, limits: Plausibility, clock: Callable[[], datetime] = utc_now) -> None:
        self.limits = limits
        self.clock = clock
        self.read = clock()
        """The clock's last reading."""

    def check(self, event: Envelope) -> None:
        """Refuse ``event`` if it was recorded after this clock plus ``max_clock_skew``.

        Raises:
            streams.engine.EventRejected: ``recorded_in_future`` (see
                :func:`streams.engine.check_recorded`).
        """
        if event.recorded_at - self.read <= self.limits.max_clock_skew:
            return
        self.read = self.clock()
        check_recorded(event, self.read, self.limits)
