"""The Chapter 691 game, dealing from the hand (58 Pa. Code § 691.?; number unconfirmed).

Rule IDs: C691-DH-a1-shuffler-required, -a2-same-hand, -a3-no-more-bets, -b-burn-first,
-b-five-community, -b-face-down, -c-stub-unexposed, -d-stub-count-due, -d-count-method,
-f-misdeal-full-deck, -f-wrong-deck.
"""

from __future__ import annotations

from schemas import events as ev
from schemas.base import Envelope
from schemas.findings import Finding
from streams.engine.context import Step
from streams.engine.reducer import DEAL_CLOSERS
from streams.engine.rules import hand_deal

IDS = hand_deal.HandDealIds(
    shuffler_required="C691-DH-a1-shuffler-required",
    same_hand="C691-DH-a2-same-hand",
    no_more_bets="C691-DH-a3-no-more-bets",
    face_down="C691-DH-b-face-down",
    stub_unexposed="C691-DH-c-stub-unexposed",
    stub_not_discarded_after_correct_count="C691-DH-c-stub-unexposed",
    stub_count_due="C691-DH-d-stub-count-due",
    count_method="C691-DH-d-count-method",
    misdeal_full_deck="C691-DH-f-misdeal-full-deck",
    wrong_deck="C691-DH-f-wrong-deck",
)
BURN_FIRST = "C691-DH-b-burn-first"
FIVE_COMMUNITY = "C691-DH-b-five-community"
COMMUNITY_CARDS = 5
"""Community cards per round (cards), subsection (b)."""
READS: frozenset[type[Envelope]] = hand_deal.READS | {ev.CardDealt} | DEAL_CLOSERS
"""The event types :func:`check` reads (the deal is judged at a ``DEAL_CLOSERS`` event)."""


def check(step: Step) -> list[Finding]:
    """All Chapter 691 rules for one event: the shared hand-deal rules plus (b) burn and board."""
    out = hand_deal.check(step, IDS)
    rnd = step.round
    event = step.event
    if rnd is None or rnd.method != "HAND":
        return out
    if type(event) is ev.CardDealt:
        area = event.to_area
        if rnd.first_card_event_id == event.event_id and area != "BURN":
            out.append(step.finding(BURN_FIRST, (event.event_id,), f"First card went to {area}, not to the burn."))
        if area != "BURN" and not area.startswith("COMMUNITY_") and not step.fired(FIVE_COMMUNITY):
            out.append(
                step.finding(
                    FIVE_COMMUNITY,
                    (event.event_id,),
                    f"Card dealt to {area}; only the burn and community cards are dealt.",
                )
            )
    after = step.deal_closed()
    if after is not None:
        burns = after.cards.get("BURN", ())
        if len(burns) != 1 and not step.fired(BURN_FIRST) and not any(f.rule_id == BURN_FIRST for f in out):
            out.append(
                step.finding(
                    BURN_FIRST,
                    burns or (after.started_event_id,),
                    f"{len(burns)} burn cards dealt; exactly one is required.",
                )
            )
        board = [e for a, ids in after.cards.items() if a.startswith("COMMUNITY_") for e in ids]
        if (
            len(board) != COMMUNITY_CARDS
            and not step.fired(FIVE_COMMUNITY)
            and not any(f.rule_id == FIVE_COMMUNITY for f in out)
        ):
            out.append(
                step.finding(
                    FIVE_COMMUNITY,
                    tuple(board) or (after.started_event_id,),
                    f"{len(board)} community cards dealt; five are required.",
                )
            )
    return out
