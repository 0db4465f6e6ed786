"""The console's pages: the floor, the findings list and its CSV export, a finding with its
evidence and its review form, a dealer's and a table's rates, and the static assets (served
only after login, like everything else)."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, tzinfo
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

import duckdb
from fastapi import APIRouter, Form, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from dealtrail.console import control_pages, replay_pages
from dealtrail.console.api_models import ReviewRequest
from dealtrail.console.deps import SEVERITIES, Console, Cursor, PageUser, User, invalid, query_string, sql
from dealtrail.console.filters import Filters, FindingsQuery
from dealtrail.investigate.replay import round_seqs
from projections.display.cards import area_name, card_face
from projections.display.spreadsheet import neutralise_cell
from projections.display.timefmt import iso_local
from projections.models import incidents, reviews
from projections.models.late_remedies import late_remedies
from projections.models.reviews import FindingFilter, ReviewDue
from projections.records import staff
from projections.store import summaries
from schemas.reviews import Cause, ReviewStatus
from streams.engine.catalog import RULES_BY_ID

PAGE_SIZE = 50
ACTIONS = ("acknowledge", "assign", "dispose", "reopen", "approve", "reject", "attach")


def router(console: Console) -> APIRouter:
    """The pages' routes (none in the API's document)."""
    routes = APIRouter()
    config, render, check_csrf = console.config, console.render, console.check_csrf

    # -- static assets (authenticated like everything else) ---------------------------------

    @routes.get("/static/{name}", include_in_schema=False)
    def static(name: str, user: PageUser) -> Response:
        if name not in ("console.css", "console.js"):
            raise HTTPException(404)
        path = Path(str(resources.files("dealtrail.console").joinpath("static", name)))
        kind = "text/css" if name.endswith(".css") else "text/javascript"
        return FileResponse(path, media_type=kind, headers={"Cache-Control": "private, max-age=300"})

    # -- floor -----------------------------------------------------------------------------

    @routes.get("/", include_in_schema=False)
    def floor(request: Request, user: PageUser, con: Cursor) -> HTMLResponse:
        return render(
            request,
            "floor.html.j2",
            user,
            **console.floor_context(con),
            poll_ms=int(config.poll_seconds * 1000),
            undelivered=_undelivered(con),
        )

    @routes.get("/floor/tables", include_in_schema=False)
    def floor_fragment(request: Request, user: PageUser, con: Cursor) -> HTMLResponse:
        return render(request, "floor_rows.html.j2", user, **console.floor_context(con))

    # -- findings --------------------------------------------------------------------------

    @routes.get("/findings", include_in_schema=False)
    def findings_page(
        request: Request,
        user: PageUser,
        con: Cursor,
        q: Filters,
        page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
        done: str = "",
    ) -> HTMLResponse:
        now = config.clock()
        flt = queue_filter(q, user)
        # the figures and the page's rows, read in one transaction
        rows, counted = incidents.page(
            con, flt, config.review_due, now, q.sort, q.order == "desc", PAGE_SIZE, (page - 1) * PAGE_SIZE
        )
        total = counted.records
        params, sort, order = q.params, q.sort, q.order
        return render(
            request,
            "findings.html.j2",
            user,
            rows=[_decorate(r) for r in rows],
            total=total,
            counted=counted,
            page=page,
            pages=max(1, math.ceil(total / PAGE_SIZE)),
            params=params,
            sort=sort,
            order=order,
            query=lambda **kw: query_string({**params, "sort": sort, "order": order, **kw}),
            choices=_choices(con),
            severities=SEVERITIES,
            review_statuses=[s.value for s in ReviewStatus],
            done=done if re.fullmatch(r"\d{1,4} (acknowledge|assign)", done) else "",
        )

    @routes.get("/findings.csv", include_in_schema=False)
    def findings_csv(user: PageUser, con: Cursor, q: Filters) -> Response:
        rows, _ = reviews.find(con, queue_filter(q, user), config.review_due, config.clock(), q.sort, q.order == "desc")
        return Response(
            _csv(rows, staff.names(con), config.tz),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": 'attachment; filename="findings.csv"'},
        )

    @routes.get("/findings/{finding_id}", include_in_schema=False)
    def finding_page(request: Request, finding_id: str, user: PageUser, con: Cursor, done: str = "") -> HTMLResponse:
        return finding_view(request, finding_id, user, con, done, read=True)

    def finding_view(
        request: Request,
        finding_id: str,
        user: User,
        con: duckdb.DuckDBPyConnection,
        done: str = "",
        status_code: int = 200,
        form: dict[str, str] | None = None,
        errors: dict[str, str] | None = None,
        read: bool = False,
    ) -> HTMLResponse:
        """A finding's page; after a refused review, the form's values and each field's error;
        ``read``: record the reading in the access log (``finding_viewed``)."""
        f, case_rows = console.finding_case(con, finding_id)  # the read model once for an incident
        spec = RULES_BY_ID.get(f["rule_id"])
        near = f["detected_at"]
        # the round's first and last seq once, for its replay and its supervisor on duty
        bounds = round_seqs(con, f["table_id"], f["round_id"], near) if f["round_id"] is not None else None
        # once, for the layout and the picture
        replayed, replay_note = _round_replay(con, f["table_id"], f["round_id"], near, bounds)
        evidence_ids, remedy_ids = list(f["evidence_event_ids"]), list(f["remedy_event_ids"] or [])
        # evidence and remedy events in one read (a conflicting event reusing an ID is listed too)
        found = _events(con, evidence_ids + remedy_ids, f["table_id"], near)
        page = render(
            request,
            "finding.html.j2",
            user,
            status_code,
            f=_decorate(f),
            summary=spec.summary if spec else "",
            evidence=[e for e in found if e["event_id"] in evidence_ids],
            remedy_events=[e for e in found if e["event_id"] in remedy_ids],
            late_remedies=late_remedies(con, finding_id, console.config.remedy_window, f["status"]),
            layout=_round_layout(replayed),
            investigation=replay_pages.investigation(con, f, case_rows, replayed, replay_note, config.tz),
            history=reviews.history(con, finding_id),
            revisions=_revisions(con, finding_id),
            causes=[c.value for c in Cause],
            users=_reviewers(con),
            supervisor_id=staff.supervisor_on_duty(
                con, f["table_id"], f["round_id"], near, bounds[1] if bounds is not None else None
            ),
            done=done if done in ACTIONS else "",
            queued=console.review_sink is not None,
            error=None,
            form=form or {},
            errors=errors or {},
        )
        if read:
            console.record_finding_read("finding_viewed", user, f)
        return page

    @routes.post("/findings/{finding_id}/reviews", include_in_schema=False)
    def review_form(
        request: Request,
        finding_id: str,
        user: PageUser,
        con: Cursor,
        csrf: Annotated[str, Form()],
        action: Annotated[str, Form()],
        note: Annotated[str, Form(max_length=4000)] = "",
        cause: Annotated[str, Form()] = "",
        corrective_action: Annotated[str, Form(max_length=4000)] = "",
        assignee: Annotated[str, Form(max_length=64)] = "",
    ) -> Response:
        with console.review_refusals(user, action, f"finding {finding_id}"):  # each refusal logged
            check_csrf(request, csrf)
            if not user.can_review:
                raise HTTPException(403, "a viewer cannot review findings")
            if action in ("approve", "reject") and not user.can_approve:
                raise HTTPException(403, f"only a manager can {action} a proposed disposition")
        typed = {"action": action, "cause": cause, "corrective_action": corrective_action}
        typed |= {"assignee": assignee, "note": note}
        try:
            with console.review_refusals(user, action, f"finding {finding_id}"):
                if action not in ACTIONS:
                    raise invalid(("body", "action"), f"action must be one of {', '.join(ACTIONS)}")
                try:
                    body = ReviewRequest.model_validate(
                        {
                            "action": action,
                            "cause": cause or None,
                            "corrective_action": corrective_action,
                            "assignee": assignee or None,
                            "note": note,
                        }
                    )
                except ValidationError as exc:  # a form's values, refused as the API refuses them
                    raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None
                console.record_review(con, finding_id, user, body)
        except RequestValidationError as exc:  # the page again: the message beside its field, the values kept
            errors: dict[str, str] = {}
            for e in exc.errors():
                loc = [str(x) for x in e.get("loc", ())[1:]] or ["action"]
                errors.setdefault(loc[0] if loc[0] in typed else "action", str(e.get("msg", "")))
            return finding_view(request, finding_id, user, con, status_code=422, form=typed, errors=errors)
        except HTTPException as exc:  # nothing to approve or reject (409): the page again, the message beside it
            if exc.status_code != 409:
                raise
            return finding_view(request, finding_id, user, con, status_code=409, form=typed,
                                errors={"action": str(exc.detail)})  # fmt: skip
        return RedirectResponse(f"/findings/{finding_id}?done={action}#reviews", status_code=303)

    @routes.get("/dealers/{dealer_id:path}", include_in_schema=False)  # an ID may hold a "/"
    def dealer_page(
        request: Request, dealer_id: str, user: PageUser, con: Cursor, period: Period = "7d", slot: str | None = None
    ) -> HTMLResponse:
        last = _last_activity(con, dealer_id, None)
        if last is None:
            raise HTTPException(404, f"no round dealt by {dealer_id}")
        start, end = period_bounds(period, last)
        r = _rates(con, dealer_id, None, start, end)
        tables = con.execute(
            """SELECT table_id, count(*) FROM rounds WHERE dealer_id = ?
               AND (?::TIMESTAMPTZ IS NULL OR completed_at >= ?) AND completed_at < ? GROUP BY 1 ORDER BY 2 DESC""",
            [dealer_id, start, start, end],
        ).fetchall()
        member = staff.current(con).get(dealer_id)
        control = control_pages.context(console, con, "dealer", dealer_id, start, end, slot)
        return render(request, "rates.html.j2", user, kind="Dealer", key=dealer_id, r=r, related=tables,
                      staff_member=member, supervisor_id=None, period=period, periods=PERIODS, start=start,
                      end=end, within=_within(start, end), control=control)  # fmt: skip

    @routes.get("/tables/{table_id:path}", include_in_schema=False)
    def table_page(
        request: Request, table_id: str, user: PageUser, con: Cursor, period: Period = "7d", slot: str | None = None
    ) -> HTMLResponse:
        last = _last_activity(con, None, table_id)
        if last is None:
            raise HTTPException(404, f"no table {table_id}")
        start, end = period_bounds(period, last)
        r = _rates(con, None, table_id, start, end)
        dealers = con.execute(
            """SELECT dealer_id, count(*) FROM rounds WHERE table_id = ?
               AND (?::TIMESTAMPTZ IS NULL OR completed_at >= ?) AND completed_at < ? GROUP BY 1 ORDER BY 2 DESC""",
            [table_id, start, start, end],
        ).fetchall()
        supervisor = summaries.supervisor_now(con, table_id)
        control = control_pages.context(console, con, "table", table_id, start, end, slot)
        return render(request, "rates.html.j2", user, kind="Table", key=table_id, r=r, related=dealers,
                      staff_member=None, supervisor_id=supervisor, period=period, periods=PERIODS, start=start,
                      end=end, within=_within(start, end), control=control)  # fmt: skip

    return routes


def queue_filter(q: FindingsQuery, user: User) -> FindingFilter:
    """The query's filter; with ``mine`` narrowed to "my queue": the findings assigned to
    ``user`` (latest assignment) and not yet disposed."""
    if not q.mine:
        return q.flt
    return dataclasses.replace(q.flt, assignee=user.name, not_disposed=True)


def _choices(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """The values the findings filters and the assign form offer."""
    found = summaries.generation_findings(con)  # one row per finding of the generation shown
    combos = con.execute(f"SELECT DISTINCT game, table_id, rule_id FROM {found}").fetchall()  # one scan, not three
    games, tables, rules = (sorted({str(c[i]) for c in combos if c[i] is not None}) for i in range(3))
    dealers = con.execute("SELECT DISTINCT dealer_id FROM rounds WHERE dealer_id IS NOT NULL ORDER BY 1").fetchall()
    return {
        "games": games,
        "tables": tables,
        "rules": rules,
        "dealers": [str(r[0]) for r in dealers],
        "users": _reviewers(con),
    }


def _reviewers(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The assignees the assign form offers: the names of active users who can review."""
    rows = con.execute(
        "SELECT name FROM dim_users WHERE active AND role IN ('reviewer', 'manager', 'admin') ORDER BY 1"
    ).fetchall()
    return [str(r[0]) for r in rows if r[0] is not None]


