"""The dealing-event vocabulary (rulebook section 4) as frozen pydantic models.

Every event is a past-tense fact with the common :class:`~schemas.base.Envelope` and a ``type``
tag; :data:`DealingEvent` is the discriminated union over the tag. Names that differ from the
rulebook's proposal are listed in ``docs/event-mapping.md``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from schemas.base import (
    MAX_INT32,
    Area,
    Card,
    DealingMethod,
    Envelope,
    Frozen,
    Identifier,
    PersonId,
    Position,
    WagerType,
)
from schemas.bounds import MAX_CARDS, MAX_DECLARED_DECK, MAX_PAYOUT_CENTS, MAX_WAGER_CENTS
from schemas.config import TableConfig

Count = Annotated[int, Field(ge=0, le=MAX_CARDS)]
"""A number of cards (cards)."""

Die = Annotated[int, Field(ge=1, le=6)]
"""The value a die shows (1 to 6)."""

PGP_HAND_CARDS = 7
"""Cards in a Pai Gow Poker hand (rulebook section 2: seven stacks of 7 cards), set into a
five-card and a two-card hand (§ 645a.14(i))."""

MAX_WAGERS_PER_ROUND = 11 * 9
"""Wagers one round can hold at most: 11 positions (``SEAT_1`` to ``SEAT_9``, ``DEALER``,
``BANK``) times the 9 wager types, each at most once per position."""


def _omit_none(data: dict[str, Any], key: str) -> dict[str, Any]:
    """Leave a schema-version-2 field out of the serialised event when it was not recorded, so a
    version 1 event encodes (and hashes, :mod:`schemas.chain`) to the same bytes as before."""
    if data.get(key, 0) is None:
        del data[key]
    return data


MAX_REVEALED_CARDS = 7
"""Most cards one owner can show at settlement (cards): a Pai Gow Poker hand of seven."""


class DeviceType(StrEnum):
    """Kinds of table device."""

    SHUFFLER = "SHUFFLER"
    AUTO_SHOE = "AUTO_SHOE"
    SHAKER = "SHAKER"
    RNG = "RNG"


class ShuffleMethod(StrEnum):
    """Manual shuffle or an automated card shuffling device."""

    MANUAL = "MANUAL"
    AUTOMATED = "AUTOMATED"


class ShuffleMode(StrEnum):
    """Mode an automated card shuffling device ran in; SORT is not a shuffle."""

    SHUFFLE = "SHUFFLE"
    SORT = "SORT"


class Face(StrEnum):
    """Which way up a card was dealt."""

    DOWN = "DOWN"
    UP = "UP"


class TableConfigured(Envelope):
    """The table was configured (or reconfigured) under a Rules Submission."""

    type: Literal["TableConfigured"] = "TableConfigured"
    config: TableConfig


class DeviceRegistered(Envelope):
    """A device was put on the table: shuffler, automated dealing shoe, dice shaker or RNG.

    ``counts_each_shuffle`` and ``indicates_full_deck`` together make a counting shuffler, which
    lifts the 5-round stub-count duty (§ 679a.9(d)).
    """

    type: Literal["DeviceRegistered"] = "DeviceRegistered"
    device_id: Identifier
    device_type: DeviceType
    counts_each_shuffle: bool = False
    indicates_full_deck: bool = False
    approved: bool = True


class DeckIntroduced(Envelope):
    """A deck (``deck_id`` in the envelope) was brought to the table."""

    type: Literal["DeckIntroduced"] = "DeckIntroduced"
    declared_count: Annotated[int, Field(ge=1, le=MAX_DECLARED_DECK)]
    jokers: Annotated[int, Field(ge=0, le=10)] | None = None
    """Jokers in the deck; None means ``declared_count - 52`` (0 for 52, 2 for 54, 1 for 53)."""
    back_colour: Annotated[str, Field(max_length=32)] | None = None
    preshuffled: bool = False


class DeckRemoved(Envelope):
    """The deck (``deck_id``) was removed from the table."""

    type: Literal["DeckRemoved"] = "DeckRemoved"
    reason_code: Identifier
    rule_id: Annotated[str, Field(max_length=80)] | None = None


class ShuffleStarted(Envelope):
    """A shuffle of the deck began (manual, or in the named automated card shuffling device)."""

    type: Literal["ShuffleStarted"] = "ShuffleStarted"
    method: ShuffleMethod
    device_id: Identifier | None = None


class ShuffleCompleted(Envelope):
    """A shuffle of the deck finished.

    ``device_card_count`` (cards) and ``device_full_deck_ok`` are the counting shuffler's report
    for this shuffle; None when the device did not report.
    """

    type: Literal["ShuffleCompleted"] = "ShuffleCompleted"
    method: ShuffleMethod
    device_id: Identifier | None = None
    device_card_count: Count | None = None
    device_full_deck_ok: bool | None = None
    mode: ShuffleMode = ShuffleMode.SHUFFLE


class ShufflerFaulted(Envelope):
    """An automated card shuffling device signalled a fault (rulebook: ``ShufflerFault``).

    The deck in the device is the envelope's ``deck_id`` (rulebook 10.2 "gains ``deck_id``": the
    envelope already carries it; None means the table's current deck). ``during`` (schema
    version 2) says what the device was doing: SHUFFLE (the fault interrupted a shuffle of that
    deck), IDLE or DEAL; None when not recorded (version 1 events), read as SHUFFLE.
    """

    type: Literal["ShufflerFaulted"] = "ShufflerFaulted"
    device_id: Identifier
    fault: Literal["JAM", "STOPPED", "INCOMPLETE_CYCLE", "COUNT_ERROR", "WRONG_MODE"]
    indicator: Annotated[str, Field(max_length=64)] | None = None
    acknowledged_by: PersonId | None = None
    during: Literal["SHUFFLE", "IDLE", "DEAL"] | None = None

    @model_serializer(mode="wrap")
    def _without_unrecorded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_none(handler(self), "during")


class AutoShoeFaulted(Envelope):
    """An automated dealing shoe jammed, stopped or failed to deal all cards (rulebook: ``AutoShoeFault``)."""

    type: Literal["AutoShoeFaulted"] = "AutoShoeFaulted"
    device_id: Identifier
    fault: Literal["JAM", "STOPPED", "FAILED_TO_DEAL_ALL"]
    cards_dealt_so_far: Count = 0


class CardsRemovedFromDevice(Envelope):
    """Cards (``count``, cards) were taken out of a device after a fault."""

    type: Literal["CardsRemovedFromDevice"] = "CardsRemovedFromDevice"
    device_id: Identifier
    count: Count


class DeviceTakenOutOfService(Envelope):
    """A device was taken out of service (rulebook: ``DeviceOutOfService``), covered or signed."""

    type: Literal["DeviceTakenOutOfService"] = "DeviceTakenOutOfService"
    device_id: Identifier
    covered: bool
    out_of_order_sign: bool


class DeviceReturnedToService(Envelope):
    """A device was put back into service."""

    type: Literal["DeviceReturnedToService"] = "DeviceReturnedToService"
    device_id: Identifier


class RoundStarted(Envelope):
    """A round of play began (``round_id`` and ``deck_id`` in the envelope)."""

    type: Literal["RoundStarted"] = "RoundStarted"
    # the store's rounds.round_no is an INTEGER: a round number above 2^31 - 1 is refused (rulebook 10.3.4)
    round_no: Annotated[int, Field(ge=1, le=MAX_INT32)]
    dealing_method: DealingMethod
    dealer_id: PersonId


class WagerPlaced(Envelope):
    """A wager was placed; ``amount`` in cents."""

    type: Literal["WagerPlaced"] = "WagerPlaced"
    wager_id: Identifier
    seat: Position
    player_seated: bool = True
    wager_type: WagerType
    amount: Annotated[int, Field(ge=0, le=MAX_WAGER_CENTS)]
    instrument: Literal["CHIPS", "PLAQUE", "APPROVED_INSTRUMENT", "CASH_VERBAL"] = "CHIPS"


class WagerChanged(Envelope):
    """An existing wager's amount (cents) was changed."""

    type: Literal["WagerChanged"] = "WagerChanged"
    wager_id: Identifier
    seat: Position
    wager_type: WagerType
    amount: Annotated[int, Field(ge=0, le=MAX_WAGER_CENTS)]


