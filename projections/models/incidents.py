"""The incidents read model: the one place every surface takes its counts from.

The CLI summary, ``summary.json`` and the report, the console's floor and findings pages, the API
and the late-review digest all read ``projections/store/sql/inc_findings.sql`` through this module, so
one question has one answer everywhere:

* an **incident** is a finding that is not the consequence of another; a consequence (a
  DT-remedy-overdue after a skipped remedy, a DT-chain-broken after a sequence gap, rulebook
  section 8a) is shown under its cause and not counted again (``rpt_findings.sql`` says which);
* an incident's **status** is the rulebook's remedy status of its latest revision: ``open``
  (split into *remedy owed* and *no remedy prescribed*), ``remedied``, ``overdue``;
* its **review status** is the kind of its latest review event made up to ``reviews_until``:
  ``unreviewed``, ``acknowledged``, ``assigned``, ``disposed``, ``reopened``, and
  ``pending_approval`` for a proposed disposition waiting for a manager (four eyes; it counts
  as not disposed); a manager's approval leaves it ``disposed``, a rejection ``reopened``;
* a review is **late** when the finding was disposed after its due time (detection plus
  ``DEALTRAIL_REVIEW__DUE_HOURS_<SEVERITY>`` hours), or is not disposed at ``as_of`` and
  ``as_of`` is past its due time. ``as_of`` is always passed in; nothing here reads the clock.

Every count below is of incidents unless its name says ``records``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import duckdb

from projections.models.reviews import FAR_FUTURE, FAR_PAST, SORTS, FindingFilter, ReviewDue, has_console_tables
from projections.store import summaries
from projections.store.sql_files import read_sql
from schemas.reviews import ReviewStatus

SEVERITIES = ("voiding", "integrity", "procedural")
STATUSES = ("open", "remedied", "overdue")
"""The rulebook's remedy statuses of a finding."""
REVIEW_STATUSES = tuple(s.value for s in ReviewStatus)
"""The review statuses (:class:`schemas.reviews.ReviewStatus`)."""

_NO_REVIEWS = (
    "(SELECT NULL::VARCHAR AS finding_id, NULL::VARCHAR AS review_id, NULL::VARCHAR AS type,"
    " NULL::VARCHAR AS user_name, NULL::TIMESTAMPTZ AS reviewed_at, NULL::VARCHAR AS assignee,"
    " NULL::VARCHAR AS cause, NULL::VARCHAR AS corrective_action, NULL::VARCHAR AS note WHERE false)"
)


def model_sql(con: duckdb.DuckDBPyConnection, live: bool = False) -> str:
    """The model's query (``inc_findings.sql`` with its finding half spliced in), for ``con``'s
    store: the finding half is read from the summary ``sum_findings`` the writer keeps
    (:mod:`projections.store.summaries`), or computed by ``rpt_findings.sql`` from every revision and
    round in a store without it (one last written by an older version, opened read-only) or with
    ``live``; one without review tables reads an empty review stream (every finding unreviewed)."""
    reviews_source = "reviews" if has_console_tables(con) else _NO_REVIEWS
    findings = (
        summaries.FINDINGS_SOURCE
        if not live and summaries.has_summary(con, "sum_findings")
        else read_sql("rpt_findings.sql")
    )
    sql = read_sql("inc_findings.sql")
    return sql.replace("/*findings*/", findings).replace("/*reviews*/", reviews_source)


def _params(
    filters: FindingFilter,
    due: ReviewDue,
    as_of: datetime,
    reviews_until: datetime | None,
    ids: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "ids": ids,  # these finding IDs only (None: all); a page's rows, read after their keys
        "start": filters.start or FAR_PAST,
        "end": filters.end or FAR_FUTURE,
        "game": filters.game,
        "table_id": filters.table_id,
        "dealer": filters.dealer,
        "rule": filters.rule,
        "severity": filters.severity,
        "status": filters.status,
        "review_status": filters.review_status,
        "finding_id": filters.finding_id,
        "incident": filters.incident,
        "assignee": filters.assignee,
        "not_disposed": filters.not_disposed,
        "case_of": filters.case_of,
        "as_of": as_of,
        "reviews_until": reviews_until or FAR_FUTURE,
        **due.params(),
    }


