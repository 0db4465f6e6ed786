"""Per-table configuration: the Rules Submission options and policy knobs the rules read.

A table is configured by a ``TableConfigured`` event carrying a :class:`TableConfig`; devices
arrive as ``DeviceRegistered`` events. Values the regulation text does not give (Pai Gow stack
size, deck of 53) are configuration with the rulebook's defaults (rulebook section 2).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, PlainSerializer, model_validator

from schemas.base import DealingMethod, Frozen, Game, Identifier, Position, WagerType
from schemas.bounds import MAX_DECLARED_DECK


class PairBonusMode(StrEnum):
    """How a Three Card Prime table deals for the Pair Bonus Wager (§ 679a.9(b),(g)).

    ``PER_PLAYER``: a fourth card to each Pair Bonus seat; ``COMMUNITY``: one Pair Bonus community
    card, if elected in the Rules Submission; ``OFF``: no Pair Bonus Wager offered.
    """

    PER_PLAYER = "PER_PLAYER"
    COMMUNITY = "COMMUNITY"
    OFF = "OFF"


class ShakerMode(StrEnum):
    """How Pai Gow Poker starting positions are drawn (§ 645a.9, § 645c.2(a), § 621a.6(a))."""

    MANUAL = "MANUAL"
    PLAYER_ACTIVATED = "PLAYER_ACTIVATED"
    RNG = "RNG"


def _sorted(values: frozenset[str]) -> list[str]:
    return sorted(values)


SortedSet = PlainSerializer(_sorted, return_type=list[str], when_used="always")
"""Sets serialise sorted, so an event's JSON (and its chain hash) is the same in every process."""

DEFAULT_DECK_SIZE = {Game.TCP: 52, Game.C691: 54, Game.PGP: 53}
"""Cards in one deck per game (rulebook section 2): 52, 54 (52 + 2 jokers), 53 (52 + 1 joker)."""


class TableConfig(Frozen):
    """Configuration of one table, as filed in the certificate holder's Rules Submission.

    Fields:
        game: the game dealt at the table.
        rules_submission_id: the Rules Submission (§ 601a.2) the options come from.
        seats: betting positions in dealing order, i.e. from the player farthest to the
            dealer's left, clockwise (``["SEAT_1", ..., "SEAT_6"]``).
        dealing_methods_allowed: HAND / MANUAL_SHOE / AUTO_SHOE.
        wagers_enabled: the wagers the Rules Submission offers (§ 679a.7(d)(2)-(3)).
        pair_bonus_mode: TCP only, see :class:`PairBonusMode`.
        house_way_id: PGP only, the house way the dealer's/bank's hand must be set by.
        shaker_mode: PGP only, see :class:`ShakerMode`.
        deck_size: cards in one deck (cards); default by game (52, 54, 53).
        pgp_stacks: PGP stacks per round (7, § 645a.14(j)); pgp_stack_size: cards per stack
            (7, provisional constant).
        stub_count_window: rounds (5) within which the stub must be counted (§ 679a.9(d)).
        stub_window_resets_on_new_deck / stub_window_resets_on_dealer_change: policy knobs of
            rulebook decision 1, both off by default.
        provisional_rules: run the ``-PROV`` rules of rulebook section 7 (on by default; reports
            mark their findings as provisional).
    """

    game: Game
    rules_submission_id: Identifier
    # a table has betting positions SEAT_1 to SEAT_9 at most (Position)
    seats: Annotated[tuple[Position, ...], Field(min_length=1, max_length=9)]
    # each of the 3 dealing methods at most once; each of the 9 wager types at most once
    dealing_methods_allowed: Annotated[
        frozenset[DealingMethod], Field(min_length=1, max_length=len(DealingMethod)), SortedSet
    ] = frozenset({DealingMethod.HAND})
    wagers_enabled: Annotated[frozenset[WagerType], Field(max_length=len(WagerType)), SortedSet] = frozenset(
        {WagerType.ANTE, WagerType.PLAY}
    )
    pair_bonus_mode: PairBonusMode = PairBonusMode.OFF
    house_way_id: Identifier | None = None
    shaker_mode: ShakerMode = ShakerMode.MANUAL
    deck_size: Annotated[int, Field(ge=1, le=MAX_DECLARED_DECK)] | None = None
    pgp_stacks: Annotated[int, Field(ge=1, le=9)] = 7
    pgp_stack_size: Annotated[int, Field(ge=1, le=13)] = 7
    stub_count_window: Annotated[int, Field(ge=1, le=100)] = 5
    stub_window_resets_on_new_deck: bool = False
    stub_window_resets_on_dealer_change: bool = False
    provisional_rules: bool = True

    @model_validator(mode="after")
    def _seats_are_seats(self) -> TableConfig:
        if len(set(self.seats)) != len(self.seats):
            raise ValueError("seats must not repeat")
        if any(not s.startswith("SEAT_") for s in self.seats):
            raise ValueError("seats lists betting positions SEAT_k only; the dealer is implied")
        return self

    @property
    def cards_per_deck(self) -> int:
        """Cards in one deck (cards): ``deck_size`` or the game's default."""
        return self.deck_size if self.deck_size is not None else DEFAULT_DECK_SIZE[self.game]

    @property
    def pgp_count_order(self) -> tuple[str, ...]:
        """Pai Gow positions in counting order for the starting position (§ 621a.6(c), provisional).

        The dealer is position 1 and the count goes counter-clockwise, so after the dealer come
        the seats in reverse dealing order: ``("DEALER", "SEAT_6", ..., "SEAT_1")``.
        """
        return ("DEALER", *reversed(self.seats))
