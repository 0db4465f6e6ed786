"""Remedy tracking (rulebook sections 5 and 8a): a finding whose rule prescribes a remedy opens
an :class:`~streams.engine.state.Obligation`; the remedy events close it (a new revision with
status ``remedied``); if the next round at the table starts first, the finding turns
``overdue`` and DT-remedy-overdue is raised, staying open until the remedy arrives, for at most
the remedy window after the round ended (rulebook 10.3.5, :func:`expire`).
"""

from __future__ import annotations

from datetime import timedelta

from schemas import events as ev
from schemas.base import DICE_WAGERS, Envelope
from schemas.findings import Finding, FindingStatus, Severity, finding_id_for
from streams.engine.catalog import REMEDY_TEXT, RULEBOOK_REVISION, RULES_BY_ID, Remedy
from streams.engine.context import Step
from streams.engine.reducer import round_deck_id
from streams.engine.state import Obligation, TableState

OVERDUE = "DT-remedy-overdue"
ROUND_SCOPED = frozenset({Remedy.VOID_ALL, Remedy.WAGERS_RETURNED, Remedy.VOID_SEAT, Remedy.PLAYER_DECISION})
VOIDING = frozenset({Remedy.VOID_ALL, Remedy.WAGERS_RETURNED, Remedy.VOID_SEAT, Remedy.PLAYER_DECISION})
"""Remedies that void wagers: a voided wager settled win or loss undoes them (issue 19, item 6)."""


def open_obligations(step: Step, findings: list[Finding]) -> tuple[Obligation, ...]:
    """Obligations for the new findings of ``step`` whose rules prescribe remedies."""
    out = []
    event = step.event
    for f in findings:
        spec = RULES_BY_ID[f.rule_id]
        if not spec.remedies or f.revision:
            continue
        out.append(
            Obligation(
                finding=f,
                pending=tuple(spec.remedies),
                trigger_seq=event.seq,
                opened_at=event.occurred_at,
                round_id=f.round_id,
                deck_id=round_deck_id(step.before, event),
                seat=getattr(event, "seat", None),
                device_id=getattr(event, "device_id", None),
                owner=getattr(event, "owner", None),
                owed_wagers=_open_wagers(step),
                ended_at=event.occurred_at if f.round_id is None or type(event) is ev.RoundCompleted else None,
            )
        )
    return tuple(out)


def expire(step: Step, state: TableState, window: timedelta | None) -> tuple[TableState, list[Finding]]:
    """Rulebook 10.3.5 and 10.4.2: an obligation leaves the state ``window`` (event time) after its
    round ended.

    At a ``RoundCompleted`` the obligations of that round note when it ended. At every event of
    the table (its events are the only clock), the obligations whose round ended ``window`` or more
    before the event are dropped, before the event can remedy them (a remedy after the window is
    stored with the events, shown beside the finding, and changes no engine state). One that no
    next round had made overdue gets an ``overdue`` revision and, for a voiding rule,
    DT-remedy-overdue for the round that owed it, exactly as the next round's start would have
    raised them (10.4.2: the same lateness gives the same findings whether or not the next round
    came within the window). Obligations already remedied and watched, or already overdue, are
    dropped silently.

    Args:
        step: the event being applied (``step.before``: the state before it).
        state: the state after the event's reduction and rules.
        window: the remedy window; None keeps every obligation (no limit).

    Returns:
        The state with the obligations kept, and the ``overdue`` revisions and DT-remedy-overdue
        findings.
    """
    if not state.obligations:
        return state, []
    event = step.event
    obligations = state.obligations
    if type(event) is ev.RoundCompleted:
        rnd = step.before.round
        round_id = event.round_id or (rnd.round_id if rnd is not None else None)
        if round_id is not None and any(ob.round_id == round_id and ob.ended_at is None for ob in obligations):
            obligations = tuple(
                ob.model_copy(update={"ended_at": event.occurred_at})
                if ob.round_id == round_id and ob.ended_at is None
                else ob
                for ob in obligations
            )
    now = event.occurred_at
    if window is None or all(ob.ended_at is None or now - ob.ended_at < window for ob in obligations):
        return (
            (state, [])
            if obligations is state.obligations
            else (state.model_copy(update={"obligations": obligations}), [])
        )
    kept: list[Obligation] = []
    out: list[Finding] = []
    for ob in obligations:
        if ob.ended_at is None or now - ob.ended_at < window:
            kept.append(ob)
            continue
        if ob.watch or ob.deadline_passed:
            continue
        out.extend(_overdue(state, ob, event))
    return state.model_copy(update={"obligations": tuple(kept)}), out