Period = Literal["1d", "7d", "30d", "90d", "all"]
"""The periods a dealer's or a table's page shows: the last day, 7, 30 or 90 days of its activity, or all of it."""
PERIODS: dict[str, str] = {"1d": "last day", "7d": "last 7 days", "30d": "last 30 days", "90d": "last 90 days",
                           "all": "all"}  # fmt: skip
"""Each period's label, in the order the page offers them."""


def _last_activity(con: duckdb.DuckDBPyConnection, dealer: str | None, table: str | None) -> datetime | None:
    """When the dealer's or table's latest round was completed or its latest finding detected
    (None: it has neither; a dealer counts only by rounds)."""
    row = con.execute(
        """SELECT greatest(
               (SELECT max(completed_at) FROM rounds WHERE ($dealer IS NULL OR dealer_id = $dealer)
                  AND ($table_id IS NULL OR table_id = $table_id)),
               (SELECT max(observed_at) FROM fct_detections WHERE $dealer IS NULL AND table_id = $table_id))""",
        {"dealer": dealer, "table_id": table},
    ).fetchone()
    return row[0] if row else None


def period_bounds(period: str, last: datetime) -> tuple[datetime | None, datetime]:
    """``[start, end)`` of ``period`` (a key of :data:`PERIODS`) ending with the activity at
    ``last``: ``end`` is the hour after it, ``start`` that many days before (None for ``all``).

    A page about a dealer who left a year ago shows his last days, not an empty week; its cost
    follows the period shown, not the history stored (issue 23, item 2)."""
    end = last.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    days = {"1d": 1, "7d": 7, "30d": 30, "90d": 90}.get(period)
    return (None if days is None else end - timedelta(days=days)), end


