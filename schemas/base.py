"""Shared building blocks of every dealtrail event: enums, value types and the envelope.

Only the standard library and pydantic are imported here (checked by a test). Nothing in this
package reads the clock or makes IDs: the producer stamps ``event_id``, ``occurred_at`` and
``recorded_at``, so a replay of stored events is byte-for-byte the same.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

from schemas.bounds import EARLIEST_INSTANT, LATEST_INSTANT, MAX_INT32, MAX_SEQ

__all__ = ["EARLIEST_INSTANT", "LATEST_INSTANT", "MAX_INT32"]  # defined in schemas.bounds, read here too


class Game(StrEnum):
    """The three seed games (rulebook section 1).

    ``TCP`` is Three Card Prime (58 Pa. Code Chapter 679a), ``C691`` the 54-card community-card
    game of Chapter 691, ``PGP`` Pai Gow Poker (Chapter 645a).
    """

    TCP = "TCP"
    C691 = "C691"
    PGP = "PGP"


class Source(StrEnum):
    """Where an event was captured."""

    MANUAL = "MANUAL"
    SHUFFLER = "SHUFFLER"
    SHOE = "SHOE"
    RFID = "RFID"
    VIDEO = "VIDEO"
    SYSTEM = "SYSTEM"


class ActorRole(StrEnum):
    """Who performed the action an event records."""

    DEALER = "DEALER"
    FLOOR = "FLOOR"
    PLAYER = "PLAYER"
    DEVICE = "DEVICE"
    SURVEILLANCE = "SURVEILLANCE"


class DealingMethod(StrEnum):
    """How the cards of a round leave the deck: from the dealer's hand or from a dealing shoe."""

    HAND = "HAND"
    MANUAL_SHOE = "MANUAL_SHOE"
    AUTO_SHOE = "AUTO_SHOE"


class WagerType(StrEnum):
    """Wager types of the three games (TCP: Ante, Play, Prime, Pair Bonus, All-Six; PGP dice wagers)."""

    ANTE = "ANTE"
    PLAY = "PLAY"
    PRIME = "PRIME"
    PAIR_BONUS = "PAIR_BONUS"
    ALL_SIX = "ALL_SIX"
    MAIN = "MAIN"
    SUM = "SUM"
    MATCH = "MATCH"
    BEAT_IT = "BEAT_IT"


DICE_WAGERS = frozenset({WagerType.SUM, WagerType.MATCH, WagerType.BEAT_IT})
"""Wagers resolved on the dice outcome (58 Pa. Code § 645c.2)."""

Identifier = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:\-]+$")]
"""An opaque identifier: event, table, round, deck, device or wager ID."""

PersonId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]
"""A person's or device's ID as the casino's systems write it (any printable text; reports escape it)."""

Card = Annotated[str, StringConstraints(pattern=r"^(?:[2-9TJQKA][CDHS]|JK|UNKNOWN)$")]
"""A card as rank+suit (``"AS"``, ``"TD"``), ``"JK"`` for a joker, or ``"UNKNOWN"`` when the face
was not recorded."""

Area = Annotated[
    str,
    StringConstraints(
        pattern=r"^(?:SEAT_[1-9]|DEALER|BANK|BURN|COMMUNITY_[1-9]|PAIR_BONUS_COMMUNITY|PAIR_BONUS_4TH_[1-9]|STACK_[1-9])$"
    ),
]
"""A layout area a card is dealt to: ``SEAT_k`` (a player's hand), ``DEALER``, ``BANK``, ``BURN``,
``COMMUNITY_j``, ``PAIR_BONUS_COMMUNITY``, ``PAIR_BONUS_4TH_k`` (the fourth-card area of seat k)
or ``STACK_s`` (Pai Gow stack s)."""


def _plausible_instant(value: datetime) -> datetime:
    """Refuse an instant whose UTC time falls outside the years 2000 to 2100 (rulebook 10.3.4):
    no real trail holds one, and a year such as 0001 breaks every period computed from it
    (``9999-12-31T23:59:59-05:00`` is not even a UTC instant: 10000-01-01)."""
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST_INSTANT <= utc < LATEST_INSTANT:
        raise ValueError("the instant in UTC falls outside the years 2000 to 2100")
    return value


