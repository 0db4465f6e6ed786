"""State transitions: what each event does to a table's state, before any rule looks at it.

:func:`reduce` is pure: it returns a new :class:`TableState` and never changes its argument.
Rules read the states before and after (see :mod:`streams.engine.context`).
"""

from __future__ import annotations

from typing import Any

from schemas import events as ev
from schemas.base import Envelope, Game
from streams.engine.state import (
    DeckState,
    DeviceState,
    RoundState,
    ShuffleInfo,
    TableState,
    WagerInfo,
)

DEAL_CLOSERS = frozenset(
    {
        "StubCounted",
        "StubDiscarded",
        "MisdealDetermined",
        "PlayerDecided",
        "PlayerViewedCards",
        "HandSet",
        "WagerSettled",
        "RoundVoided",
        "RoundCompleted",
    }
)
"""Event types that end the deal of a round (card-count rules are judged at the first one)."""

DEFAULT_JOKERS = {Game.TCP: 0, Game.C691: 2, Game.PGP: 1}
"""Jokers in a deck of each game when no ``DeckIntroduced`` said otherwise (rulebook section 2)."""


def _deck(state: TableState, deck_id: str) -> DeckState:
    deck = state.decks.get(deck_id)
    if deck is None:
        deck = DeckState(deck_id=deck_id, declared_count=state.config.cards_per_deck, jokers=DEFAULT_JOKERS[state.game])
    return deck


def _with_deck(state: TableState, deck: DeckState, **table: Any) -> TableState:
    return state.model_copy(update={"decks": {**state.decks, deck.deck_id: deck}, **table})


def round_deck_id(state: TableState, event: Envelope) -> str | None:
    """The deck an event concerns: its own ``deck_id``, the round's, or the table's current deck."""
    if event.deck_id is not None:
        return event.deck_id
    if state.round is not None and state.round.deck_id is not None:
        return state.round.deck_id
    return state.current_deck_id


def shuffle_counts(state: TableState, info: ShuffleInfo | None) -> bool:
    """True if ``info`` is a shuffle by a counting shuffler that counted the full deck.

    § 679a.9(d): the device must count the cards after each shuffle **and** indicate whether the
    full deck is present; a missing count for that shuffle makes the round non-exempt.
    """
    if info is None or info.method != "AUTOMATED" or info.device_id is None or info.mode != "SHUFFLE":
        return False
    device = state.devices.get(info.device_id)
    return (
        device is not None
        and device.counts_each_shuffle
        and device.indicates_full_deck
        and info.counted
        and info.full_deck_ok is not None
    )


def stub_window_applies(state: TableState, rnd: RoundState) -> bool:
    """True if the round counts toward the 5-round stub-count window (rulebook decision 1).

    Hand-dealt rounds of Three Card Prime and the Chapter 691 game count (§ 679a.9(d)); shoe-dealt
    Three Card Prime rounds count too when the provisional rules are on
    (TCP-679a.8/10-stub-count-PROV). Exemption by a counting shuffler is checked by the caller.
    """
    if state.game is Game.PGP:
        return False
    if rnd.method == "HAND":
        return True
    return state.game is Game.TCP and state.config.provisional_rules


def _round(state: TableState, **update: Any) -> TableState:
    assert state.round is not None
    return state.model_copy(update={"round": state.round.model_copy(update=update), **{}})