def _within(start: datetime | None, end: datetime) -> str:
    """The findings list's query-string part for a period (``&from=...&to=...``, UTC ISO 8601)."""
    bounds = {"from": start.astimezone(UTC).isoformat()} if start else {}
    return "&" + urlencode({**bounds, "to": end.astimezone(UTC).isoformat()})


def slot_of(start: datetime | None, end: datetime, first: datetime | None) -> str:
    """The chart's slot for a period: an hour up to 2 days shown, a day up to 92, else a week
    (``first``: the earliest activity in the period, which bounds what is shown)."""
    begin = max(start, first) if start and first else start or first or end
    span = end - begin
    return "hour" if span <= timedelta(days=2) else "day" if span <= timedelta(days=92) else "week"


RATES_INCIDENTS = {
    # one row per incident of the session's generation (a consequence's cause_finding_id is set)
    "summary": """SELECT finding_id, rule_id, severity, detected_at AS observed_at
        FROM sum_findings
        WHERE generation = coalesce(getvariable('dealtrail_generation'), (SELECT max(generation) FROM generations), 1)
          AND cause_finding_id IS NULL
          AND ($table_id IS NULL OR table_id = $table_id) AND ($dealer IS NULL OR dealer_id = $dealer)
          AND ($start IS NULL OR detected_at >= $start) AND ($end IS NULL OR detected_at < $end)""",
    # the same from every revision, less the consequences the read model names
    "live": """SELECT d.finding_id, d.rule_id, d.severity, d.observed_at
        FROM fct_detections d
        WHERE ($table_id IS NULL OR d.table_id = $table_id)
          AND ($start IS NULL OR d.observed_at >= $start) AND ($end IS NULL OR d.observed_at < $end)
          AND NOT list_contains($consequences, d.finding_id)
          AND ($dealer IS NULL OR EXISTS (SELECT 1 FROM rounds x
               WHERE x.dealer_id = $dealer AND x.table_id = d.table_id AND x.round_id = d.round_id))""",
}
"""The incidents ``con_rates.sql`` counts (its ``/*incidents*/``): from ``sum_findings`` when the
store has it (its ``dealer_id`` is the dealer of the finding's round), else from the detections."""


