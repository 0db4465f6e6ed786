"""State transitions: what each event does to a table's state, before any rule looks at it.

:func:`reduce` works on a :class:`Draft`, a working copy of the table state made for one
``apply``: the draft is a shallow copy, and each nested model (the round, a deck) is copied once
before its first change, so the state it came from is never touched and the new state shares
everything that did not change. Handlers are looked up by event type (one dict lookup per
event, the hot path of the audit and the worker).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schemas import events as ev
from schemas.base import Envelope, Game
from streams.engine.state import (
    DeckState,
    DeviceState,
    PendingFault,
    RoundState,
    ShuffleInfo,
    TableState,
    WagerInfo,
)

DEAL_CLOSERS: frozenset[type[Envelope]] = frozenset(
    {
        ev.StubCounted,
        ev.StubDiscarded,
        ev.MisdealDetermined,
        ev.PlayerDecided,
        ev.PlayerViewedCards,
        ev.HandSet,
        ev.WagerSettled,
        ev.RoundVoided,
        ev.RoundCompleted,
        ev.HandsRevealed,
    }
)
"""Event types that end the deal of a round (card-count rules are judged at the first one)."""

CUT_RECORDED_FROM = 2
"""The schema version from which a Chapter 691 trail records the § 691.4 cut (``DeckCut``):
a deck shuffled by a completion of this version or newer must be cut before it is taken into
the hand (C691-DH-a2); version 1 trails could not record a cut, so none is asked of them."""

DEFAULT_JOKERS = {Game.TCP: 0, Game.C691: 2, Game.PGP: 1}
"""Jokers in a deck of each game when no ``DeckIntroduced`` said otherwise (rulebook section 2)."""


class Draft:
    """The table state being built by one ``apply``; the only mutable object of the engine.

    ``state`` starts as a shallow copy of the base state. :meth:`set_round` and
    :meth:`put_deck` copy the round and the decks mapping before their first change. Once the
    engine returns ``state``, nothing changes it again.
    """

    __slots__ = ("_decks_copied", "_round_copied", "state")

    def __init__(self, base: TableState, **changes: Any) -> None:
        self.state = base.model_copy(update=changes)
        self._round_copied = False
        self._decks_copied = False

    @classmethod
    def of(cls, fields: dict[str, Any]) -> Draft:
        """A draft whose state takes ``fields`` (a copy of a table state's fields, with changes)
        as its own; the caller must not touch ``fields`` again."""
        draft = cls.__new__(cls)
        state = object.__new__(TableState)
        object.__setattr__(state, "__dict__", fields)
        draft.state = state
        draft._round_copied = False
        draft._decks_copied = False
        return draft

    @property
    def round(self) -> RoundState | None:
        """The round in progress in the draft."""
        return self.state.round

    def set(self, **changes: Any) -> None:
        """Change table-level fields."""
        self.state.__dict__.update(changes)

    def set_round(self, **changes: Any) -> None:
        """Change fields of the round in progress (copied on first change)."""
        rnd = self.state.round
        assert rnd is not None
        if self._round_copied:
            rnd.__dict__.update(changes)
        else:
            self.state.__dict__["round"] = rnd.model_copy(update=changes)
            self._round_copied = True

    def start_round(self, rnd: RoundState | None) -> None:
        """Replace the round in progress (a new one, or None when it completes)."""
        self.state.__dict__["round"] = rnd
        self._round_copied = rnd is not None

    def put_deck(self, deck: DeckState) -> None:
        """Store a (new) deck state."""
        if not self._decks_copied:
            self.state.__dict__["decks"] = dict(self.state.decks)
            self._decks_copied = True
        self.state.decks[deck.deck_id] = deck  # type: ignore[index]  # the draft's own copy


def round_deck_id(state: TableState, event: Envelope) -> str | None:
    """The deck an event concerns: its own ``deck_id``, the round's, or the table's current deck."""
    if event.deck_id is not None:
        return event.deck_id
    if state.round is not None and state.round.deck_id is not None:
        return state.round.deck_id
    return state.current_deck_id


def _deck(state: TableState, deck_id: str) -> DeckState:
    deck = state.decks.get(deck_id)
    if deck is None:
        deck = DeckState(deck_id=deck_id, declared_count=state.config.cards_per_deck, jokers=DEFAULT_JOKERS[state.game])
    return deck


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


# -- table-level events -------------------------------------------------------------------------


def _configured(d: Draft, e: ev.TableConfigured) -> None:
    d.set(config=e.config)


def _device(d: Draft, e: ev.DeviceRegistered) -> None:
    dev = DeviceState(
        device_type=e.device_type,
        counts_each_shuffle=e.counts_each_shuffle,
        indicates_full_deck=e.indicates_full_deck,
        approved=e.approved,
    )
    d.set(devices={**d.state.devices, e.device_id: dev})
    _back_in_use(d, e.device_id)  # registered again: back in use (rulebook 10.3.2)


def _deck_introduced(d: Draft, e: ev.DeckIntroduced) -> None:
    deck_id = e.deck_id or e.event_id
    jokers = e.jokers if e.jokers is not None else max(0, e.declared_count - 52)
    d.put_deck(DeckState(deck_id=deck_id, declared_count=e.declared_count, jokers=jokers))
    d.set(current_deck_id=deck_id)
    if d.state.config.stub_window_resets_on_new_deck:
        d.set(stub_run=0, stub_run_rounds=())


def _deck_removed(d: Draft, e: ev.DeckRemoved) -> None:
    deck_id = round_deck_id(d.state, e)
    if deck_id is None:
        return
    gone = {"removed": True, "composition_flagged": False, "composition_finding": None, "fault_event_id": None}
    d.put_deck(_deck(d.state, deck_id).model_copy(update=gone))
    if d.state.current_deck_id == deck_id:
        d.set(current_deck_id=None)
    _device_fault_cleared(d)  # the deck is gone: it no longer waits for a clearing shuffle


def _shuffle_started(d: Draft, e: ev.ShuffleStarted) -> None:
    deck_id = round_deck_id(d.state, e)
    if deck_id is None:
        return
    deck = _deck(d.state, deck_id)
    update: dict[str, Any] = {
        "shuffle_started_seq": e.seq,
        "shuffle_started_event_id": e.event_id,
        "seen_cards": "",  # rulebook 10.1.3: the whole deck is gathered, the window starts
        "seen_ids": (),
    }
    idle = _idle_fault(d.state, e.device_id if e.method == "AUTOMATED" else None)
    if idle is not None:  # put into a device that faulted standing empty (10.5.2)
        update.update(_faulted_by(deck, idle))
    d.put_deck(deck.model_copy(update=update))
    d.set(current_deck_id=deck_id)


def _idle_fault(state: TableState, device_id: str | None) -> PendingFault | None:
    """Rulebook 10.5.2: the pending fault ``device_id`` signalled standing empty (no deck named,
    ``during`` IDLE), which the next deck shuffled in it must clear, else None."""
    if device_id is None:
        return None
    pending = state.faults.get(device_id)
    return pending if pending is not None and pending.idle else None


def _faulted_by(deck: DeckState, fault: PendingFault) -> dict[str, Any]:
    """The deck-state fields that make ``fault`` a fault of ``deck`` (a fault it already has stays
    its evidence; a clearing shuffle must start after the later of the two)."""
    return {"fault_event_id": deck.fault_event_id or fault.event_id, "fault_seq": max(deck.fault_seq, fault.seq)}


def _shuffle_completed(d: Draft, e: ev.ShuffleCompleted) -> None:
    deck_id = round_deck_id(d.state, e)
    if deck_id is None:
        return
    deck = _deck(d.state, deck_id)
    by = e.device_id if e.method == "AUTOMATED" else None
    info = ShuffleInfo(
        event_id=e.event_id,
        method=e.method,
        device_id=e.device_id,
        started_seq=deck.shuffle_started_seq if deck.shuffle_started_seq is not None else e.seq,
        counted=e.device_card_count is not None,
        full_deck_ok=e.device_full_deck_ok,
        mode=e.mode,
    )
    good = e.mode == "SHUFFLE" and e.device_full_deck_ok is not False
    clearing = good and clears_fault(d.state, info)
    idle = _idle_fault(d.state, by)
    if idle is not None and (not clearing or info.started_seq <= idle.seq):
        deck = deck.model_copy(update=_faulted_by(deck, idle))  # in the device, not cleared (10.5.2)
    if d.state.faults:
        unnamed = e.method == "AUTOMATED" and e.device_id is None  # some shuffler: not evidence of another method
        _resolve_faults(d, by, deck_id, info.started_seq, clearing, unnamed)
    info = info.model_copy(update={"during_fault": _shuffled_while_unusable(d.state, by)})
    cut = e.event_id if good and d.state.game is Game.C691 and e.schema_version >= CUT_RECORDED_FROM else None
    update: dict[str, Any] = {
        "last_shuffle": info,
        "shuffle_started_seq": None,
        "shuffle_started_event_id": None,
        "seen_cards": "",
        "seen_ids": (),
        "dealt_round_id": None,
        "dealt_event_id": None,
        "cut_due": cut,
    }
    off = _out_of_service_event(d.state, by)
    if not good:  # a completion in another mode or short of cards: a fault of this deck and device
        update.update(fault_event_id=deck.fault_event_id or e.event_id, fault_seq=e.seq)
        if by is not None:
            d.set(faults={**d.state.faults, by: PendingFault(event_id=e.event_id, seq=e.seq, deck_id=deck_id)})
    elif off is not None:  # shuffled by a device taken out of service and not returned (10.3.2)
        update.update(fault_event_id=deck.fault_event_id or off, fault_seq=e.seq)
    elif clearing:
        update["cleared_seq"] = info.started_seq
        if deck.fault_event_id is not None and info.started_seq > deck.fault_seq:
            update["fault_event_id"] = None
    d.put_deck(deck.model_copy(update=update))
    d.set(current_deck_id=deck_id)
    if d.state.shuffler_fault is not None:
        _device_fault_cleared(d)


def _resolve_faults(
    d: Draft, by: str | None, deck_id: str, started_seq: int, clearing: bool, unnamed: bool = False
) -> None:
    """Rulebook 10.4.1 at a shuffle's completion (``by``: the shuffler that made it, None by hand;
    ``unnamed``: an automated completion that names no device, which says nothing of which).

    A shuffler with a pending fault that did not make this shuffle was passed over for another
    method: it turns unusable (case b). A clearing completion by the faulted shuffler itself, of
    the fault's deck (of any deck when the fault names none, its deck left the table, or the
    device is already unusable by case b), clears the fault and that unusability. An automated
    dealing shoe's fault is cleared by § 645a.14(m)'s remedy: its cards taken out of it, then a
    clearing completion of its deck started after the fault, by any method.
    """
    state = d.state
    faults = dict(state.faults)
    unusable = dict(state.unusable)
    for device_id, pending in state.faults.items():
        device = state.devices.get(device_id)
        kind = device.device_type if device is not None else "SHUFFLER"
        if kind == "AUTO_SHOE":
            if (
                clearing
                and pending.cards_removed
                and started_seq > pending.seq
                and _fault_deck_is(state, pending, deck_id)
            ):
                del faults[device_id]
                if device is None or not device.out_of_service:
                    unusable.pop(device_id, None)
            continue
        if device_id != by:
            if not unnamed:
                unusable.setdefault(device_id, pending.event_id)  # another method on an uncleared fault
            continue
        if not clearing or started_seq <= pending.seq or (device is not None and device.out_of_service):
            continue
        if device_id in unusable or _fault_deck_is(state, pending, deck_id):
            del faults[device_id]
            unusable.pop(device_id, None)
    d.set(faults=faults, unusable=unusable)


def _fault_deck_is(state: TableState, pending: PendingFault, deck_id: str) -> bool:
    """True if a completion of ``deck_id`` is one of the pending fault's deck (any deck when the
    fault names none or its deck was removed from the table)."""
    if pending.deck_id is None or pending.deck_id == deck_id:
        return True
    deck = state.decks.get(pending.deck_id)
    return deck is None or deck.removed


def _out_of_service_event(state: TableState, device_id: str | None) -> str | None:
    """The event that made ``device_id`` unusable if it is taken out of service and not returned
    (rulebook 10.4.1 case a), else None."""
    if device_id is None:
        return None
    device = state.devices.get(device_id)
    if device is None or not device.out_of_service:
        return None
    return state.unusable.get(device_id)


def _shuffled_while_unusable(state: TableState, by: str | None) -> str | None:
    """Rulebook 10.3.2, 10.4.1: the event that made a shuffler unusable, neither covered nor
    signed out of order, when a shuffle is completed by another method (``by`` is None, by hand,
    or another device) or by that device before its return to service; else None."""
    for device_id, cause in state.unusable.items():
        device = state.devices.get(device_id)
        if device is None or device.device_type != "SHUFFLER" or device.covered_or_signed:
            continue
        if device_id != by or device.out_of_service:
            return cause
    return None


def _device_fault_cleared(d: Draft) -> None:
    """End a fault naming no deck once every deck at the table has passed a clearing shuffle
    started after it (or left the table): rulebook 10.3.1."""
    state = d.state
    if state.shuffler_fault is None:
        return
    if all(deck.removed or deck.cleared_seq > state.fault_seq for deck in state.decks.values()):
        d.set(shuffler_fault=None, fault_seq=0)


def deck_fault(state: TableState, deck_id: str | None) -> str | None:
    """The unresolved fault a deal from ``deck_id`` is made on, or None (rulebook 10.1.2, 10.3.1).

    The deck's own fault (a fault naming it, a bad completion, a shuffle by a device not returned
    to service), else the device's fault that named no deck when the deck's last clearing
    shuffle started before it. A deck not known to the table has only the device's fault.
    """
    deck = state.decks.get(deck_id) if deck_id is not None else None
    if deck is not None and deck.fault_event_id is not None:
        return deck.fault_event_id
    if state.shuffler_fault is not None and (deck is None or deck.cleared_seq <= state.fault_seq):
        return state.shuffler_fault
    return None


def clears_fault(state: TableState, info: ShuffleInfo) -> bool:
    """Rulebook 10.1.2: is this good completion (mode SHUFFLE, not short) a clearing one?

    A completion from a counting shuffler (counts each shuffle and signals a full deck) must have
    reported ``device_full_deck_ok`` = true. A manual shuffle clears as before (whether a manual
    shuffle was allowed is rule (a)(1)'s and § 645a.14(n)'s question). It clears a fault of its
    deck when its shuffle started after the fault (by seq: the caller checks), and a fault naming
    no deck for its deck alone (10.3.1). A device not returned to service clears nothing (10.3.2:
    the caller checks).
    """
    device = state.devices.get(info.device_id) if info.device_id is not None else None
    if info.method == "AUTOMATED" and device is not None and device.counts_each_shuffle and device.indicates_full_deck:
        return info.full_deck_ok is True
    return True


def _shuffler_faulted(d: Draft, e: ev.ShufflerFaulted) -> None:
    """Rulebook 10.3.1, 10.4.1, 10.5.2: a fault of the deck it names (of every deck when it names
    none and ``during`` is not IDLE; of the next deck shuffled in the device when it stood empty),
    pending on the device until a clearing completion in it; the device stays in use."""
    # standing empty, it concerns only the next deck shuffled in it (10.5.2)
    idle = e.deck_id is None and e.during == "IDLE"
    if e.deck_id is None and not idle:  # a fault of the device: every deck must pass a clearing shuffle (10.3.1)
        d.set(shuffler_fault=e.event_id, fault_seq=e.seq)
    elif e.deck_id is not None:
        deck = _deck(d.state, e.deck_id)  # a deck already faulted keeps its first fault as evidence
        d.put_deck(deck.model_copy(update={"fault_event_id": deck.fault_event_id or e.event_id, "fault_seq": e.seq}))
    _pending(d, e.device_id, PendingFault(event_id=e.event_id, seq=e.seq, deck_id=e.deck_id, idle=idle))


def _pending(d: Draft, device_id: str, fault: PendingFault) -> None:
    """Record ``fault`` as the device's pending fault; an earlier one of the same deck stays the
    evidence, the later seq is the one a clearing shuffle must start after."""
    known = d.state.faults.get(device_id)
    if known is not None and known.deck_id == fault.deck_id:
        fault = fault.model_copy(update={"event_id": known.event_id})
    d.set(faults={**d.state.faults, device_id: fault})


def _removed_from_device(d: Draft, e: ev.CardsRemovedFromDevice) -> None:
    """All of a deck's cards taken out of a jammed shuffler: the composition window starts (10.1.3).
    The cards taken out of a faulted automated dealing shoe: the first step of its remedy (10.4.1)."""
    pending = d.state.faults.get(e.device_id)
    if pending is not None and not pending.cards_removed and e.seq > pending.seq:
        d.set(faults={**d.state.faults, e.device_id: pending.model_copy(update={"cards_removed": True})})
    device = d.state.devices.get(e.device_id)
    deck_id = round_deck_id(d.state, e)
    if device is None or device.device_type != "SHUFFLER" or deck_id is None:
        return
    deck = _deck(d.state, deck_id)
    if e.count >= deck.size():
        d.put_deck(deck.model_copy(update={"seen_cards": "", "seen_ids": ()}))


def _deck_cut(d: Draft, e: ev.DeckCut) -> None:
    deck_id = round_deck_id(d.state, e)
    if deck_id is not None:
        deck = _deck(d.state, deck_id)
        if deck.cut_due is not None:
            d.put_deck(deck.model_copy(update={"cut_due": None}))


def _deck_verified(d: Draft, e: ev.DeckVerified) -> None:
    """A deck verified OK by the floor holds its declared composition again and is no longer suspect."""
    deck_id = round_deck_id(d.state, e)
    if deck_id is not None and e.result == "OK":
        deck = _deck(d.state, deck_id)
        ended = {"composition_flagged": False, "composition_finding": None, "added": "", "taken_out": ""}
        d.put_deck(deck.model_copy(update=ended))


def _inventory(d: Draft, e: ev.CardAddedToDeck | ev.CardRemovedFromDeck, into: str, out_of: str) -> None:
    """A card put ``into`` the deck's ``added`` or ``taken_out`` list, unless it cancels one on the
    other (``out_of``): a card taken out and put back leaves the composition as declared."""
    deck_id = round_deck_id(d.state, e)
    if deck_id is None or e.card == "UNKNOWN":
        return
    deck = _deck(d.state, deck_id)
    needle = " " + e.card
    other: str = getattr(deck, out_of)
    pos = other.find(needle)
    if pos >= 0:
        d.put_deck(deck.model_copy(update={out_of: other[:pos] + other[pos + 3 :]}))
    else:
        d.put_deck(deck.model_copy(update={into: getattr(deck, into) + needle}))


def _card_added(d: Draft, e: ev.CardAddedToDeck) -> None:
    _inventory(d, e, into="added", out_of="taken_out")


def _card_taken_out(d: Draft, e: ev.CardRemovedFromDeck) -> None:
    _inventory(d, e, into="taken_out", out_of="added")


def _shoe_faulted(d: Draft, e: ev.AutoShoeFaulted) -> None:
    """Rulebook 10.4.1: the shoe's fault is pending until § 645a.14(m)'s remedy clears it."""
    _pending(d, e.device_id, PendingFault(event_id=e.event_id, seq=e.seq, deck_id=round_deck_id(d.state, e)))


def _out_of_service(d: Draft, e: ev.DeviceTakenOutOfService) -> None:
    """Rulebook 10.4.1 case a: the device is unusable until its return to service; a second
    notice (a cover or a sign added) keeps the first as the cause."""
    known = d.state.devices.get(e.device_id)
    if known is not None:
        off = known.model_copy(update={"out_of_service": True, "covered_or_signed": e.covered or e.out_of_order_sign})
        d.set(
            devices={**d.state.devices, e.device_id: off},
            unusable={**d.state.unusable, e.device_id: d.state.unusable.get(e.device_id) or e.event_id},
        )


def _back_in_service(d: Draft, e: ev.DeviceReturnedToService) -> None:
    devices = dict(d.state.devices)
    if e.device_id in devices:
        devices[e.device_id] = devices[e.device_id].model_copy(
            update={"out_of_service": False, "covered_or_signed": False}
        )
    d.set(devices=devices)
    _back_in_use(d, e.device_id)


def _back_in_use(d: Draft, device_id: str) -> None:
    """A device returned to service or registered again: usable, its pending fault gone (10.3.2)."""
    if device_id in d.state.unusable:
        d.set(unusable={k: v for k, v in d.state.unusable.items() if k != device_id})
    if device_id in d.state.faults:
        d.set(faults={k: v for k, v in d.state.faults.items() if k != device_id})


def _dealt_by_another_method(d: Draft, method: str) -> None:
    """Rulebook 10.4.1 case b: a round or card dealt by a method other than an automated dealing
    shoe while a shoe's fault is pending makes that shoe unusable."""
    if method == "AUTO_SHOE":
        return
    state = d.state
    for device_id, pending in state.faults.items():
        device = state.devices.get(device_id)
        if device is not None and device.device_type == "AUTO_SHOE" and device_id not in state.unusable:
            d.set(unusable={**d.state.unusable, device_id: pending.event_id})