def _overdue(state: TableState, ob: Obligation, event: ev.DealingEvent) -> list[Finding]:
    """The findings of an obligation whose deadline passed at ``event`` (the next round's start, or
    the first event at or past the end of its remedy window): an ``overdue`` revision of its
    finding and, for a voiding rule, DT-remedy-overdue for the round that owed the remedy, proven
    by the finding's evidence and ``event`` (rulebook section 8a, 10.4.2)."""
    late = ob.finding.model_copy(
        update={
            "revision": ob.finding.revision + 1,
            "status": FindingStatus.OVERDUE,
            "trigger_event_id": event.event_id,
            "observed_at": event.occurred_at,
            "rulebook_revision": RULEBOOK_REVISION,
        }
    )
    if ob.finding.severity is not Severity.VOIDING:
        return [late]
    evidence = (*ob.finding.evidence_event_ids, event.event_id)
    spec = RULES_BY_ID[OVERDUE]
    missing = "; ".join(REMEDY_TEXT[Remedy(r)] for r in ob.pending)
    what = "Next round started" if type(event) is ev.RoundStarted else "The remedy window closed"
    overdue = Finding(
        finding_id=finding_id_for(OVERDUE, evidence),
        rule_id=OVERDUE,
        citation=spec.citation,
        game=state.game,
        severity=spec.severity,
        table_id=state.table_id,
        round_id=ob.round_id,
        evidence_event_ids=evidence,
        required_remedy=missing,
        message=f"{what} before the remedy of {ob.finding.rule_id} ({missing}).",
        trigger_event_id=event.event_id,
        observed_at=event.occurred_at,
        rulebook_revision=RULEBOOK_REVISION,
    )
    return [late, overdue]


def _open_wagers(step: Step) -> frozenset[str]:
    rnd = step.round
    if rnd is None:
        return frozenset()
    return frozenset(w.wager_id for w in rnd.wagers.values() if w.active and not w.settled)


def _voided_wagers(ob: Obligation, state: TableState) -> frozenset[str]:
    """The owed wagers that the obligation's remedies void: all of them when the rule voids
    all hands or returns the wagers, else the wagers of the obligation's seat that ride on its
    hand (a seat's dice-outcome wagers, Sum / Match / Beat It, do not: § 645a.14(d) voids the
    player's hand, not the dice)."""
    remedies = RULES_BY_ID[ob.finding.rule_id].remedies
    if Remedy.VOID_ALL in remedies or Remedy.WAGERS_RETURNED in remedies or ob.seat is None:
        return ob.owed_wagers
    rnd = state.round
    wagers = rnd.wagers if rnd is not None else {}
    return frozenset(
        w
        for w in ob.owed_wagers
        if w in wagers and wagers[w].seat == ob.seat and wagers[w].wager_type not in DICE_WAGERS
    )


def _track_wagers(ob: Obligation, state: TableState, event: ev.DealingEvent) -> Obligation:  # noqa: PLR0911
    """Follow the owed wagers of ``ob``: returned, pushed, or settled win/loss instead (a voided
    wager settled win or loss keeps every voiding remedy unmet, rulebook decision 4)."""
    if not VOIDING.intersection(RULES_BY_ID[ob.finding.rule_id].remedies):
        return ob
    round_id = event.round_id or (state.round.round_id if state.round else None)
    if round_id != ob.round_id:
        return ob
    if type(event) is ev.WagersReturned:
        if Remedy.WAGERS_RETURNED not in ob.pending:
            return ob
        got = ob.owed_wagers & frozenset(event.wager_ids)
        return ob.model_copy(update={"returned_wagers": ob.returned_wagers | got}) if got else ob
    if type(event) is ev.WagerSettled and event.wager_id in ob.owed_wagers:
        if event.outcome == "PUSH":
            if Remedy.WAGERS_RETURNED not in ob.pending:
                return ob
            return ob.model_copy(update={"returned_wagers": ob.returned_wagers | {event.wager_id}})
        if event.wager_id in _voided_wagers(ob, state) and not ob.settled_instead:
            return ob.model_copy(update={"settled_instead": True})
    return ob


