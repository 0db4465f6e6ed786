"""Three Card Prime: 58 Pa. Code § 679a.7 (wagers) and § 679a.9 (dealing from the hand).

Rule IDs: TCP-679a.7-a-instrument, -b-seated, -c-late-wager, -d1-play-equals-ante,
-d23-optional-wager-enabled; TCP-679a.9-a1/a2/a3, -b-deal-order, -b-three-each, -b-face-down,
-b-pair-bonus-4th, -g-pair-bonus-community, -c-stub-unexposed, -d-stub-count-due,
-d-count-method, -e-correct-count, -f-misdeal-full-deck, -f-wrong-deck, -f-finding-mismatch;
and TCP-679a.8/10-stub-count-PROV (provisional).
"""

from __future__ import annotations

from schemas import events as ev
from schemas.base import Envelope
from schemas.findings import Finding
from streams.engine.context import Step
from streams.engine.reducer import DEAL_CLOSERS
from streams.engine.rules import hand_deal
from streams.engine.state import RoundState, WagerInfo

IDS = hand_deal.HandDealIds(
    shuffler_required="TCP-679a.9-a1-shuffler-required",
    same_hand="TCP-679a.9-a2-same-hand",
    no_more_bets="TCP-679a.9-a3-no-more-bets",
    face_down="TCP-679a.9-b-face-down",
    stub_unexposed="TCP-679a.9-c-stub-unexposed",
    stub_not_discarded_after_correct_count="TCP-679a.9-e-correct-count",
    stub_count_due="TCP-679a.9-d-stub-count-due",
    count_method="TCP-679a.9-d-count-method",
    misdeal_full_deck="TCP-679a.9-f-misdeal-full-deck",
    wrong_deck="TCP-679a.9-f-wrong-deck",
)
OPTIONAL_WAGERS = frozenset({"PRIME", "PAIR_BONUS"})
DEAL_ORDER = "TCP-679a.9-b-deal-order"
THREE_EACH = "TCP-679a.9-b-three-each"
PAIR_4TH = "TCP-679a.9-b-pair-bonus-4th"
PAIR_COMMUNITY = "TCP-679a.9-g-pair-bonus-community"
MISMATCH = "TCP-679a.9-f-finding-mismatch"
READS: frozenset[type[Envelope]] = (
    hand_deal.READS
    | frozenset[type[Envelope]](
        {ev.WagerPlaced, ev.WagerChanged, ev.WagerWithdrawn, ev.CardDealt, ev.MisdealDetermined}
    )
    | DEAL_CLOSERS
)
"""The event types :func:`check` reads (the deal is judged at a ``DEAL_CLOSERS`` event)."""


def check(step: Step) -> list[Finding]:
    """All Three Card Prime rules for one event (see the module docstring for the IDs)."""
    out = hand_deal.check(step, IDS)
    event = step.event
    rnd = step.round
    if rnd is None:
        return out
    if type(event) is ev.WagerPlaced or type(event) is ev.WagerChanged or type(event) is ev.WagerWithdrawn:
        out.extend(_wager(step, rnd, event))
    elif type(event) is ev.CardDealt and rnd.method == "HAND":
        out.extend(_card(step, rnd, event))
    elif type(event) is ev.MisdealDetermined:
        out.extend(_mismatch(step, rnd, event))
    closed = step.deal_closed()
    if closed is not None and closed.method == "HAND":
        out.extend(_deal_closed(step, closed))
    return out


def _wager(step: Step, rnd: RoundState, event: ev.WagerPlaced | ev.WagerChanged | ev.WagerWithdrawn) -> list[Finding]:
    """§ 679a.7(a)-(d): how, by whom, when and how much."""
    out = []
    wager_type = event.wager_type
    if type(event) is ev.WagerPlaced:
        if event.instrument == "CASH_VERBAL":
            out.append(
                step.finding("TCP-679a.7-a-instrument", (event.event_id,), "Verbal wager backed by cash accepted.")
            )
        if not event.player_seated:
            out.append(
                step.finding("TCP-679a.7-b-seated", (event.event_id,), f"Wager at {event.seat} by a player not seated.")
            )
        if wager_type in OPTIONAL_WAGERS and wager_type not in step.config.wagers_enabled:
            out.append(
                step.finding(
                    "TCP-679a.7-d23-optional-wager-enabled",
                    (event.event_id,),
                    f"{wager_type} wager accepted but not offered in the Rules Submission.",
                )
            )
    before = step.before.round
    nmb = before.nmb_event_id if before is not None else None
    if nmb is not None and wager_type != "PLAY":
        verb = {"WagerPlaced": "placed", "WagerChanged": "changed", "WagerWithdrawn": "withdrawn"}[event.type]
        out.append(
            step.finding(
                "TCP-679a.7-c-late-wager", (nmb, event.event_id), f'{wager_type} wager {verb} after "no more bets".'
            )
        )
    if wager_type == "PLAY" and (type(event) is ev.WagerPlaced or type(event) is ev.WagerChanged):
        after = step.after.round
        ante = after.seats_with("ANTE").get(event.seat) if after is not None else None
        if ante is None or ante.amount != event.amount:
            msg = (
                f"Play Wager at {event.seat} without an Ante Wager."
                if ante is None
                else f"Play Wager of {event.amount} cents at {event.seat} differs from the Ante of {ante.amount}."
            )
            out.append(
                step.finding("TCP-679a.7-d1-play-equals-ante", (ante.event_id if ante else None, event.event_id), msg)
            )
    return out