def reduce(state: TableState, event: ev.DealingEvent) -> TableState:  # noqa: PLR0911
    """Apply one event's effect to the table state.

    Args:
        state: the table state before ``event`` (not modified).
        event: a validated dealing event of this table, already sequence-checked.

    Returns:
        The new table state. Events that belong to a round but arrive between rounds change only
        table-level fields.
    """
    rnd = state.round
    deck_id: str | None
    deck: DeckState | None
    match event:
        case ev.TableConfigured():
            return state.model_copy(update={"config": event.config})
        case ev.DeviceRegistered():
            dev = DeviceState(
                device_type=event.device_type,
                counts_each_shuffle=event.counts_each_shuffle,
                indicates_full_deck=event.indicates_full_deck,
                approved=event.approved,
            )
            return state.model_copy(update={"devices": {**state.devices, event.device_id: dev}})
        case ev.DeckIntroduced():
            deck_id = event.deck_id or event.event_id
            jokers = event.jokers if event.jokers is not None else max(0, event.declared_count - 52)
            deck = DeckState(deck_id=deck_id, declared_count=event.declared_count, jokers=jokers)
            if state.config.stub_window_resets_on_new_deck:
                return _with_deck(state, deck, current_deck_id=deck_id, stub_run=0, stub_run_rounds=())
            return _with_deck(state, deck, current_deck_id=deck_id)
        case ev.DeckRemoved():
            deck_id = round_deck_id(state, event)
            if deck_id is None:
                return state
            removed = _deck(state, deck_id).model_copy(update={"removed": True})
            current = None if state.current_deck_id == deck_id else state.current_deck_id
            return _with_deck(state, removed, current_deck_id=current)
        case ev.ShuffleStarted():
            deck_id = round_deck_id(state, event)
            if deck_id is None:
                return state
            started = _deck(state, deck_id).model_copy(
                update={"shuffle_started_seq": event.seq, "shuffle_started_event_id": event.event_id}
            )
            return _with_deck(state, started, current_deck_id=deck_id)
        case ev.ShuffleCompleted():
            deck_id = round_deck_id(state, event)
            if deck_id is None:
                return state
            current_deck = _deck(state, deck_id)
            started_seq = (
                current_deck.shuffle_started_seq if current_deck.shuffle_started_seq is not None else event.seq
            )
            info = ShuffleInfo(
                event_id=event.event_id,
                method=event.method,
                device_id=event.device_id,
                started_seq=started_seq,
                counted=event.device_card_count is not None,
                full_deck_ok=event.device_full_deck_ok,
                mode=event.mode,
            )
            shuffled = current_deck.model_copy(
                update={
                    "last_shuffle": info,
                    "shuffle_started_seq": None,
                    "shuffle_started_event_id": None,
                    "seen": {},
                    "composition_flagged": False,
                }
            )
            good = event.mode == "SHUFFLE" and event.device_full_deck_ok is not False
            fault = None if good else event.event_id
            unusable = state.unusable
            if good and event.device_id is not None and event.device_id in unusable:
                unusable = {k: v for k, v in unusable.items() if k != event.device_id}
            return _with_deck(
                state,
                shuffled,
                current_deck_id=deck_id,
                shuffler_fault=fault,
                fault_flagged=False,
                unusable=unusable,
            )
        case ev.ShufflerFaulted():
            return state.model_copy(
                update={
                    "shuffler_fault": event.event_id,
                    "fault_flagged": False,
                    "unusable": {**state.unusable, event.device_id: event.event_id},
                }
            )
        case ev.AutoShoeFaulted():
            return state.model_copy(update={"unusable": {**state.unusable, event.device_id: event.event_id}})
        case ev.DeviceTakenOutOfService():
            known = state.devices.get(event.device_id)
            if known is None:
                return state
            off = known.model_copy(
                update={"out_of_service": True, "covered_or_signed": event.covered or event.out_of_order_sign}
            )
            return state.model_copy(update={"devices": {**state.devices, event.device_id: off}})
        case ev.DeviceReturnedToService():
            devices = dict(state.devices)
            if event.device_id in devices:
                devices[event.device_id] = devices[event.device_id].model_copy(
                    update={"out_of_service": False, "covered_or_signed": False}
                )
            unusable = {k: v for k, v in state.unusable.items() if k != event.device_id}
            return state.model_copy(update={"devices": devices, "unusable": unusable})
        case ev.RoundStarted():
            deck_id = event.deck_id or state.current_deck_id
            deck = state.decks.get(deck_id) if deck_id is not None else None
            exempt = shuffle_counts(state, deck.last_shuffle if deck is not None else None)
            new_round = RoundState(
                round_id=event.round_id or event.event_id,
                round_no=event.round_no,
                method=event.dealing_method,
                dealer_id=event.dealer_id,
                deck_id=deck_id,
                started_event_id=event.event_id,
                started_seq=event.seq,
                started_at=event.occurred_at,
                exempt=exempt,
            )
            reset = state.config.stub_window_resets_on_dealer_change and state.last_dealer_id not in (
                None,
                event.dealer_id,
            )
            if reset:
                state = state.model_copy(update={"stub_run": 0, "stub_run_rounds": ()})
            unusable = state.unusable
            if event.dealing_method == "AUTO_SHOE":
                shoes = {k for k, d in state.devices.items() if d.device_type == "AUTO_SHOE"}
                unusable = {k: v for k, v in unusable.items() if k not in shoes}
            return state.model_copy(update={"round": new_round, "unusable": unusable})
        case ev.RoundCompleted():
            if rnd is None:
                return state
            run, run_rounds = state.stub_run, state.stub_run_rounds
            if stub_window_applies(state, rnd) and not rnd.exempt:
                if rnd.stub_event_id is not None:
                    run, run_rounds = 0, ()
                else:
                    run += 1
                    run_rounds = (*run_rounds, event.event_id)[-state.config.stub_count_window :]
            return state.model_copy(
                update={
                    "round": None,
                    "last_dealer_id": rnd.dealer_id,
                    "rounds_completed": state.rounds_completed + 1,
                    "stub_run": run,
                    "stub_run_rounds": run_rounds,
                }
            )
    if rnd is None or (event.round_id is not None and event.round_id != rnd.round_id):
        return state
    closes = rnd.cards_dealt > 0 and not rnd.deal_closed and event.type in DEAL_CLOSERS
    if closes:
        rnd = rnd.model_copy(update={"deal_closed": True})
        state = state.model_copy(update={"round": rnd})
    return _reduce_round(state, rnd, event)