def _round_started(d: Draft, e: ev.RoundStarted) -> None:
    if d.state.faults:
        _dealt_by_another_method(d, e.dealing_method)
    state = d.state
    deck_id = e.deck_id or state.current_deck_id
    deck = state.decks.get(deck_id) if deck_id is not None else None
    d.start_round(
        RoundState(
            round_id=e.round_id or e.event_id,
            round_no=e.round_no,
            method=e.dealing_method,
            dealer_id=e.dealer_id,
            deck_id=deck_id,
            started_event_id=e.event_id,
            started_seq=e.seq,
            started_at=e.occurred_at,
            # section 8, 10.5.4: only a round a counted shuffle fed is exempt
            exempt=deck is not None and deck.dealt_round_id is None and shuffle_counts(state, deck.last_shuffle),
        )
    )
    if state.config.stub_window_resets_on_dealer_change and state.last_dealer_id not in (None, e.dealer_id):
        d.set(stub_run=0, stub_run_rounds=())


def _round_completed(d: Draft, e: ev.RoundCompleted) -> None:
    rnd = d.round
    if rnd is None:
        return
    state = d.state
    run, run_rounds = state.stub_run, state.stub_run_rounds
    if rnd.stub_event_id is not None:  # a stub count resets the window, in an exempt round too (10.5.4)
        run, run_rounds = 0, ()
    elif stub_window_applies(state, rnd) and not rnd.exempt:
        run += 1
        run_rounds = (*run_rounds, e.event_id)[-state.config.stub_count_window :]
    d.start_round(None)
    d.set(
        last_dealer_id=rnd.dealer_id,
        rounds_completed=state.rounds_completed + 1,
        stub_run=run,
        stub_run_rounds=run_rounds,
    )