def _undone(ob: Obligation, event: ev.DealingEvent) -> tuple[Obligation, list[Finding]]:
    """A remedied obligation under watch whose voided wager was just settled win or loss: its
    findings get a revision that is no longer ``remedied`` (``overdue`` if the next round had
    started before the remedy, else ``open``), and the void is owed again (it can no longer be
    met: the obligation turns overdue at the next round)."""
    status = FindingStatus.OVERDUE if ob.deadline_passed else FindingStatus.OPEN
    out: list[Finding] = []
    for f in (ob.finding, ob.overdue_finding):
        if f is None:
            continue
        out.append(
            f.model_copy(
                update={
                    "revision": f.revision + 1,
                    "status": status,
                    "remedy_event_ids": (),
                    "remedy_delay_seconds": None,
                    "late": False,
                    "trigger_event_id": event.event_id,
                    "observed_at": event.occurred_at,
                    "rulebook_revision": RULEBOOK_REVISION,
                }
            )
        )
    finding, overdue = out[0], (out[1] if len(out) > 1 else None)
    remedies = RULES_BY_ID[ob.finding.rule_id].remedies
    owed = tuple(r for r in remedies if r in VOIDING and r != Remedy.PLAYER_DECISION) or (Remedy.VOID_SEAT,)
    reopened = ob.model_copy(
        update={"watch": False, "pending": owed, "finding": finding, "overdue_finding": overdue, "done": ()}
    )
    return reopened, out


def _satisfies(state: TableState, ob: Obligation, remedy: str, event: ev.DealingEvent) -> bool:  # noqa: PLR0911
    """True if ``event`` carries out ``remedy`` for ``ob`` (``state`` is the state after it)."""
    if remedy in ROUND_SCOPED:
        round_id = event.round_id or (state.round.round_id if state.round else None)
        if round_id != ob.round_id:
            return False
    if type(event) is ev.RoundVoided:
        if ob.settled_instead:  # a voided wager was settled win or loss: the void is not a remedy
            return False
        if remedy == Remedy.VOID_ALL:
            return event.scope == "ALL_HANDS"
        if remedy == Remedy.VOID_SEAT:
            return event.scope in ("ALL_HANDS", ob.seat)
        return remedy == Remedy.WAGERS_RETURNED and _all_returned(ob)
    elif type(event) is ev.WagersReturned or type(event) is ev.WagerSettled:
        return remedy == Remedy.WAGERS_RETURNED and _all_returned(ob)
    elif type(event) is ev.DeckRemoved:
        return remedy == Remedy.DECK_REMOVED and (ob.deck_id is None or round_deck_id(state, event) == ob.deck_id)
    elif type(event) is ev.ShuffleCompleted:
        if remedy != Remedy.RESHUFFLE or event.mode != "SHUFFLE":
            return False
        deck_id = round_deck_id(state, event)
        if ob.deck_id is not None and deck_id != ob.deck_id:
            return False  # rulebook 10.3.1: the cards to reshuffle are those of the trigger's deck
        deck = state.decks.get(deck_id) if deck_id else None
        return deck is not None and deck.last_shuffle is not None and deck.last_shuffle.started_seq > ob.trigger_seq
    elif type(event) is ev.NoRollCalled:
        return remedy == Remedy.NO_ROLL_CALLED
    elif type(event) is ev.DiceShaken:
        return remedy == Remedy.RESHAKEN and Remedy.NO_ROLL_CALLED not in ob.pending
    elif type(event) is ev.PlayerVoidDecided:
        return remedy == Remedy.PLAYER_DECISION and event.seat == ob.seat
    elif type(event) is ev.HandReset:
        settled = state.round is not None and state.round.settled_any
        return remedy == Remedy.HAND_RESET and event.owner == ob.owner and not settled
    elif type(event) is ev.CardsRemovedFromDevice:
        return remedy == Remedy.REMOVED_FROM_DEVICE and event.device_id == ob.device_id
    return False


REMEDY_EVENTS: frozenset[type[Envelope]] = frozenset(
    {
        ev.RoundVoided,
        ev.WagersReturned,
        ev.WagerSettled,
        ev.DeckRemoved,
        ev.ShuffleCompleted,
        ev.NoRollCalled,
        ev.DiceShaken,
        ev.PlayerVoidDecided,
        ev.HandReset,
        ev.CardsRemovedFromDevice,
    }
)
"""The event types that can carry out a remedy or follow owed wagers (:func:`_satisfies`,
:func:`_track_wagers`): any other event leaves every obligation as it is, so
:func:`progress` returns at once for it (a table's open obligations are not looked at for
each card dealt; an obligation whose round is over can stay open for the rest of the trail)."""


