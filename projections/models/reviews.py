"""Reviews in the store, and the read model the console, the API and the reports share: each
finding with its review status, due time and late flag (users, roles and API tokens are in
:mod:`projections.records.users`).

Writes go through the store's one writer connection (the console in embedded mode, the projector
in the streaming deployment) and are append-only: a review is a new row. Reads take any
connection (read-only included) and are parameterised; a sort key is picked from a fixed list,
never spliced from input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb
import pyarrow as pa

from schemas.reviews import AnyReview, FindingApproved, FindingAssigned, FindingDisposed, FindingDispositionProposed

ReviewEvent = AnyReview
FOUR_EYES_SEVERITIES = ("voiding", "integrity")
"""Severities whose ``NOT_A_VIOLATION`` disposition is only proposed until a second person, a
manager, approves it."""
DECISION_TYPES = (
    "FindingDisposed",
    "FindingDispositionProposed",
    "FindingApproved",
    "FindingRejected",
    "FindingReopened",
)
"""The review events that decide a finding's disposition; a proposal is pending while it is the
latest of them (an acknowledgement or an assignment after it leaves it pending)."""
DISPOSITION_FIELDS = ("corrective_action", "note")
"""What a disposition can be required to carry besides its cause (always required)."""

FAR_PAST = datetime(1970, 1, 1, tzinfo=UTC)
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)

SORTS: dict[str, str] = {
    "detected": "detected_at",
    "table": "table_id",
    "rule": "rule_id",
    "severity": "CASE severity WHEN 'voiding' THEN 0 WHEN 'integrity' THEN 1 ELSE 2 END",
    "status": "status",
    "review": "review_status",
    "dealer": "dealer_id",
    "due": "review_due_at",
}
"""Sort keys the findings list accepts -> SQL expression (a fixed list: input never reaches SQL)."""


@dataclass(frozen=True)
class ReviewDue:
    """How long a finding may wait for its disposition, per severity (hours).

    The values come from the settings (``DEALTRAIL_REVIEW__DUE_HOURS_VOIDING`` ...); this class
    holds no default of its own.
    """

    voiding: float
    integrity: float
    procedural: float

    def params(self) -> dict[str, float]:
        """The SQL parameters of ``inc_findings.sql``."""
        return {"due_voiding": self.voiding, "due_integrity": self.integrity, "due_procedural": self.procedural}


@dataclass(frozen=True)
class DispositionNeeds:
    """What a disposition must carry besides its cause, per severity: some of
    :data:`DISPOSITION_FIELDS`. The values come from the settings
    (``DEALTRAIL_REVIEW__DISPOSITION_NEEDS_VOIDING`` ...); this class holds no default.
    """

    voiding: tuple[str, ...]
    integrity: tuple[str, ...]
    procedural: tuple[str, ...]

    def missing(self, severity: str, corrective_action: str, note: str) -> list[str]:
        """The required fields a disposition of a ``severity`` finding leaves blank (in order).

        Args:
            severity: the finding's severity (an unknown one needs what a voiding one needs).
            corrective_action: the disposition's corrective action.
            note: the disposition's note.
        """
        needed = {"procedural": self.procedural, "integrity": self.integrity}.get(severity, self.voiding)
        given = {"corrective_action": corrective_action, "note": note}
        return [f for f in DISPOSITION_FIELDS if f in needed and not given[f].strip()]


def needs_approval(severity: str, cause: str) -> bool:
    """True if a disposition with ``cause`` of a ``severity`` finding is only proposed until a
    manager other than the proposer approves it (``NOT_A_VIOLATION`` on a voiding or integrity
    finding)."""
    return cause == "NOT_A_VIOLATION" and severity in FOUR_EYES_SEVERITIES


@dataclass(frozen=True)
class FindingFilter:
    """The filters of the findings page, the CSV export and ``GET /api/v1/findings``.

    Every field None means "any". ``start``/``end`` bound the detection time, [start, end);
    ``incident`` True keeps the incidents, False the consequences (see :mod:`projections.models.incidents`);
    ``assignee`` keeps the findings assigned (latest assignment) to that user; ``not_disposed``
    True keeps the findings whose review is not ``disposed`` (a pending proposal is not);
    ``case_of`` keeps that finding and the consequences whose cause it is (a case).
    """

    start: datetime | None = None
    end: datetime | None = None
    game: str | None = None
    table_id: str | None = None
    dealer: str | None = None
    rule: str | None = None
    severity: str | None = None
    status: str | None = None
    review_status: str | None = None
    finding_id: str | None = None
    incident: bool | None = None
    assignee: str | None = None
    not_disposed: bool | None = None
    case_of: str | None = None


def has_console_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """True if the store holds the review tables (a store last written before them has none)."""
    rows = con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'dim_review_status'").fetchall()
    return bool(rows and rows[0][0])


def find(
    con: duckdb.DuckDBPyConnection,
    filters: FindingFilter,
    due: ReviewDue,
    as_of: datetime,
    sort: str = "detected",
    descending: bool = True,
    limit: int | None = None,
    offset: int = 0,
    reviews_until: datetime | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The finding records that pass ``filters``, with cause, review status, due time and late flag:
    :func:`projections.models.incidents.records` (the incidents read model), kept under this name for
    its callers.

    Args:
        con: any connection to the store.
        filters: see :class:`FindingFilter`.
        due: review due times per severity (hours).
        as_of: the instant an undisposed finding is late against (now, or a report's as-of time).
        sort: a key of :data:`SORTS` (anything else sorts by detection time).
        descending: newest / highest first.
        limit: rows per page (None: all).
        offset: rows to skip.
        reviews_until: count only reviews made at or before this instant (None: every review).

    Returns:
        ``(rows, total)``: the page's rows as dicts (the columns of ``inc_findings.sql``) and how
        many rows pass the filters in all.
    """
    from projections.models import incidents  # it builds on this module's filter and due times

    return incidents.records(con, filters, due, as_of, sort, descending, limit, offset, reviews_until)