class WagerWithdrawn(Envelope):
    """A wager was taken back."""

    type: Literal["WagerWithdrawn"] = "WagerWithdrawn"
    wager_id: Identifier
    seat: Position
    wager_type: WagerType


class NoMoreBetsAnnounced(Envelope):
    """The dealer announced "no more bets"."""

    type: Literal["NoMoreBetsAnnounced"] = "NoMoreBetsAnnounced"


class DeckHeld(Envelope):
    """The dealer took the deck into a hand (§ 679a.9(a)(2)); where it was held."""

    type: Literal["DeckHeld"] = "DeckHeld"
    hand: Literal["LEFT", "RIGHT"]
    over_inventory_container: bool = True
    in_front_of_dealer: bool = True


class CardDealt(Envelope):
    """One card left the deck or shoe for an area of the layout."""

    type: Literal["CardDealt"] = "CardDealt"
    deal_index: Annotated[int, Field(ge=1, le=MAX_CARDS)]
    dealt_from: Literal["DECK_IN_HAND", "MANUAL_SHOE", "AUTO_SHOE"] = "DECK_IN_HAND"
    to_area: Area
    face: Face = Face.DOWN
    card: Card = "UNKNOWN"


class StackDelivered(Envelope):
    """A Pai Gow stack (``stack_index``) of ``card_count`` cards was delivered to a position."""

    type: Literal["StackDelivered"] = "StackDelivered"
    stack_index: Annotated[int, Field(ge=1, le=9)]
    card_count: Count
    to_position: Position