# -- events inside a round ----------------------------------------------------------------------


def _wager_placed(d: Draft, rnd: RoundState, e: ev.WagerPlaced) -> None:
    w = WagerInfo(wager_id=e.wager_id, seat=e.seat, wager_type=e.wager_type, amount=e.amount, event_id=e.event_id)
    d.set_round(wagers={**rnd.wagers, e.wager_id: w})


def _wager_changed(d: Draft, rnd: RoundState, e: ev.WagerChanged) -> None:
    old = rnd.wagers.get(e.wager_id)
    w = WagerInfo(
        wager_id=e.wager_id,
        seat=e.seat,
        wager_type=e.wager_type,
        amount=e.amount,
        event_id=old.event_id if old is not None else e.event_id,
    )
    d.set_round(wagers={**rnd.wagers, e.wager_id: w})


def _wager_withdrawn(d: Draft, rnd: RoundState, e: ev.WagerWithdrawn) -> None:
    old = rnd.wagers.get(e.wager_id)
    if old is not None:
        d.set_round(wagers={**rnd.wagers, e.wager_id: old.model_copy(update={"active": False})})


def _no_more_bets(d: Draft, rnd: RoundState, e: ev.NoMoreBetsAnnounced) -> None:
    if rnd.nmb_event_id is None:
        d.set_round(nmb_event_id=e.event_id)


