"""dealtrail's own integrity rules (rulebook section 8a) that look at dealing events:
DT-deck-composition, DT-deal-after-device-fault and ALL-shuffle-count-mismatch-PROV.

DT-sequence-gap and DT-remedy-overdue are raised by :mod:`streams.engine.engine` and
:mod:`streams.engine.remedies`, which own the sequence and the obligations.
"""

from __future__ import annotations

from schemas import events as ev
from schemas.base import Envelope
from schemas.findings import Finding
from streams.engine.catalog import RULEBOOK_REVISION
from streams.engine.context import Step
from streams.engine.reducer import deck_fault, round_deck_id

COMPOSITION = "DT-deck-composition"
DEAL_AFTER_FAULT = "DT-deal-after-device-fault"
COUNT_MISMATCH = "ALL-shuffle-count-mismatch-PROV"
READS: frozenset[type[Envelope]] = frozenset(
    {
        ev.CardDealt,
        ev.CardFoundFaceUp,
        ev.DeckVerified,
        ev.CardAddedToDeck,
        ev.CardRemovedFromDeck,
        ev.ShuffleCompleted,
    }
)
"""The event types :func:`check` reads; the engine calls it for no other (no finding is lost)."""


def check(step: Step) -> list[Finding]:
    """Integrity rules for one event.

    - DT-deck-composition: a card (``CardDealt``/``CardFoundFaceUp`` with a recorded face) seen a
      second time since the deck's last shuffle, or a joker beyond the deck's jokers; once per
      deck per shuffle.
    - DT-deal-after-device-fault: a ``CardDealt`` from a deck with an unresolved fault
      (:func:`streams.engine.reducer.deck_fault`: a ``ShufflerFaulted`` naming that deck, or
      naming none, a ``ShuffleCompleted`` of it that reported a short deck or ran in SORT mode,
      a shuffle by a device not returned to service), with no clearing shuffle of that deck
      since; once per round (rulebook 10.3.1: the published fines count occurrences).
    - ALL-shuffle-count-mismatch-PROV: ``ShuffleCompleted.device_full_deck_ok`` is False; the
      deck must be removed.

    Rulebook revision 2: the composition window starts at ``ShuffleStarted`` (10.1.3); a deck
    stays flagged (no second DT-deck-composition) until ``DeckRemoved`` or ``DeckVerified`` OK
    (10.1.5); ``DeckVerified`` with another result, and an unauthorised ``CardAddedToDeck`` /
    ``CardRemovedFromDeck``, raise DT-deck-composition; what clears a fault is decided in
    :func:`streams.engine.reducer.clears_fault` (10.1.2).

    Rulebook revision 3: a fault belongs to its deck (10.3.1); while a deck is suspect, a further
    trigger on it (a duplicate face, a ``DeckVerified`` other than OK, an unauthorised inventory
    change) adds its events to the open finding as a new revision of it (10.3.3).
    """
    event = step.event
    out: list[Finding] = []
    if type(event) is ev.CardDealt or type(event) is ev.CardFoundFaceUp:
        if type(event) is ev.CardDealt and not step.fired(DEAL_AFTER_FAULT):
            deck_id = round_deck_id(step.before, event)
            fault = deck_fault(step.before, deck_id)
            if fault is not None:
                out.append(
                    step.finding(
                        DEAL_AFTER_FAULT,
                        (fault, event.event_id),
                        f"Card dealt from deck {deck_id} after a device fault with no complete full-deck shuffle "
                        "of it since.",
                    )
                )
        if event.card != "UNKNOWN":
            out.extend(_composition(step, event))
    elif type(event) is ev.DeckVerified and event.result != "OK":
        deck_id = event.deck_id or step.after.current_deck_id
        msg = f"Deck {deck_id} verified {event.result}: {event.count} cards."
        out.append(_suspicion(step, event, (event.event_id,), msg))
    elif (type(event) is ev.CardAddedToDeck or type(event) is ev.CardRemovedFromDeck) and event.authorised_by is None:
        what = "added to" if type(event) is ev.CardAddedToDeck else "taken out of"
        deck_id = round_deck_id(step.after, event)
        out.append(_suspicion(step, event, (event.event_id,), f"{event.card} {what} deck {deck_id} unauthorised."))
    elif type(event) is ev.ShuffleCompleted and event.device_full_deck_ok is False:
        count = "" if event.device_card_count is None else f" ({event.device_card_count} cards)"
        out.append(
            step.finding(COUNT_MISMATCH, (event.event_id,), f"Shuffler reported the deck is not complete{count}.")
        )
    return out


def _suspicion(step: Step, event: ev.DealingEvent, evidence: tuple[str, ...], message: str) -> Finding:
    """A DT-deck-composition trigger: a new finding, or, while the deck is suspect, a new revision
    of its open finding with ``evidence`` added (rulebook 10.3.3)."""
    deck_id = round_deck_id(step.before, event)
    deck = step.before.decks.get(deck_id) if deck_id is not None else None
    if deck is None or not deck.composition_flagged or deck.composition_finding is None:
        return step.finding(COMPOSITION, evidence, message)
    f = deck.composition_finding
    return f.model_copy(
        update={
            "revision": f.revision + 1,
            "evidence_event_ids": tuple(dict.fromkeys((*f.evidence_event_ids, *evidence))),
            "trigger_event_id": event.event_id,
            "observed_at": event.occurred_at,
            "rulebook_revision": RULEBOOK_REVISION,
        }
    )


def _composition(step: Step, event: ev.CardDealt | ev.CardFoundFaceUp) -> list[Finding]:
    deck_id = round_deck_id(step.after, event)
    if deck_id is None:
        return []
    deck = step.after.decks.get(deck_id)
    if deck is None:  # not recorded: a card outside any round (its start was lost, a gap the engine reports)
        return []
    allowed = deck.allowed(event.card)
    if deck.seen_cards.count(" " + event.card) <= allowed:
        return []
    seen = deck.sightings(event.card)
    if allowed <= 0:
        msg = f"{event.card} drawn from deck {deck_id}, which does not hold it."
    else:
        msg = f"{event.card} drawn {len(seen)} times from deck {deck_id} since its last shuffle."
    return [_suspicion(step, event, seen, msg)]