class CardExposed(Envelope):
    """A card was exposed; ``seat`` names the player when ``location`` is PLAYER_HAND."""

    type: Literal["CardExposed"] = "CardExposed"
    card: Card = "UNKNOWN"
    location: Literal["PLAYER_HAND", "DEALER_HAND", "BANK_HAND", "STUB", "DECK", "SHOE", "STACK"]
    seat: Position | None = None
    exposed_by: Literal["DEALER", "PLAYER", "DEVICE"] = "DEALER"
    phase: Literal["DEAL", "STACK_DEAL", "PLAY", "SETTLEMENT"] = "DEAL"


class CardFoundFaceUp(Envelope):
    """A card was found face up in the shoe or deck while dealing (§ 645a.14(f)).

    ``disposition`` (schema version 2): where the card went (DISCARD_RACK, USED in the round,
    RETURNED_TO_DECK); None when not recorded.
    """

    type: Literal["CardFoundFaceUp"] = "CardFoundFaceUp"
    location: Literal["SHOE", "DECK"]
    card: Card = "UNKNOWN"
    disposition: Literal["DISCARD_RACK", "USED", "RETURNED_TO_DECK"] | None = None

    @model_serializer(mode="wrap")
    def _without_unrecorded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_none(handler(self), "disposition")


class CardDrawnInError(Envelope):
    """A card was drawn in error (§ 645a.14(g)) and what was done with it."""

    type: Literal["CardDrawnInError"] = "CardDrawnInError"
    face_exposed: bool
    disposition: Literal["USED_AS_NEXT", "DISCARDED"]


class StubCounted(Envelope):
    """The dealer counted the stub: ``count`` cards (§ 679a.9(d))."""

    type: Literal["StubCounted"] = "StubCounted"
    count: Count
    method: Literal["FACE_DOWN_ON_LAYOUT", "OTHER"] = "FACE_DOWN_ON_LAYOUT"
    exposed: bool = False