def _deck_held(d: Draft, rnd: RoundState, e: ev.DeckHeld) -> None:
    if rnd.deck_hand is None:
        d.set_round(deck_hand=e.hand, deck_hand_event_id=e.event_id)


def _card_dealt(d: Draft, rnd: RoundState, e: ev.CardDealt) -> None:
    if d.state.faults:
        _dealt_by_another_method(d, e.dealt_from)
    area = e.to_area
    cards = dict(rnd.cards)
    cards[area] = (*cards.get(area, ()), e.event_id)
    update: dict[str, Any] = {"cards": cards, "cards_dealt": rnd.cards_dealt + 1}
    if area.startswith("SEAT_") or area == "DEALER":
        update["hand_cards"] = rnd.hand_cards + 1
    if rnd.first_card_event_id is None:
        update["first_card_event_id"] = e.event_id
        if rnd.deck_id is not None:  # rulebook 10.1.1: the deck has now been dealt since its shuffle
            deck = _deck(d.state, rnd.deck_id)
            if deck.dealt_round_id is None:
                d.put_deck(deck.model_copy(update={"dealt_round_id": rnd.round_id, "dealt_event_id": e.event_id}))
    d.set_round(**update)
    _see_card(d, e, e.card)


def _found_face_up(d: Draft, rnd: RoundState, e: ev.CardFoundFaceUp) -> None:
    d.set_round(found_face_up=(*rnd.found_face_up, e.event_id))
    _see_card(d, e, e.card)


