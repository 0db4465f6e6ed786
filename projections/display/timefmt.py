"""How dealtrail shows a time to people: the one code path for every page and console line.

Instants are stored in UTC. They are shown in UTC with their offset, or in the zone the user asked
for (``--tz``), always labelled with the zone, so the same store reads the same on every host
whatever the host's own time zone. Parquet and ``summary.json`` stay in UTC (:func:`iso_utc`);
every ``findings.csv`` (the console's export and the reports') writes its times in the casino's
zone with their offset (:func:`iso_local`), the one definition both use.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DisplayZone = tzinfo
"""The zone times are shown in: ``datetime.UTC`` or a :class:`zoneinfo.ZoneInfo`."""

NO_OFFSET_HELP = (
    "a time without an offset is read in {zone}; in the hour repeated when the clocks go back, "
    "as its first occurrence (add the offset, e.g. -05:00, for the second)"
)
"""What the console's forms and the API's document say about a time typed without an offset
(``{zone}``: the casino's zone; ``dealtrail.console.filters.parse_time`` reads it so)."""

FROM_HELP = "ISO 8601; " + NO_OFFSET_HELP.format(zone="the casino's zone (DEALTRAIL_TIMEZONE)")
"""The API's description of a ``from`` query parameter."""
TO_HELP = "ISO 8601, exclusive; " + NO_OFFSET_HELP.format(zone="the casino's zone (DEALTRAIL_TIMEZONE)")
"""The API's description of a ``to`` query parameter."""


def zone(name: str) -> DisplayZone:
    """The zone called ``name`` (an IANA name such as ``America/New_York``, or ``UTC``).

    Raises:
        ValueError: no such zone.
    """
    if name.upper() in ("UTC", "Z"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (use an IANA name such as America/New_York, or UTC)") from None


def zone_name(tz: DisplayZone) -> str:
    """The label of a zone: ``UTC`` or its IANA key (``America/New_York``)."""
    if tz is UTC:
        return "UTC"
    return str(getattr(tz, "key", None) or tz)


def show(t: datetime, tz: DisplayZone = UTC) -> str:
    """A full time for people, e.g. ``2026-11-27 13:00:00-05:00 America/New_York``.

    Args:
        t: a timezone-aware time (a naive one is taken as UTC, as DuckDB returns for UTC sessions).
        tz: the zone to show it in.
    """
    local = _aware(t).astimezone(tz)
    return f"{local:%Y-%m-%d %H:%M:%S}{_offset(local)} {zone_name(tz)}"


def stamp(t: datetime | None, tz: DisplayZone = UTC) -> str:
    """A time to the second with its offset, e.g. ``2026-11-27 13:19:15-05:00`` (no zone name:
    the page or column names it once); ``-`` for None. What people read in a cell or a line.

    Args:
        t: a timezone-aware time (a naive one is taken as UTC, as DuckDB returns for UTC sessions).
        tz: the casino's zone (``DEALTRAIL_TIMEZONE``), or ``datetime.UTC`` where the label says UTC.
    """
    if t is None:
        return "-"
    local = _aware(t).astimezone(tz)
    return f"{local:%Y-%m-%d %H:%M:%S}{_offset(local)}"


def short(t: datetime | None, tz: DisplayZone = UTC) -> str:
    """A time for a narrow column, to the second with its offset, e.g. ``11-27 13:19:15-05:00``
    (month and day, no year; the offset tells the two 01:30s of a night that falls back apart);
    ``-`` for None."""
    if t is None:
        return "-"
    local = _aware(t).astimezone(tz)
    return f"{local:%m-%d %H:%M:%S}{_offset(local)}"


def span(start: datetime, end: datetime, tz: DisplayZone = UTC) -> str:
    """A period for people, to the minute, each end with its offset and the zone named once, e.g.
    ``2026-11-27 14:00-05:00 to 22:00-05:00 America/New_York`` (the end's date only when it is
    another day: ``2026-10-31 20:00-04:00 to 2026-11-01 04:00-05:00 ...``)."""
    a, b = _aware(start).astimezone(tz), _aware(end).astimezone(tz)
    to = f"{b:%H:%M}" if a.date() == b.date() else f"{b:%Y-%m-%d %H:%M}"
    return f"{a:%Y-%m-%d %H:%M}{_offset(a)} to {to}{_offset(b)} {zone_name(tz)}"


def parsed(value: object) -> datetime | None:
    """``value`` as a timezone-aware time: a datetime as it is, an ISO 8601 string read (a naive
    one taken as UTC); None when it is neither."""
    if isinstance(value, datetime):
        return _aware(value)
    try:
        return _aware(datetime.fromisoformat(str(value))) if value else None
    except ValueError:
        return None


def clock(t: datetime, tz: DisplayZone = UTC) -> str:
    """The time of day with its offset, e.g. ``13:00:00-05:00`` (the offset tells the two
    01:30s of a night that falls back apart); label the column with :func:`zone_name`."""
    local = _aware(t).astimezone(tz)
    return f"{local:%H:%M:%S}{_offset(local)}"


def iso_utc(t: datetime) -> str:
    """ISO 8601 in UTC, e.g. ``2026-11-27T18:00:00+00:00`` (for CSV, JSON and the like)."""
    return _aware(t).astimezone(UTC).isoformat()


def iso_local(t: datetime, tz: DisplayZone = UTC) -> str:
    """ISO 8601 in ``tz`` with its offset, to the second, e.g. ``2026-11-01T01:30:00-04:00``
    (a CSV cell: the offset tells the two 01:30s of a night that falls back apart).

    Args:
        t: a timezone-aware time (a naive one is taken as UTC, as DuckDB returns for UTC sessions).
        tz: the casino's zone (``DEALTRAIL_TIMEZONE``, or a command's ``--tz``).
    """
    return _aware(t).astimezone(tz).isoformat(timespec="seconds")


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def _offset(local: datetime) -> str:
    off = local.strftime("%z")  # +0000 / -0500
    return f"{off[:3]}:{off[3:]}" if off else ""
