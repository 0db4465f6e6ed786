"""Scheduled compliance reports: one report per closed period (shift, day or a cron schedule).

A period is closed once its end has passed. Each closed period that holds any part of the trail
(a period starting after the last stored event is not reported until events arrive) gets a folder
``<out>/<period>/`` with ``report.html``, ``findings.csv``, ``findings.parquet`` and
``summary.json``; a period already written (its ``summary.json`` exists) is skipped unless
``force``. Reports depend only on the store and the period, so re-running a period writes the
same files. The clock is a parameter, so tests control it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb

from projections.report import write_report
from projections.store import connect_read_only

SHIFT_STARTS = (6, 14, 22)
"""Hours (local time) when the three 8-hour shifts start."""


class ScheduleError(ValueError):
    """An unknown schedule or time zone."""


@dataclass(frozen=True)
class Period:
    """A reporting period [start, end) and its folder name."""

    start: datetime
    end: datetime
    label: str


@dataclass(frozen=True)
class Schedule:
    """``every`` is ``shift``, ``day`` or a cron expression (5 fields); ``tz`` an IANA zone."""

    every: str
    tz: str = "UTC"

    def __post_init__(self) -> None:
        try:
            ZoneInfo(self.tz)
        except Exception as exc:
            raise ScheduleError(f"unknown time zone {self.tz!r}") from exc
        if self.every not in ("shift", "day"):
            from croniter import croniter

            if not croniter.is_valid(self.every):
                raise ScheduleError(f"--every must be shift, day or a cron expression; got {self.every!r}")

    def periods(self, first: datetime, now: datetime) -> Iterator[Period]:
        """The closed periods from the one containing ``first`` up to ``now`` (timezone-aware)."""
        zone = ZoneInfo(self.tz)
        if self.every in ("shift", "day"):
            yield from self._fixed(first.astimezone(zone), now, zone)
            return
        from croniter import croniter

        it = croniter(self.every, first.astimezone(zone))
        start = it.get_prev(datetime)
        it = croniter(self.every, start)
        while True:
            end = it.get_next(datetime)
            if end > now:
                return
            yield Period(start.astimezone(UTC), end.astimezone(UTC), f"{start:%Y-%m-%dT%H%M}")
            start = end

    def _fixed(self, first: datetime, now: datetime, zone: ZoneInfo) -> Iterator[Period]:
        hours = (0,) if self.every == "day" else SHIFT_STARTS

        def starts() -> Iterator[datetime]:
            day = first.date() - timedelta(days=1)
            while True:
                for h in hours:
                    yield datetime.combine(day, dtime(h), tzinfo=zone)
                day += timedelta(days=1)

        bounds = starts()
        start = next(bounds)
        for end in bounds:
            if end > first:
                if end > now:
                    return
                label = f"{start:%Y-%m-%d}" if self.every == "day" else f"{start:%Y-%m-%dT%H%M}-shift"
                yield Period(start.astimezone(UTC), end.astimezone(UTC), label)
            start = end


def trail_span(con: duckdb.DuckDBPyConnection) -> tuple[datetime, datetime] | None:
    """When the store's trail starts and ends (None for an empty store)."""
    rows = con.execute("SELECT min(occurred_at), max(occurred_at) FROM events").fetchall()
    if not rows or rows[0][0] is None:
        return None
    return rows[0][0], rows[0][1]


def run_due(
    db: Path | duckdb.DuckDBPyConnection,
    out: Path,
    schedule: Schedule,
    now: datetime,
    force: bool = False,
) -> list[Path]:
    """Write the report of every closed period not written yet.

    Args:
        db: the store's path (opened read-only) or the writer's own connection.
        out: the folder that holds one sub-folder per period.
        schedule: which periods.
        now: the current time (timezone-aware).
        force: rewrite periods already written.

    Returns:
        The period folders written by this call.
    """
    own = not isinstance(db, duckdb.DuckDBPyConnection)
    con = db if isinstance(db, duckdb.DuckDBPyConnection) else connect_read_only(db)
    written = []
    try:
        span = trail_span(con)
        if span is None:
            return []
        for period in schedule.periods(span[0], now):
            if period.start > span[1]:
                break  # no dealing event at all in this or any later period (yet)
            folder = out / period.label
            if (folder / "summary.json").exists() and not force:
                continue
            write_report(con, folder, period.start, period.end, f"dealtrail compliance report {period.label}")
            written.append(folder)
    finally:
        if own:
            con.close()
    return written


def run_forever(
    db: Path,
    out: Path,
    schedule: Schedule,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
    poll_seconds: float = 60.0,
    on_written: Callable[[list[Path]], None] | None = None,
    iterations: int | None = None,
) -> None:
    """Write each period's report as it closes; check every ``poll_seconds`` (seconds).

    ``iterations`` bounds the loop (tests); None runs until interrupted.
    """
    n = 0
    while iterations is None or n < iterations:
        written = run_due(db, out, schedule, clock())
        if written and on_written is not None:
            on_written(written)
        n += 1
        if iterations is None or n < iterations:
            sleep(poll_seconds)