def _stub_counted(d: Draft, rnd: RoundState, e: ev.StubCounted) -> None:
    total, correct = deck_arithmetic(d.state, rnd, e.count)
    d.set_round(stub_count=e.count, stub_event_id=e.event_id, deck_total=total, stub_correct=correct)


def _stub_discarded(d: Draft, rnd: RoundState, e: ev.StubDiscarded) -> None:
    d.set_round(stub_discarded=True)


def _voided(d: Draft, rnd: RoundState, e: ev.RoundVoided) -> None:
    if e.scope == "ALL_HANDS":
        d.set_round(voided_all=True)
    else:
        d.set_round(voided_seats=rnd.voided_seats | {e.scope})


def _settled(d: Draft, rnd: RoundState, e: ev.WagerSettled) -> None:
    old = rnd.wagers.get(e.wager_id)
    if old is None:
        d.set_round(settled_any=True)
    else:
        d.set_round(settled_any=True, wagers={**rnd.wagers, e.wager_id: old.model_copy(update={"settled": True})})


def _dice_shaken(d: Draft, rnd: RoundState, e: ev.DiceShaken) -> None:
    d.set_round(shaken_event_id=e.event_id, reveal=None, reveal_event_id=None, reveal_valid=False)


def _dice_revealed(d: Draft, rnd: RoundState, e: ev.DiceRevealed) -> None:
    d.set_round(
        reveal=e.values,
        reveal_event_id=e.event_id,
        reveal_valid=e.all_flat and not e.die_out_of_shaker,
        values_announced=False,
    )


