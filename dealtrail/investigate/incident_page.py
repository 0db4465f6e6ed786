"""The incident report: one self-contained HTML page for a replayed table and window.

Everything taken from events (dealer IDs, table names, messages) is escaped by jinja2's
autoescape, and the page carries a Content-Security-Policy that forbids scripts altogether.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

import jinja2

from dealtrail.investigate.replay import ReplayResult, describe_state, layout, rule_summary
from projections.display.cards import area_name, card_face
from projections.display.timefmt import clock, show, zone_name
from projections.store.private import make_private_dirs, write_private_text
from schemas import events as ev
from schemas.findings import Finding


def _details(event: ev.DealingEvent) -> str:
    # the envelope is shown in its own columns; IDs and hashes are folded apart
    skip = {"event_id", "table_id", "game", "round_id", "deck_id", "seq", "occurred_at", "recorded_at", "source",
            "actor", "schema_version", "corrects", "type", "prev_hash", "hash"}  # fmt: skip
    data = event.model_dump(mode="json", exclude=skip, exclude_none=True)
    return ", ".join(f"{k}={v}" for k, v in data.items())


def incident_context(
    result: ReplayResult, title: str, tz: tzinfo = UTC, stored: Iterable[Finding] = ()
) -> dict[str, Any]:
    """The template's data: rounds with their events, layouts and findings; times of day in
    ``tz`` (with their offset; the column names the zone).

    Each finding is shown at its final status: the latest revision replayed in the window, or a
    later one in ``stored`` (the table's stored revisions: a remedy skipped in the window turns
    ``overdue`` only when the next round starts, after the window).
    """
    stored = tuple(stored)
    latest: dict[str, Any] = {}
    for f in result.replayed:
        if f.finding_id not in latest or f.revision > latest[f.finding_id].revision:
            latest[f.finding_id] = f
    for f in stored:
        if f.finding_id in latest and f.revision > latest[f.finding_id].revision:
            latest[f.finding_id] = f
    rounds: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for step in result.steps:
        rid = step.event.round_id or "between rounds"
        if current is None or current["round_id"] != rid:
            current = {"round_id": rid, "events": [], "layout": [], "dealer_id": None}
            rounds.append(current)
        current["events"].append(
            {
                "seq": step.event.seq,
                "time": clock(step.event.occurred_at, tz),
                "type": step.event.type,
                "event_id": step.event.event_id,
                "hashes": (step.event.prev_hash, step.event.hash),
                "actor": f"{step.event.actor.role.value} {step.event.actor.id}",
                "details": _details(step.event),
                "findings": [
                    {"rule_id": f.rule_id, "status": f.status.value, "revision": f.revision, "message": f.message}
                    for f in step.findings
                ],
            }
        )
        rows = layout(step.state, result.cards)
        if rows:
            current["layout"] = rows
        if step.state.round is not None:
            current["dealer_id"] = step.state.round.dealer_id
    findings = [
        {
            "finding": f,
            "summary": rule_summary(f.rule_id),
            "first": _detection(f, result.replayed, stored),
        }
        for f in sorted(latest.values(), key=lambda f: (f.observed_at, f.rule_id))
    ]
    return {
        "title": title,
        "zone": zone_name(tz),
        "table_id": result.table_id,
        "rounds": rounds,
        "findings": findings,
        "differences": result.differences,
        "unreadable": result.unreadable,
        "matches": result.matches,
        "compared": bool(result.stored) or bool(result.differences),
        "state_at": describe_state(result.state_at) if result.state_at is not None else None,
        "at_event": result.at_event,
    }


def _detection(f: Finding, replayed: Iterable[Finding], stored: Iterable[Finding]) -> Finding:
    """The revision 0 of ``f`` (when and how it was detected): replayed in the window, else among
    the stored revisions (a window of one round can hold a later revision of a finding raised
    before it, such as a jam's finding between rounds turned overdue at the round's start), else
    the earliest revision at hand."""
    same = [g for g in (*replayed, *stored) if g.finding_id == f.finding_id]
    return min(same, key=lambda g: g.revision, default=f)


PAGE_BYTES = 900_000
"""The largest incident page written (bytes of HTML): a replay that would make a bigger one is
written as an index page and numbered part pages beside it, each under this size."""


def write_incident(
    result: ReplayResult,
    path: Path,
    title: str,
    tz: tzinfo = UTC,
    stored: Iterable[Finding] = (),
    max_bytes: int = PAGE_BYTES,
) -> list[Path]:
    """Render the incident page to ``path`` (owner-only, missing folders 0700).

    A replay whose page would exceed ``max_bytes`` (a whole table over a shift) is split: ``path``
    becomes the index (the comparison, the state asked for, every finding with a link to the part
    that holds its round, and the list of parts) and the rounds go, in order, to part pages
    ``<stem>-001<suffix>``, ``<stem>-002<suffix>``, ... beside it, each under ``max_bytes``
    and linked to the index and to its neighbours.

    Args:
        result: the replay.
        path: the page's file.
        title: its title.
        tz: the zone times are shown in (labelled), ``datetime.UTC`` or a ``ZoneInfo``.
        stored: the table's stored finding revisions, for each finding's final status.
        max_bytes: the size a page stays under (bytes).

    Returns:
        The files written: ``path`` first, then the parts in order.

    Raises:
        IsADirectoryError: ``path`` is a folder.
    """
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder, not a file for the incident page")
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dealtrail.investigate", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = lambda t: show(t, tz) if isinstance(t, datetime) else str(t)
    env.filters["cardface"] = card_face
    env.filters["area"] = area_name
    template = env.get_template("incident.html.j2")
    ctx = incident_context(result, title, tz, stored)
    html = template.render(**ctx, parts=None, nav=None, round_part={})
    make_private_dirs(path.parent)
    if len(html.encode()) <= max_bytes or len(ctx["rounds"]) <= 1:
        write_private_text(path, html)
        return [path]
    rounds = ctx["rounds"]
    per = max(1, len(rounds) * max_bytes // (2 * len(html.encode())))
    while True:
        chunks = [rounds[i : i + per] for i in range(0, len(rounds), per)]
        names = [f"{path.stem}-{n + 1:03d}{path.suffix}" for n in range(len(chunks))]
        pages = []
        for n, chunk in enumerate(chunks):
            nav = {
                "index": path.name,
                "prev": names[n - 1] if n else None,
                "next": names[n + 1] if n + 1 < len(chunks) else None,
                "part": n + 1,
                "parts": len(chunks),
            }
            page_ctx = {
                **ctx,
                "rounds": chunk,
                "findings": [],
                "differences": [],
                "unreadable": [],
                "state_at": None,
                "compared": False,
            }
            pages.append(template.render(**page_ctx, parts=None, nav=nav, round_part={}))
        if per == 1 or all(len(p.encode()) <= max_bytes for p in pages):
            break
        per = max(1, per // 2)
    parts = [
        {
            "href": names[n],
            "first": chunk[0]["round_id"],
            "last": chunk[-1]["round_id"],
            "events": sum(len(r["events"]) for r in chunk),
            "findings": sum(len(e["findings"]) for r in chunk for e in r["events"]),
        }
        for n, chunk in enumerate(chunks)
    ]
    round_part = {r["round_id"]: names[n] for n, chunk in enumerate(chunks) for r in chunk}
    index = template.render(**{**ctx, "rounds": []}, parts=parts, nav=None, round_part=round_part)
    write_private_text(path, index)
    written = [path]
    for name, page in zip(names, pages, strict=True):
        write_private_text(path.with_name(name), page)
        written.append(path.with_name(name))
    return written