def history(con: duckdb.DuckDBPyConnection, finding_id: str) -> list[dict[str, Any]]:
    """The finding's review events, oldest first, as dicts (type, user_name, reviewed_at, ...,
    ``proposal_id`` for an approval or a rejection; ``references``: the video references
    attached, as dicts of camera, clip_id, url and note; an empty list for a review without any,
    or stored before references existed)."""
    cur = con.execute(
        """SELECT review_id, type, user_name, reviewed_at, assignee, cause, corrective_action, note,
                  json_extract_string(payload, '$.proposal_id') AS proposal_id,
                  coalesce(payload->'references', '[]')::VARCHAR AS refs
           FROM reviews WHERE finding_id = ? ORDER BY reviewed_at, review_id""",
        [finding_id],
    )
    cols = [d[0] for d in cur.description]
    out = []
    for row in cur.fetchall():
        rec = dict(zip(cols, row, strict=True))
        rec["references"] = _references(rec.pop("refs"))
        out.append(rec)
    return out


def _references(text: str | None) -> list[dict[str, str]]:
    """The video references of a stored review payload's ``references`` (JSON text), each
    checked again by :class:`schemas.reviews.VideoReference`; one that no longer validates is
    left out of links and shown as ``invalid`` with its camera text, never dropped silently."""
    import json

    from pydantic import ValidationError

    from schemas.reviews import VideoReference

    out: list[dict[str, str]] = []
    for item in json.loads(text or "[]") or []:
        try:
            out.append(VideoReference.model_validate(item).model_dump())
        except ValidationError:
            camera = str(item.get("camera", "")) if isinstance(item, dict) else ""
            out.append({"camera": camera[:128], "clip_id": "", "url": "", "note": "", "invalid": "yes"})
    return out


REVIEWS_SCHEMA = pa.schema(
    [
        ("review_id", pa.string()),
        ("finding_id", pa.string()),
        ("type", pa.string()),
        ("user_name", pa.string()),
        ("reviewed_at", pa.timestamp("us", tz="UTC")),
        ("assignee", pa.string()),
        ("cause", pa.string()),
        ("corrective_action", pa.string()),
        ("note", pa.string()),
        ("payload", pa.string()),
    ]
)
"""The columns of the ``reviews`` table, in order (the projector's batches are Arrow tables of it)."""


_WITH_CAUSE = (FindingDisposed, FindingDispositionProposed, FindingApproved)


def review_row(review: ReviewEvent) -> dict[str, Any]:
    """The ``reviews`` table's row of one review event (see :data:`REVIEWS_SCHEMA`)."""
    return {
        "review_id": review.review_id,
        "finding_id": review.finding_id,
        "type": review.type,
        "user_name": review.user,
        "reviewed_at": review.reviewed_at,
        "assignee": review.assignee if isinstance(review, FindingAssigned) else None,
        "cause": review.cause.value if isinstance(review, _WITH_CAUSE) else None,
        "corrective_action": review.corrective_action
        if isinstance(review, FindingDisposed | FindingDispositionProposed)
        else None,
        "note": review.note,
        "payload": review.model_dump_json(),
    }