def _expected_order(antes: dict[str, WagerInfo], seats: tuple[str, ...]) -> list[str]:
    recipients = [s for s in seats if s in antes] + ["DEALER"]
    return recipients * 3


def _card(step: Step, rnd: RoundState, event: ev.CardDealt) -> list[Finding]:
    """§ 679a.9(b) deal order and § 679a.9(g) Pair Bonus community card."""
    out = []
    before = step.before.round
    assert before is not None
    area = event.to_area
    if (area.startswith("SEAT_") or area == "DEALER") and not step.fired(DEAL_ORDER):
        antes = before.seats_with("ANTE")
        order = _expected_order(antes, step.config.seats)
        idx = before.hand_cards
        no_ante = area.startswith("SEAT_") and area not in antes
        if no_ante or (idx < len(order) and order[idx] != area):
            why = (
                f"card to {area}, which has no Ante Wager"
                if no_ante
                else f"card {idx + 1} of the deal went to {area}; {order[idx]} was due"
            )
            out.append(step.finding(DEAL_ORDER, (event.event_id,), f"Deal out of order: {why}."))
    mode = step.config.pair_bonus_mode
    if area == "PAIR_BONUS_COMMUNITY" and not step.fired(PAIR_COMMUNITY):
        if mode != "COMMUNITY":
            out.append(
                step.finding(
                    PAIR_COMMUNITY,
                    (event.event_id,),
                    "Pair Bonus community card dealt but not elected in the Rules Submission.",
                )
            )
        else:
            holders = before.recipients()
            due = [*before.seats_with("ANTE"), "DEALER"]
            if any(holders.get(r, 0) < 3 for r in due):
                out.append(
                    step.finding(
                        PAIR_COMMUNITY,
                        (event.event_id,),
                        "Pair Bonus community card dealt before every hand had three cards.",
                    )
                )
    if area.startswith("PAIR_BONUS_4TH_") and mode == "COMMUNITY" and not step.fired(PAIR_COMMUNITY):
        out.append(
            step.finding(
                PAIR_COMMUNITY,
                (event.event_id,),
                "Fourth card dealt to a seat although the Pair Bonus community card is elected.",
            )
        )
    return out


def _deal_closed(step: Step, rnd: RoundState) -> list[Finding]:
    """§ 679a.9(b): three cards each and the Pair Bonus fourth cards, judged when the deal ends."""
    out = []
    held = rnd.recipients()
    due = [*rnd.seats_with("ANTE"), "DEALER"]
    wrong = [r for r in due if held.get(r, 0) != 3]
    if wrong:
        evidence = tuple(e for r in wrong for e in rnd.cards.get(r, ())) or (rnd.started_event_id,)
        detail = ", ".join(f"{r} {held.get(r, 0)}" for r in wrong)
        out.append(step.finding(THREE_EACH, evidence, f"Hands without exactly three cards: {detail}."))
    if step.config.pair_bonus_mode == "PER_PLAYER":
        bonus = rnd.seats_with("PAIR_BONUS")
        bad: list[str] = []
        evidence_ids: list[str] = []
        for seat, wager in bonus.items():
            got = rnd.cards.get(f"PAIR_BONUS_4TH_{seat[5:]}", ())
            if len(got) != 1:
                bad.append(f"{seat} has {len(got)} fourth cards")
                evidence_ids += [wager.event_id, *got]
        for area, got in rnd.cards.items():
            if area.startswith("PAIR_BONUS_4TH_") and f"SEAT_{area[15:]}" not in bonus:
                bad.append(f"SEAT_{area[15:]} got a fourth card without a Pair Bonus Wager")
                evidence_ids += list(got)
        if bad:
            out.append(step.finding(PAIR_4TH, tuple(evidence_ids), "; ".join(bad).capitalize() + "."))
    return out


def _mismatch(step: Step, rnd: RoundState, event: ev.MisdealDetermined) -> list[Finding]:
    """§ 679a.9(f) cross-check: the dealer's determination against the computed deck total."""
    if rnd.stub_event_id is None or rnd.deck_total is None:
        return []
    size = step.config.cards_per_deck
    computed = rnd.stub_correct is False and rnd.deck_total == size
    if event.misdealt == computed and event.dealer_reconciled_total == rnd.deck_total:
        return []
    return [
        step.finding(
            MISMATCH,
            (rnd.stub_event_id, event.event_id),
            f"Dealer determined misdealt={event.misdealt} with {event.dealer_reconciled_total} cards; "
            f"the events give misdealt={computed} with {rnd.deck_total} cards.",
        )
    ]