Instant = Annotated[
    AwareDatetime,
    AfterValidator(_plausible_instant),
    # JSON Schema has no keyword for a time range; these are the ajv-formats keywords validators know
    Field(
        json_schema_extra={
            "formatMinimum": EARLIEST_INSTANT.isoformat().replace("+00:00", "Z"),
            "formatExclusiveMaximum": LATEST_INSTANT.isoformat().replace("+00:00", "Z"),
        }
    ),
]
"""A timezone-aware time whose UTC instant lies within the years 2000 to 2100 (rulebook 10.3.4)."""

Position = Annotated[str, StringConstraints(pattern=r"^(?:SEAT_[1-9]|DEALER|BANK)$")]
"""A betting position or the dealer/bank: ``SEAT_k``, ``DEALER`` or ``BANK``."""


SCHEMA_VERSION = 2
"""The ``schema_version`` events are written with now (2: rulebook revision 2's vocabulary).
Version 1 events are still read (:mod:`schemas.codec`); an omitted ``schema_version`` is 1."""


def _absent(value: Any) -> bool:
    """True for a field value left out of the JSON (an optional field added later: events
    written before it serialise, and so hash, as they did)."""
    return value is None


class Frozen(BaseModel):
    """Base of every schema model: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Actor(Frozen):
    """The person or device behind an event (``role`` and an opaque ``id``)."""

    role: ActorRole
    id: PersonId


class Envelope(Frozen):
    """The common envelope of every dealing event (rulebook section 4).

    Fields:
        event_id: unique ID (a ULID from the producer); the idempotency key everywhere.
        table_id: the gaming table; the Kafka key, so one partition holds a table's events in order.
        game: the game the table deals.
        round_id: the round the event belongs to, or None for table-level events.
        deck_id: the deck the event concerns, or None.
        seq: per-table sequence number, 1, 2, 3, ... without gaps (DT-sequence-gap otherwise);
            at most 2^62 (the store's BIGINT); the engine refuses a seq more than
            ``max_seq_jump`` ahead of its table's last one.
        occurred_at: when it happened at the table (timezone-aware; its UTC instant within the
            years 2000 to 2100, else a schema error: rulebook 10.3.4).
        recorded_at: when the capture system recorded it (timezone-aware, same range); the
            engine refuses an ``occurred_at`` more than ``max_clock_skew`` after it, and every
            intake refuses a ``recorded_at`` more than ``max_clock_skew`` after its own clock.
        source: capture channel; actor: who did it.
        schema_version: version of this event type's schema: :data:`SCHEMA_VERSION` for events
            made now; a decoded event keeps the version it was written with (1 if omitted).
        corrects: event_id of an earlier event this one amends (history is never edited).
        prev_hash: the ``hash`` of the previous event of the table (None for the first, or when
            the source does not chain its events).
        hash: SHA-256 of this event's canonical JSON without ``hash`` (see :mod:`schemas.chain`).
        hash_version: which canonical JSON ``hash`` is computed over: 2 for RFC 8785
            (:mod:`schemas.canonical`, every event chained now); absent (None, and then left out
            of the JSON) for the encoding of dealtrail 0.2.0 (pydantic's compact JSON in schema
            order), which stored events keep and ``verify`` still reads.
    """

    event_id: Identifier
    table_id: Identifier
    game: Game
    round_id: Identifier | None = None
    deck_id: Identifier | None = None
    seq: Annotated[int, Field(ge=1, le=MAX_SEQ)]
    occurred_at: Instant
    recorded_at: Instant
    source: Source
    actor: Actor
    schema_version: Annotated[int, Field(ge=1, le=MAX_INT32)] = SCHEMA_VERSION
    corrects: Identifier | None = None
    prev_hash: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] | None = None
    hash: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] | None = None
    hash_version: Literal[2] | None = Field(default=None, exclude_if=_absent)
