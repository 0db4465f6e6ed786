"""The findings filters of the pages' and the API's query strings: ``from``/``to`` times read as
ISO 8601 (without an offset: the casino's wall clock, the first of a repeated hour), blank values
meaning any."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from typing import Annotated, Literal

from fastapi import Depends, Query, Request

from dealtrail.console.deps import invalid
from projections.models.reviews import FindingFilter

KINDS = {"incidents": True, "consequences": False}
"""The findings list's ``kind`` values -> ``FindingFilter.incident`` (absent: every record)."""


def parse_time(value: str | datetime | None, name: str, tz: tzinfo = UTC) -> datetime | None:
    """A filter's time: ISO 8601; one with an offset keeps it. One without an offset is a wall
    clock time in ``tz`` (the casino's zone, as the pages say with
    ``projections.display.timefmt.NO_OFFSET_HELP``): in the hour repeated when the clocks go
    back (``2026-11-01T01:30`` in New York) it is the first occurrence (``fold=0``,
    ``-04:00``), and a time skipped when they go forward is read with the offset
    before the change (as :mod:`zoneinfo` does).

    Args:
        value: the query value (text, or a time pydantic has parsed); None or blank: no bound.
        name: the query parameter's name, for the error.
        tz: the casino's zone (``datetime.UTC`` or a ``ZoneInfo``).

    Returns:
        The UTC instant, or None.

    Raises:
        RequestValidationError: 422, not a time, or one that is not a UTC instant (an offset
            that moves year 1 or 9999 out of range).
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        t = value
    else:
        try:
            t = datetime.fromisoformat(value)
        except ValueError:
            raise invalid(("query", name), f"{name} must be an ISO 8601 time, e.g. 2026-11-27T18:00:00+00:00") from None
    t = t if t.tzinfo is not None else t.replace(tzinfo=tz, fold=0)
    try:
        return t.astimezone(UTC)
    except OverflowError:
        raise invalid(("query", name), f"{name} is out of range once taken to UTC") from None


def _blank(value: str | None) -> str | None:
    return value or None


@dataclass(frozen=True)
class FindingsQuery:
    """A findings list's query: the filter, the query-string values as given (for links), the sort
    column and its order (``asc`` or ``desc``), and ``mine``: "my queue" (the findings assigned to
    the signed-in user, not yet disposed; the page applies it, knowing the user)."""

    flt: FindingFilter
    params: dict[str, str]
    sort: str
    order: Literal["asc", "desc"]
    mine: bool = False


def filters_from(
    from_: str | datetime | None,
    to: str | datetime | None,
    game: str | None,
    table: str | None,
    dealer: str | None,
    rule: str | None,
    severity: str | None,
    status: str | None,
    review: str | None,
    tz: tzinfo = UTC,
) -> FindingFilter:
    """The findings filter of a page's or the API's query values (blank means any); ``from`` and
    ``to`` without an offset are read in ``tz``, the casino's zone (:func:`parse_time`).

    Raises:
        RequestValidationError: 422 for a ``from``/``to`` that is not an ISO 8601 time.
    """
    return FindingFilter(
        start=parse_time(from_, "from", tz),
        end=parse_time(to, "to", tz),
        game=_blank(game),
        table_id=_blank(table),
        dealer=_blank(dealer),
        rule=_blank(rule),
        severity=_blank(severity),
        status=_blank(status),
        review_status=_blank(review),
    )


def page_query(
    request: Request,
    from_: Annotated[str | None, Query(alias="from")] = None,
    to: str | None = None,
    game: str | None = None,
    table: str | None = None,
    dealer: str | None = None,
    rule: str | None = None,
    severity: str | None = None,
    status: str | None = None,
    review: str | None = None,
    sort: str = "detected",
    order: Literal["asc", "desc"] = "desc",
    kind: str | None = None,
    mine: str | None = None,
) -> FindingsQuery:
    """The findings page's and its CSV export's query: one filter, one order. ``kind``
    ``incidents`` keeps the incidents, ``consequences`` the consequences (anything else: every
    finding record); ``mine`` (any non-blank value) asks for "my queue". Times without an offset
    are read in the console's zone (``ConsoleConfig.tz``)."""
    given = {"from": from_, "to": to, "game": game, "table": table, "dealer": dealer, "rule": rule,
             "severity": severity, "status": status, "review": review}  # fmt: skip
    tz = request.app.state.console.config.tz
    flt = filters_from(from_, to, game, table, dealer, rule, severity, status, review, tz)
    incident = KINDS.get(kind or "")
    given["kind"] = kind if incident is not None else None
    flt = replace(flt, incident=incident)
    given["mine"] = "1" if mine else None
    return FindingsQuery(flt, {k: v or "" for k, v in given.items()}, sort, order, bool(mine))


Filters = Annotated[FindingsQuery, Depends(page_query)]