def _values_announced(d: Draft, rnd: RoundState, e: ev.DiceValuesAnnounced) -> None:
    d.set_round(values_announced=True)


def _total_announced(d: Draft, rnd: RoundState, e: ev.DiceTotalAnnounced) -> None:
    d.set_round(total_announced=e.total, total_event_id=e.event_id)


def _rng_number(d: Draft, rnd: RoundState, e: ev.RngNumberDisplayed) -> None:
    d.set_round(rng_number=e.number, rng_event_id=e.event_id)


def _stack_delivered(d: Draft, rnd: RoundState, e: ev.StackDelivered) -> None:
    d.set_round(stacks={**rnd.stacks, e.to_position: (e.stack_index, e.card_count, e.event_id)})


def _hands_revealed(d: Draft, rnd: RoundState, e: ev.HandsRevealed) -> None:
    d.set_round(revealed=True)


def _hand_set(d: Draft, rnd: RoundState, e: ev.HandSet) -> None:
    if e.owner not in rnd.hands_set:
        d.set_round(hands_set=rnd.hands_set | {e.owner})
    if e.owner in HOUSE_WAY_OWNERS and e.matches_house_way is not None:
        wrong = {k: v for k, v in rnd.house_way_wrong.items() if k != e.owner}
        if not e.matches_house_way:
            wrong[e.owner] = e.event_id
        d.set_round(house_way_wrong=wrong)


