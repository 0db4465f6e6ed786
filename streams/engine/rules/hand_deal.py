"""Rules shared by the two dealing-from-the-hand sections, § 679a.9 (Three Card Prime) and the
Chapter 691 section: the same text, with 52 or 54 cards.

Each game module names its rule IDs in a :class:`HandDealIds` and calls :func:`check`.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas import events as ev
from schemas.base import Envelope
from schemas.findings import Finding
from streams.engine.context import Step


@dataclass(frozen=True, slots=True)
class HandDealIds:
    """The rule IDs one game uses for the shared subsections (a)(1)-(a)(3), (b) face down,
    (c)/(e) stub, (d) count due and method, (f) misdeal and wrong deck."""

    shuffler_required: str
    same_hand: str
    no_more_bets: str
    face_down: str
    stub_unexposed: str
    stub_not_discarded_after_correct_count: str
    stub_count_due: str
    count_method: str
    misdeal_full_deck: str
    wrong_deck: str


STUB_COUNT_DUE_PROV = "TCP-679a.8/10-stub-count-PROV"
READS: frozenset[type[Envelope]] = frozenset(
    {ev.CardDealt, ev.DeckHeld, ev.CardExposed, ev.StubCounted, ev.StubDiscarded, ev.RoundCompleted}
)
"""The event types :func:`check` reads; the engine calls it for no other (no finding is lost)."""


def check(step: Step, ids: HandDealIds) -> list[Finding]:
    """Apply the shared dealing-from-the-hand rules to one event.

    Events read: CardDealt, DeckHeld, CardExposed, StubCounted, StubDiscarded, RoundCompleted.
    Rulebook revision 2: (a)(1) is also broken by a deck dealt again with no ``ShuffleCompleted``
    since its previous round (10.1.1); Chapter 691's (a)(2) by a deck taken into the hand before
    the ``DeckCut`` its shuffle awaits (schema version 2 trails).
    Only rounds dealt from the hand (``RoundStarted.dealing_method`` = HAND) are checked, except
    the stub-count window, which :mod:`streams.engine.reducer` keeps for shoe rounds too when
    the Three Card Prime provisional rule is on.

    Returns:
        The findings this event raises (revision 0).
    """
    event = step.event
    rnd = step.round
    out: list[Finding] = []
    if type(event) is ev.RoundCompleted:
        out.extend(_stub_count_due(step, ids))
    if rnd is None or rnd.method != "HAND":
        return out
    if type(event) is ev.CardDealt:
        if rnd.first_card_event_id == event.event_id:
            if rnd.nmb_event_id is None:
                out.append(
                    step.finding(
                        ids.no_more_bets,
                        (rnd.started_event_id, event.event_id),
                        'First card dealt before "no more bets" was announced.',
                    )
                )
            deck = step.after.decks.get(rnd.deck_id) if rnd.deck_id else None
            shuffle = deck.last_shuffle if deck is not None else None
            dealt = step.before.decks.get(rnd.deck_id) if rnd.deck_id else None
            if dealt is not None and dealt.dealt_round_id not in (None, rnd.round_id):
                out.append(
                    step.finding(
                        ids.shuffler_required,
                        (rnd.started_event_id, dealt.dealt_event_id, event.event_id),
                        f"Deck {rnd.deck_id} dealt again after round {dealt.dealt_round_id} with no shuffle "
                        "since; an automated shuffling device is required.",
                    )
                )
            elif shuffle is None or shuffle.method != "AUTOMATED":
                how = "no recorded shuffle" if shuffle is None else f"a {shuffle.method.lower()} shuffle"
                out.append(
                    step.finding(
                        ids.shuffler_required,
                        (rnd.started_event_id, shuffle.event_id if shuffle else None, event.event_id),
                        f"Cards dealt from the hand after {how}; an automated shuffling device is required.",
                    )
                )
        if event.face == "UP":
            out.append(step.finding(ids.face_down, (event.event_id,), f"Card to {event.to_area} dealt face up."))
    elif type(event) is ev.DeckHeld:
        prior = step.before.round.deck_hand if step.before.round else None
        problems = []
        if prior is not None and prior != event.hand:
            problems.append(f"deck moved from the {prior.lower()} hand to the {event.hand.lower()} hand")
        if not event.over_inventory_container:
            problems.append("deck not held over the table inventory container")
        if not event.in_front_of_dealer:
            problems.append("deck not held in front of the dealer")
        deck = step.before.decks.get(rnd.deck_id) if rnd.deck_id else None
        unshuffled = None
        if ids.same_hand.startswith("C691") and deck is not None and deck.shuffle_started_seq is not None:
            problems.append("deck taken into the hand before the § 691.4 shuffle and cut was completed")
            unshuffled = deck.shuffle_started_event_id
        elif ids.same_hand.startswith("C691") and deck is not None and deck.cut_due is not None:
            problems.append("deck taken into the hand before the § 691.4 cut")
            unshuffled = deck.cut_due
        if problems:
            evidence = (
                unshuffled,
                rnd.deck_hand_event_id if prior not in (None, event.hand) else None,
                event.event_id,
            )
            out.append(step.finding(ids.same_hand, evidence, "; ".join(problems).capitalize() + "."))
    elif type(event) is ev.CardExposed and event.location == "STUB":
        out.append(step.finding(ids.stub_unexposed, (event.event_id,), "A card of the stub was exposed."))
    elif type(event) is ev.StubDiscarded and event.exposed:
        out.append(step.finding(ids.stub_unexposed, (event.event_id,), "Stub placed in the discard rack exposed."))
    elif type(event) is ev.StubCounted:
        if event.method != "FACE_DOWN_ON_LAYOUT" or event.exposed:
            how = "with cards exposed" if event.exposed else "not face down on the layout"
            out.append(step.finding(ids.count_method, (event.event_id,), f"Stub counted {how}."))
        out.extend(_wrong_count(step, ids, event))
    elif type(event) is ev.RoundCompleted:
        before = step.before.round
        if before is not None and not before.stub_discarded and not before.voided_all:
            if before.stub_correct:
                out.append(
                    step.finding(
                        ids.stub_not_discarded_after_correct_count,
                        (before.stub_event_id, event.event_id),
                        "Stub count was correct but the stub was not placed in the discard rack.",
                    )
                )
            else:
                out.append(
                    step.finding(
                        ids.stub_unexposed,
                        (before.started_event_id, event.event_id),
                        "Round completed without the stub being placed in the discard rack.",
                    )
                )
    return out


def _wrong_count(step: Step, ids: HandDealIds, event: ev.StubCounted) -> list[Finding]:
    rnd = step.after.round
    if rnd is None or rnd.stub_correct is not False or rnd.deck_total is None:
        return []
    size = step.config.cards_per_deck
    if rnd.deck_total == size:
        return [
            step.finding(
                ids.misdeal_full_deck,
                (event.event_id,),
                f"Stub of {event.count} cards is wrong for this deal, but {size} cards are present: misdeal.",
            )
        ]
    return [
        step.finding(
            ids.wrong_deck,
            (event.event_id,),
            f"Stub of {event.count} cards puts the deck at {rnd.deck_total} cards, not {size}.",
        )
    ]


def _stub_count_due(step: Step, ids: HandDealIds) -> list[Finding]:
    after, before = step.after, step.before
    window = step.config.stub_count_window
    if after.stub_run in (before.stub_run, 0) or after.stub_run % window:
        return []
    rnd = before.round
    rule_id = ids.stub_count_due if rnd is None or rnd.method == "HAND" else STUB_COUNT_DUE_PROV
    return [
        step.finding(
            rule_id,
            after.stub_run_rounds,
            f"{after.stub_run} consecutive rounds completed without a stub count.",
            round_id=rnd.round_id if rnd else None,
        )
    ]
