"""The report's executive summary: the headline figures of the period against the previous one,
and what needs action, for the first page or two of the report; and the running header of its
printed pages.

The previous period is the span of the same length that ends where the period starts (the
shift, day or hour before); a report of an unbounded span has none. Its figures are read from
the same store as of the same time, with the same generation of findings, so they change if
late events arrive for it; they are shown for comparison and are not part of the report's
digest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, tzinfo
from typing import Any

import duckdb
from markupsafe import Markup

from projections.display.timefmt import show
from projections.models import incidents as incident_model
from projections.models.reviews import FindingFilter, ReviewDue

ACTION_ROWS = 8
"""How many findings needing action the summary lists one by one (the rest are counted)."""


def _figures(
    con: duckdb.DuckDBPyConnection,
    start: datetime,
    end: datetime,
    due: ReviewDue | None,
    late_at: datetime,
    as_of: datetime | None,
) -> dict[str, Any]:
    """The headline figures of [start, end): rounds, incidents (by severity, per 1,000 rounds),
    incidents not disposed, overdue remedies not disposed, late reviews (None: not judged)."""
    rounds = con.execute(
        "SELECT count(*) FROM rounds WHERE completed_at >= $1 AND completed_at < $2", [start, end]
    ).fetchall()[0][0]
    c = incident_model.counts(con, due, late_at, FindingFilter(start=start, end=end), as_of)
    return {
        "rounds": int(rounds),
        "incidents": c.incidents,
        "voiding": c.by_severity["voiding"],
        "integrity": c.by_severity["integrity"],
        "procedural": c.by_severity["procedural"],
        "per_1000_rounds": round(c.incidents * 1000 / rounds, 1) if rounds else None,
        "not_disposed": c.not_disposed,
        "overdue": c.overdue_not_disposed,
        "late_reviews": c.late,
    }


def headline(
    con: duckdb.DuckDBPyConnection,
    start: datetime | None,
    end: datetime | None,
    due: ReviewDue | None,
    late_at: datetime,
    as_of: datetime | None,
) -> dict[str, Any]:
    """The period's headline figures and the previous period's (None for an unbounded period).

    Args:
        con: a connection whose session names the generation and the reviews' as-of time (as
            ``write_report`` sets them).
        start: the period's start (None: unbounded, no comparison).
        end: the period's end (None: unbounded, no comparison).
        due: review due times per severity; None: lateness not judged.
        late_at: the instant lateness is judged at.
        as_of: reviews made later are not counted (None: every review).

    Returns:
        ``{"this": figures or None, "previous": figures or None, "previous_start",
        "previous_end", "previous_empty"}``; a previous period without any stored dealing
        event has no figures (``previous`` None, ``previous_empty`` True): "no data", never
        zeros to compare with.
    """
    if start is None or end is None:
        return {"this": None, "previous": None, "previous_start": None, "previous_end": None, "previous_empty": False}
    before = start - (end - start)
    events = con.execute(
        "SELECT count(*) FROM events WHERE occurred_at >= $1 AND occurred_at < $2", [before, start]
    ).fetchall()[0][0]
    return {
        "this": _figures(con, start, end, due, late_at, as_of),
        "previous": _figures(con, before, start, due, late_at, as_of) if events else None,
        "previous_start": before,
        "previous_end": start,
        "previous_empty": not events,
    }


ROWS = (
    ("rounds", "Rounds completed"),
    ("incidents", "Incidents"),
    ("voiding", "  voiding"),
    ("integrity", "  integrity"),
    ("procedural", "  procedural"),
    ("per_1000_rounds", "Incidents per 1,000 rounds"),
    ("not_disposed", "Incidents not disposed"),
    ("overdue", "Overdue remedies not disposed"),
    ("late_reviews", "Reviews late"),
)
"""The rows of the comparison table: key, label."""


def summary(
    head: Mapping[str, Any],
    listed: Sequence[Mapping[str, Any]],
    remedies: Sequence[Mapping[str, Any]],
    figures: Mapping[str, Any],
) -> dict[str, Any]:
    """What the executive summary shows.

    Args:
        head: :func:`headline`.
        listed: the report's voiding and integrity incidents (with ``review_status``).
        remedies: the findings whose required remedy is open or overdue.
        figures: the report's figures (``build_summary``).

    Returns:
        ``rows`` (label, this period, previous period, change; None where a figure is not
        judged), ``action`` (the voiding and integrity incidents not disposed, the first
        :data:`ACTION_ROWS`), ``action_total``, ``overdue_remedies``, ``late_reviews``,
        ``data_quality`` (incidents), ``compared`` (a previous period was read),
        ``previous_empty`` (the previous period holds no event: its column says "no data").
    """
    this, prev = head.get("this"), head.get("previous")
    rows = []
    if this is not None:
        for key, label in ROWS:
            now, then = this[key], prev[key] if prev else None
            change = now - then if isinstance(now, int | float) and isinstance(then, int | float) else None
            if isinstance(change, float):
                change = round(change, 1)
            rows.append({"label": label, "this": now, "previous": then, "change": change})
    open_findings = [f for f in listed if f.get("review_status") != "disposed"]
    return {
        "rows": rows,
        "compared": prev is not None,
        "action": open_findings[:ACTION_ROWS],
        "action_total": len(open_findings),
        "overdue_remedies": sum(1 for f in remedies if f.get("status") == "overdue"),
        "open_remedies": sum(1 for f in remedies if f.get("status") == "open"),
        "late_reviews": figures["reviews"].get("late_not_disposed"),
        "data_quality": figures["data_quality"]["incidents"],
        "previous_start": head.get("previous_start"),
        "previous_end": head.get("previous_end"),
        "previous_empty": bool(head.get("previous_empty")),
    }


def css_string(text: str) -> Markup:
    """``text`` as a quoted CSS string, every character but letters, digits and a few plain
    signs written as a CSS escape (so no value can end the string or the ``<style>``)."""
    plain = set(" .,:;-+()/_'")
    out = "".join(c if (c.isascii() and c.isalnum()) or c in plain else f"\\{ord(c):06x}" for c in text)
    return Markup(f'"{out}"')


def print_header(
    property_name: str | None, start: datetime | None, end: datetime | None, tz: tzinfo
) -> dict[str, Markup]:
    """The running header of each printed page as CSS strings: ``property`` (its name, or
    "property not named") and ``period`` (its start and end in ``tz``, or "whole trail")."""
    from projections.records.property import NOT_NAMED

    span = f"{show(start, tz) if start else 'first event'} to {show(end, tz) if end else 'last event'}"
    return {"property": css_string(property_name or NOT_NAMED), "period": css_string(span)}