def _rates(
    con: duckdb.DuckDBPyConnection,
    dealer: str | None,
    table: str | None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[str, Any]:
    """A dealer's or a table's rounds, incidents and rates per 1,000 rounds in ``[start, end)``
    (None: open), by rule and by time slot (:func:`slot_of`): the incidents of the report and the
    floor (a consequence is counted under its cause)."""
    if summaries.has_summary(con, "sum_findings"):
        found, consequences = RATES_INCIDENTS["summary"], []
    else:  # a store written before the summary: the model names the consequences
        scope = FindingFilter(table_id=table, dealer=dealer, incident=False, start=start, end=end)
        rows, _ = incidents.records(con, scope, ReviewDue(0, 0, 0), datetime.now(UTC))
        found, consequences = RATES_INCIDENTS["live"], [c["finding_id"] for c in rows]
    row = con.execute(  # the period's first round: a period longer than the activity in it is charted by its activity
        """SELECT min(completed_at) FROM rounds WHERE ($dealer IS NULL OR dealer_id = $dealer)
           AND ($table_id IS NULL OR table_id = $table_id) AND ($start IS NULL OR completed_at >= $start)""",
        {"dealer": dealer, "table_id": table, "start": start},
    ).fetchone()
    first = row[0] if row else None
    slot = slot_of(start, end or datetime.now(UTC), first)
    params: dict[str, Any] = {"dealer": dealer, "table_id": table, "start": start, "end": end, "slot": slot}
    if found is RATES_INCIDENTS["live"]:
        params["consequences"] = consequences
    cur = con.execute(sql("con_rates.sql").replace("/*incidents*/", found), params)
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    by_rule = [r for r in rows if r["kind"] == "rule"]
    slots = [r for r in rows if r["kind"] == "slot"]
    total_rounds = int(by_rule[0]["rounds"]) if by_rule else sum(int(h["rounds"]) for h in slots)
    for r in by_rule:
        r["rate"] = _rate(r["findings"], total_rounds)
        spec = RULES_BY_ID.get(r["key"])
        r["summary"] = spec.summary if spec else ""
    by_rule.sort(key=lambda r: (-r["findings"], r["key"]))
    slots = fill_slots(slots, slot)
    for h in slots:
        h["rate"] = _rate(h["findings"], h["rounds"])
    findings_total = sum(int(r["findings"]) for r in by_rule)
    cut = slice(11, 16) if slot == "hour" else slice(5, 10)  # the bar's label: HH:MM or MM-DD
    return {
        "rounds": total_rounds,
        "findings": findings_total,
        "rate": _rate(findings_total, total_rounds),
        "by_rule": by_rule,
        "hours": slots,
        "slot": slot,
        "chart": _bars([(h["key"][cut], h["rate"] or 0.0, h["findings"], h["rounds"]) for h in slots]),
    }


def fill_slots(rows: list[dict[str, Any]], slot: str = "hour") -> list[dict[str, Any]]:
    """The slot rows of ``con_rates.sql`` (key ``YYYY-MM-DD HH:00``, the slot's start in UTC)
    with every slot between the first and the last present: a slot with no round and no
    incident is a row of zeros, so a chart over time shows it as zero instead of skipping it.
    ``slot``: ``hour``, ``day`` or ``week``."""
    if not rows:
        return []
    by_key = {h["key"]: h for h in rows}
    fmt = "%Y-%m-%d %H:00"
    t = datetime.strptime(min(by_key), fmt)
    last = datetime.strptime(max(by_key), fmt)
    step = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(weeks=1)}[slot]
    out = []
    while t <= last:
        key = t.strftime(fmt)
        out.append(by_key.get(key) or {"kind": "slot", "key": key, "severity": None, "findings": 0, "rounds": 0})
        t += step
    return out


