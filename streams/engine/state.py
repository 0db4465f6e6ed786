"""Per-table state rebuilt from dealing events (rulebook section 4, "Projections").

All states are frozen dataclasses; collections are dicts and tuples that are never mutated in
place (a new state is always a new object). They are plain dataclasses rather than pydantic
models because the engine copies them on every event: :meth:`_State.model_copy` is a single
dict copy. Their JSON form comes from pydantic (validated on the way back): :func:`dump_state`
/ :func:`load_state` for the state the audit stores at the end of a file, and the Faust
worker's table entry (``streams.worker.Stored``) for its changelog.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Self

from pydantic import PlainSerializer, TypeAdapter

from schemas.base import DealingMethod, Game
from schemas.config import TableConfig
from schemas.findings import Finding


def _sorted(values: frozenset[str]) -> list[str]:
    return sorted(values)


#: A set of IDs in a state. Its JSON form is a sorted list, so the same state dumps to the same
#: text in every process (a set iterates in an order that changes with Python's hash seed, which
#: made stored states and snapshot hashes differ between two audits of the same file).
StrSet = Annotated[frozenset[str], PlainSerializer(_sorted, return_type=list[str], when_used="json")]


class _State:
    """Base of the state dataclasses: a fast, unvalidated copy with changes."""

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A shallow copy with ``update`` applied (same call as pydantic's, without validation).

        The engine builds a new state per event, so this is its hot path. States are never
        mutated, so sharing the unchanged nested values is safe.
        """
        new = object.__new__(self.__class__)
        fields = self.__dict__.copy()
        if update:
            fields.update(update)
        object.__setattr__(new, "__dict__", fields)
        return new


@dataclass(frozen=True, kw_only=True, eq=True)
class DeviceState(_State):
    """A registered device: its capabilities (counting shuffler?) and service status."""

    device_type: str
    counts_each_shuffle: bool
    indicates_full_deck: bool
    approved: bool
    out_of_service: bool = False
    covered_or_signed: bool = False


@dataclass(frozen=True, kw_only=True, eq=True)
class PendingFault(_State):
    """A device fault not yet cleared by its own remedy (rulebook 10.4.1).

    ``event_id`` is the fault (a ``ShufflerFaulted``, a ``ShuffleCompleted`` short of cards or in
    another mode, an ``AutoShoeFaulted``), ``seq`` its seq (a clearing shuffle must start after
    it), ``deck_id`` the deck it concerns (None: the device's, any deck clears it). ``idle`` is True
    for a fault naming no deck recorded ``during`` IDLE (rulebook 10.5.2): it concerns the next deck
    shuffled in the device, not the decks outside it. ``cards_removed`` turns True when an automated
    dealing shoe's cards are taken out of it after the fault (``CardsRemovedFromDevice``):
    § 645a.14(m)'s remedy is that and a reshuffle to a clearing completion. The device stays in use;
    using another method while the fault is pending makes it unusable (:attr:`TableState.unusable`).
    """

    event_id: str
    seq: int
    deck_id: str | None = None
    cards_removed: bool = False
    idle: bool = False


@dataclass(frozen=True, kw_only=True, eq=True)
class ShuffleInfo(_State):
    """The last completed shuffle of a deck.

    ``started_seq`` is the seq of its ``ShuffleStarted`` (or of the completion when no start was
    recorded); ``counted`` is True when a counting shuffler counted the deck on this shuffle,
    which exempts rounds dealt from it from the 5-round stub count (§ 679a.9(d)).
    """

    event_id: str
    method: str
    device_id: str | None
    started_seq: int
    counted: bool
    full_deck_ok: bool | None
    mode: str
    during_fault: str | None = None
    """Rulebook 10.3.2 and 10.4.1: the event that made a shuffler unusable (taken out of service,
    or a fault left uncleared when another method was used), neither covered nor signed out of
    order, when this shuffle was made by another method or by that device before its return to
    service, else None; each round dealt from it is one PGP-645a.14-n-out-of-order finding."""


