"""The simulator's Three Card Prime (58 Pa. Code § 679a.7, § 679a.9): how a round is dealt
and the errors it can carry."""

from __future__ import annotations

from dealtrail.simulator.table import (
    CLOSING,
    COMMON,
    FAULT_DEALS,
    SEATS,
    WRONG_DECKS,
    GameSim,
    Injection,
    Plan,
    TableSim,
    closing_ready,
    closing_table,
    complete_round,
    deal_card,
    discard_stub,
    hand_dealt,
    not_counting,
    redeal_ready,
    remedy_void,
    reveal,
    settle,
    single_deck,
    suppress_counts,
    wager_amount,
)
from schemas import events as ev
from schemas.base import ActorRole, Envelope
from schemas.config import PairBonusMode


def deal_tcp(sim: TableSim, plan: Plan, deck: list[str], round_id: str) -> bool:
    """Deal one Three Card Prime round (§ 679a.7, § 679a.9). Returns True if the stub was counted."""
    k = plan.kind
    hand = sim.method == "HAND"
    rng = sim.rng
    seats = sorted(rng.sample(SEATS, rng.randint(1, 6)), key=SEATS.index)
    wagers: dict[str, str] = {}
    ante_amount: dict[str, int] = {}
    pair: list[str] = []
    n = 0

    def wid() -> str:
        nonlocal n
        n += 1
        return f"{round_id}-W{n:02d}"

    for i, seat in enumerate(seats):
        amount = wager_amount(sim)
        ante_amount[seat] = amount
        w = wid()
        wagers[w] = seat
        instrument = "CASH_VERBAL" if (k == "cash-wager" and i == 0) else "CHIPS"
        seated = not (k == "unseated-wager" and i == 0)
        sim.emit(
            ev.WagerPlaced,
            wager_id=w,
            seat=seat,
            wager_type="ANTE",
            amount=amount,
            instrument=instrument,
            player_seated=seated,
            role=ActorRole.PLAYER,
            actor_id=f"P-{seat}",
        )
        forced = i == 0 and k in ("community-early", "fourth-card-missing")
        if rng.random() < 0.4 or forced:
            w = wid()
            wagers[w] = seat
            pair.append(seat)
            sim.emit(
                ev.WagerPlaced,
                wager_id=w,
                seat=seat,
                wager_type="PAIR_BONUS",
                amount=500,
                role=ActorRole.PLAYER,
                actor_id=f"P-{seat}",
            )
        if (sim.prime and rng.random() < 0.2) or (k == "prime-not-offered" and i == 0):
            w = wid()
            wagers[w] = seat
            sim.emit(
                ev.WagerPlaced,
                wager_id=w,
                seat=seat,
                wager_type="PRIME",
                amount=500,
                role=ActorRole.PLAYER,
                actor_id=f"P-{seat}",
            )
    if k == "cash-wager":
        plan.expect.append("TCP-679a.7-a-instrument")
    if k == "unseated-wager":
        plan.expect.append("TCP-679a.7-b-seated")
    if k == "prime-not-offered":
        plan.expect.append("TCP-679a.7-d23-optional-wager-enabled")
    if k == "community-not-elected":
        pass
    if k != "no-more-bets-skipped":
        sim.emit(ev.NoMoreBetsAnnounced)
    else:
        plan.expect.append("TCP-679a.9-a3-no-more-bets")
    if k == "late-wager":
        seat = seats[0]
        ante_id = next(w for w, s in wagers.items() if s == seat)
        ante_amount[seat] += 500
        sim.emit(
            ev.WagerChanged,
            wager_id=ante_id,
            seat=seat,
            wager_type="ANTE",
            amount=ante_amount[seat],
            role=ActorRole.PLAYER,
            actor_id=f"P-{seat}",
        )
        plan.expect.append("TCP-679a.7-c-late-wager")
    if hand:
        sim.emit(ev.DeckHeld, hand="RIGHT", over_inventory_container=k != "deck-not-over-container")
        if k == "deck-not-over-container":
            plan.expect.append("TCP-679a.9-a2-same-hand")
    if k == "manual-shuffle":
        plan.expect.append("TCP-679a.9-a1-shuffler-required")

    src = "DECK_IN_HAND" if hand else "MANUAL_SHOE"
    cards = iter(deck)
    idx = 0
    dealt: list[tuple[str, str]] = []

    def deal(area: str, face: str = "DOWN", card: str | None = None) -> Envelope:
        nonlocal idx
        idx += 1
        c = card if card is not None else next(cards)
        event = deal_card(sim, idx, area, face, c, dealt_from=src)
        dealt.append((area, c))
        return event

    order = [*seats, "DEALER"]
    for p in range(3):
        this = list(order)
        if k == "deal-out-of-order" and p == 0:
            this[0], this[1] = this[1], this[0]
        for j, area in enumerate(this):
            face = "UP" if (k == "face-up-card" and p == 1 and j == 0) else "DOWN"
            dup = dealt[0][1] if (k == "duplicate-card" and p == 2 and j == 0) else None
            deal(area, face, dup)
            if k == "same-hand-switched" and p == 1 and j == 0:
                sim.emit(ev.DeckHeld, hand="LEFT")
        if k == "community-early" and p == 1 and pair:
            deal("PAIR_BONUS_COMMUNITY")
    for rule, kind in (
        ("TCP-679a.9-b-deal-order", "deal-out-of-order"),
        ("TCP-679a.9-b-face-down", "face-up-card"),
        ("DT-deck-composition", "duplicate-card"),
        ("TCP-679a.9-a2-same-hand", "same-hand-switched"),
    ):
        if k == kind:
            plan.expect.append(rule)
    if k in FAULT_DEALS:
        plan.expect.append("DT-deal-after-device-fault")
    if k == "extra-dealer-card":
        deal("DEALER")
        plan.expect.append("TCP-679a.9-b-three-each")
    if pair:
        if sim.pair_mode is PairBonusMode.PER_PLAYER:
            for i, seat in enumerate(pair):
                if k == "fourth-card-missing" and i == 0:
                    plan.expect.append("TCP-679a.9-b-pair-bonus-4th")
                    continue
                deal(f"PAIR_BONUS_4TH_{seat[5:]}")
        elif k != "community-early":
            deal("PAIR_BONUS_COMMUNITY")
        else:
            plan.expect.append("TCP-679a.9-g-pair-bonus-community")
    unremedied = k in ("misdeal-unremedied", CLOSING)  # CLOSING: the table closes before the void
    misdeal = k in ("misdeal", "misdeal-mismatch") or unremedied
    if misdeal:
        deal("BURN")
        plan.expect.append("TCP-679a.9-f-misdeal-full-deck")
    counted = sim.count_due(plan)
    voided = False
    if counted:
        stub = len(deck) - len(dealt)
        sim.emit(ev.StubCounted, count=stub, method="OTHER" if k == "count-not-face-down" else "FACE_DOWN_ON_LAYOUT")
        if k == "count-not-face-down":
            plan.expect.append("TCP-679a.9-d-count-method")
        if misdeal and not unremedied:
            sim.emit(ev.MisdealDetermined, misdealt=k == "misdeal", dealer_reconciled_total=52)
            if k == "misdeal-mismatch":
                plan.expect.append("TCP-679a.9-f-finding-mismatch")
            remedy_void(sim, list(wagers), "TCP-679a.9-f-misdeal-full-deck")
            voided = True
        if k in WRONG_DECKS:
            plan.expect.append("TCP-679a.9-f-wrong-deck")
            sim.emit(ev.MisdealDetermined, misdealt=k == "wrong-deck-mismatch", dealer_reconciled_total=len(deck))
            if k == "wrong-deck-mismatch":
                plan.expect.append("TCP-679a.9-f-finding-mismatch")
            remedy_void(sim, list(wagers), "TCP-679a.9-f-wrong-deck", deck=True)
            voided = True
    if unremedied:
        plan.expect.append("DT-remedy-overdue")
    if not voided:
        kept = "TCP-679a.9-e-correct-count" if counted else "TCP-679a.9-c-stub-unexposed"
        discard_stub(sim, plan, "TCP-679a.9-c-stub-unexposed", (("stub-kept", kept), ("stub-kept-counted", kept)))
        for seat in seats:
            play = rng.random() < 0.7
            sim.emit(
                ev.PlayerDecided,
                seat=seat,
                decision="PLAY" if play else "FOLD",
                role=ActorRole.PLAYER,
                actor_id=f"P-{seat}",
            )
            if play:
                w = wid()
                wagers[w] = seat
                amount = ante_amount[seat] + (500 if (k == "play-not-ante" and seat == seats[0]) else 0)
                sim.emit(
                    ev.WagerPlaced,
                    wager_id=w,
                    seat=seat,
                    wager_type="PLAY",
                    amount=amount,
                    role=ActorRole.PLAYER,
                    actor_id=f"P-{seat}",
                )
                if amount != ante_amount[seat]:
                    plan.expect.append("TCP-679a.7-d1-play-equals-ante")
        reveal(sim, [(o, [c for a, c in dealt if a == o]) for o in (*seats, "DEALER")])
        settle(sim, wagers, ("WIN", "LOSS", "LOSS", "PUSH"))
    return complete_round(sim, k, counted)