def records(
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
    """The finding records that pass ``filters``, consequences included, each with its cause,
    ``incident`` flag, remedy status, review status, due time and late flag.

    Args:
        con: any connection to the store (read-only included).
        filters: see :class:`projections.models.reviews.FindingFilter` (``incident=True``: incidents only).
        due: review due times per severity (hours, from the settings).
        as_of: the instant an undisposed finding is late against (timezone-aware).
        sort: a key of :data:`projections.models.reviews.SORTS` (anything else: detection time).
        descending: newest / highest first.
        limit: rows per page (None: all).
        offset: rows to skip.
        reviews_until: count only reviews made at or before this instant (None: every review).

    Returns:
        ``(rows, total)``: the page's rows as dicts (the columns of ``inc_findings.sql``) and how
        many records pass the filters in all.
    """
    params = _params(filters, due, as_of, reviews_until)
    base = model_sql(con)
    order = SORTS.get(sort, SORTS["detected"])
    direction = "DESC" if descending else "ASC"
    # the model runs once: the page's rows carry the count of every row that passed the filters
    page = (
        f"SELECT *, count(*) OVER () AS _records FROM ({base}) "
        f"ORDER BY {order} {direction} NULLS LAST, detected_at DESC, finding_id"
    )
    if limit is not None:
        page += " LIMIT $limit OFFSET $offset"
        params |= {"limit": int(limit), "offset": int(offset)}
    cur = con.execute(page, params)
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
    if rows:
        total = int(rows[0]["_records"])
    elif offset:  # past the last page: the count comes from the model alone
        total_rows = con.execute(
            f"SELECT count(*) FROM ({base})", _params(filters, due, as_of, reviews_until)
        ).fetchall()
        total = int(total_rows[0][0]) if total_rows else 0
    else:
        total = 0
    for row in rows:
        del row["_records"]
    return rows, total


@dataclass(frozen=True)
class Counts:
    """The figures of one scope (a period, a table, a filter), incidents unless named records.

    Attributes:
        records: finding records, consequences included (the rows of findings.csv and of the
            console's findings list).
        incidents: records that are not a consequence of another.
        consequences: records shown under their cause (``records - incidents``).
        by_severity: incidents per severity (voiding, integrity, procedural).
        by_status: incidents per remedy status (open, remedied, overdue).
        open_remedy_owed: open incidents whose rule requires a remedy not yet seen.
        open_no_remedy: open incidents whose rule prescribes no remedy (they wait for a review).
        by_review_status: incidents per review status.
        not_disposed: incidents whose review is not ``disposed``.
        not_disposed_by_severity: the same per severity (the floor's columns).
        overdue_not_disposed: overdue incidents not disposed (the floor's "remedies overdue").
        late: incidents whose review is late (see the module docstring); None: not judged.
        late_not_disposed: late incidents still not disposed (the digest's list); None: not judged.
        last_not_disposed_at: the latest detection of an incident not disposed (None: none).
    """

    records: int = 0
    incidents: int = 0
    consequences: int = 0
    by_severity: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SEVERITIES, 0))
    by_status: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    open_remedy_owed: int = 0
    open_no_remedy: int = 0
    by_review_status: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REVIEW_STATUSES, 0))
    not_disposed: int = 0
    not_disposed_by_severity: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SEVERITIES, 0))
    overdue_not_disposed: int = 0
    late: int | None = 0
    late_not_disposed: int | None = 0
    last_not_disposed_at: datetime | None = None

    @property
    def open(self) -> int:
        """Open incidents (remedy owed plus no remedy prescribed)."""
        return self.by_status["open"]

    def as_dict(self) -> dict[str, Any]:
        """The figures as a dict (``open`` included; times left as datetimes)."""
        return {**asdict(self), "open": self.open}


_AGGREGATE = """
WITH g AS (  -- the model's rows grouped by what the figures tell apart: a few dozen groups
    SELECT {key} incident, severity, status, coalesce(required_remedy, '') <> '' AS owed, review_status,
           review_late, count(*) AS n, max(detected_at) AS last_at
    FROM ({model})
    GROUP BY ALL
)
SELECT {key}
    coalesce(sum(n), 0) AS records,
    coalesce(sum(n) FILTER (WHERE incident), 0) AS incidents,
    {severities},
    {statuses},
    coalesce(sum(n) FILTER (WHERE incident AND status = 'open' AND owed), 0) AS open_remedy_owed,
    coalesce(sum(n) FILTER (WHERE incident AND status = 'open' AND NOT owed), 0) AS open_no_remedy,
    {review_statuses},
    {not_disposed},
    coalesce(sum(n) FILTER (WHERE incident AND review_status <> 'disposed' AND status = 'overdue'), 0) AS overdue_nd,
    coalesce(sum(n) FILTER (WHERE incident AND review_late), 0) AS late,
    coalesce(sum(n) FILTER (WHERE incident AND review_late AND review_status <> 'disposed'), 0) AS late_nd,
    max(last_at) FILTER (WHERE incident AND review_status <> 'disposed') AS last_nd_at
FROM g
{group}
"""
"""The figures of the model's rows (:class:`Counts`' columns), per table with ``{key}`` =
``table_id,``. The rows are grouped first by the few columns the figures depend on, then the
figures are sums over those groups: the same numbers as a count per figure over every row, at
about four fifths of the time on a month's 35,000 findings (one hash of a few columns per row
instead of two dozen filtered counts)."""