@dataclass(frozen=True, kw_only=True, eq=True)
class DeckState(_State):
    """One deck at the table: declared size, jokers, last shuffle and the cards seen since it.

    ``seen_cards`` holds the cards drawn since the deck was last gathered into the shuffler (its
    ``ShuffleStarted``, rulebook 10.1.3) as ``" AS KD JK ..."`` (three characters a card, so
    membership is one substring search) and ``seen_ids`` the events that drew them, in the same
    order (DT-deck-composition). ``added`` / ``taken_out`` are the cards put into or taken out of
    the deck outside a deal (same form), which its composition follows. ``composition_flagged``
    stays True from a DT-deck-composition finding until the deck is removed or verified OK
    (10.1.5). ``dealt_round_id`` / ``dealt_event_id``: the round (and its first card) dealt
    from the deck since its last ``ShuffleCompleted`` (10.1.1). ``cut_due``: the
    ``ShuffleCompleted`` (schema version 2, Chapter 691) still waiting for its ``DeckCut``.

    Rulebook revision 3: ``fault_event_id`` is the unresolved device fault of this deck (a
    ``ShufflerFaulted`` naming it, a completion in another mode or short of cards, or a shuffle by
    a device not returned to service), ``fault_seq`` the seq a clearing shuffle must start after
    (10.3.1); ``cleared_seq`` the start seq of the deck's last clearing completion (a fault naming
    no deck is cleared per deck by one started after it). ``composition_finding`` is the latest
    revision of the open DT-deck-composition finding while the deck is suspect (10.3.3).
    """

    deck_id: str
    declared_count: int
    jokers: int
    removed: bool = False
    shuffle_started_seq: int | None = None
    shuffle_started_event_id: str | None = None
    last_shuffle: ShuffleInfo | None = None
    seen_cards: str = ""
    seen_ids: tuple[str, ...] = ()
    composition_flagged: bool = False
    added: str = ""
    taken_out: str = ""
    dealt_round_id: str | None = None
    dealt_event_id: str | None = None
    cut_due: str | None = None
    fault_event_id: str | None = None
    fault_seq: int = 0
    cleared_seq: int = 0
    composition_finding: Finding | None = None

    def allowed(self, card: str) -> int:
        """How many of ``card`` the deck holds (cards): one (or its jokers), plus cards added,
        less cards taken out outside a deal."""
        base = self.jokers if card == "JK" else 1
        if not self.added and not self.taken_out:
            return base
        needle = " " + card
        return base + self.added.count(needle) - self.taken_out.count(needle)

    def size(self) -> int:
        """Cards in the deck (cards): declared, plus added, less taken out."""
        return self.declared_count + (len(self.added) - len(self.taken_out)) // 3

    def sightings(self, card: str) -> tuple[str, ...]:
        """Event IDs that drew ``card`` (two characters) since the last shuffle, in order."""
        out = []
        needle = " " + card
        pos = self.seen_cards.find(needle)
        while pos >= 0:
            out.append(self.seen_ids[pos // 3])
            pos = self.seen_cards.find(needle, pos + 3)
        return tuple(out)


@dataclass(frozen=True, kw_only=True, eq=True)
class WagerInfo(_State):
    """A wager of the round; ``amount`` in cents; ``active`` False once withdrawn."""

    wager_id: str
    seat: str
    wager_type: str
    amount: int
    event_id: str
    active: bool = True
    settled: bool = False


@dataclass(frozen=True, kw_only=True, eq=True)
class RoundState(_State):
    """The round in progress at a table.

    Cards are kept per layout area (``cards[area]`` = the ``CardDealt`` event IDs in deal order;
    the card faces are in those events). ``fired`` holds the rule IDs already
    raised in this round by once-per-round rules. ``revealed`` turns True at ``HandsRevealed``
    and ``hands_set`` holds the owners of ``HandSet`` hands: exposure rules stop there (10.1.4).
    ``house_way_wrong`` maps a dealer's or bank's hand set against the house way and not reset
    since to that ``HandSet`` event (§ 645a.14(i), rulebook 10.5.3).
    """

    round_id: str
    round_no: int
    method: DealingMethod
    dealer_id: str
    deck_id: str | None
    started_event_id: str
    started_seq: int
    started_at: datetime
    exempt: bool
    nmb_event_id: str | None = None
    wagers: Mapping[str, WagerInfo] = field(default_factory=dict)
    cards: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    hand_cards: int = 0
    cards_dealt: int = 0
    first_card_event_id: str | None = None
    deck_hand: str | None = None
    deck_hand_event_id: str | None = None
    stub_count: int | None = None
    stub_event_id: str | None = None
    deck_total: int | None = None
    stub_correct: bool | None = None
    stub_discarded: bool = False
    deal_closed: bool = False
    voided_all: bool = False
    voided_seats: StrSet = frozenset()
    settled_any: bool = False
    found_face_up: tuple[str, ...] = ()
    fired: StrSet = frozenset()
    revealed: bool = False
    hands_set: StrSet = frozenset()
    house_way_wrong: Mapping[str, str] = field(default_factory=dict)
    # Pai Gow Poker dice and stacks
    shaken_event_id: str | None = None
    reveal: tuple[int, int, int] | None = None
    reveal_event_id: str | None = None
    reveal_valid: bool = False
    total_announced: int | None = None
    total_event_id: str | None = None
    values_announced: bool = False
    rng_number: int | None = None
    rng_event_id: str | None = None
    stacks: Mapping[str, tuple[int, int, str]] = field(default_factory=dict)
    exposed_seats: Mapping[str, str] = field(default_factory=dict)
    viewed_seats: Mapping[str, str] = field(default_factory=dict)

    def recipients(self) -> dict[str, int]:
        """Cards held per hand area (``SEAT_k`` and ``DEALER``) after the deal (cards)."""
        return {a: len(ids) for a, ids in self.cards.items() if a.startswith("SEAT_") or a == "DEALER"}

    def active_wagers(self) -> dict[str, WagerInfo]:
        """Wagers placed and not withdrawn."""
        return {k: w for k, w in self.wagers.items() if w.active}

    def seats_with(self, wager_type: str) -> dict[str, WagerInfo]:
        """Active wagers of one type, by seat."""
        return {w.seat: w for w in self.wagers.values() if w.active and w.wager_type == wager_type}


@dataclass(frozen=True, kw_only=True, eq=True)
class Obligation(_State):
    """A remedy owed after a finding (rulebook: OpenRemedies).

    ``pending`` are the :class:`~streams.engine.catalog.Remedy` steps still missing;
    ``done`` the event IDs that carried out the others. ``owed_wagers`` are the round's open
    wagers when the finding was raised, ``returned_wagers`` those returned since (or pushed);
    ``settled_instead`` turns True if one was settled win/loss instead (rulebook decision 4),
    which keeps WAGERS_RETURNED unmet. ``deadline_passed`` turns True when the
    next round started first (DT-remedy-overdue raised, ``overdue_finding`` kept for its update).
    ``ended_at`` is when the obligation's round ended (its ``RoundCompleted``, or the next
    ``RoundStarted`` if it never completed; the trigger's time for a trigger between rounds): the
    obligation leaves the state ``remedy_window`` after it (rulebook 10.3.5).
    ``watch`` is True for an obligation already remedied by voiding wagers (all hands, or a
    seat) while its round goes on: a voided wager settled win or loss after the void undoes the
    remedy (a new revision, not ``remedied``); the watch ends at the next ``RoundStarted``.
    """

    finding: Finding
    pending: tuple[str, ...]
    done: tuple[str, ...] = ()
    trigger_seq: int
    opened_at: datetime
    round_id: str | None
    deck_id: str | None = None
    seat: str | None = None
    device_id: str | None = None
    owner: str | None = None
    owed_wagers: StrSet = frozenset()
    returned_wagers: StrSet = frozenset()
    settled_instead: bool = False
    deadline_passed: bool = False
    overdue_finding: Finding | None = None
    watch: bool = False
    ended_at: datetime | None = None


@dataclass(frozen=True, kw_only=True, eq=True)
class TableState(_State):
    """Everything dealtrail knows about one table, rebuilt from its events.

    Fields of note: ``last_seq`` (the highest seq applied), ``recent`` (chunks of
    ``(seq, event_id, digest)`` for the last few thousand events, to tell an exact duplicate from
    a conflicting one), ``stub_run`` (non-exempt rounds since the last stub count, rounds) and
    ``stub_run_rounds`` (their ``RoundCompleted`` event IDs, the evidence of the last window),
    ``obligations`` (open remedies), ``shuffler_fault`` (event ID of an unresolved fault of the
    device that named no deck, DT-deal-after-device-fault, and ``fault_seq`` its seq: every deck
    whose last clearing shuffle started before it is faulted, rulebook 10.3.1; a deck's own fault
    is on its :class:`DeckState`), ``faults`` (device ID -> its :class:`PendingFault`, a fault
    its own remedy has not cleared yet: the device stays in use, rulebook 10.4.1) and
    ``unusable`` (device ID -> the event that made it unusable for § 645a.14(n), rulebook 10.4.1:
    a ``DeviceTakenOutOfService``, until ``DeviceReturnedToService`` or ``DeviceRegistered``; or
    the pending fault when the table used another method on it, until the device completes a
    clearing shuffle again or is returned to service).
    """

    table_id: str
    game: Game
    config: TableConfig
    last_seq: int = 0
    last_event_id: str | None = None
    last_hash: str | None = None
    recent: tuple[tuple[tuple[int, str, int], ...], ...] = ()
    devices: Mapping[str, DeviceState] = field(default_factory=dict)
    decks: Mapping[str, DeckState] = field(default_factory=dict)
    current_deck_id: str | None = None
    round: RoundState | None = None
    last_dealer_id: str | None = None
    stub_run: int = 0
    stub_run_rounds: tuple[str, ...] = ()
    obligations: tuple[Obligation, ...] = ()
    shuffler_fault: str | None = None
    fault_seq: int = 0
    faults: Mapping[str, PendingFault] = field(default_factory=dict)
    unusable: Mapping[str, str] = field(default_factory=dict)
    rounds_completed: int = 0


_TABLE_STATE = TypeAdapter(TableState)


def dump_state(state: TableState) -> str:
    """The table state as JSON text (what the store keeps at the end of an audited file)."""
    return _TABLE_STATE.dump_json(state).decode()


def load_state(text: str | bytes) -> TableState:
    """Rebuild a table state from :func:`dump_state` output.

    Raises:
        pydantic.ValidationError: the text is not a table state.
    """
    return _TABLE_STATE.validate_json(text)