HOUSE_WAY_OWNERS = frozenset({"DEALER", "BANK"})
"""The hands § 645a.14(i) requires set the house way (the certificate holder's required setting)."""


def _hand_reset(d: Draft, rnd: RoundState, e: ev.HandReset) -> None:
    """§ 645a.14(i), rulebook 10.5.3: a hand reset per the house way is no longer set against it."""
    if e.owner in rnd.house_way_wrong:
        d.set_round(house_way_wrong={k: v for k, v in rnd.house_way_wrong.items() if k != e.owner})


EXPOSED_OWNER = {"DEALER_HAND": "DEALER", "BANK_HAND": "BANK"}


def is_showdown(rnd: RoundState, e: ev.CardExposed) -> bool:
    """Rulebook 10.1.4: a card shown at settlement, after ``HandsRevealed``, or of a hand already
    set is not an exposure (the exposure rules apply while dealing, before hands are set or
    revealed). Cards of the stub, the stacks or the deck are never a showdown."""
    if e.location not in ("PLAYER_HAND", "DEALER_HAND", "BANK_HAND"):
        return False
    if e.phase == "SETTLEMENT" or rnd.revealed:
        return True
    owner = e.seat if e.location == "PLAYER_HAND" else EXPOSED_OWNER[e.location]
    return owner is not None and owner in rnd.hands_set


def _card_exposed(d: Draft, rnd: RoundState, e: ev.CardExposed) -> None:
    if e.location == "PLAYER_HAND" and e.seat is not None and e.exposed_by == "DEALER" and not is_showdown(rnd, e):
        d.set_round(exposed_seats={**rnd.exposed_seats, e.seat: e.event_id})