class MisdealDetermined(Envelope):
    """The dealer's determination after a wrong stub count (§ 679a.9(f))."""

    type: Literal["MisdealDetermined"] = "MisdealDetermined"
    misdealt: bool
    dealer_reconciled_total: Count


class StubDiscarded(Envelope):
    """The stub was placed in the discard rack, exposed or not."""

    type: Literal["StubDiscarded"] = "StubDiscarded"
    exposed: bool = False


class DiceShaken(Envelope):
    """The Pai Gow shaker was shaken ``shake_count`` times."""

    type: Literal["DiceShaken"] = "DiceShaken"
    shaker_id: Identifier
    shake_count: Annotated[int, Field(ge=0, le=100)]
    mode: Literal["MANUAL", "PLAYER_ACTIVATED"] = "MANUAL"


class DiceRevealed(Envelope):
    """The shaker was uncovered: the three dice values, whether all lay flat and whether one fell out."""

    type: Literal["DiceRevealed"] = "DiceRevealed"
    values: tuple[Die, Die, Die]
    all_flat: bool = True
    die_out_of_shaker: bool = False


class NoRollCalled(Envelope):
    """The dealer called "no roll" (§ 645a.14(a)-(b))."""

    type: Literal["NoRollCalled"] = "NoRollCalled"
    reason: Literal["NOT_FLAT", "OUT_OF_SHAKER"]


class DiceValuesAnnounced(Envelope):
    """The dealer announced each die's value (§ 645c.2(g))."""

    type: Literal["DiceValuesAnnounced"] = "DiceValuesAnnounced"
    # three dice, each showing 1 to 6 (§ 645c.2(g)): an announced value can be wrong, never 7
    values: tuple[Die, Die, Die]


class DiceTotalAnnounced(Envelope):
    """The dealer announced the dice total used to find the starting position (§ 645a.14(c))."""

    type: Literal["DiceTotalAnnounced"] = "DiceTotalAnnounced"
    total: Annotated[int, Field(ge=0, le=100)]


class RngNumberDisplayed(Envelope):
    """A random number generator displayed the count for the starting position (provisional)."""

    type: Literal["RngNumberDisplayed"] = "RngNumberDisplayed"
    number: Annotated[int, Field(ge=1, le=100)]


class StartingPositionDetermined(Envelope):
    """The dealer determined the position that gets the first stack."""

    type: Literal["StartingPositionDetermined"] = "StartingPositionDetermined"
    position: Position
    basis: Literal["DICE", "RNG"] = "DICE"


class PlayerViewedCards(Envelope):
    """The player at ``seat`` looked at the cards."""

    type: Literal["PlayerViewedCards"] = "PlayerViewedCards"
    seat: Position


class PlayerVoidDecided(Envelope):
    """A player with an exposed card chose to play out or void the hand (rulebook: ``PlayerVoidDecision``)."""

    type: Literal["PlayerVoidDecided"] = "PlayerVoidDecided"
    seat: Position
    decision: Literal["PLAY_OUT", "VOID"]


class HandSet(Envelope):
    """A Pai Gow hand was set into a five-card and a two-card hand.

    ``matches_house_way`` is the verdict of the table's house-way check (the certificate holder's
    required setting, ``house_way_id``) for the dealer's or bank's hand; None for player hands.
    """

    type: Literal["HandSet"] = "HandSet"
    owner: Position
    # the seven cards of a Pai Gow hand go 5 + 2 (§ 645a.14(i)); empty when not recorded
    five_card: Annotated[tuple[Card, ...], Field(max_length=5)] = ()
    two_card: Annotated[tuple[Card, ...], Field(max_length=2)] = ()
    matches_house_way: bool | None = None

    @model_validator(mode="after")
    def _whole_hands(self) -> HandSet:
        if len(self.five_card) not in (0, 5) or len(self.two_card) not in (0, 2):
            raise ValueError("a set hand is five cards and two cards (or none recorded)")
        return self


