"""The intake's clock, read at the edge: the audit and the publisher refuse an event recorded
after their own clock, the worker and the projector an event recorded after its Kafka record's
timestamp (:func:`streams.engine.check_recorded`), so both decide alike whatever their host
clocks say (issue 46); :class:`HostClockCheck` says when a host clock is off from the broker's.
Imports the standard library and :mod:`streams.engine` only; the engine itself never reads a clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

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

    def check(self, event: Envelope, stamped: datetime | None = None) -> None:
        """Refuse ``event`` if it was recorded after this clock plus ``max_clock_skew``.

        Args:
            event: the event as received.
            stamped: the timestamp of the Kafka record that carried it (:func:`record_time`);
                when given it decides instead of this clock, so the worker, the projector and
                any redelivery judge the record alike (issue 46); None (a file, a record
                without a timestamp): this clock.

        Raises:
            streams.engine.EventRejected: ``recorded_in_future`` (see
                :func:`streams.engine.check_recorded`).
        """
        if stamped is not None:
            check_recorded(event, stamped, self.limits, "its Kafka record's timestamp")
            return
        if event.recorded_at - self.read <= self.limits.max_clock_skew:
            return
        self.read = self.clock()
        check_recorded(event, self.read, self.limits)


def record_time(timestamp_ms: int | float | None) -> datetime | None:
    """A Kafka record's timestamp (milliseconds since the epoch, as the clients give it) as a
    UTC instant; None for a record without one (a client gives -1 or None)."""
    if timestamp_ms is None or timestamp_ms < 0:
        return None
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC)


class HostClockCheck:
    """Whether this host's clock is more than ``limit`` off from the broker's record timestamps.

    Fed with the host clock and the timestamp of records as they are read. A record's timestamp
    is never later than the moment it can be read, so a host clock more than ``limit`` before
    any record's timestamp is behind. A record read at the end of its partition (``fresh``: the
    reader is caught up) was written moments ago, so a host clock more than ``limit`` after it
    is ahead; a record read while catching up tells nothing about that. One line when the clock
    goes off and one when it agrees again (:meth:`observe`), and the last offset measured for
    ``/readyz`` (:attr:`offset`).

    Args:
        limit: how far off is too far (``settings.plausibility.max_clock_skew``).
    """

    def __init__(self, limit: timedelta) -> None:
        self.limit = limit
        self.offset: timedelta | None = None
        """The host clock minus the timestamp of the last record that measured it (None: none yet)."""
        self.off = False
        """The host clock is more than ``limit`` off (as the last telling record showed)."""

    def observe(self, host: datetime, stamped: datetime | None, fresh: bool) -> str | None:
        """Take one record's timestamp ``stamped`` read at host time ``host``; returns the line
        to say when the verdict changes, else None."""
        if stamped is None:
            return None
        offset = host - stamped
        if offset < -self.limit or (fresh and offset > self.limit):
            off = True
        elif fresh or offset <= self.limit:
            off = False
        else:
            return None  # an old record read late: says nothing of this clock
        self.offset = offset
        if off == self.off:
            return None
        self.off = off
        if off:
            way = "behind" if offset < timedelta(0) else "ahead of"
            return (
                f"this host's clock is {abs(offset)} {way} the broker's record timestamps (more than "
                f"DEALTRAIL_MAX_CLOCK_SKEW {self.limit}): events are judged against their records' "
                "timestamps, but fix the host's clock (NTP)"
            )
        return f"this host's clock agrees with the broker's record timestamps again (off by {offset})"

    def as_json(self) -> dict[str, object]:
        """What ``/readyz`` reports of it."""
        return {
            "off": self.off,
            "offset_seconds": None if self.offset is None else round(self.offset.total_seconds(), 1),
            "limit_seconds": self.limit.total_seconds(),
        }
