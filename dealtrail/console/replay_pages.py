"""The investigator's workbench in the console: the step-through replay of a round or a time
window (its page, its script and its API), and the case page of a cause and its consequences.

The replay page is a small shell: its script (``/replay-assets/replay.js``, served from here with ``investigate.css``
after login, as the CSP wants: no inline script) fetches the steps from
``GET /api/v1/tables/{table_id}/replay`` a page at a time, so the page stays small whatever the
window. The steps come from the pure engine replayed from the store's nearest checked snapshot
(:mod:`dealtrail.investigate.replay_view`), never from SQL that repeats a rule.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from dealtrail.console.api_models import ApiTime, ErrorMessage
from dealtrail.console.deps import ApiUser, Console, Cursor, PageUser, invalid, known_query
from dealtrail.console.filters import parse_time
from dealtrail.investigate.replay import ReplayError, Window
from dealtrail.investigate.replay_view import MAX_PAGE_STEPS, PAGE_STEPS, breach_picture, case_members, replay_page
from projections.display.timefmt import FROM_HELP, TO_HELP
from projections.models import reviews
from streams.engine.catalog import RULES_BY_ID

MAX_WINDOW_HOURS = 24
"""The longest time window a replay page or API call takes (hours): a longer one is a 422 (ask
for a day at a time; each is replayed from the nearest snapshot before it)."""

ASSETS = {"replay.js": "text/javascript", "investigate.css": "text/css"}
"""The workbench's static files (served after login, like the console's own)."""


def _window(round_: str | None, from_: datetime | None, to: datetime | None, tz: tzinfo = UTC) -> Window:
    """The replay window asked for, checked (422 when it is none, both, or longer than a day); with
    only ``from`` (or only ``to``) it is the day from (or up to) it, the longest a window may be;
    times without an offset are read in ``tz``, the casino's zone (``filters.parse_time``)."""
    from_, to = parse_time(from_, "from", tz), parse_time(to, "to", tz)
    if round_ and (from_ or to):
        raise invalid(("query", "round"), "ask for a round or a time window (from, to), not both")
    if round_:
        return Window(round_id=round_)
    if from_ is None and to is None:
        raise invalid(("query", "from"), "a replay needs a round, or a time window (from, to)")
    span = timedelta(hours=MAX_WINDOW_HOURS)  # one end given: the longest window from it (issue 47, item 7)
    if from_ is None and to is not None:
        from_ = to - span
    elif to is None and from_ is not None:
        to = from_ + span
    assert from_ is not None and to is not None
    if to <= from_:
        raise invalid(("query", "to"), "to must be after from")
    if (to - from_).total_seconds() > MAX_WINDOW_HOURS * 3600:
        raise invalid(("query", "to"), f"a replay window is at most {MAX_WINDOW_HOURS} hours")
    return Window(start=from_.astimezone(UTC), end=to.astimezone(UTC))


def _api_window(
    round_: str | None, from_: datetime | None, to: datetime | None, tz: tzinfo = UTC
) -> tuple[Window, datetime | None]:
    """The replay window of an API call, which takes every request its document allows (issue
    47, item 7): a round with a time span is the round's events in it; a span with ``to`` not
    after ``from`` holds no event (the caller answers 404, as for any window without one); a span
    longer than a day is answered for its first day. Returns the window and, when it was cut
    to a day, the end that was asked for (else None). One end given: the day from (or up to) it."""
    from_, to = parse_time(from_, "from", tz), parse_time(to, "to", tz)
    if round_:
        return Window(round_id=round_, start=_utc(from_), end=_utc(to)), None
    span = timedelta(hours=MAX_WINDOW_HOURS)
    if from_ is None and to is not None:
        from_ = to - span
    elif to is None and from_ is not None:
        to = from_ + span
    assert from_ is not None and to is not None
    asked = None
    if to - from_ > span:
        asked, to = to, from_ + span
    return Window(start=from_.astimezone(UTC), end=to.astimezone(UTC)), asked


def _utc(at: datetime | None) -> datetime | None:
    return at.astimezone(UTC) if at is not None else None


def replay_detail(table_id: str, window: Window, finding_id: str | None) -> str:
    """What a replay showed, for its access-log entry: the table, the round or the UTC window, and
    the finding it was opened from."""
    if window.round_id is not None:
        shown = f"round {window.round_id}"
    else:
        start, end = window.start, window.end
        shown = f"{start.isoformat() if start else '...'} to {end.isoformat() if end else '...'}"
    return f"replay of table {table_id} {shown}" + (f" for finding {finding_id}" if finding_id else "")