def _aggregate_sql(model: str, by_table: bool) -> str:
    def each(prefix: str, column: str, values: tuple[str, ...], extra: str = "") -> str:
        return ",\n    ".join(
            f"coalesce(sum(n) FILTER (WHERE incident{extra} AND {column} = '{v}'), 0) AS {prefix}_{v}" for v in values
        )

    return _AGGREGATE.format(
        key="table_id," if by_table else "",
        severities=each("sev", "severity", SEVERITIES),
        statuses=each("st", "status", STATUSES),
        review_statuses=each("rv", "review_status", REVIEW_STATUSES),
        not_disposed=each("nd", "severity", SEVERITIES, " AND review_status <> 'disposed'"),
        model="/*model*/",
        group="GROUP BY table_id ORDER BY table_id" if by_table else "",
    ).replace("/*model*/", model)


def _counts(row: dict[str, Any], judge_late: bool) -> Counts:
    return Counts(
        records=int(row["records"]),
        incidents=int(row["incidents"]),
        consequences=int(row["records"]) - int(row["incidents"]),
        by_severity={s: int(row[f"sev_{s}"]) for s in SEVERITIES},
        by_status={s: int(row[f"st_{s}"]) for s in STATUSES},
        open_remedy_owed=int(row["open_remedy_owed"]),
        open_no_remedy=int(row["open_no_remedy"]),
        by_review_status={s: int(row[f"rv_{s}"]) for s in REVIEW_STATUSES},
        not_disposed=sum(int(row[f"nd_{s}"]) for s in SEVERITIES),
        not_disposed_by_severity={s: int(row[f"nd_{s}"]) for s in SEVERITIES},
        overdue_not_disposed=int(row["overdue_nd"]),
        late=int(row["late"]) if judge_late else None,
        late_not_disposed=int(row["late_nd"]) if judge_late else None,
        last_not_disposed_at=row["last_nd_at"],
    )


def _run(
    con: duckdb.DuckDBPyConnection,
    filters: FindingFilter,
    due: ReviewDue | None,
    as_of: datetime,
    reviews_until: datetime | None,
    by_table: bool,
) -> list[dict[str, Any]]:
    params = _params(filters, due or ReviewDue(0, 0, 0), as_of, reviews_until)
    cur = con.execute(_aggregate_sql(model_sql(con), by_table), params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def counts(
    con: duckdb.DuckDBPyConnection,
    due: ReviewDue | None,
    as_of: datetime,
    filters: FindingFilter | None = None,
    reviews_until: datetime | None = None,
) -> Counts:
    """The figures of every finding that passes ``filters`` (default: the whole store).

    Args:
        con: any connection to the store (read-only included); the generation is the one the
            session names (``SET VARIABLE dealtrail_generation``), else the latest.
        due: review due times per severity (from the settings); None: lateness not judged
            (``late`` and ``late_not_disposed`` are None).
        as_of: the instant lateness is judged at (timezone-aware; the console's now, a report's
            as-of time). Never read from the clock here.
        filters: the scope (period [start, end) of detection, table, rule, ...).
        reviews_until: count only reviews made at or before this instant (None: every review).

    Returns:
        The :class:`Counts` of the scope.
    """
    rows = _run(con, filters or FindingFilter(), due, as_of, reviews_until, by_table=False)
    return _counts(rows[0], due is not None)


def page(
    con: duckdb.DuckDBPyConnection,
    filters: FindingFilter,
    due: ReviewDue,
    as_of: datetime,
    sort: str = "detected",
    descending: bool = True,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], Counts]:
    """One page of :func:`records` with the :func:`counts` of every record that passed the
    filters (the findings list and the findings API show both): the figures and the page's keys
    come from one query over the model's narrow columns, then the wide columns (messages,
    evidence lists) are read for the page's rows only, so a long history is sorted narrow.

    Args:
        con: any connection to the store (read-only included).
        filters: see :class:`projections.models.reviews.FindingFilter`.
        due: review due times per severity (hours, from the settings).
        as_of: the instant an undisposed finding is late against (timezone-aware).
        sort: a key of :data:`projections.models.reviews.SORTS` (anything else: detection time).
        descending: newest / highest first.
        limit: rows per page (at least 1).
        offset: rows to skip (a page past the last one has no rows and still its counts).

    Returns:
        ``(rows, counts)``: the page's rows as :func:`records` gives them, and the figures of
        the whole filtered set (``counts.records`` is the total :func:`records` gives).

    Raises:
        duckdb.TransactionException: ``con`` is in a transaction already (both queries run in
            one of their own; give it a cursor of its own).
    """
    order = SORTS.get(sort, SORTS["detected"])
    direction = "DESC" if descending else "ASC"
    sort_keys = f"_key {direction} NULLS LAST, detected_at DESC, finding_id"
    # first the figures and the page's keys, from the model's narrow columns (materialised once)...
    keys = f"""
        WITH m AS MATERIALIZED (
            SELECT finding_id, detected_at, incident, severity, status, required_remedy, review_status,
                   review_late, ({order}) AS _key
            FROM ({model_sql(con)})
        ), agg AS ({_aggregate_sql("SELECT * FROM m", False)})
        SELECT agg AS _counts,
               (SELECT coalesce(list(finding_id ORDER BY {sort_keys}), []) FROM (
                    SELECT * FROM m ORDER BY {sort_keys} LIMIT $limit OFFSET $offset)) AS _ids
        FROM agg"""
    params = _params(filters, due, as_of, None) | {"limit": max(1, int(limit)), "offset": max(0, int(offset))}
    # both queries in one transaction: the rows are those the figures counted, whatever a writer commits between
    con.execute("BEGIN TRANSACTION")
    try:
        found = con.execute(keys, params).fetchone()
        if found is None:
            return [], Counts()
        counted, ids = _counts(found[0], judge_late=True), [str(i) for i in found[1]]
        if not ids:
            return [], counted
        # ...then the wide columns of those rows only
        cur = con.execute(model_sql(con), _params(filters, due, as_of, None, ids))
        cols = [d[0] for d in cur.description]
        by_id = {row[cols.index("finding_id")]: dict(zip(cols, row, strict=True)) for row in cur.fetchall()}
        return [by_id[i] for i in ids], counted
    finally:
        con.execute("COMMIT")