def _undelivered(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Notifications still failing or given up (none when notifications never ran on this store)."""
    from dealtrail.reporting.notify import failures

    views = con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'dim_notifications'").fetchall()
    return failures(con) if views and views[0][0] else []


def _rate(findings: int | None, rounds: int | None) -> float | None:
    return round(1000 * (findings or 0) / rounds, 1) if rounds else None


def _decorate(row: dict[str, Any]) -> dict[str, Any]:
    spec = RULES_BY_ID.get(row["rule_id"])
    return {**row, "rule_summary": spec.summary if spec else ""}


EVENTS_NEAR = timedelta(hours=12)
"""How far from a finding's detection its evidence and remedy events are looked for first: the
store keeps its batches of events in arrival order, so a bound on the time reads only the row groups of those
days instead of the whole history; IDs not found there are looked for in all of it."""


def _events(con: duckdb.DuckDBPyConnection, ids: list[str], table_id: str, near: datetime) -> list[dict[str, Any]]:
    """The stored events with these IDs at ``table_id``, in seq order, looked for first within
    :data:`EVENTS_NEAR` of ``near`` (the finding's detection), then anywhere for the rest."""
    if not ids:
        return []
    import json

    select = """SELECT event_id, seq, type, occurred_at, actor_role, actor_id, payload::VARCHAR, arrival
                FROM events WHERE table_id = $table AND event_id IN (SELECT unnest($ids))"""
    params: dict[str, Any] = {"ids": ids, "table": table_id}
    rows = con.execute(
        select + " AND occurred_at >= $lo AND occurred_at <= $hi",
        {**params, "lo": near - EVENTS_NEAR, "hi": near + EVENTS_NEAR},
    ).fetchall()
    missing = set(ids) - {r[0] for r in rows}
    if missing:  # further from the detection than the bound (or not stored): the whole history
        rows += con.execute(
            select.replace("unnest($ids)", "unnest($missing)") + " AND (occurred_at < $lo OR occurred_at > $hi)",
            {"missing": sorted(missing), "table": table_id, "lo": near - EVENTS_NEAR, "hi": near + EVENTS_NEAR},
        ).fetchall()
    rows.sort(key=lambda r: (r[1], r[7]))
    out = []
    skip = {"event_id", "table_id", "game", "round_id", "deck_id", "seq", "occurred_at", "recorded_at", "source",
            "actor", "schema_version", "type", "prev_hash", "hash"}  # fmt: skip
    for event_id, seq, type_, at, role, actor, payload, _arrival in rows:
        data = json.loads(payload)
        details = ", ".join(f"{k}={v}" for k, v in data.items() if k not in skip and v is not None)
        out.append(
            {
                "event_id": event_id,
                "seq": seq,
                "type": type_,
                "occurred_at": at,
                "actor": f"{(role or '').lower()} {actor or ''}".strip(),
                "details": details,
                "hash": data.get("hash"),
                "prev_hash": data.get("prev_hash"),
            }
        )
    return out


def _revisions(con: duckdb.DuckDBPyConnection, finding_id: str) -> list[dict[str, Any]]:
    cur = con.execute(
        """SELECT revision, status, observed_at, trigger_event_id, remedy_delay_seconds, late
           FROM findings WHERE finding_id = ? ORDER BY revision""",
        [finding_id],
    )
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _round_replay(
    con: duckdb.DuckDBPyConnection,
    table_id: str,
    round_id: str | None,
    near: datetime | None,
    bounds: tuple[int, int] | None,
) -> tuple[Any, str | None]:
    """The finding's round replayed from the nearest snapshot (``dealtrail.investigate.replay.ReplayResult``),
    at most :data:`dealtrail.investigate.replay_view.PAGE_REPLAY_EVENTS` events; ``(None, why)`` when it
    lies further from a usable snapshot than that, ``(None, None)`` without a round or without a
    stored event of it. ``near``: the finding's detection (see :class:`dealtrail.investigate.replay.Window`);
    ``bounds``: the round's first and last seq (:func:`dealtrail.investigate.replay.round_seqs`)."""
    if round_id is None or bounds is None:
        return None, None
    from dealtrail.investigate.replay import ReplayError, Window
    from dealtrail.investigate.replay_view import PAGE_REPLAY_EVENTS, ReplayTooLong, replay_window

    try:
        window = Window(round_id=round_id, near=near)
        return replay_window(con, table_id, window, PAGE_REPLAY_EVENTS, bounds), None
    except ReplayTooLong as exc:
        return None, f"The round is not drawn: {exc}."
    except ReplayError:
        return None, None


def _round_layout(result: Any) -> dict[str, Any] | None:
    """The round as it lay when it ended (or when the trail stops): cards per area, drawn as the
    replay draws them (exposed cards face up; Pai Gow stacks as the hands they became:
    :func:`dealtrail.investigate.replay_view.layout_json`); None: no replay, or no card laid."""
    if result is None:
        return None
    from dealtrail.investigate.replay_view import layout_json, seen_by_step

    seen = seen_by_step(result.steps)
    rows: list[dict[str, Any]] = []
    dealer = None
    for i, step in enumerate(result.steps):
        if step.state.round is not None and step.state.round.cards:
            rows = layout_json(step.state.round, result.cards, seen[i])
        if step.state.round is not None:
            dealer = step.state.round.dealer_id
    if not rows:
        return None
    return {"dealer_id": dealer, "areas": table_layout(rows)}


def _bars(points: list[tuple[str, float, int, int]]) -> dict[str, Any]:
    """Bar chart geometry (SVG attributes, no inline style): label, rate, findings, rounds."""
    if not points:
        return {"bars": [], "width": 0, "height": 0, "max": 0}
    top = max(p[1] for p in points) or 1.0
    width = 44
    bars = []
    for i, (label, rate, n, rounds) in enumerate(points):
        h = round(150 * rate / top, 1)
        bars.append({"x": 40 + i * width, "y": round(170 - h, 1), "h": h, "w": width - 6, "label": label, "rate": rate,
                     "findings": n, "rounds": rounds})  # fmt: skip
    return {"bars": bars, "width": 60 + len(points) * width, "height": 200, "max": top}


def _csv(rows: list[dict[str, Any]], names: Mapping[str, str] | None = None, tz: tzinfo = UTC) -> str:
    """The findings export; ``names`` (the roster's, :func:`projections.records.staff.names`) fill the
    ``dealer_name`` column beside ``dealer_id`` (blank for an ID the roster does not name); times
    are ISO 8601 in ``tz`` (the casino's zone) with their offset."""
    known = names or {}
    rows = [{**r, "dealer_name": known.get(r.get("dealer_id") or "")} for r in rows]
    cols = [
        "finding_id", "detected_at", "game", "table_id", "round_id", "dealer_id", "rule_id", "citation", "severity",
        "status", "review_status", "review_due_at", "review_late", "last_reviewed_by", "last_reviewed_at", "assignee",
        "cause", "required_remedy", "message", "corrective_action", "disposition_note", "disposed_by", "approved_by",
    ]  # fmt: skip
    cols.insert(cols.index("dealer_id") + 1, "dealer_name")
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(cols)
    for r in rows:
        line = []
        for c in cols:
            v = r.get(c)
            if c == "cause" and v is None:  # a pending proposal's cause (review_status says so)
                v = r.get("proposed_cause")
            # a time in ISO 8601 in the casino's zone, with its offset (as the reports' findings.csv)
            text = iso_local(v, tz) if isinstance(v, datetime) else "" if v is None else str(v)
            line.append(neutralise_cell(text))  # a cell a spreadsheet would run is quoted as text
        w.writerow(line)
    return buf.getvalue()


def table_layout(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Layout areas placed as on the felt: the dealer's side (dealer, bank, and their set hands),
    the middle (community cards, burns, stacks not yet delivered) and the players' seats.

    Args:
        rows: areas as :func:`dealtrail.investigate.replay_view.layout_json` gives them (``area``,
            ``name``, ``cards`` as ``[code, face_up, event_id, shown_by]``), or as
            ``dealtrail.investigate.replay.layout`` does (``cards`` as ``(event_id, code, face)``).
    """
    placed: dict[str, list[dict[str, Any]]] = {"dealer": [], "middle": [], "seats": []}
    for row in rows:
        area = row["area"]
        cards = [
            {**card_face(c[0]), "face_up": bool(c[1]), "event_id": c[2]}
            if len(c) == 4
            else {**card_face(c[1]), "face_up": c[2] == "UP", "event_id": c[0]}
            for c in row["cards"]
        ]
        item = {"area": area, "name": row.get("name") or area_name(area), "cards": cards}
        if area.split("_")[0] in ("DEALER", "BANK"):
            placed["dealer"].append(item)
        elif area.startswith("SEAT_"):
            placed["seats"].append(item)
        else:
            placed["middle"].append(item)
    placed["seats"].sort(key=lambda i: int(i["area"].split("_")[1]))  # stable: a two-card hand before its five
    return placed
