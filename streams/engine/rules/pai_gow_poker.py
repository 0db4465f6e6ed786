"""Pai Gow Poker: 58 Pa. Code § 645a.14 (irregularities; invalid roll of dice) and § 645c.2
(dice wagers), plus the provisional § 645a.9 rules of rulebook section 7.

Rule IDs: PGP-645a.14-a-no-roll-not-flat, -b-no-roll-out, -c-wrong-total,
-d-player-card-exposed, -d-decision-after-look, -e-dealer-bank-exposed, -f-one-face-up,
-f-two-face-up, -g-drawn-in-error, -hk-wrong-count, -i-house-way, -j-exposed-during-stacks,
-l-shuffler-fault, -m-shoe-fault, -n-out-of-order; PGP-645c.2-f-wager-before-shake,
PGP-645c.2-g-announce-dice; PGP-645a.9-shake-3x-PROV, -start-position-PROV, -rng-PROV,
-stacks-PROV, -unwagered-stacks-PROV.
"""

from __future__ import annotations

from schemas import events as ev
from schemas.base import DICE_WAGERS, Envelope
from schemas.findings import Finding
from streams.engine.context import Step
from streams.engine.reducer import is_showdown
from streams.engine.state import RoundState

SHUFFLER_FAULTS = frozenset({"JAM", "STOPPED", "INCOMPLETE_CYCLE"})
"""§ 645a.14(l): the device jams, stops shuffling or fails to complete a cycle."""
MIN_SHAKES = 3
"""§ 621a.6(a)(2) (analog): shake at least three times."""
READS: frozenset[type[Envelope]] = frozenset(
    {
        ev.ShufflerFaulted,
        ev.ShuffleStarted,
        ev.RoundStarted,
        ev.CardDealt,
        ev.AutoShoeFaulted,
        ev.DiceShaken,
        ev.DiceRevealed,
        ev.RngNumberDisplayed,
        ev.WagerPlaced,
        ev.StackDelivered,
        ev.CardExposed,
        ev.PlayerViewedCards,
        ev.CardFoundFaceUp,
        ev.CardDrawnInError,
        ev.WagerSettled,
        ev.StubDiscarded,
        ev.RoundCompleted,
    }
)
"""The event types :func:`check` reads; the engine calls it for no other (no finding is lost)."""


def starting_position(step: Step, total: int) -> str:
    """The position a count of ``total`` reaches: dealer = 1, counter-clockwise (§ 621a.6(c))."""
    order = step.config.pgp_count_order
    return order[(total - 1) % len(order)]


def check(step: Step) -> list[Finding]:
    """All Pai Gow Poker rules for one event (see the module docstring for the IDs)."""
    event = step.event
    out: list[Finding] = []
    if type(event) is ev.ShufflerFaulted and event.fault in SHUFFLER_FAULTS and event.during in (None, "SHUFFLE"):
        out.append(
            step.finding(
                "PGP-645a.14-l-shuffler-fault",
                (event.event_id,),
                f"Shuffler {event.device_id} reported {event.fault}; the cards must be reshuffled.",
            )
        )
    rnd = step.round
    if rnd is None:
        return out
    before = step.before.round
    if type(event) is ev.RoundStarted:
        out.extend(_round_out_of_order(step, rnd, event))
    elif type(event) is ev.CardDealt and event.dealt_from != "AUTO_SHOE":
        out.extend(_dealt_out_of_order(step, event))
    elif type(event) is ev.AutoShoeFaulted:
        out.append(
            step.finding(
                "PGP-645a.14-m-shoe-fault",
                (event.event_id,),
                f"Automated dealing shoe {event.device_id} reported {event.fault} during the round.",
            )
        )
    elif type(event) is ev.DiceShaken:
        out.extend(_shaken(step, rnd, event))
    elif type(event) is ev.DiceRevealed:
        if not event.all_flat:
            out.append(step.finding("PGP-645a.14-a-no-roll-not-flat", (event.event_id,), "Dice did not all land flat."))
        if event.die_out_of_shaker:
            out.append(step.finding("PGP-645a.14-b-no-roll-out", (event.event_id,), "A die fell out of the shaker."))
    elif type(event) is ev.RngNumberDisplayed and step.config.shaker_mode != "RNG":
        out.append(
            step.finding(
                "PGP-645a.9-rng-PROV",
                (event.event_id,),
                "RNG number used but the Rules Submission provides manual dice.",
            )
        )
    elif type(event) is ev.WagerPlaced and event.wager_type in DICE_WAGERS and before is not None:
        if before.shaken_event_id is not None and not step.fired("PGP-645c.2-f-wager-before-shake"):
            out.append(
                step.finding(
                    "PGP-645c.2-f-wager-before-shake",
                    (before.shaken_event_id, event.event_id),
                    f"{event.wager_type} wager placed after the shaker was used.",
                )
            )
    elif type(event) is ev.StackDelivered:
        out.extend(_stack(step, rnd, event))
    elif type(event) is ev.CardExposed and not (before is not None and is_showdown(before, event)):
        out.extend(_exposed(step, event))
    elif type(event) is ev.PlayerViewedCards and before is not None and event.seat in before.exposed_seats:
        out.append(
            step.finding(
                "PGP-645a.14-d-decision-after-look",
                (before.exposed_seats[event.seat], event.event_id),
                f"Player at {event.seat} looked at the cards before deciding on the exposed hand.",
            )
        )
    elif type(event) is ev.CardFoundFaceUp:
        found = rnd.found_face_up
        if len(found) == 1:
            out.append(
                step.finding(
                    "PGP-645a.14-f-one-face-up",
                    (event.event_id,),
                    f"Card found face up in the {event.location.lower()}.",
                )
            )
        elif len(found) == 2:
            out.append(step.finding("PGP-645a.14-f-two-face-up", found, "A second card found face up while dealing."))
    elif type(event) is ev.CardDrawnInError and not event.face_exposed and event.disposition != "USED_AS_NEXT":
        out.append(
            step.finding(
                "PGP-645a.14-g-drawn-in-error",
                (event.event_id,),
                "Card drawn in error, unexposed, was not used as the next card.",
            )
        )
    elif type(event) is ev.WagerSettled and before is not None:
        if not before.settled_any:
            out.extend(_settled_against_house_way(step, before, event))
        wager = before.wagers.get(event.wager_id)
        unannounced = wager is not None and wager.wager_type in DICE_WAGERS and not before.values_announced
        if unannounced and not step.fired("PGP-645c.2-g-announce-dice"):
            out.append(
                step.finding(
                    "PGP-645c.2-g-announce-dice",
                    (before.reveal_event_id, event.event_id),
                    "Dice wager settled before each die's value was announced.",
                )
            )
    elif type(event) is ev.StubDiscarded and event.exposed:
        out.append(step.finding("PGP-645a.9-stacks-PROV", (event.event_id,), "Leftover cards discarded exposed."))
    elif type(event) is ev.RoundCompleted and before is not None:
        if not before.settled_any and not before.voided_all:  # completed with no settlement recorded
            out.extend(_settled_against_house_way(step, before, event))
        out.extend(_completed(step, before, event))
    return out


