"""The simulator's Pai Gow Poker (58 Pa. Code § 645a.14, § 645c.2): how a round is dealt and
the errors it can carry."""

from __future__ import annotations

from dealtrail.simulator.table import (
    CLOSING,
    COMMON,
    FAULT_DEALS,
    SEATS,
    GameSim,
    Injection,
    Plan,
    TableSim,
    closing_ready,
    closing_table,
    place_main_wager,
    remedy_void,
    reveal,
)
from schemas import events as ev
from schemas.base import ActorRole, Source


def deal_pgp(sim: TableSim, plan: Plan, deck: list[str], round_id: str) -> bool:
    """Deal one Pai Gow Poker round: dice for the starting position, seven stacks of seven."""
    k = plan.kind
    rng = sim.rng
    cfg_order = ("DEALER", *reversed(SEATS))
    seats = sorted(rng.sample(SEATS, rng.randint(1, 6)), key=SEATS.index)
    wagers: dict[str, str] = {}
    dice_wagers: list[str] = []
    for i, seat in enumerate(seats):
        w = f"{round_id}-W{i + 1:02d}"
        wagers[w] = seat
        place_main_wager(sim, w, seat)
    use_dice_wager = sim.dice_wagers and k != "rng-used"

    def place_dice_wager() -> None:
        """The first seat's wager on the dice (a SUM wager of 500)."""
        w = f"{round_id}-W90"
        wagers[w] = seats[0]
        dice_wagers.append(w)
        sim.emit(
            ev.WagerPlaced,
            wager_id=w,
            seat=seats[0],
            wager_type="SUM",
            amount=500,
            role=ActorRole.PLAYER,
            actor_id=f"P-{seats[0]}",
        )

    if use_dice_wager and k != "dice-wager-late":
        place_dice_wager()
    sim.emit(ev.NoMoreBetsAnnounced)
    if k == "rng-used":
        number = rng.randint(1, 12)
        sim.emit(ev.RngNumberDisplayed, number=number, source=Source.SYSTEM, role=ActorRole.DEVICE, actor_id="RNG-1")
        total = number
        plan.expect.append("PGP-645a.9-rng-PROV")
    else:
        shakes = 2 if k == "two-shakes" else rng.randint(3, 5)
        if k == "two-shakes":
            plan.expect.append("PGP-645a.9-shake-3x-PROV")
        sim.emit(ev.DiceShaken, shaker_id=f"{sim.table_id}-SHK", shake_count=shakes)
        if k == "dice-wager-late":
            place_dice_wager()
            plan.expect.append("PGP-645c.2-f-wager-before-shake")
        values = (rng.randint(1, 6), rng.randint(1, 6), rng.randint(1, 6))
        if k in ("dice-not-flat", "die-out"):
            sim.emit(ev.DiceRevealed, values=values, all_flat=k != "dice-not-flat", die_out_of_shaker=k == "die-out")
            sim.emit(ev.NoRollCalled, reason="NOT_FLAT" if k == "dice-not-flat" else "OUT_OF_SHAKER")
            sim.emit(ev.DiceShaken, shaker_id=f"{sim.table_id}-SHK", shake_count=3)
            plan.expect.append(
                "PGP-645a.14-a-no-roll-not-flat" if k == "dice-not-flat" else "PGP-645a.14-b-no-roll-out"
            )
            values = (rng.randint(1, 6), rng.randint(1, 6), rng.randint(1, 6))
        sim.emit(ev.DiceRevealed, values=values)
        if k == "dice-not-announced" and dice_wagers:
            plan.expect.append("PGP-645c.2-g-announce-dice")
        else:
            sim.emit(ev.DiceValuesAnnounced, values=values)
        total = sum(values)
        announced = total + 1 if k == "wrong-total" else total
        sim.emit(ev.DiceTotalAnnounced, total=announced)
        if k == "wrong-total":
            total = announced
            plan.expect.append("PGP-645a.14-c-wrong-total")
    start = cfg_order.index(cfg_order[(total - 1) % 7])
    if k == "wrong-start":
        start = (start + 2) % 7
        plan.expect.append("PGP-645a.9-start-position-PROV")
    sim.emit(ev.StartingPositionDetermined, position=cfg_order[start], basis="RNG" if k == "rng-used" else "DICE")
    src = "AUTO_SHOE" if sim.dealing == "AUTO_SHOE" else "DECK_IN_HAND"
    cards = iter(deck)
    idx = 0
    seen: list[str] = []
    stack_cards: dict[int, list[str]] = {}
    face_up = 0
    voided = False
    for s in range(1, 8):
        size = 6 if (k == "short-stack" and s == 3) else 7
        for c in range(size):
            if k in ("shoe-fault", "shoe-fault-cleared") and s == 4 and c == 2:
                sim.emit(
                    ev.AutoShoeFaulted,
                    device_id=sim.shoe,
                    fault="JAM",
                    cards_dealt_so_far=idx,
                    source=Source.SHOE,
                    role=ActorRole.DEVICE,
                    actor_id=sim.shoe,
                )
                plan.expect.append("PGP-645a.14-m-shoe-fault")
                sim.emit(ev.CardsRemovedFromDevice, device_id=sim.shoe, count=len(deck) - idx - face_up)
                remedy_void(sim, list(wagers), "PGP-645a.14-m-shoe-fault")
                sim.emit(ev.RoundCompleted)
                return False
            if k in ("one-face-up", "two-face-up") and (
                (s == 2 and c == 0) or (k == "two-face-up" and s == 5 and c == 3)
            ):
                face_up += 1
                sim.emit(
                    ev.CardFoundFaceUp,
                    location="SHOE" if src == "AUTO_SHOE" else "DECK",
                    card=next(cards),
                    disposition="DISCARD_RACK",
                )
            if k == "drawn-in-error" and s == 3 and c == 3:
                sim.emit(ev.CardDrawnInError, face_exposed=False, disposition="DISCARDED")
                next(cards)
                plan.expect.append("PGP-645a.14-g-drawn-in-error")
            idx += 1
            card = seen[0] if (k == "duplicate-card" and s == 6 and c == 0) else next(cards)
            seen.append(card)
            stack_cards.setdefault(s, []).append(card)
            sim.emit(
                ev.CardDealt,
                deal_index=idx,
                dealt_from=src,
                to_area=f"STACK_{s}",
                card=card,
                source=Source.RFID,
                after=rng.uniform(0.2, 0.6),
            )
            if k == "exposed-in-stacks" and s == 2 and c == 4:
                sim.emit(ev.CardExposed, card=card, location="STACK", phase="STACK_DEAL")
                plan.expect.append("PGP-645a.14-j-exposed-during-stacks")
    if k == "one-face-up":
        plan.expect.append("PGP-645a.14-f-one-face-up")
    if k == "two-face-up":
        plan.expect += ["PGP-645a.14-f-one-face-up", "PGP-645a.14-f-two-face-up"]
    if k == "duplicate-card":
        plan.expect.append("DT-deck-composition")
    if k in FAULT_DEALS:
        plan.expect.append("DT-deal-after-device-fault")
    sim.emit(ev.StubDiscarded, exposed=k == "leftover-exposed")
    if k == "leftover-exposed":
        plan.expect.append("PGP-645a.9-stacks-PROV")
    void_now = k in ("two-face-up", "wrong-total", "short-stack", "exposed-in-stacks")
    skipped = None
    for s in range(1, 8):
        pos = cfg_order[(start + s - 1) % 7]
        if k == "stack-skipped" and s == 7:
            skipped = pos
            continue
        size = 6 if (k == "short-stack" and s == 3) else 7
        sim.emit(ev.StackDelivered, stack_index=s, card_count=size, to_position=pos)
    if k == "short-stack":
        plan.expect.append("PGP-645a.14-hk-wrong-count")
    if skipped is not None:
        plan.expect += ["PGP-645a.9-stacks-PROV", "PGP-645a.9-unwagered-stacks-PROV"]
    if void_now:
        rule = {
            "two-face-up": "PGP-645a.14-f-two-face-up",
            "wrong-total": "PGP-645a.14-c-wrong-total",
            "short-stack": "PGP-645a.14-hk-wrong-count",
            "exposed-in-stacks": "PGP-645a.14-j-exposed-during-stacks",
        }[k or ""]
        remedy_void(sim, list(wagers), rule)
        voided = True
    void_seat: str | None = None  # a seat whose hand the player voided: its hand wagers are returned
    held = {cfg_order[(start + s - 1) % 7]: cards for s, cards in stack_cards.items()}
    dealer = held.get("DEALER") or deck[0:7]  # the dealer's seven cards, as the stacks were delivered
    if not voided:
        exposed_seat = seats[0]
        if k in ("player-card-exposed", "decision-after-look"):
            card = (held.get(exposed_seat) or [deck[idx]])[0]  # a card of the seat's own hand
            sim.emit(ev.CardExposed, card=card, location="PLAYER_HAND", seat=exposed_seat, phase="PLAY")
            plan.expect.append("PGP-645a.14-d-player-card-exposed")
            if k == "decision-after-look":
                sim.emit(ev.PlayerViewedCards, seat=exposed_seat, role=ActorRole.PLAYER, actor_id=f"P-{exposed_seat}")
                plan.expect.append("PGP-645a.14-d-decision-after-look")
            decision = rng.choice(("PLAY_OUT", "VOID"))
            sim.emit(
                ev.PlayerVoidDecided,
                seat=exposed_seat,
                decision=decision,
                role=ActorRole.PLAYER,
                actor_id=f"P-{exposed_seat}",
            )
            if decision == "VOID":
                void_seat = exposed_seat
                sim.emit(
                    ev.RoundVoided,
                    scope=exposed_seat,
                    reason_code="PLAYER_VOID",
                    rule_id="PGP-645a.14-d-player-card-exposed",
                )
        unremedied = k in ("dealer-exposed-unremedied", CLOSING)  # CLOSING: the table closes before the void
        if k == "dealer-card-exposed" or unremedied:
            sim.emit(ev.CardExposed, card=dealer[0], location="DEALER_HAND", phase="PLAY")
            plan.expect.append("PGP-645a.14-e-dealer-bank-exposed")
            if k == "dealer-card-exposed":
                remedy_void(sim, list(wagers), "PGP-645a.14-e-dealer-bank-exposed")
                voided = True
            else:
                plan.expect.append("DT-remedy-overdue")
    if not voided:
        for seat in seats:
            if k == "decision-after-look" and seat == seats[0]:
                continue
            sim.emit(ev.PlayerViewedCards, seat=seat, role=ActorRole.PLAYER, actor_id=f"P-{seat}")
        house = k not in ("house-way-missed", "house-way-reset")
        five, two = tuple(dealer[0:5]), tuple(dealer[5:7])
        sim.emit(ev.HandSet, owner="DEALER", five_card=five, two_card=two, matches_house_way=house)
        if k == "house-way-missed":  # settled as set: one finding (rulebook 10.5.3)
            plan.expect.append("PGP-645a.14-i-house-way")
        elif k == "house-way-reset":  # reset per the house way before settlement: the procedure followed
            sim.emit(ev.HandReset, owner="DEALER")
            sim.emit(
                ev.HandSet,
                owner="DEALER",
                five_card=tuple(dealer[2:7]),
                two_card=tuple(dealer[0:2]),
                matches_house_way=True,
            )
        reveal(sim, [(o, held.get(o, [])) for o in ("DEALER", *seats)])
        for w, seat in wagers.items():
            outcome = rng.choice(("WIN", "LOSS", "PUSH"))
            if seat == void_seat and w not in dice_wagers:
                outcome = "PUSH"  # the voided hand's wager is returned, never won or lost
            sim.emit(ev.WagerSettled, wager_id=w, outcome=outcome, payout=1000 if outcome == "WIN" else 0, after=0.4)
    sim.emit(ev.RoundCompleted)
    return False