class HandReset(Envelope):
    """A hand was reset per the house way (§ 645a.14(i))."""

    type: Literal["HandReset"] = "HandReset"
    owner: Position
    reason: Literal["HOUSE_WAY"] = "HOUSE_WAY"


class PlayerDecided(Envelope):
    """A Three Card Prime player decided to play or fold (rulebook: ``PlayerDecision``)."""

    type: Literal["PlayerDecided"] = "PlayerDecided"
    seat: Position
    decision: Literal["PLAY", "FOLD"]


class RoundVoided(Envelope):
    """Hands were declared void: all hands, or one seat's (``scope`` = ``SEAT_k``)."""

    type: Literal["RoundVoided"] = "RoundVoided"
    scope: Annotated[str, Field(pattern=r"^(?:ALL_HANDS|SEAT_[1-9])$")]
    reason_code: Identifier
    rule_id: Annotated[str, Field(max_length=80)] | None = None


class WagersReturned(Envelope):
    """The listed wagers were returned to the players."""

    type: Literal["WagersReturned"] = "WagersReturned"
    # every wager of one round at most (all positions, all wager types)
    wager_ids: Annotated[tuple[Identifier, ...], Field(max_length=MAX_WAGERS_PER_ROUND)]


class ReshuffleOrdered(Envelope):
    """A reshuffle was ordered after an irregularity."""

    type: Literal["ReshuffleOrdered"] = "ReshuffleOrdered"
    reason_code: Identifier
    rule_id: Annotated[str, Field(max_length=80)] | None = None


class WagerSettled(Envelope):
    """A wager was settled; ``payout`` in cents."""

    type: Literal["WagerSettled"] = "WagerSettled"
    wager_id: Identifier
    outcome: Literal["WIN", "LOSS", "PUSH"]
    payout: Annotated[int, Field(ge=0, le=MAX_PAYOUT_CENTS)] = 0


class DeckCut(Envelope):
    """The deck (``deck_id``) was cut after its shuffle (§ 691.4 shuffle and cut; schema version 2)."""

    type: Literal["DeckCut"] = "DeckCut"
    cut_by: Literal["DEALER", "PLAYER", "DEVICE"] = "DEALER"


class DeckVerified(Envelope):
    """A floorperson verified the deck (``deck_id``): ``count`` cards, composition checked.

    ``result`` OK ends a DT-deck-composition suspicion (rulebook 10.1.5); SHORT, LONG or
    WRONG_CARDS raises DT-deck-composition. Schema version 2.
    """

    type: Literal["DeckVerified"] = "DeckVerified"
    count: Count
    composition_ok: bool
    result: Literal["OK", "SHORT", "LONG", "WRONG_CARDS"]
    verified_by: PersonId


class CardAddedToDeck(Envelope):
    """A card was put into the deck (``deck_id``) outside a deal (schema version 2).

    The deck's composition follows it; with no ``authorised_by`` the change is unauthorised
    (DT-deck-composition).
    """

    type: Literal["CardAddedToDeck"] = "CardAddedToDeck"
    card: Card
    reason: Literal["REPLACEMENT", "DAMAGED", "FOUND", "OTHER"]
    authorised_by: PersonId | None = None


class CardRemovedFromDeck(Envelope):
    """A card was taken out of the deck (``deck_id``) outside a deal (schema version 2).

    The deck's composition follows it; with no ``authorised_by`` the change is unauthorised
    (DT-deck-composition).
    """

    type: Literal["CardRemovedFromDeck"] = "CardRemovedFromDeck"
    card: Card
    reason: Literal["REPLACEMENT", "DAMAGED", "FOUND", "OTHER"]
    authorised_by: PersonId | None = None


HandOwner = Annotated[str, Field(pattern=r"^(?:SEAT_[1-9]|DEALER|BANK|COMMUNITY)$")]
"""Whose cards were revealed: ``SEAT_k``, ``DEALER``, ``BANK`` or ``COMMUNITY`` (the board)."""


