"""dealtrail's own integrity rules (rulebook section 8a) that look at dealing events:
DT-deck-composition, DT-deal-after-device-fault and ALL-shuffle-count-mismatch-PROV.

DT-sequence-gap and DT-remedy-overdue are raised by :mod:`streams.engine.engine` and
:mod:`streams.engine.remedies`, which own the sequence and the obligations.
"""

from __future__ import annotations

from schemas import events as ev
from schemas.base import Envelope
from schemas.findings import Finding
from streams.engine.context import Step
from streams.engine.reducer import round_deck_id

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
    - DT-deal-after-device-fault: a ``CardDealt`` after ``ShufflerFaulted`` or a
      ``ShuffleCompleted`` that reported a short deck or ran in SORT mode, with no good shuffle
      since; once per fault.
    - ALL-shuffle-count-mismatch-PROV: ``ShuffleCompleted.device_full_deck_ok`` is False; the
      deck must be removed.

    Rulebook revision 2: the composition window starts at ``ShuffleStarted`` (10.1.3); a deck
    stays flagged (no second DT-deck-composition) until ``DeckRemoved`` or ``DeckVerified`` OK
    (10.1.5); ``DeckVerified`` with another result, and an unauthorised ``CardAddedToDeck`` /
    ``CardRemovedFromDeck``, raise DT-deck-composition; what clears a fault is decided in
    :func:`streams.engine.reducer.clears_fault` (10.1.2).
    """
    event = step.event
    out: list[Finding] = []
    if type(event) is ev.CardDealt or type(event) is ev.CardFoundFaceUp:
        if type(event) is ev.CardDealt and step.before.shuffler_fault and not step.before.fault_flagged:
            out.append(
                step.finding(
                    DEAL_AFTER_FAULT,
                    (step.before.shuffler_fault, event.event_id),
                    "Card dealt after a device fault with no complete full-deck shuffle since.",
                )
            )
        if event.card != "UNKNOWN":
            out.extend(_composition(step, event))
    elif type(event) is ev.DeckVerified and event.result != "OK":
        if not _flagged(step, event):
            out.append(
                step.finding(
                    COMPOSITION,
                    (event.event_id,),
                    f"Deck {event.deck_id or step.after.current_deck_id} verified {event.result}: {event.count} cards.",
                )
            )
    elif (type(event) is ev.CardAddedToDeck or type(event) is ev.CardRemovedFromDeck) and event.authorised_by is None:
        if not _flagged(step, event):
            what = "added to" if type(event) is ev.CardAddedToDeck else "taken out of"
            deck_id = round_deck_id(step.after, event)
            out.append(
                step.finding(COMPOSITION, (event.event_id,), f"{event.card} {what} deck {deck_id} unauthorised.")
            )
    elif type(event) is ev.ShuffleCompleted and event.device_full_deck_ok is False:
        count = "" if event.device_card_count is None else f" ({event.device_card_count} cards)"
        out.append(
            step.finding(COUNT_MISMATCH, (event.event_id,), f"Shuffler reported the deck is not complete{count}.")
        )
    return out


def _flagged(step: Step, event: ev.DealingEvent) -> bool:
    deck_id = round_deck_id(step.before, event)
    deck = step.before.decks.get(deck_id) if deck_id is not None else None
    return deck is not None and deck.composition_flagged


def _composition(step: Step, event: ev.CardDealt | ev.CardFoundFaceUp) -> list[Finding]:
    deck_id = round_deck_id(step.after, event)
    if deck_id is None:
        return []
    before = step.before.decks.get(deck_id)
    if before is not None and before.composition_flagged:
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
    return [step.finding(COMPOSITION, seen, msg)]
