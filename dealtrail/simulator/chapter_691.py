"""The simulator's Chapter 691 community-card game, dealt from the hand: how a round is dealt
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
    not_counting,
    place_main_wager,
    redeal_ready,
    remedy_void,
    reveal,
    settle,
    suppress_counts,
)
from schemas import events as ev


def deal_c691(sim: TableSim, plan: Plan, deck: list[str], round_id: str) -> bool:
    """Deal one round of the Chapter 691 game: burn 1, five community cards. Returns True if counted."""
    k = plan.kind
    rng = sim.rng
    seats = sorted(rng.sample(SEATS, rng.randint(1, 6)), key=SEATS.index)
    wagers = []
    for i, seat in enumerate(seats):
        w = f"{round_id}-W{i + 1:02d}"
        wagers.append(w)
        place_main_wager(sim, w, seat)
    if k == "no-more-bets-skipped":
        plan.expect.append("C691-DH-a3-no-more-bets")
    else:
        sim.emit(ev.NoMoreBetsAnnounced)
    if k == "manual-shuffle":
        plan.expect.append("C691-DH-a1-shuffler-required")
    sim.emit(ev.DeckHeld, hand="LEFT", in_front_of_dealer=k != "deck-not-in-front")
    if k in ("deck-not-in-front", "cut-skipped"):
        plan.expect.append("C691-DH-a2-same-hand")
    cards = iter(deck)
    dealt: list[str] = []
    board: list[str] = []
    idx = 0

    def deal(area: str, face: str = "DOWN", card: str | None = None) -> None:
        nonlocal idx
        idx += 1
        c = card if card is not None else next(cards)
        dealt.append(c)
        if area.startswith("COMMUNITY_"):
            board.append(c)
        deal_card(sim, idx, area, face, c)

    unremedied = k in ("misdeal-unremedied", CLOSING)  # CLOSING: the table closes before the void
    misdeal = k == "misdeal" or unremedied
    if k != "burn-skipped":
        deal("BURN")
    if misdeal:
        deal("BURN")
    community = 4 if k == "four-community" else 5
    for j in range(community):
        face = "UP" if (k == "face-up-card" and j == 2) else "DOWN"
        dup = next(c for c in dealt if c != "JK") if (k == "duplicate-card" and j == 3) else None
        deal(f"COMMUNITY_{j + 1}", face, dup)
        if k == "same-hand-switched" and j == 1:
            sim.emit(ev.DeckHeld, hand="RIGHT")
    for rule, kind in (
        ("C691-DH-b-burn-first", "burn-skipped"),
        ("C691-DH-b-five-community", "four-community"),
        ("C691-DH-b-face-down", "face-up-card"),
        ("DT-deck-composition", "duplicate-card"),
        ("C691-DH-a2-same-hand", "same-hand-switched"),
    ):
        if k == kind:
            plan.expect.append(rule)
    if k in FAULT_DEALS:
        plan.expect.append("DT-deal-after-device-fault")
    if misdeal:
        plan.expect += ["C691-DH-b-burn-first", "C691-DH-f-misdeal-full-deck"]
    counted = sim.count_due(plan)
    voided = False
    if counted:
        sim.emit(
            ev.StubCounted,
            count=len(deck) - len(dealt),
            method="OTHER" if k == "count-not-face-down" else "FACE_DOWN_ON_LAYOUT",
        )
        if k == "count-not-face-down":
            plan.expect.append("C691-DH-d-count-method")
        if k == "misdeal":
            sim.emit(ev.MisdealDetermined, misdealt=True, dealer_reconciled_total=54)
            remedy_void(sim, wagers, "C691-DH-f-misdeal-full-deck")
            voided = True
        if k in WRONG_DECKS:
            plan.expect.append("C691-DH-f-wrong-deck")
            sim.emit(ev.MisdealDetermined, misdealt=False, dealer_reconciled_total=len(deck))
            remedy_void(sim, wagers, "C691-DH-f-wrong-deck", deck=True)
            voided = True
    if unremedied:
        plan.expect.append("DT-remedy-overdue")
    if not voided:
        discard_stub(sim, plan, "C691-DH-c-stub-unexposed", (("stub-kept", "C691-DH-c-stub-unexposed"),))
        reveal(sim, [("COMMUNITY", board)])
        settle(sim, wagers, ("WIN", "LOSS", "LOSS"))
    return complete_round(sim, k, counted)


INJECTIONS: dict[str, Injection] = {
    **COMMON,
    "manual-shuffle": Injection(count=True),
    "deck-not-in-front": Injection(),
    "same-hand-switched": Injection(),
    "no-more-bets-skipped": Injection(),
    "burn-skipped": Injection(count=False),
    "four-community": Injection(count=False),
    "face-up-card": Injection(),
    "stub-exposed": Injection(),
    "stub-kept": Injection(),
    "count-not-face-down": Injection(count=True),
    "misdeal": Injection(count=True),
    "misdeal-unremedied": Injection(count=True),
    "wrong-deck": Injection(applies=not_counting, count=True),
    "long-deck": Injection(applies=not_counting, count=True),
    "short-deck": Injection(applies=not_counting, count=True),
    "redealt-unshuffled": Injection(ready=redeal_ready),
    "cut-skipped": Injection(),
    "stub-count-skipped": Injection(applies=not_counting, before_shuffle=suppress_counts),
    "shuffle-count-mismatch": Injection(applies=lambda s: s.counting),
    CLOSING: Injection(applies=closing_table, ready=closing_ready, count=True, floor_event=True),
}
"""Every kind of error injected at a C691 table: the common ones first, then the game's."""

GAME = GameSim(deal_c691, INJECTIONS)