INJECTIONS: dict[str, Injection] = {
    **COMMON,
    "cash-wager": Injection(),
    "unseated-wager": Injection(),
    "late-wager": Injection(),
    "play-not-ante": Injection(),
    "prime-not-offered": Injection(applies=lambda s: not s.prime),
    "manual-shuffle": Injection(applies=lambda s: hand_dealt(s) and single_deck(s), count=True),
    "deck-not-over-container": Injection(applies=hand_dealt),
    "same-hand-switched": Injection(applies=hand_dealt),
    "no-more-bets-skipped": Injection(applies=hand_dealt),
    "deal-out-of-order": Injection(applies=hand_dealt),
    "extra-dealer-card": Injection(applies=hand_dealt, count=False),
    "face-up-card": Injection(applies=hand_dealt),
    "fourth-card-missing": Injection(
        applies=lambda s: hand_dealt(s) and s.pair_mode is PairBonusMode.PER_PLAYER, count=False
    ),
    "community-early": Injection(applies=lambda s: hand_dealt(s) and s.pair_mode is PairBonusMode.COMMUNITY),
    "stub-exposed": Injection(applies=hand_dealt),
    "stub-kept": Injection(applies=hand_dealt),
    "stub-kept-counted": Injection(applies=hand_dealt, count=True),
    "count-not-face-down": Injection(applies=hand_dealt, count=True),
    "misdeal": Injection(applies=hand_dealt, count=True),
    "misdeal-mismatch": Injection(applies=hand_dealt, count=True),
    "misdeal-unremedied": Injection(applies=hand_dealt, count=True),
    "wrong-deck": Injection(applies=lambda s: hand_dealt(s) and not_counting(s), count=True),
    "wrong-deck-mismatch": Injection(applies=lambda s: hand_dealt(s) and not_counting(s), count=True),
    "long-deck": Injection(applies=lambda s: hand_dealt(s) and not_counting(s), count=True),
    "short-deck": Injection(applies=lambda s: hand_dealt(s) and not_counting(s), count=True),
    "redealt-unshuffled": Injection(applies=lambda s: hand_dealt(s) and single_deck(s), ready=redeal_ready),
    "stub-count-skipped": Injection(applies=not_counting, before_shuffle=suppress_counts),
    "shuffle-count-mismatch": Injection(applies=lambda s: s.counting and single_deck(s)),
    CLOSING: Injection(
        applies=lambda s: hand_dealt(s) and closing_table(s), ready=closing_ready, count=True, floor_event=True
    ),
}
"""Every kind of error injected at a TCP table: the common ones first, then the game's."""

GAME = GameSim(deal_tcp, INJECTIONS)
