"""The control chart on a dealer's and a table's page (issue 50): the picture, the baseline it was
judged against, the signals list (each linked to the findings behind it) with its review form
(acknowledge, note, close, reopen; reviewers and up), and the form that freezes the period shown
as a new baseline (managers and admins). Every change is written under the store's write lock and
recorded in the access log, refusals too."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Annotated, Any
from urllib.parse import urlencode

import duckdb
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse

from dealtrail.console.deps import Console, PageUser
from projections.models.control import CATEGORIES, KINDS, RULES, ChartSpec, chart, rules_of, signal_id, slots_for
from projections.records import baselines, signal_reviews
from projections.reports.control_chart import page_svg

SLOT_STEP = {"shift": timedelta(hours=8), "day": timedelta(days=1), "week": timedelta(days=7)}
"""How long each slot is on the wall clock."""
BACK = re.compile(r"^/(dealers|tables)/[^\s]{1,300}$")
"""Where a form may send the browser back to (the page it was on)."""


def zone_key(tz: tzinfo) -> str:
    """The IANA name of the console's zone (``UTC`` for ``datetime.UTC``)."""
    return str(getattr(tz, "key", "UTC"))


def spec_of(console: Console, kind: str, slot: str, category: str = "all") -> ChartSpec:
    """The chart of ``kind`` by ``slot`` with the console's settings (``DEALTRAIL_CONTROL__*``, its zone)."""
    c = console.config.control
    return ChartSpec(kind, slot, category, c.min_rounds, c.cusum_k, c.cusum_h, zone_key(console.config.tz))  # type: ignore[arg-type]


def slot_bounds(local_start: datetime, slot: str, tz: tzinfo) -> tuple[datetime, datetime]:
    """A slot's ``[start, end)`` as UTC instants, from its local wall-clock start."""
    start = local_start.replace(tzinfo=tz)
    end = (local_start + SLOT_STEP[slot]).replace(tzinfo=tz)
    return start.astimezone(UTC), end.astimezone(UTC)


def context(
    console: Console,
    con: duckdb.DuckDBPyConnection,
    kind: str,
    key: str,
    start: datetime | None,
    end: datetime,
    slot: str | None,
) -> dict[str, Any]:
    """What the page's control-chart section shows: ``slot``, ``slots``, ``picture`` (a data URI,
    empty when no round), ``baseline`` (its sentence), ``signals`` (numbered as the picture numbers
    them, each with its rules, findings link, status and reviews), ``hollow`` (points not judged)
    and ``min_rounds``."""
    offered = slots_for(kind, console.config.control.dealer_slot)  # type: ignore[arg-type]
    slot = slot if slot in offered else offered[0]
    spec = spec_of(console, kind, slot)
    baseline = baselines.in_force(con, spec)
    points = chart(con, spec, start, end, key, baseline)
    title = f"{kind.capitalize()} {key}"
    picture = ""
    if points:
        svg = page_svg(points, title, spec, baselines.label(baseline))
        picture = "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")
    tz = console.config.tz
    signals = []
    for n, p in enumerate((p for p in points if p["signal"]), start=1):
        sid = signal_id(spec, p)
        s_start, s_end = slot_bounds(p["slot_start"], slot, tz)
        query = {kind: key, "from": s_start.isoformat(), "to": s_end.isoformat()}
        signals.append(
            {
                "n": n,
                "signal_id": sid,
                "when": p["slot_start"],
                "rules": rules_of(p),
                "u": p["u"],
                "ucl": p["ucl"],
                "rounds": p["rounds"],
                "errors": p["errors"],
                "findings_link": "/findings?" + urlencode(query),
            }
        )
    history = signal_reviews.history(con, [s["signal_id"] for s in signals])
    for s in signals:
        s["reviews"] = history.get(s["signal_id"], [])
        s["status"] = signal_reviews.status(s["reviews"])
    return {
        "slot": slot,
        "slots": offered,
        "picture": picture,
        "baseline": baselines.label(baseline),
        "signals": signals,
        "hollow": sum(1 for p in points if not p["solid"]),
        "points": len(points),
        "min_rounds": spec.min_rounds,
        "kind": kind,
        "rules": list(RULES.values()),
        "actions": signal_reviews.ACTIONS,
        "period_start": start,
        "period_end": end,
        # the freeze form's values, in the casino's zone with their offset (as every time the page shows)
        "period_start_iso": start.astimezone(tz).isoformat() if start else None,
        "period_end_iso": end.astimezone(tz).isoformat(),
    }