def _reduce_round(state: TableState, rnd: RoundState, event: ev.DealingEvent) -> TableState:  # noqa: PLR0911
    match event:
        case ev.WagerPlaced():
            w = WagerInfo(
                wager_id=event.wager_id,
                seat=event.seat,
                wager_type=event.wager_type,
                amount=event.amount,
                event_id=event.event_id,
            )
            return _round(state, wagers={**rnd.wagers, event.wager_id: w})
        case ev.WagerChanged():
            old = rnd.wagers.get(event.wager_id)
            w = WagerInfo(
                wager_id=event.wager_id,
                seat=event.seat,
                wager_type=event.wager_type,
                amount=event.amount,
                event_id=old.event_id if old is not None else event.event_id,
            )
            return _round(state, wagers={**rnd.wagers, event.wager_id: w})
        case ev.WagerWithdrawn():
            old = rnd.wagers.get(event.wager_id)
            if old is None:
                return state
            return _round(state, wagers={**rnd.wagers, event.wager_id: old.model_copy(update={"active": False})})
        case ev.NoMoreBetsAnnounced():
            return _round(state, nmb_event_id=rnd.nmb_event_id or event.event_id)
        case ev.DeckHeld():
            if rnd.deck_hand is not None:
                return state
            return _round(state, deck_hand=event.hand, deck_hand_event_id=event.event_id)
        case ev.CardDealt():
            area = event.to_area
            hand = area.startswith("SEAT_") or area == "DEALER"
            update: dict[str, Any] = {
                "cards": {**rnd.cards, area: (*rnd.cards.get(area, ()), event.event_id)},
                "cards_dealt": rnd.cards_dealt + 1,
                "hand_cards": rnd.hand_cards + (1 if hand else 0),
            }
            if event.card != "UNKNOWN":
                update["faces"] = {**rnd.faces, event.event_id: event.card}
            if event.face == "UP":
                update["face_up_event_ids"] = (*rnd.face_up_event_ids, event.event_id)
            if rnd.first_card_event_id is None:
                update["first_card_event_id"] = event.event_id
            state = _round(state, **update)
            return _see_card(state, event, event.card)
        case ev.CardFoundFaceUp():
            state = _round(state, found_face_up=(*rnd.found_face_up, event.event_id))
            return _see_card(state, event, event.card)
        case ev.StubCounted():
            total, correct = deck_arithmetic(state, rnd, event.count)
            return _round(
                state, stub_count=event.count, stub_event_id=event.event_id, deck_total=total, stub_correct=correct
            )
        case ev.StubDiscarded():
            return _round(state, stub_discarded=True)
        case ev.RoundVoided():
            if event.scope == "ALL_HANDS":
                return _round(state, voided_all=True)
            return _round(state, voided_seats=rnd.voided_seats | {event.scope})
        case ev.WagersReturned():
            return _round(state, returned=rnd.returned | frozenset(event.wager_ids))
        case ev.WagerSettled():
            old = rnd.wagers.get(event.wager_id)
            wagers = rnd.wagers
            if old is not None:
                wagers = {**wagers, event.wager_id: old.model_copy(update={"settled": True})}
            return _round(state, settled_any=True, wagers=wagers)
        case ev.DiceShaken():
            return _round(state, shaken_event_id=event.event_id, reveal=None, reveal_event_id=None, reveal_valid=False)
        case ev.DiceRevealed():
            valid = event.all_flat and not event.die_out_of_shaker
            return _round(
                state,
                reveal=event.values,
                reveal_event_id=event.event_id,
                reveal_valid=valid,
                values_announced=False,
            )
        case ev.DiceValuesAnnounced():
            return _round(state, values_announced=True)
        case ev.DiceTotalAnnounced():
            return _round(state, total_announced=event.total, total_event_id=event.event_id)
        case ev.RngNumberDisplayed():
            return _round(state, rng_number=event.number, rng_event_id=event.event_id)
        case ev.StackDelivered():
            entry = (event.stack_index, event.card_count, event.event_id)
            return _round(state, stacks={**rnd.stacks, event.to_position: entry})
        case ev.CardExposed():
            if event.location == "PLAYER_HAND" and event.seat is not None and event.exposed_by == "DEALER":
                return _round(state, exposed_seats={**rnd.exposed_seats, event.seat: event.event_id})
            return state
        case ev.PlayerViewedCards():
            if event.seat in rnd.viewed_seats:
                return state
            return _round(state, viewed_seats={**rnd.viewed_seats, event.seat: event.event_id})
        case ev.PlayerVoidDecided():
            return _round(state, exposed_seats={k: v for k, v in rnd.exposed_seats.items() if k != event.seat})
    return state


