"""The plausibility bounds of rulebook 10.3.4 and 10.5.5, each defined once.

A value beyond one of these is refused, never judged: the schema's bounds at decoding
(``out_of_bounds``, ``invalid_event``), the engine's two at judging (``implausible_seq_jump``,
``implausible_clock_skew``, and every intake's ``recorded_in_future``). The event schemas
(:mod:`schemas.events`, :mod:`schemas.base`, :mod:`schemas.config`) and so their JSON Schema
(``schemas/json/``), the settings' defaults (``dealtrail/settings.py``) and the events reference
(``docs/events.md``, generated from :data:`BOUNDS`) all read them from here; a test holds the
four together (``tests/unit/test_bounds_revision5.py``).

Where rulebook 10.5.5 allows it, dealtrail refuses at tighter bounds than the rulebook's defaults,
and says so here: a wager amount above 10^10 cents (the rulebook's floor for a tighter bound), a
declared deck above 520 cards (ten decks). The bounds the schema applies are fixed, not settings:
whether a record is an event must not depend on the reader's configuration, so that the worker,
the projector, a replay and a vendor validating against the published JSON Schema refuse the same
records. The two that depend on a table's state or on a clock, the seq jump and the clock skew,
are settings, with these defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

EARLIEST_INSTANT = datetime(2000, 1, 1, tzinfo=UTC)
"""The earliest ``occurred_at`` / ``recorded_at`` a trail can mean (rulebook 10.3.4: the years
2000 to 2100)."""
LATEST_INSTANT = datetime(2101, 1, 1, tzinfo=UTC)
"""The first instant after the years 2000 to 2100 (excluded)."""
MAX_INT32 = 2**31 - 1
"""The largest number an INTEGER column of the store holds: a round number at most (rulebook
10.3.4), and a ``schema_version``."""
MAX_SEQ = 2**62
"""The largest per-table ``seq`` (the store's BIGINT, with room to add to it)."""
MAX_CARDS = 1000
"""The most cards any count of cards or deal index may say (cards; rulebook 10.3.4)."""
MAX_DECLARED_DECK = 520
"""The most cards a deck (``DeckIntroduced.declared_count``, ``TableConfig.deck_size``) may
declare: ten decks (cards; rulebook 10.5.5, tighter than 10.3.4's 1,000)."""
MAX_WAGER_CENTS = 10**10
"""The largest wager amount (cents: a hundred million dollars, far above any published table
limit; rulebook 10.5.5, tighter than 10.3.4's 10^12)."""
MAX_PAYOUT_CENTS = 10**12
"""The largest payout (cents; rulebook 10.3.4: a payout may be many times its wager)."""
DEFAULT_MAX_SEQ_JUMP = 100_000
"""The default of the setting ``max_seq_jump`` (seqs; rulebook 10.3.4)."""
DEFAULT_MAX_CLOCK_SKEW = timedelta(hours=1)
"""The default of the setting ``max_clock_skew`` (rulebook 10.3.4)."""


@dataclass(frozen=True)
class Bound:
    """One bound as the events reference lists it.

    Attributes:
        name: the constant above that defines it.
        limit: what is refused, in words, with its number.
        fields: the fields it bounds (``Event.field``; ``*`` for every event's envelope).
        setting: the ``DEALTRAIL_`` variable that sets it, or None for a fixed bound.
        rulebook: what rulebook 10.3.4 / 10.5.5 says of it.
        refused_as: the dead-letter reason a record beyond it gets.
    """

    name: str
    limit: str
    fields: tuple[str, ...]
    setting: str | None
    rulebook: str
    refused_as: str


BOUNDS: tuple[Bound, ...] = (
    Bound(
        "EARLIEST_INSTANT, LATEST_INSTANT",
        f"a UTC instant before {EARLIEST_INSTANT:%Y} or from {LATEST_INSTANT:%Y} on",
        ("*.occurred_at", "*.recorded_at"),
        None,
        "10.3.4: outside the years 2000 to 2100",
        "out_of_bounds",
    ),
    Bound(
        "DEFAULT_MAX_CLOCK_SKEW",
        f"an `occurred_at` more than {DEFAULT_MAX_CLOCK_SKEW.total_seconds() / 60:g} minutes after its own "
        "`recorded_at`, or a "
        "`recorded_at` that far after the intake's clock",
        ("*.occurred_at", "*.recorded_at"),
        "DEALTRAIL_MAX_CLOCK_SKEW",
        "10.3.4: default 1 hour",
        "implausible_clock_skew, recorded_in_future",
    ),
    Bound(
        "DEFAULT_MAX_SEQ_JUMP",
        f"a `seq` more than {DEFAULT_MAX_SEQ_JUMP:,} ahead of its table's last",
        ("*.seq",),
        "DEALTRAIL_MAX_SEQ_JUMP",
        "10.3.4: default 100,000",
        "implausible_seq_jump",
    ),
    Bound("MAX_SEQ", f"a `seq` above 2^62 ({MAX_SEQ:,})", ("*.seq",), None, "the store's BIGINT", "out_of_bounds"),
    Bound(
        "MAX_INT32",
        f"a round number above 2^31 - 1 ({MAX_INT32:,})",
        ("RoundStarted.round_no",),
        None,
        "10.3.4: 2^31 - 1",
        "out_of_bounds",
    ),
    Bound(
        "MAX_CARDS",
        f"any count of cards or deal index above {MAX_CARDS:,}",
        (
            "CardDealt.deal_index",
            "StubCounted.count",
            "ShuffleCompleted.device_card_count",
            "DeckVerified.count",
            "CardsRemovedFromDevice.count",
            "StackDelivered.card_count",
            "AutoShoeFaulted.cards_dealt_so_far",
            "MisdealDetermined.dealer_reconciled_total",
        ),
        None,
        "10.3.4: 1,000",
        "out_of_bounds",
    ),
    Bound(
        "MAX_DECLARED_DECK",
        f"a deck declared above {MAX_DECLARED_DECK} cards (ten decks)",
        ("DeckIntroduced.declared_count", "TableConfigured.config.deck_size"),
        None,
        "10.5.5: no tighter than 520",
        "out_of_bounds",
    ),
    Bound(
        "MAX_WAGER_CENTS",
        f"a wager amount above 10^10 cents ({MAX_WAGER_CENTS:,})",
        ("WagerPlaced.amount", "WagerChanged.amount"),
        None,
        "10.5.5: no tighter than 10^10 cents (10.3.4's default 10^12)",
        "out_of_bounds",
    ),
    Bound(
        "MAX_PAYOUT_CENTS",
        f"a payout above 10^12 cents ({MAX_PAYOUT_CENTS:,})",
        ("WagerSettled.payout",),
        None,
        "10.3.4: 10^12 cents",
        "out_of_bounds",
    ),
)
"""Every bound, in the order the events reference lists them."""