def router(console: Console) -> APIRouter:
    """The routes of the control chart's forms (none in the API's document)."""
    routes = APIRouter()
    check_csrf, store, write_lock = console.check_csrf, console.store, console.write_lock

    def back_to(back: str, fragment: str, done: str) -> RedirectResponse:
        if not BACK.fullmatch(back):
            raise HTTPException(422, "not a dealer's or table's page to go back to")
        sep = "&" if "?" in back else "?"
        return RedirectResponse(f"{back}{sep}done={done}#{fragment}", status_code=303)

    @routes.post("/control/signals", include_in_schema=False)
    def review_signal(
        request: Request,
        user: PageUser,
        csrf: Annotated[str, Form()],
        signal: Annotated[str, Form(max_length=400)],
        action: Annotated[str, Form(max_length=20)],
        back: Annotated[str, Form(max_length=400)],
        note: Annotated[str, Form(max_length=signal_reviews.MAX_NOTE)] = "",
    ) -> RedirectResponse:
        check_csrf(request, csrf)
        if not user.can_review:
            console.access.record("signal_review", user.name, "refused", f"{action[:20]} of signal {signal}: a viewer")
            raise HTTPException(403, "a viewer cannot review signals")
        try:
            with write_lock:
                review_id = signal_reviews.record(store.con, signal, action, note, user.name, console.config.clock())
        except signal_reviews.SignalReviewError as exc:
            console.access.record("signal_review", user.name, "refused", f"{action[:20]} of signal {signal}: {exc}")
            raise HTTPException(422, str(exc)) from None
        console.access.record(
            "signal_review", user.name, "ok", f"{action} of signal {signal} ({review_id}) with {user.credential}"
        )
        return back_to(back, "signals", action)

    @routes.post("/control/baselines", include_in_schema=False)
    def freeze_baseline(
        request: Request,
        user: PageUser,
        csrf: Annotated[str, Form()],
        kind: Annotated[str, Form(max_length=10)],
        slot: Annotated[str, Form(max_length=10)],
        start: Annotated[datetime, Form()],
        end: Annotated[datetime, Form()],
        back: Annotated[str, Form(max_length=400)],
        category: Annotated[str, Form(max_length=20)] = "all",
        note: Annotated[str, Form(max_length=baselines.MAX_NOTE)] = "",
    ) -> RedirectResponse:
        check_csrf(request, csrf)
        what = f"{kind[:10]}/{slot[:10]}/{category[:20]} {start.isoformat()} to {end.isoformat()}"
        if not user.can_approve:
            console.access.record("baseline_frozen", user.name, "refused", f"{what}: not a manager")
            raise HTTPException(403, "only a manager freezes a baseline")
        if kind not in KINDS or slot not in slots_for(kind) or category not in CATEGORIES:
            raise HTTPException(422, "unknown chart")
        try:
            with write_lock:
                b = baselines.freeze(
                    store.con, spec_of(console, kind, slot, category), start, end, user.name,
                    console.config.clock(), note,
                )  # fmt: skip
        except baselines.BaselineError as exc:
            console.access.record("baseline_frozen", user.name, "refused", f"{what}: {exc}")
            raise HTTPException(422, str(exc)) from None
        console.access.record("baseline_frozen", user.name, "ok", f"{b.baseline_id} {what}: {baselines.label(b)}")
        return back_to(back, "control", "baseline")

    return routes