INJECTIONS: dict[str, Injection] = {
    **COMMON,
    "dice-not-flat": Injection(),
    "die-out": Injection(),
    "wrong-total": Injection(),
    "player-card-exposed": Injection(),
    "decision-after-look": Injection(),
    "dealer-card-exposed": Injection(),
    "dealer-exposed-unremedied": Injection(),
    "one-face-up": Injection(),
    "two-face-up": Injection(),
    "drawn-in-error": Injection(),
    "short-stack": Injection(),
    "house-way-missed": Injection(),
    "exposed-in-stacks": Injection(),
    "shuffler-jam": Injection(),
    "shuffler-jam-uncovered": Injection(),
    "shoe-fault": Injection(applies=lambda s: s.method == "AUTO_SHOE"),
    "dice-wager-late": Injection(applies=lambda s: s.dice_wagers),
    "dice-not-announced": Injection(applies=lambda s: s.dice_wagers),
    "two-shakes": Injection(),
    "wrong-start": Injection(),
    "rng-used": Injection(),
    "leftover-exposed": Injection(),
    "stack-skipped": Injection(),
    "shuffle-count-mismatch": Injection(applies=lambda s: s.counting),
    "shoe-fault-cleared": Injection(applies=lambda s: s.method == "AUTO_SHOE", floor_event=True),
    "house-way-reset": Injection(floor_event=True, appended=True),
    CLOSING: Injection(applies=closing_table, ready=closing_ready, floor_event=True),
}
"""Every kind of error injected at a PGP table: the common ones first, then the game's."""

GAME = GameSim(deal_pgp, INJECTIONS)