def _see_card(state: TableState, event: Envelope, card: str) -> TableState:
    """Record a drawn card against its deck (DT-deck-composition)."""
    if card == "UNKNOWN":
        return state
    deck_id = round_deck_id(state, event)
    if deck_id is None:
        return state
    deck = _deck(state, deck_id)
    deck = deck.model_copy(update={"seen": {**deck.seen, card: (*deck.seen.get(card, ()), event.event_id)}})
    return _with_deck(state, deck)


def expected_cards_dealt(state: TableState, rnd: RoundState) -> int:
    """Cards that leave the deck in a correct deal of this round (cards), rulebook section 2.

    Three Card Prime: 3 x (Ante seats + dealer) + Pair Bonus fourth cards (one per Pair Bonus
    seat, or one community card if elected and any Pair Bonus Wager was placed). Chapter 691:
    1 burn + 5 community = 6. Pai Gow Poker: stacks x stack size.
    """
    cfg = state.config
    if state.game is Game.C691:
        return 6
    if state.game is Game.PGP:
        return cfg.pgp_stacks * cfg.pgp_stack_size
    antes = len(rnd.seats_with("ANTE"))
    pair = len(rnd.seats_with("PAIR_BONUS"))
    if cfg.pair_bonus_mode == "COMMUNITY":
        bonus = 1 if pair else 0
    elif cfg.pair_bonus_mode == "PER_PLAYER":
        bonus = pair
    else:
        bonus = 0
    return 3 * (antes + 1) + bonus


def deck_arithmetic(state: TableState, rnd: RoundState, stub_count: int) -> tuple[int, bool]:
    """Rulebook decision 2: ``deck_total`` = stub + cards dealt this round (incl. burns and
    cards found face up and discarded); the count is correct iff the stub equals the deck size
    less the cards a correct deal uses.

    Returns:
        ``(deck_total, count_correct)`` in cards.
    """
    total = stub_count + rnd.cards_dealt + len(rnd.found_face_up)
    correct = stub_count == state.config.cards_per_deck - expected_cards_dealt(state, rnd)
    return total, correct