def router(console: Console) -> APIRouter:
    """The replay page, its script, its API and the case page."""
    routes = APIRouter()
    render = console.render
    tz = console.config.tz

    @routes.get("/replay-assets/{name}", include_in_schema=False)
    def asset(name: str, user: PageUser) -> Response:
        if name not in ASSETS:
            raise HTTPException(404)
        path = Path(str(resources.files("dealtrail.console").joinpath("static", name)))
        return FileResponse(path, media_type=ASSETS[name], headers={"Cache-Control": "private, max-age=300"})

    @routes.get("/replay", include_in_schema=False)
    def replay_shell(
        request: Request,
        user: PageUser,
        con: Cursor,
        table: Annotated[str, Query(min_length=1, max_length=200)],
        round_: Annotated[str | None, Query(alias="round", max_length=200)] = None,
        from_: Annotated[ApiTime | None, Query(alias="from")] = None,
        to: Annotated[ApiTime | None, Query()] = None,
        finding: Annotated[str | None, Query(max_length=64)] = None,
    ) -> HTMLResponse:
        window = _window(round_, from_, to, tz)
        known = con.execute("SELECT count(*) FROM events WHERE table_id = ?", [table]).fetchall()[0][0]
        if not known:
            raise HTTPException(404, f"no stored event of table {table}")
        finding_id = finding if finding and all(c in "0123456789abcdef" for c in finding) else None
        page = render(
            request,
            "replay.html.j2",
            user,
            table_id=table,
            round_id=window.round_id,
            start=window.start,
            end=window.end,
            finding_id=finding_id,
        )
        console.access.record_read("replay_viewed", user.name, replay_detail(table, window, finding_id))
        return page

    @routes.get(
        "/api/v1/tables/{table_id}/replay",
        tags=["replay"],
        operation_id="replay_table",
        response_model=None,
        dependencies=[Depends(known_query)],
        responses={
            401: {"model": ErrorMessage, "description": "No token, or a revoked one."},
            404: {
                "model": ErrorMessage,
                "description": "No stored event of the table (or of the round) there, or in the window.",
            },
            200: {"description": "One page of the window's steps, each with the layout as it lay."},
        },
    )
    def api_replay(
        table_id: str,
        user: ApiUser,
        con: Cursor,
        round_: Annotated[str | None, Query(alias="round", max_length=200)] = None,
        from_: Annotated[ApiTime | None, Query(alias="from", description=FROM_HELP)] = None,
        to: Annotated[ApiTime | None, Query(description=TO_HELP)] = None,
        page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
        page_size: Annotated[int, Query(ge=1, le=MAX_PAGE_STEPS)] = PAGE_STEPS,
    ) -> dict[str, Any]:
        """The events of a round, or of a time window [from, to) of at most a day, one step each
        with the table as it lay after it (layout, burns, stub, dice, stacks, decks, devices,
        remedies owed) and the findings it raised, replayed by the rule engine from the
        nearest snapshot before the window; ``page_size`` steps a page. Neither a round nor a
        time: the last day of the table's stored events. A round and a window: the round's
        events in the window. One end of a window: the day from (or up to) it. A window longer
        than a day: its first day, with ``window.asked_to`` the end asked for (ask again from
        ``window.to``). A window with ``to`` not after ``from`` holds no event (404)."""
        if not round_ and from_ is None and to is None:  # the table's last day (issue 47, item 7)
            last = con.execute("SELECT max(occurred_at) FROM events WHERE table_id = ?", [table_id]).fetchall()
            if not last or last[0][0] is None:
                raise HTTPException(404, f"no stored event of table {table_id}")
            to = last[0][0] + timedelta(microseconds=1)
        window, asked = _api_window(round_, from_, to, tz)
        try:
            found = replay_page(con, table_id, window, page, page_size, tz).as_json()
        except ReplayError as exc:
            raise HTTPException(404, str(exc)) from None
        if asked is not None:  # cut to its first day: the answer says so, and where to go on from
            found["window"]["asked_to"] = asked.astimezone(UTC).isoformat()
        if page == 1 or user.token is not None:  # the replay page's script reads its pages with the session
            detail = f"{replay_detail(table_id, window, None)}, API page {page} with {user.credential}"
            console.access.record_read("replay_viewed", user.name, detail)
        return found

    @routes.get("/cases/{finding_id}", include_in_schema=False)
    def case_page(request: Request, finding_id: str, user: PageUser, con: Cursor) -> HTMLResponse:
        _, rows = console.finding_case(con, finding_id)
        cause, consequences = case_members(rows, finding_id)
        if cause is None:
            raise HTTPException(404, f"no finding {finding_id}")
        members = [cause, *consequences]
        for r in members:
            spec = RULES_BY_ID.get(r["rule_id"])
            r["rule_summary"] = spec.summary if spec else ""
            r["video_references"] = [  # attached in the member's reviews (issue 22, item 4)
                {**x, "user_name": h["user_name"], "reviewed_at": h["reviewed_at"]}
                for h in reviews.history(con, r["finding_id"])
                for x in h["references"]
            ]
        page = render(request, "case.html.j2", user, cause=cause, consequences=consequences, me=finding_id)
        console.record_finding_read("case_viewed", user, cause, f" opened from {finding_id}")
        return page

    return routes


def investigation(
    con: Any,
    f: dict[str, Any],
    case_rows: list[dict[str, Any]],
    replayed: Any = None,
    not_drawn: str | None = None,
    tz: tzinfo = UTC,
) -> dict[str, Any]:
    """What the finding page's investigation partials need: the picture of the breach and the
    case the finding belongs to (its cause, its consequences), and the replay window of a finding
    between rounds (two minutes either side of its detection, UTC ISO 8601). ``replayed``: the
    finding's round as the page replayed it (``dealtrail.investigate.replay.ReplayResult``; None: replayed
    for the picture); ``not_drawn``: why the page could not replay the round (the picture is then
    not attempted again, and the page says why instead of drawing nothing); ``case_rows``: the
    rows of the finding's case (:meth:`Console.finding_case`); ``tz``: the zone the picture's
    times are shown in (the casino's)."""
    cause, consequences = case_members(case_rows, f["finding_id"])
    at = f["detected_at"].astimezone(UTC)
    return {
        "window": ((at - timedelta(minutes=2)).isoformat(), (at + timedelta(minutes=2)).isoformat()),
        "picture": None if not_drawn else breach_picture(con, f, replayed, tz),
        "not_drawn": not_drawn,
        "case": {"cause": cause, "consequences": consequences} if consequences else None,
    }