def _settled_against_house_way(step: Step, rnd: RoundState, event: Envelope) -> list[Finding]:
    """PGP-645a.14-i-house-way, § 645a.14(i) as rulebook 10.5.3 reads it: a dealer's or bank's hand
    set against the house way and not reset (``HandReset``) before settlement is one finding for
    the round, raised at the round's first settlement (``event``: its ``WagerSettled``, or the
    ``RoundCompleted`` of a round that recorded none). Evidence: the ``HandSet`` and ``event``. A
    hand reset in time raises nothing: the regulation's procedure was followed."""
    if not rnd.house_way_wrong:
        return []
    owners = sorted(rnd.house_way_wrong)
    return [
        step.finding(
            "PGP-645a.14-i-house-way",
            (*(rnd.house_way_wrong[o] for o in owners), event.event_id),
            f"{' and '.join(owners)} hand not set the house way and not reset before settlement.",
        )
    ]


def _shaken(step: Step, rnd: RoundState, event: ev.DiceShaken) -> list[Finding]:
    out = []
    if event.mode == "MANUAL" and event.shake_count < MIN_SHAKES:
        out.append(
            step.finding("PGP-645a.9-shake-3x-PROV", (event.event_id,), f"Shaker shaken {event.shake_count} times.")
        )
    if event.mode == "PLAYER_ACTIVATED" and step.config.shaker_mode != "PLAYER_ACTIVATED":
        out.append(
            step.finding(
                "PGP-645a.9-rng-PROV",
                (event.event_id,),
                "Player-activated shaker used but not in the Rules Submission.",
            )
        )
    dice = [w.event_id for w in rnd.wagers.values() if w.active and w.wager_type in DICE_WAGERS]
    if dice and rnd.nmb_event_id is None and not step.fired("PGP-645c.2-f-wager-before-shake"):
        out.append(
            step.finding(
                "PGP-645c.2-f-wager-before-shake",
                (*dice, event.event_id),
                'Shaker used with dice wagers on the layout and no "no more bets" announced.',
            )
        )
    return out


def _stack(step: Step, rnd: RoundState, event: ev.StackDelivered) -> list[Finding]:
    out = []
    before = step.before.round
    assert before is not None
    if not before.stacks:
        out.extend(_first_stack(step, before, event))
    size = step.config.pgp_stack_size
    if event.card_count != size and not step.fired("PGP-645a.14-hk-wrong-count"):
        out.append(
            step.finding(
                "PGP-645a.14-hk-wrong-count",
                (event.event_id,),
                f"{event.to_position} dealt {event.card_count} cards; the stack size is {size}.",
            )
        )
    return out