class RevealedHand(Frozen):
    """One owner's cards turned face up at settlement (at most 7: a Pai Gow hand; 3 or 4 in
    Three Card Prime, 5 community cards in the Chapter 691 game)."""

    owner: HandOwner
    cards: Annotated[tuple[Card, ...], Field(max_length=MAX_REVEALED_CARDS)] = ()


class HandsRevealed(Envelope):
    """Hands were turned face up for settlement (rulebook 10.1.4: a showdown, not an exposure).

    ``hands``: one entry per owner (at most 12: nine seats, dealer, bank, community). Schema version 2.
    """

    type: Literal["HandsRevealed"] = "HandsRevealed"
    hands: Annotated[tuple[RevealedHand, ...], Field(min_length=1, max_length=12)]


class RoundCompleted(Envelope):
    """The round of play was completed."""

    type: Literal["RoundCompleted"] = "RoundCompleted"


EVENT_TYPES: tuple[type[Envelope], ...] = (
    TableConfigured,
    DeviceRegistered,
    DeckIntroduced,
    DeckRemoved,
    ShuffleStarted,
    ShuffleCompleted,
    ShufflerFaulted,
    AutoShoeFaulted,
    CardsRemovedFromDevice,
    DeviceTakenOutOfService,
    DeviceReturnedToService,
    RoundStarted,
    WagerPlaced,
    WagerChanged,
    WagerWithdrawn,
    NoMoreBetsAnnounced,
    DeckHeld,
    CardDealt,
    StackDelivered,
    CardExposed,
    CardFoundFaceUp,
    CardDrawnInError,
    StubCounted,
    MisdealDetermined,
    StubDiscarded,
    DiceShaken,
    DiceRevealed,
    NoRollCalled,
    DiceValuesAnnounced,
    DiceTotalAnnounced,
    RngNumberDisplayed,
    StartingPositionDetermined,
    PlayerViewedCards,
    PlayerVoidDecided,
    HandSet,
    HandReset,
    PlayerDecided,
    RoundVoided,
    WagersReturned,
    ReshuffleOrdered,
    WagerSettled,
    RoundCompleted,
    DeckCut,
    DeckVerified,
    CardAddedToDeck,
    CardRemovedFromDeck,
    HandsRevealed,
)
"""Every event class, in vocabulary order."""

DealingEvent = Annotated[
    TableConfigured
    | DeviceRegistered
    | DeckIntroduced
    | DeckRemoved
    | ShuffleStarted
    | ShuffleCompleted
    | ShufflerFaulted
    | AutoShoeFaulted
    | CardsRemovedFromDevice
    | DeviceTakenOutOfService
    | DeviceReturnedToService
    | RoundStarted
    | WagerPlaced
    | WagerChanged
    | WagerWithdrawn
    | NoMoreBetsAnnounced
    | DeckHeld
    | CardDealt
    | StackDelivered
    | CardExposed
    | CardFoundFaceUp
    | CardDrawnInError
    | StubCounted
    | MisdealDetermined
    | StubDiscarded
    | DiceShaken
    | DiceRevealed
    | NoRollCalled
    | DiceValuesAnnounced
    | DiceTotalAnnounced
    | RngNumberDisplayed
    | StartingPositionDetermined
    | PlayerViewedCards
    | PlayerVoidDecided
    | HandSet
    | HandReset
    | PlayerDecided
    | RoundVoided
    | WagersReturned
    | ReshuffleOrdered
    | WagerSettled
    | RoundCompleted
    | DeckCut
    | DeckVerified
    | CardAddedToDeck
    | CardRemovedFromDeck
    | HandsRevealed,
    Field(discriminator="type"),
]
"""The discriminated union of all dealing events, tagged by ``type``."""

EVENT_TYPE_NAMES: frozenset[str] = frozenset(cls.__name__ for cls in EVENT_TYPES)