def _all_returned(ob: Obligation) -> bool:
    return not ob.settled_instead and ob.owed_wagers <= ob.returned_wagers


def progress(state: TableState, event: ev.DealingEvent) -> tuple[TableState, list[Finding]]:
    """Advance every open obligation with ``event``; close those with nothing pending.

    Returns:
        The state with updated ``obligations`` and the new finding revisions (``remedied``).
    """
    if not state.obligations or type(event) not in REMEDY_EVENTS:
        return state, []
    revisions: list[Finding] = []
    kept: list[Obligation] = []
    changed = False
    for ob in state.obligations:
        tracked = _track_wagers(ob, state, event)
        if ob.watch:
            if tracked.settled_instead and not ob.settled_instead:
                reopened, undone = _undone(tracked, event)
                kept.append(reopened)
                revisions.extend(undone)
                changed = True
            else:
                kept.append(ob)
            continue
        if tracked is not ob:
            changed = True
            ob = tracked  # noqa: PLW2901
        pending = list(ob.pending)
        done = list(ob.done)
        for remedy in ob.pending:
            if _satisfies(state, ob, remedy, event):
                pending.remove(remedy)
                done.append(event.event_id)
        if len(pending) == len(ob.pending):
            kept.append(ob)
            continue
        changed = True
        if type(event) is ev.PlayerVoidDecided and event.decision == "VOID":
            pending.append(Remedy.VOID_SEAT)
        if pending:
            kept.append(ob.model_copy(update={"pending": tuple(pending), "done": tuple(dict.fromkeys(done))}))
            continue
        remedy_ids = tuple(dict.fromkeys(done))
        closed: list[Finding] = []
        for f in (ob.finding, ob.overdue_finding):
            if f is None:
                continue
            since = ob.opened_at if f is ob.finding else f.observed_at
            delay = (event.occurred_at - since).total_seconds()
            closed.append(
                f.model_copy(
                    update={
                        "revision": f.revision + 1,
                        "status": FindingStatus.REMEDIED,
                        "remedy_event_ids": remedy_ids,
                        "remedy_delay_seconds": delay,
                        "late": ob.deadline_passed,
                        "trigger_event_id": event.event_id,
                        "observed_at": event.occurred_at,
                        "rulebook_revision": RULEBOOK_REVISION,
                    }
                )
            )
        revisions.extend(closed)
        rnd = state.round
        remedies = RULES_BY_ID[ob.finding.rule_id].remedies
        if (
            ob.round_id is not None
            and rnd is not None
            and rnd.round_id == ob.round_id
            and (Remedy.VOID_ALL in remedies or Remedy.WAGERS_RETURNED in remedies or type(event) is ev.RoundVoided)
        ):
            # remedied by a void while its round goes on (a player who plays out voids nothing):
            # watched until the next round starts
            kept.append(
                ob.model_copy(
                    update={
                        "pending": (),
                        "done": remedy_ids,
                        "watch": True,
                        "finding": closed[0],
                        "overdue_finding": closed[1] if len(closed) > 1 else None,
                    }
                )
            )
    if not changed:
        return state, []
    return state.model_copy(update={"obligations": tuple(kept)}), revisions


def deadline(step: Step, state: TableState) -> tuple[TableState, list[Finding]]:
    """At ``RoundStarted``: every obligation of an earlier round or between rounds still open
    turns ``overdue``; for voiding rules it also raises DT-remedy-overdue (evidence: the
    trigger's evidence and the ``RoundStarted``), as rulebook section 8a defines it."""
    event = step.event
    if type(event) is not ev.RoundStarted or not state.obligations:
        return state, []
    out: list[Finding] = []
    kept = []
    changed = False
    for ob in state.obligations:
        if ob.watch:
            changed = True
            continue  # remedied, and its round is over: nothing more can undo the remedy
        if ob.ended_at is None:  # its round never completed: it ended when the next one started
            ob = ob.model_copy(update={"ended_at": event.occurred_at})  # noqa: PLW2901
            changed = True
        if ob.deadline_passed:
            kept.append(ob)
            continue
        found = _overdue(state, ob, event)
        out += found
        kept.append(
            ob.model_copy(
                update={
                    "deadline_passed": True,
                    "finding": found[0],
                    "overdue_finding": found[1] if len(found) > 1 else None,
                }
            )
        )
    if not out and not changed:
        return state, []
    return state.model_copy(update={"obligations": tuple(kept)}), out