def _first_stack(step: Step, rnd: RoundState, event: ev.StackDelivered) -> list[Finding]:
    """§ 645a.14(c) and the provisional starting-position count."""
    if rnd.rng_number is not None:
        expected = starting_position(step, rnd.rng_number)
        if event.to_position != expected:
            return [
                step.finding(
                    "PGP-645a.9-start-position-PROV",
                    (rnd.rng_event_id, event.event_id),
                    f"First stack to {event.to_position}; RNG number {rnd.rng_number} counts to {expected}.",
                )
            ]
        return []
    if rnd.reveal is None or not rnd.reveal_valid:
        return []
    true_total = sum(rnd.reveal)
    expected = starting_position(step, true_total)
    if event.to_position == expected:
        return []
    if rnd.total_announced is not None and rnd.total_announced != true_total:
        return [
            step.finding(
                "PGP-645a.14-c-wrong-total",
                (rnd.reveal_event_id, rnd.total_event_id, event.event_id),
                f"Dice {rnd.reveal} total {true_total}, announced {rnd.total_announced}; first stack went to "
                f"{event.to_position}, not {expected}.",
            )
        ]
    return [
        step.finding(
            "PGP-645a.9-start-position-PROV",
            (rnd.reveal_event_id, event.event_id),
            f"First stack to {event.to_position}; a dice total of {true_total} counts to {expected}.",
        )
    ]


def _exposed(step: Step, event: ev.CardExposed) -> list[Finding]:
    if event.phase == "STACK_DEAL" or event.location == "STACK":
        return [
            step.finding(
                "PGP-645a.14-j-exposed-during-stacks", (event.event_id,), "Card exposed while dealing the stacks."
            )
        ]
    if event.location in ("DEALER_HAND", "BANK_HAND"):
        whose = "dealer's" if event.location == "DEALER_HAND" else "bank's"
        return [
            step.finding("PGP-645a.14-e-dealer-bank-exposed", (event.event_id,), f"Card of the {whose} hand exposed.")
        ]
    if event.location == "PLAYER_HAND" and event.exposed_by == "DEALER" and event.seat is not None:
        return [
            step.finding(
                "PGP-645a.14-d-player-card-exposed",
                (event.event_id,),
                f"Dealer exposed a card of the player at {event.seat}; the player may void the hand.",
            )
        ]
    return []


def _round_out_of_order(step: Step, rnd: RoundState, event: ev.RoundStarted) -> list[Finding]:
    """§ 645a.14(n), rulebook 10.3.2 and 10.4.1: each round shuffled or dealt while a device is
    unusable (taken out of service and not returned, or passed over for another method on a fault
    its own remedy had not cleared) and neither covered nor signed out of order is one finding: a
    round dealt from a shuffle made then (by hand, another device, or the shuffler itself before
    its return), and any round while an automated dealing shoe is unusable (dealt by hand, which
    this round start may be what makes it unusable, or with the shoe before its return)."""
    out = []
    state = step.after
    deck = state.decks.get(rnd.deck_id) if rnd.deck_id is not None else None
    shuffle = deck.last_shuffle if deck is not None else None
    if shuffle is not None and shuffle.during_fault is not None:
        out.append(
            step.finding(
                "PGP-645a.14-n-out-of-order",
                (shuffle.during_fault, shuffle.event_id, event.event_id),
                "Round dealt from a shuffle made while the faulted shuffler was neither covered nor signed out of "
                "order.",
            )
        )
    for device_id, fault_id in state.unusable.items():
        device = state.devices.get(device_id)
        if device is None or device.device_type != "AUTO_SHOE" or device.covered_or_signed:
            continue
        out.append(
            step.finding(
                "PGP-645a.14-n-out-of-order",
                (fault_id, event.event_id),
                f"Round dealt while {device_id} was faulted and neither covered nor signed out of order.",
            )
        )
    return out


def _dealt_out_of_order(step: Step, event: ev.CardDealt) -> list[Finding]:
    """§ 645a.14(n), rulebook 10.4.1: a card dealt by another method while an automated dealing
    shoe is unusable (this card may be what makes it so: its fault was pending), once a round."""
    if step.fired("PGP-645a.14-n-out-of-order"):
        return []
    state = step.after
    for device_id, fault_id in state.unusable.items():
        device = state.devices.get(device_id)
        if device is None or device.device_type != "AUTO_SHOE" or device.covered_or_signed:
            continue
        return [
            step.finding(
                "PGP-645a.14-n-out-of-order",
                (fault_id, event.event_id),
                f"Another method used while {device_id} was faulted and neither covered nor signed out of order.",
            )
        ]
    return []


def _completed(step: Step, rnd: RoundState, event: ev.RoundCompleted) -> list[Finding]:
    if rnd.voided_all or not rnd.stacks:
        return []
    out = []
    stacks = step.config.pgp_stacks
    if len(rnd.stacks) != stacks:
        out.append(
            step.finding(
                "PGP-645a.9-stacks-PROV",
                (*(s[2] for s in rnd.stacks.values()), event.event_id),
                f"{len(rnd.stacks)} stacks delivered; {stacks} are dealt every round.",
            )
        )
    missing = [p for p in step.config.pgp_count_order if p not in rnd.stacks]
    if missing:
        out.append(
            step.finding(
                "PGP-645a.9-unwagered-stacks-PROV",
                (rnd.started_event_id, event.event_id),
                f"No stack delivered to {', '.join(missing)}.",
            )
        )
    return out
