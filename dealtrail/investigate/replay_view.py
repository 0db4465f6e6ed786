"""The investigator's views of a replay: the steps of a round or a time window with the table
as it lay after each event (for the console's step-through replay), and the picture of what a
finding is about (for its page).

Everything here is read from the pure engine's own state, replayed from the stored trail by
:mod:`dealtrail.investigate.replay` (from the nearest checked snapshot before the window); nothing repeats a
rule in SQL. A step's layout is JSON-ready and small (a card is ``[code, face_up, event_id]``),
and the steps of a long window come in pages, so no answer grows with the table's history.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Any

from dealtrail.investigate.replay import (
    ReplayError,
    ReplayResult,
    Step,
    Window,
    replay,
    round_seqs,
    snapshot_start,
    stored_events,
)
from projections.display.cards import area_name, card_face
from projections.display.timefmt import clock, show, stamp
from schemas import events as ev
from schemas.findings import Finding
from streams.engine import RoundState, TableState
from streams.engine.catalog import REMEDY_TEXT, RULES_BY_ID, Remedy
from streams.engine.reducer import expected_cards_dealt
from streams.engine.state import DeckState

if TYPE_CHECKING:
    import duckdb

PAGE_STEPS = 150
"""Steps per page of a replay window by default (a step is 1 to 4 KB of JSON, the most for a
Pai Gow Poker round's 49 cards in stacks: a page stays under 1 MB)."""
MAX_PAGE_STEPS = 200
"""The most steps a page holds (200 of the largest steps measured, 4.2 KB each: 0.84 MB)."""

_ENVELOPE = {
    "event_id",
    "table_id",
    "game",
    "round_id",
    "deck_id",
    "seq",
    "occurred_at",
    "recorded_at",
    "source",
    "actor",
    "schema_version",
    "corrects",
    "type",
    "prev_hash",
    "hash",
}


@dataclass(frozen=True)
class ReplayView:
    """One page of a replay window.

    Attributes:
        table_id: the table.
        window: what was asked for (``round`` or ``from``/``to``), JSON-ready.
        total: steps in the whole window; page / pages: this page (1-based) of how many.
        page_size: steps per page; first: the index (0-based) of this page's first step.
        steps: this page's steps (:func:`step_json`).
        findings: every finding revision raised in the whole window, with the index of the step
            that raised it (``i``): the page lists the findings so far and marks them on its
            slider without loading every page.
        started_after_seq: the snapshot the replay started from (0: the table's first event).
        decks_removed_before: how many decks had been removed from the table before the
            window's first event (the steps leave each out while it stays as it was then:
            ``ReplayResult.removed_before``).
    """

    table_id: str
    window: dict[str, Any]
    total: int
    page: int
    pages: int
    page_size: int
    first: int
    steps: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    started_after_seq: int
    decks_removed_before: int = 0

    def as_json(self) -> dict[str, Any]:
        """The page as the API sends it."""
        return {
            "table_id": self.table_id,
            "window": self.window,
            "total": self.total,
            "page": self.page,
            "pages": self.pages,
            "page_size": self.page_size,
            "first": self.first,
            "started_after_seq": self.started_after_seq,
            "decks_removed_before": self.decks_removed_before,
            "steps": self.steps,
            "findings": self.findings,
        }


PAGE_REPLAY_EVENTS = 50_000
"""The most events a console page replays to draw a round (from the nearest snapshot to the
round's last event; about 45 µs each, so some 2 s): a store whose snapshots were written by
another engine version or rulebook revision (before an upgrade) would otherwise replay a table's
whole history for each finding page. ``dealtrail reaudit`` writes snapshots for the engine in force."""


class ReplayTooLong(ReplayError):
    """The window lies further from a usable snapshot than the caller's bound allows."""


def replay_window(
    con: duckdb.DuckDBPyConnection,
    table_id: str,
    window: Window,
    max_events: int | None = None,
    round_bounds: tuple[int, int] | None = None,
) -> ReplayResult:
    """Replay ``window`` of ``table_id`` from the store: from the latest checked snapshot that
    ends before the window (as ``dealtrail replay`` does) up to the window's last event, through
    the pure engine.

    Args:
        con: a connection to the store (read-only is enough).
        table_id: the table.
        window: a round, or a span [start, end) of occurrence times.
        max_events: the most events to replay (from the snapshot to the window's last event,
            counted by seq); None: no bound.
        round_bounds: the first and last seq of the window's round
            (:func:`dealtrail.investigate.replay.round_seqs`), when the caller has read them; read here
            otherwise (once, for both ends).

    Raises:
        ReplayTooLong: more than ``max_events`` events to replay (the message says how many and
            what writes nearer snapshots).
        ReplayError: no stored event of the table, or none of the round.
    """
    if window.round_id is not None and round_bounds is None:
        round_bounds = round_seqs(con, table_id, window.round_id, window.near)
    begin = snapshot_start(con, table_id, window, round_bounds=round_bounds)
    if window.round_id is not None:
        last = round_bounds[1] if round_bounds is not None else None
    else:
        last = _last_seq(con, table_id, window)
    if max_events is not None and last is not None and last - begin.last_seq > max_events:
        raise ReplayTooLong(
            f"the window lies {last - begin.last_seq:,} events after the nearest snapshot of this engine "
            f"version and rulebook revision (a page replays at most {max_events:,}); `dealtrail reaudit` "
            "writes snapshots for the engine in force"
        )
    return replay(table_id, _events_between(con, table_id, begin.last_seq, last), None, window, None, begin)


def _last_seq(con: duckdb.DuckDBPyConnection, table_id: str, window: Window) -> int | None:
    """The highest seq of an event inside ``window``'s time span: the replay need not read past
    it (None: no bound; a round's is its :func:`dealtrail.investigate.replay.round_seqs`)."""
    if window.start is not None or window.end is not None:
        rows = con.execute(
            """SELECT max(seq) FROM events WHERE table_id = ?
               AND (?::TIMESTAMPTZ IS NULL OR occurred_at >= ?) AND (?::TIMESTAMPTZ IS NULL OR occurred_at < ?)""",
            [table_id, window.start, window.start, window.end, window.end],
        ).fetchall()
    else:
        return None
    return None if not rows or rows[0][0] is None else int(rows[0][0])


def _events_between(
    con: duckdb.DuckDBPyConnection, table_id: str, after_seq: int, last_seq: int | None
) -> Iterator[tuple[str, str]]:
    """The stored events of the table with ``after_seq < seq <= last_seq`` (no upper bound for
    None), as :func:`dealtrail.investigate.replay.stored_events` gives them."""
    if last_seq is None:
        yield from stored_events(con, table_id, after_seq)
        return
    cur = con.execute(
        """SELECT event_id, payload::VARCHAR FROM events WHERE table_id = ? AND seq > ? AND seq <= ?
           ORDER BY seq, arrival""",
        [table_id, after_seq, last_seq],
    )
    while rows := cur.fetchmany(10_000):
        for event_id, payload in rows:
            yield str(event_id), str(payload)


def replay_page(
    con: duckdb.DuckDBPyConnection,
    table_id: str,
    window: Window,
    page: int = 1,
    page_size: int = PAGE_STEPS,
    tz: tzinfo = UTC,
) -> ReplayView:
    """One page of the steps of ``window`` at ``table_id``, each with the layout as it lay.

    Args:
        con: a connection to the store (read-only is enough).
        table_id: the table.
        window: a round, or a span [start, end) of occurrence times (UTC-aware).
        page: which page (1-based); past the last, an empty page.
        page_size: steps per page (1..``MAX_PAGE_STEPS``).
        tz: the zone each step's ``shown`` time is in (the casino's, ``DEALTRAIL_TIMEZONE``).

    Raises:
        ReplayError: no stored event of the table, none of the round, or none in the window.
    """
    result = replay_window(con, table_id, window)
    if not result.steps:
        raise ReplayError(f"no stored event of table {table_id!r} in the window")
    first = (page - 1) * page_size
    shown = result.steps[first : first + page_size]
    pages = max(1, -(-len(result.steps) // page_size))
    hidden = result.removed_before
    seen = seen_by_step(result.steps)
    steps = [
        step_json(first + i, s.event, s.state, s.findings, result.cards, hidden, tz, seen[first + i])
        for i, s in enumerate(shown)
    ]
    return ReplayView(
        table_id=table_id,
        window={
            "round": window.round_id,
            "from": window.start.astimezone(UTC).isoformat() if window.start else None,
            "to": window.end.astimezone(UTC).isoformat() if window.end else None,
        },
        total=len(result.steps),
        page=page,
        pages=pages,
        page_size=page_size,
        first=first,
        steps=steps,
        findings=[{"i": i, **_finding_json(f)} for i, s in enumerate(result.steps) for f in s.findings],
        started_after_seq=result.start.last_seq if result.start is not None else 0,
        decks_removed_before=len(hidden),
    )


def event_details(event: ev.DealingEvent) -> str:
    """An event's own fields (not its envelope) as ``key=value, ...``."""
    data = event.model_dump(mode="json", exclude=_ENVELOPE, exclude_none=True)
    return ", ".join(f"{k}={v}" for k, v in data.items())


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        "finding_id": f.finding_id,
        "revision": f.revision,
        "rule_id": f.rule_id,
        "severity": f.severity.value,
        "status": f.status.value,
        "message": f.message,
        "evidence": list(f.evidence_event_ids),
        "required_remedy": f.required_remedy,
    }


def _deck_faulted(state: TableState, deck_id: str) -> bool:
    """True if the deck owes a clearing shuffle (rulebook 10.3.1): a fault of its own, or a fault of
    the device that named no deck, logged after the deck's last clearing shuffle started."""
    d = state.decks[deck_id]
    if d.fault_event_id is not None:
        return True
    return state.shuffler_fault is not None and d.cleared_seq <= state.fault_seq


def _deck_status(state: TableState, deck_id: str) -> str:
    d = state.decks[deck_id]
    if d.removed:
        return "removed from the table"
    if _deck_faulted(state, deck_id):
        return "faulted in the shuffler"
    if d.shuffle_started_seq is not None and (
        d.last_shuffle is None or d.shuffle_started_seq > d.last_shuffle.started_seq
    ):
        return "being shuffled"
    if d.dealt_round_id is not None:
        return f"in play (round {d.dealt_round_id})"
    if d.last_shuffle is not None:
        how = d.last_shuffle.method.lower().replace("_", " ")
        return f"shuffled ({how}{', counted' if d.last_shuffle.counted else ''}), not yet dealt"
    return "not shuffled since it came to the table"


def state_json(
    state: TableState,
    cards: dict[str, tuple[str, str]],
    hidden: Mapping[str, DeckState] | None = None,
    seen: Seen | None = None,
) -> dict[str, Any]:
    """The table as it lay in ``state``: the round's layout (cards in deal order with their face
    and the event that dealt them), burns, stub and discard rack, dice and stacks, each deck's
    and device's status and the remedies owed (JSON-ready).

    Args:
        state: the engine's table state after an event.
        cards: event ID -> (card code, face) of the cards dealt (``ReplayResult.cards``).
        hidden: decks left out of ``decks`` while their state is the one given (those removed
            before the window began: ``ReplayResult.removed_before``; one brought back is shown).
        seen: what the trail showed of the round by then (:func:`seen_by_step`): exposed cards
            face up, Pai Gow hands as hands (:func:`layout_json`).
    """
    gone = hidden or {}
    rnd = state.round
    out: dict[str, Any] = {
        "round": None,
        "layout": [],
        "decks": [
            {"deck_id": k, "status": _deck_status(state, k)}
            for k, d in sorted(state.decks.items())
            if (was := gone.get(k)) is None or not (d is was or d == was)  # unchanged since it was removed
        ],
        "current_deck": state.current_deck_id,
        "devices": [
            {
                "device_id": k,
                "type": d.device_type,
                "status": "out of service"
                if d.out_of_service
                else "faulted" + (" (covered or signed)" if d.covered_or_signed else "")
                if k in state.unusable or k in state.faults
                else "in service",
            }
            for k, d in sorted(state.devices.items())
        ],
        "remedies": [
            {
                "finding_id": ob.finding.finding_id,
                "rule_id": ob.finding.rule_id,
                "round_id": ob.round_id,
                "pending": [REMEDY_TEXT.get(Remedy(p), p) for p in ob.pending],
                "done": len(ob.done),
                "overdue": ob.deadline_passed,
            }
            for ob in state.obligations
        ],
        "stub_run": state.stub_run,
        "stub_window": state.config.stub_count_window,
    }
    if rnd is None:
        return out
    out["layout"] = layout_json(rnd, cards, seen)
    out["round"] = {
        "round_id": rnd.round_id,
        "dealer_id": rnd.dealer_id,
        "deck_id": rnd.deck_id,
        "method": rnd.method.value,
        "cards_dealt": rnd.cards_dealt,
        "found_face_up": len(rnd.found_face_up),
        "stub_count": rnd.stub_count,
        "deck_total": rnd.deck_total,
        "stub_correct": rnd.stub_correct,
        "stub_discarded": rnd.stub_discarded,
        "dice": list(rnd.reveal) if rnd.reveal is not None else None,
        "total_announced": rnd.total_announced,
        "stacks": {pos: {"stack": s[0], "cards": s[1]} for pos, s in sorted(rnd.stacks.items())},
        "voided": "all hands" if rnd.voided_all else ", ".join(sorted(rnd.voided_seats)),
        "exempt": rnd.exempt,
    }
    return out


@dataclass(frozen=True)
class Seen:
    """What the trail has shown of the round in progress by a step, which the engine's state does
    not keep: the cards shown face up (card code -> the ``CardExposed`` or ``CardFoundFaceUp``
    event) and the Pai Gow hands set (owner -> (five-card, two-card) codes of its ``HandSet``)."""

    exposed: Mapping[str, str] = field(default_factory=dict)
    hands: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)


def seen_by_step(steps: Sequence[Step]) -> list[Seen]:
    """:class:`Seen` after each of ``steps`` (one each, in order), started afresh with each round.

    A hand reset (``HandReset``) goes back to its seven cards: the trail does not say how it was
    set again. A replay that begins in the middle of a round knows only what followed."""
    out: list[Seen] = []
    current: str | None = None
    exposed: dict[str, str] = {}
    hands: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for step in steps:
        rid = step.state.round.round_id if step.state.round is not None else None
        if rid != current:
            current, exposed, hands = rid, {}, {}
        match step.event:
            case ev.CardExposed() | ev.CardFoundFaceUp() if step.event.card != "UNKNOWN":
                exposed = {**exposed, step.event.card: step.event.event_id}
            case ev.HandSet() if step.event.five_card:
                hands = {**hands, step.event.owner: (tuple(step.event.five_card), tuple(step.event.two_card))}
            case ev.HandReset():
                hands = {k: v for k, v in hands.items() if k != step.event.owner}
            case _:
                pass
        out.append(Seen(exposed, hands))
    return out


def layout_json(
    rnd: RoundState, cards: Mapping[str, tuple[str, str]], seen: Seen | None = None
) -> list[dict[str, Any]]:
    """The round's cards where they lie, each area ``{"area", "name", "cards": [[code, face_up,
    dealing event ID, ID of the event that showed it face up or None], ...]}``.

    A card dealt face down and later exposed (or found face up) is drawn face up. Pai Gow stacks
    delivered to a position are that position's hand: its seven cards, then its two-card and
    five-card hands once ``HandSet`` names them; a stack not yet delivered stays ``Stack n``.

    Args:
        rnd: the round in progress.
        cards: event ID -> (card code, face) of the cards dealt (``ReplayResult.cards``).
        seen: what the trail showed of the round by then (:func:`seen_by_step`); None: nothing.
    """
    seen = seen or Seen()
    delivered = {f"STACK_{stack}": pos for pos, (stack, _, _) in rnd.stacks.items()}

    def code(eid: str) -> str:
        return cards.get(eid, ("UNKNOWN", "DOWN"))[0]

    def card(eid: str) -> list[Any]:
        c, face = cards.get(eid, ("UNKNOWN", "DOWN"))
        shown_by = seen.exposed.get(c) if c != "UNKNOWN" else None
        return [c, face == "UP" or shown_by is not None, eid, shown_by]

    groups: list[tuple[tuple[int, int, str], str, str, tuple[str, ...]]] = []
    for area, ids in rnd.cards.items():
        pos = delivered.get(area)
        if pos is None:
            groups.append((_area_order(area), area, area_name(area), ids))
            continue
        owner, order = area_name(pos), _area_order(pos)
        hand = seen.hands.get(pos)
        if hand is None:
            groups.append((order, pos, f"{owner}: {len(ids)} cards ({area_name(area).lower()})", ids))
            continue
        five, two = set(hand[0]), set(hand[1])
        if not five | two <= {code(i) for i in ids}:  # the trail's set hand is not this position's cards
            name = f"{owner}: {len(ids)} cards ({area_name(area).lower()}); its set hand names cards not dealt here"
            groups.append((order, pos, name, ids))
            continue
        groups.append(
            ((*order[:2], pos + "_2"), pos + "_TWO", f"{owner}: two-card hand", tuple(i for i in ids if code(i) in two))
        )
        groups.append(
            (
                (*order[:2], pos + "_5"),
                pos + "_FIVE",
                f"{owner}: five-card hand",
                tuple(i for i in ids if code(i) in five),
            )
        )
        rest = tuple(i for i in ids if code(i) not in five | two)
        if rest:
            groups.append(((*order[:2], pos + "_9"), pos + "_REST", f"{owner}: in neither set hand", rest))
    groups.sort(key=lambda g: g[0])
    return [{"area": key, "name": name, "cards": [card(i) for i in ids]} for _, key, name, ids in groups]


def _area_order(area: str) -> tuple[int, int, str]:
    _, _, n = area.rpartition("_")
    rank = {"DEALER": 0, "BANK": 0, "BURN": 1}.get(area, 3 if area.startswith("SEAT_") else 2)
    return (rank, int(n) if n.isdigit() else 0, area)


def _event_card(event: ev.DealingEvent) -> list[Any] | None:
    """The card an event shows (``[code, face_up]``): the card dealt, exposed or found face up."""
    match event:
        case ev.CardDealt():
            return [event.card, event.face is ev.Face.UP]
        case ev.CardExposed() | ev.CardFoundFaceUp():
            return [event.card, True]
        case _:
            return None


def step_json(
    index: int,
    event: ev.DealingEvent,
    state: TableState,
    findings: Iterable[Finding],
    cards: dict[str, tuple[str, str]],
    hidden: Mapping[str, DeckState] | None = None,
    tz: tzinfo = UTC,
    seen: Seen | None = None,
) -> dict[str, Any]:
    """One replay step: the event, the findings it raised and the table after it (:func:`state_json`;
    ``hidden``: the decks it leaves out). ``time`` is the UTC instant (ISO 8601, for programs);
    ``shown`` is it for people, in ``tz`` (the casino's zone) to the second with its offset."""
    return {
        "i": index,
        "seq": event.seq,
        "time": event.occurred_at.astimezone(UTC).isoformat(),
        "shown": stamp(event.occurred_at, tz),
        "type": event.type,
        "event_id": event.event_id,
        "round_id": event.round_id,
        "actor": f"{event.actor.role.value.lower()} {event.actor.id}",
        "details": event_details(event),
        "card": _event_card(event),
        "findings": [_finding_json(f) for f in findings],
        **state_json(state, cards, hidden, seen),
    }


# -- the picture of a breach -----------------------------------------------------------------


def _card(code: str, face_up: bool, mark: str = "", note: str = "") -> dict[str, Any]:
    return {**card_face(code), "face_up": face_up, "mark": mark, "note": note}


def breach_picture(
    con: duckdb.DuckDBPyConnection, finding: dict[str, Any], replayed: ReplayResult | None = None, tz: tzinfo = UTC
) -> dict[str, Any] | None:
    """What a finding is about, drawn: the cards, dice, stacks, counts or device faults its
    evidence events name, each marked, beside what the rule expected where the trail says it.

    Read from the engine's state replayed over the finding's round (or up to its trigger event
    between rounds) and from the evidence events themselves (``evidence_event_ids``).

    Args:
        con: a connection to the store.
        finding: the finding's row (``finding_id``, ``rule_id``, ``table_id``, ``round_id``,
            ``evidence_event_ids``, ``trigger_event_id``; ``cause_finding_id`` for a consequence).
        replayed: the finding's round already replayed (:func:`replay_window`), so a page that
            also draws the round replays it once; None: replayed here (at most
            :data:`PAGE_REPLAY_EVENTS` events).
        tz: the zone the panels' times are shown in, with their offset (the casino's).

    Returns:
        ``{"title", "panels": [...], "layout"}``, or None when the trail holds none of the
        evidence or lies too far from a usable snapshot (a panel: ``title``, ``cards``, ``facts``
        as (label, value) pairs, ``kind``).
    """
    evidence = [str(e) for e in finding.get("evidence_event_ids") or ()]
    rule = str(finding["rule_id"])
    table_id = str(finding["table_id"])
    window = Window(round_id=finding["round_id"]) if finding.get("round_id") else None
    trigger_id = str(finding.get("trigger_event_id") or (evidence[-1] if evidence else ""))
    try:
        if window is not None:
            result = replayed if replayed is not None else replay_window(con, table_id, window, PAGE_REPLAY_EVENTS)
        else:
            begin = snapshot_start(con, table_id, Window(), trigger_id)
            rows = con.execute(
                "SELECT max(seq) FROM events WHERE table_id = ? AND event_id = ?", [table_id, trigger_id]
            ).fetchall()
            last = None if not rows or rows[0][0] is None else int(rows[0][0])
            if last is not None and last - begin.last_seq > PAGE_REPLAY_EVENTS:
                return None
            trail = _events_between(con, table_id, begin.last_seq, last)
            result = replay(table_id, trail, None, Window(), trigger_id, begin)
    except ReplayError:
        return None
    by_id = {s.event.event_id: s for s in result.steps}
    cited = [by_id[e] for e in evidence if e in by_id]
    trigger = by_id.get(trigger_id)
    panels: list[dict[str, Any]] = []
    # the cited events in trail order, those outside the round (the next round's start of a
    # DT-remedy-overdue, the far side of a gap) read from the store
    shown = sorted(
        [s.event for s in cited] + _stored(con, table_id, [e for e in evidence if e not in by_id]),
        key=lambda e: e.seq,
    )
    panels.extend(_evidence_panel(e, tz) for e in shown)
    if rule in ("DT-sequence-gap", "DT-chain-broken") and len(shown) == 2:
        before, after = shown
        panels[0]["title"] = f"The last event before the gap: {before.type}"
        panels[1]["title"] = f"The first event after it: {after.type}"
        missing = max(0, after.seq - before.seq - 1)
        panels.append({"kind": "gap", "title": "The gap", "cards": [], "facts": [
            ("Seq", f"{before.seq} to {after.seq}"), ("Events missing", str(missing)),
            ("Chain", "the event after the gap does not link to the one before it" if rule == "DT-chain-broken"
             else "the stored trail skips these sequence numbers")]})  # fmt: skip
    state = trigger or (cited[-1] if cited else None) or (result.steps[-1] if result.steps else None)
    extra = _rule_panels(rule, [s.event for s in cited], state.state if state else None, result, tz)
    if rule == "DT-remedy-overdue":
        extra.insert(0, _overdue_panel(finding, [s.event for s in cited], tz))
    panels.extend(extra)
    if not panels and not cited:
        return None
    layout = None
    if state is not None and state.state.round is not None:
        marks = set(evidence)  # a cited card: its dealing event, or the event that showed it face up, is evidence
        at = next(i for i, st in enumerate(result.steps) if st is state)
        layout = [
            {
                "area": a["area"],
                "name": a["name"],
                "cards": [
                    _card(c, up, "cited" if eid in marks or by in marks else "") for c, up, eid, by in a["cards"]
                ],
            }
            for a in layout_json(state.state.round, result.cards, seen_by_step(result.steps[: at + 1])[at])
        ]
    spec = RULES_BY_ID.get(rule)
    blank: dict[str, Any] = {"cards": [], "hand": None, "dice": None, "stub": None, "stacks": None, "facts": []}
    return {"title": spec.summary if spec else rule, "panels": [{**blank, **p} for p in panels], "layout": layout}


def _stored(con: duckdb.DuckDBPyConnection, table_id: str, ids: list[str]) -> list[ev.DealingEvent]:
    """The stored events of ``table_id`` with these IDs, decoded, in seq order (undecodable ones left out:
    the replay lists them)."""
    from schemas.codec import DecodeError, decode

    if not ids:
        return []
    rows = con.execute(
        """SELECT payload::VARCHAR FROM events WHERE table_id = ? AND event_id IN (SELECT unnest(?))
           ORDER BY seq, arrival""",
        [table_id, ids],
    ).fetchall()
    out = []
    for (payload,) in rows:
        try:
            out.append(decode(str(payload)))
        except DecodeError:
            continue
    return out


def _overdue_panel(finding: dict[str, Any], cited: list[ev.DealingEvent], tz: tzinfo = UTC) -> dict[str, Any]:
    """The remedy timeline of a DT-remedy-overdue: what was owed, from when, and that the next
    round started before it was seen (rulebook section 8a)."""
    facts = [("Owed", str(finding.get("required_remedy") or "the cause's remedy"))]
    if cited:
        facts.append(("Owed from", clock(cited[0].occurred_at, tz)))
    facts.append(("Seen", "not before the next round started"))
    return {"kind": "timeline", "title": "The remedy that was skipped", "cards": [], "facts": facts}


def _who(event: ev.DealingEvent) -> str:
    return f"{event.actor.role.value.lower()} {event.actor.id}"


def _evidence_panel(event: ev.DealingEvent, tz: tzinfo = UTC) -> dict[str, Any]:
    """A panel for one cited event that carries a card, a count, dice, a stack or a fault."""
    facts: list[tuple[str, str]] = [
        ("When", show(event.occurred_at, tz)),
        ("By", _who(event)),
    ]
    panel: dict[str, Any]
    match event:
        case ev.CardExposed():
            where = area_name(f"SEAT_{event.seat}") if event.seat and str(event.seat).isdigit() else event.seat
            facts += [
                ("Exposed by", event.exposed_by.lower()),
                ("Where", event.location.replace("_", " ").lower() + (f", {where}" if where else "")),
                ("During", event.phase.lower().replace("_", " ")),
            ]
            panel = {
                "kind": "exposed",
                "title": "The exposed card",
                "cards": [_card(event.card, True, "exposed")],
                "facts": facts,
            }
        case ev.CardFoundFaceUp():
            facts += [("Found in", event.location.lower())]
            if event.disposition:
                facts.append(("Then", event.disposition.replace("_", " ").lower()))
            panel = {
                "kind": "found",
                "title": "A card found face up",
                "cards": [_card(event.card, True, "found")],
                "facts": facts,
            }
        case ev.CardDealt():
            facts += [
                ("To", area_name(event.to_area)),
                ("Dealt", "face up" if event.face is ev.Face.UP else "face down"),
                ("Deck", event.deck_id or "-"),
                ("Deal index", str(event.deal_index)),
            ]
            panel = {
                "kind": "dealt",
                "title": "The card dealt",
                "cards": [_card(event.card, event.face is ev.Face.UP, "cited")],
                "facts": facts,
            }
        case ev.HandSet():
            facts.append(
                ("House way check", {True: "matches", False: "does not match", None: "-"}[event.matches_house_way])
            )
            panel = {
                "kind": "hand",
                "title": f"{area_name(event.owner)}'s hand as set",
                "hand": {
                    "five": [_card(c, True) for c in event.five_card],
                    "two": [_card(c, True) for c in event.two_card],
                },
                "cards": [],
                "facts": facts,
            }
        case ev.ShufflerFaulted():
            facts += [
                ("Device", event.device_id),
                ("Fault", event.fault.lower().replace("_", " ")),
                ("Deck in the device", event.deck_id or "not recorded"),
                ("While", (event.during or "not recorded").lower()),
            ]
            panel = {"kind": "fault", "title": "The device fault", "cards": [], "facts": facts}
        case ev.StubCounted():
            facts += [("Stub counted", f"{event.count} cards"), ("Method", event.method.replace("_", " ").lower())]
            panel = {"kind": "count", "title": "The stub count", "cards": [], "facts": facts}
        case ev.DiceRevealed():
            panel = {
                "kind": "dice",
                "title": "The dice",
                "dice": list(event.values),
                "cards": [],
                "facts": [*facts, ("Total", str(sum(event.values)))],
            }
        case ev.StackDelivered():
            facts += [("Stack", str(event.stack_index)), ("Cards", str(event.card_count)), ("To", event.to_position)]
            panel = {"kind": "stack", "title": "The stack delivered", "cards": [], "facts": facts}
        case ev.DiceTotalAnnounced():
            panel = {
                "kind": "dice",
                "title": "The total announced",
                "cards": [],
                "facts": [*facts, ("Announced", str(event.total))],
            }
        case ev.RoundStarted():
            panel = {
                "kind": "event",
                "title": f"Round {event.round_id} started",
                "cards": [],
                "facts": [*facts, ("Round", event.round_id or "-")],
            }
        case _:
            details = event_details(event)
            panel = {
                "kind": "event",
                "title": event.type,
                "cards": [],
                "facts": [*facts, *([("Details", details)] if details else [])],
            }
    return panel


def _rule_panels(
    rule: str, cited: list[ev.DealingEvent], state: TableState | None, result: ReplayResult, tz: tzinfo = UTC
) -> list[dict[str, Any]]:
    """What the rule expected, set beside what the evidence shows, where the trail holds it."""
    out: list[dict[str, Any]] = []
    if state is None:
        return out
    rnd = state.round
    if rule.endswith("-i-house-way"):
        # the house way's setting: the same owner's hand set again after its HandReset, if the trail has it
        owner = next((e.owner for e in cited if isinstance(e, ev.HandSet)), "DEALER")
        after = [s.event for s in result.steps if isinstance(s.event, ev.HandReset | ev.HandSet)]
        reset = next((i for i, e in enumerate(after) if isinstance(e, ev.HandReset) and e.owner == owner), None)
        again = next(
            (
                e
                for e in after[(reset or 0) + 1 :]
                if reset is not None and isinstance(e, ev.HandSet) and e.owner == owner
            ),
            None,
        )
        if again is not None:
            out.append(
                {
                    "kind": "hand",
                    "title": "The hand reset per the house way",
                    "cards": [],
                    "hand": {
                        "five": [_card(c, True) for c in again.five_card],
                        "two": [_card(c, True) for c in again.two_card],
                    },
                    "facts": [("By", _who(again))],
                }
            )
        else:
            text = (
                f"reset (HandReset at {clock(after[reset].occurred_at, tz)}); the trail does not "
                "record the hand as reset"
                if reset is not None
                else "never reset in this round"
            )
            out.append(
                {
                    "kind": "hand",
                    "title": "The house way",
                    "cards": [],
                    "facts": [("House way", state.config.house_way_id or "-"), ("The hand was", text)],
                }
            )
    if rnd is not None and rnd.stub_count is not None and ("stub" in rule or "misdeal" in rule or "count" in rule):
        expected = state.config.cards_per_deck - expected_cards_dealt(state, rnd)
        out.append(
            {
                "kind": "stub",
                "title": "The stub against the expected count",
                "cards": [],
                "stub": {
                    "counted": rnd.stub_count,
                    "expected": expected,
                    "dealt": rnd.cards_dealt,
                    "found": len(rnd.found_face_up),
                    "deck_total": rnd.deck_total,
                    "deck_size": state.config.cards_per_deck,
                },
                "facts": [
                    ("Stub counted", f"{rnd.stub_count} cards"),
                    ("Expected stub", f"{expected} cards"),
                    ("Difference", _stub_difference(rnd.stub_count - expected)),
                    ("Cards dealt", f"{rnd.cards_dealt} (+{len(rnd.found_face_up)} found face up)"),
                    ("Deck total", f"{rnd.deck_total} of {state.config.cards_per_deck}"),
                ],
            }
        )
    if rnd is not None and rnd.stacks and ("wrong-total" in rule or "start-position" in rule or "wrong-count" in rule):
        order = list(state.config.pgp_count_order)
        expected_pos = None
        if rnd.reveal is not None:
            expected_pos = order[(sum(rnd.reveal) - 1) % len(order)]
        elif rnd.rng_number is not None:
            expected_pos = order[(rnd.rng_number - 1) % len(order)]
        first = min(rnd.stacks.items(), key=lambda kv: kv[1][0])[0]
        out.append(
            {
                "kind": "stacks",
                "title": "Where the stacks went",
                "cards": [],
                "stacks": [
                    {
                        "position": p,
                        "stack": rnd.stacks[p][0] if p in rnd.stacks else None,
                        "cards": rnd.stacks[p][1] if p in rnd.stacks else None,
                        "mark": "wrong" if p == first and p != expected_pos else "right" if p == expected_pos else "",
                    }
                    for p in order
                ],
                "facts": [
                    ("Dice", " + ".join(map(str, rnd.reveal)) + f" = {sum(rnd.reveal)}" if rnd.reveal else "-"),
                    ("Total announced", str(rnd.total_announced) if rnd.total_announced is not None else "-"),
                    ("First stack went to", first),
                    ("It should have gone to", expected_pos or "-"),
                    ("Stack size", str(state.config.pgp_stack_size)),
                ],
            }
        )
    if rule == "DT-deal-after-device-fault":
        deck = next((e.deck_id for e in cited if isinstance(e, ev.CardDealt)), rnd.deck_id if rnd else None)
        out.append(
            {
                "kind": "deck",
                "title": "The deck dealt",
                "cards": [],
                "facts": [
                    ("Deck", deck or "-"),
                    ("Its status then", _deck_status(state, deck) if deck is not None and deck in state.decks else "-"),
                    (
                        "Faulted decks",
                        ", ".join(k for k in sorted(state.decks) if _deck_faulted(state, k)) or "none now",
                    ),
                ],
            }
        )
    return out


def _stub_difference(diff: int) -> str:
    if diff == 0:
        return "none"
    n = abs(diff)
    if diff < 0:
        return f"{n} card{'s' if n > 1 else ''} short: {n} more left the deck than a correct deal deals"
    return f"{n} card{'s' if n > 1 else ''} over: {n} fewer left the deck than a correct deal deals"


def case_members(rows: list[dict[str, Any]], finding_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A case: the cause of ``finding_id`` (itself if it is an incident) and its consequences.

    Args:
        rows: finding rows of the incidents read model (each with ``finding_id`` and
            ``cause_finding_id``), those of the finding's table at least.
        finding_id: any finding of the case.

    Returns:
        ``(cause, consequences)``: the cause's row (None if not in ``rows``) and the rows whose
        cause it is, oldest first.
    """
    by_id = {r["finding_id"]: r for r in rows}
    me = by_id.get(finding_id)
    if me is None:
        return None, []
    cause = by_id.get(me.get("cause_finding_id") or "", me)
    consequences = sorted(
        (r for r in rows if r.get("cause_finding_id") == cause["finding_id"]),
        key=lambda r: (r.get("detected_at") or datetime.min.replace(tzinfo=UTC), r["finding_id"]),
    )
    return cause, consequences