def _player_viewed(d: Draft, rnd: RoundState, e: ev.PlayerViewedCards) -> None:
    if e.seat not in rnd.viewed_seats:
        d.set_round(viewed_seats={**rnd.viewed_seats, e.seat: e.event_id})


def _void_decided(d: Draft, rnd: RoundState, e: ev.PlayerVoidDecided) -> None:
    if e.seat in rnd.exposed_seats:
        d.set_round(exposed_seats={k: v for k, v in rnd.exposed_seats.items() if k != e.seat})


def _see_card(d: Draft, event: Envelope, card: str) -> None:
    """Record a drawn card against its deck (DT-deck-composition)."""
    if card == "UNKNOWN":
        return
    deck_id = round_deck_id(d.state, event)
    if deck_id is None:
        return
    deck = _deck(d.state, deck_id)
    d.put_deck(
        deck.model_copy(
            update={"seen_cards": f"{deck.seen_cards} {card}", "seen_ids": (*deck.seen_ids, event.event_id)}
        )
    )


TABLE_HANDLERS: dict[type[Envelope], Callable[[Draft, Any], None]] = {
    ev.TableConfigured: _configured,
    ev.DeviceRegistered: _device,
    ev.DeckIntroduced: _deck_introduced,
    ev.DeckRemoved: _deck_removed,
    ev.ShuffleStarted: _shuffle_started,
    ev.ShuffleCompleted: _shuffle_completed,
    ev.ShufflerFaulted: _shuffler_faulted,
    ev.AutoShoeFaulted: _shoe_faulted,
    ev.DeviceTakenOutOfService: _out_of_service,
    ev.DeviceReturnedToService: _back_in_service,
    ev.CardsRemovedFromDevice: _removed_from_device,
    ev.DeckCut: _deck_cut,
    ev.DeckVerified: _deck_verified,
    ev.CardAddedToDeck: _card_added,
    ev.CardRemovedFromDeck: _card_taken_out,
    ev.RoundStarted: _round_started,
    ev.RoundCompleted: _round_completed,
}
"""Events that change table-level state, whether or not a round is in progress."""

ROUND_HANDLERS: dict[type[Envelope], Callable[[Draft, RoundState, Any], None]] = {
    ev.CardDealt: _card_dealt,
    ev.WagerPlaced: _wager_placed,
    ev.WagerSettled: _settled,
    ev.WagerChanged: _wager_changed,
    ev.WagerWithdrawn: _wager_withdrawn,
    ev.NoMoreBetsAnnounced: _no_more_bets,
    ev.DeckHeld: _deck_held,
    ev.CardFoundFaceUp: _found_face_up,
    ev.StubCounted: _stub_counted,
    ev.StubDiscarded: _stub_discarded,
    ev.RoundVoided: _voided,
    ev.DiceShaken: _dice_shaken,
    ev.DiceRevealed: _dice_revealed,
    ev.DiceValuesAnnounced: _values_announced,
    ev.DiceTotalAnnounced: _total_announced,
    ev.RngNumberDisplayed: _rng_number,
    ev.StackDelivered: _stack_delivered,
    ev.CardExposed: _card_exposed,
    ev.PlayerViewedCards: _player_viewed,
    ev.PlayerVoidDecided: _void_decided,
    ev.HandsRevealed: _hands_revealed,
    ev.HandSet: _hand_set,
    ev.HandReset: _hand_reset,
}
"""Events that change the round in progress; ignored between rounds and when stamped with
another round's ID (a late event must not change the current round)."""


def _in_round(d: Draft, event: Envelope) -> None:
    rnd = d.round
    if rnd is None or (event.round_id is not None and event.round_id != rnd.round_id):
        return
    if rnd.cards_dealt and not rnd.deal_closed and type(event) in DEAL_CLOSERS:
        d.set_round(deal_closed=True)
        rnd = d.round
        assert rnd is not None
    handler = ROUND_HANDLERS.get(type(event))
    if handler is not None:
        handler(d, rnd, event)


def reduce(d: Draft, event: ev.DealingEvent) -> None:
    """Apply one event's effect to the draft.

    Args:
        d: the draft of the table state (changed in place; its base state never is).
        event: a validated dealing event of this table, already sequence-checked.
    """
    handler = TABLE_HANDLERS.get(type(event))
    if handler is not None:
        handler(d, event)
    else:
        _in_round(d, event)


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