def append_review(con: duckdb.DuckDBPyConnection, review: ReviewEvent) -> bool:
    """Store one review event (the writer's connection); a review ID stored before adds nothing.

    Returns:
        True if the review was stored now, False if it was there already (a redelivery).
    """
    row = review_row(review)
    cur = con.execute(
        """INSERT INTO reviews
           SELECT $review_id, $finding_id, $type, $user_name, $reviewed_at, $assignee, $cause,
                  $corrective_action, $note, $payload
           WHERE NOT EXISTS (SELECT 1 FROM reviews WHERE review_id = $review_id)""",
        row,
    )
    got = cur.fetchall()
    return bool(got and got[0][0])


def summary(
    con: duckdb.DuckDBPyConnection,
    start: datetime | None,
    end: datetime | None,
    as_of: datetime,
    due: ReviewDue | None,
    reviews_until: datetime | None = None,
) -> dict[str, Any]:
    """Review figures of the incidents detected in [start, end) for reports and ``summary.json``,
    from the incidents read model (:mod:`projections.models.incidents`).

    Args:
        con: any connection (a store without review tables counts every incident unreviewed).
        start: start of the period, inclusive (None: unbounded).
        end: end of the period, exclusive (None: unbounded).
        as_of: the instant lateness is judged at (a report's as-of time).
        due: due times per severity; None leaves ``late`` out (unknown).
        reviews_until: count only reviews made at or before this instant (None: every review).

    Returns:
        ``{"by_review_status": {status: n}, "not_a_violation": n, "late": n | None,
        "late_not_disposed": n | None, "by_cause": {cause: n}}``, all counting incidents (a
        consequence is reviewed under its cause): ``not_a_violation`` incidents are counted in
        ``disposed`` and shown apart, never removed.
    """
    from projections.models import incidents  # it builds on this module's filter and due times

    c = incidents.counts(con, due, as_of, FindingFilter(start=start, end=end), reviews_until)
    rows, _ = incidents.records(
        con,
        FindingFilter(start=start, end=end, incident=True),
        due or ReviewDue(0, 0, 0),
        as_of,
        reviews_until=reviews_until,
    )
    by_cause: dict[str, int] = {}
    for r in rows:
        if r["cause"]:
            by_cause[r["cause"]] = by_cause.get(r["cause"], 0) + 1
    return {
        "by_review_status": dict(c.by_review_status),
        "not_a_violation": by_cause.get("NOT_A_VIOLATION", 0),
        "late": c.late,
        "late_not_disposed": c.late_not_disposed,
        "by_cause": dict(sorted(by_cause.items())),
    }


def review_rows_json(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with their times as ISO 8601 text in UTC (JSON-ready)."""
    out = []
    for r in rows:
        out.append(
            {
                k: (
                    v.astimezone(UTC).isoformat() if isinstance(v, datetime) else list(v) if isinstance(v, tuple) else v
                )
                for k, v in r.items()
            }
        )
    return out


def video_references(
    con: duckdb.DuckDBPyConnection, start: datetime | None, end: datetime | None, as_of: datetime | None = None
) -> list[dict[str, Any]]:
    """The video references attached in reviews of the findings detected in [start, end), made
    up to ``as_of`` (None: every review), oldest review first.

    Returns:
        One dict per reference: ``finding_id``, ``rule_id``, ``table_id``, ``round_id``,
        ``user_name``, ``type`` and ``reviewed_at`` of its review, and ``camera``, ``clip_id``,
        ``url``, ``note`` (and ``invalid`` for a stored one that no longer validates).
    """
    if not has_console_tables(con):
        return []
    rows = con.execute(
        """SELECT r.finding_id, d.rule_id, d.table_id, d.round_id, r.user_name, r.type, r.reviewed_at,
                  (r.payload->'references')::VARCHAR
           FROM reviews r JOIN fct_detections d USING (finding_id)
           WHERE json_array_length(r.payload->'references') > 0
             AND ($start::TIMESTAMPTZ IS NULL OR d.observed_at >= $start)
             AND ($end::TIMESTAMPTZ IS NULL OR d.observed_at < $end)
             AND ($as_of::TIMESTAMPTZ IS NULL OR r.reviewed_at <= $as_of)
           ORDER BY r.reviewed_at, r.review_id""",
        {"start": start, "end": end, "as_of": as_of},
    ).fetchall()
    out: list[dict[str, Any]] = []
    for finding_id, rule_id, table_id, round_id, user_name, type_, reviewed_at, refs in rows:
        review = {
            "finding_id": finding_id,
            "rule_id": rule_id,
            "table_id": table_id,
            "round_id": round_id,
            "user_name": user_name,
            "type": type_,
            "reviewed_at": reviewed_at,
        }
        out.extend({**review, **ref} for ref in _references(refs))
    return out