def total(parts: Iterable[Counts], judge_late: bool) -> Counts:
    """The figures of disjoint scopes added up (every count summed, the latest detection the
    latest of theirs): :func:`counts` of the union, e.g. of :func:`counts_by_table`'s tables,
    read without running the model again. ``judge_late``: whether lateness was judged (else
    ``late`` and ``late_not_disposed`` are None, as :func:`counts` gives them without due times)."""
    out = Counts()
    for c in parts:
        latest = [t for t in (out.last_not_disposed_at, c.last_not_disposed_at) if t is not None]
        out = Counts(
            records=out.records + c.records,
            incidents=out.incidents + c.incidents,
            consequences=out.consequences + c.consequences,
            by_severity={s: out.by_severity[s] + c.by_severity[s] for s in SEVERITIES},
            by_status={s: out.by_status[s] + c.by_status[s] for s in STATUSES},
            open_remedy_owed=out.open_remedy_owed + c.open_remedy_owed,
            open_no_remedy=out.open_no_remedy + c.open_no_remedy,
            by_review_status={s: out.by_review_status[s] + c.by_review_status[s] for s in REVIEW_STATUSES},
            not_disposed=out.not_disposed + c.not_disposed,
            not_disposed_by_severity={
                s: out.not_disposed_by_severity[s] + c.not_disposed_by_severity[s] for s in SEVERITIES
            },
            overdue_not_disposed=out.overdue_not_disposed + c.overdue_not_disposed,
            late=(out.late or 0) + (c.late or 0),
            late_not_disposed=(out.late_not_disposed or 0) + (c.late_not_disposed or 0),
            last_not_disposed_at=max(latest) if latest else None,
        )
    if not judge_late:
        out = dataclasses.replace(out, late=None, late_not_disposed=None)
    return out


def counts_by_table(
    con: duckdb.DuckDBPyConnection,
    due: ReviewDue | None,
    as_of: datetime,
    filters: FindingFilter | None = None,
    reviews_until: datetime | None = None,
) -> dict[str, Counts]:
    """:func:`counts` per table (table ID -> figures; a table without findings is absent)."""
    rows = _run(con, filters or FindingFilter(), due, as_of, reviews_until, by_table=True)
    return {str(r["table_id"]): _counts(r, due is not None) for r in rows}


def summary_line(c: Counts) -> str:
    """The figures as one line for a terminal: incidents, their remedy statuses, the late
    reviews, then the finding records they come from (the CLI's ``audit`` and ``demo``)."""
    late = "" if c.late is None else f"; reviews late {c.late:,}"
    return (
        f"{c.incidents:,} incidents (open {c.open:,}: remedy owed {c.open_remedy_owed:,}, "
        f"no remedy prescribed {c.open_no_remedy:,}; overdue {c.by_status['overdue']:,}; "
        f"remedied {c.by_status['remedied']:,}{late}) from {c.records:,} finding records "
        f"({c.consequences:,} consequences shown under their cause)"
    )
