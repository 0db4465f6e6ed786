"""The report's executive summary: the headline figures of the period against the previous one,
and what needs action, for the first page or two of the report; and the running header of its
printed pages.

The previous period is the span of the same length that ends where the period starts (the
shift, day or hour before), compared only when its trail covers it as this period's does (see
:data:`COVERAGE_SHARE`); a report of an unbounded span has none. Its figures are read from
the same store as of the same time, with the same generation of findings, so they change if
late events arrive for it; they are shown for comparison and are not part of the report's
digest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
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
    tz: tzinfo = UTC,
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
        tz: the zone the sentence of ``not_compared`` shows times in (the casino's).

    Returns:
        ``{"this": figures or None, "previous": figures or None, "previous_start",
        "previous_end", "previous_empty", "not_compared"}``; a previous period without any
        stored dealing event has no figures (``previous`` None, ``previous_empty`` True): "no
        data", never zeros to compare with; one whose events span less than
        :data:`COVERAGE_SHARE` of what this period's do is not compared either (``previous``
        None, ``not_compared`` the sentence that says why).
    """
    if start is None or end is None:
        return {
            "this": None,
            "previous": None,
            "previous_start": None,
            "previous_end": None,
            "previous_empty": False,
            "not_compared": None,
        }
    before = start - (end - start)
    this_cover, prev_cover = _covered(con, start, end), _covered(con, before, start)
    comparable = prev_cover is not None and this_cover is not None and prev_cover >= COVERAGE_SHARE * this_cover
    why = None
    if prev_cover is not None and not comparable:
        why = (
            f"No comparison with the previous period ({show(before, tz)} to {show(start, tz)}): its dealing "
            f"events span {_length(prev_cover)} of its {_length(end - start)}, this period's "
            f"{_length(this_cover or timedelta(0))}; figures of unequal coverage are not compared."
        )
    return {
        "this": _figures(con, start, end, due, late_at, as_of),
        "previous": _figures(con, before, start, due, late_at, as_of) if comparable else None,
        "previous_start": before,
        "previous_end": start,
        "previous_empty": prev_cover is None,
        "not_compared": why,
    }


COVERAGE_SHARE = 0.9
"""The previous period is compared only when its dealing events span at least this share of the
span this period's do (first to last event): a shift against a shift, not against an hour of one."""


def _covered(con: duckdb.DuckDBPyConnection, start: datetime, end: datetime) -> timedelta | None:
    """How long the dealing events of [start, end) span, first to last (None: no event)."""
    first, last = con.execute(
        "SELECT min(occurred_at), max(occurred_at) FROM events WHERE occurred_at >= $1 AND occurred_at < $2",
        [start, end],
    ).fetchall()[0]
    return None if first is None else last - first


def _length(d: timedelta) -> str:
    """A span for people, to the minute: ``8 h``, ``1 h 2 min``, ``45 min``."""
    minutes = int(d.total_seconds() // 60)
    h, m = divmod(minutes, 60)
    return " ".join(part for part in (f"{h} h" if h else "", f"{m} min" if m or not h else "") if part)


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
        ``previous_empty`` (the previous period holds no event: its column says "no data"),
        ``not_compared`` (why the previous period is not compared, or None).
    """
    this, prev = head.get("this"), head.get("previous")
    rows = []
    if this is not None:
        for key, label in ROWS:
            now, then = this[key], prev[key] if prev else None
            change = now - then if isinstance(now, int | float) and isinstance(then, int | float) else None
            if isinstance(change, float):
                change = round(change, 1)
            # more rounds is no warning: only a count of incidents going up or down is coloured
            tone = "" if key == "rounds" or not change else ("up" if change > 0 else "down")
            rows.append({"label": label, "this": now, "previous": then, "change": change, "tone": tone})
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
        "not_compared": head.get("not_compared"),
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
