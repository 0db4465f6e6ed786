"""A Three Card Prime trail on which rulebook revision 3 (section 10.3.1) changes the verdicts: two
decks rotating through one counting shuffler, the deck in the shuffler jamming while the other is
dealt, then dealt itself without a clearing shuffle, twice.

Revision 2 charged DT-deal-after-device-fault to R2 (dealt from DK-2, shuffled fully before the
jam) and to nothing after; revision 3 charges R3 and R4, the rounds dealt from the jammed DK-1.
``tests/fixtures/revision2-findings.jsonl`` holds the findings the revision-2 engine (commit
0c571a4) gave this trail: the store "judged under revision 2" of the re-audit test.
"""

from __future__ import annotations

from datetime import UTC, datetime

from dealtrail.simulator.builder import TableWriter
from schemas import events as ev
from schemas.base import ActorRole, Envelope, Game
from schemas.config import TableConfig

TABLE_ID = "TCP-R3"
SHUFFLER = "TCP-R3-SHF"
START = datetime(2026, 12, 1, 18, 0, tzinfo=UTC)
FACES = tuple(r + s for s in "CDHS" for r in "23456789TJQKA")


def trail(*, returned: bool = False) -> list[Envelope]:
    """The events of the trail, in seq order (chained); with ``returned``, the shuffler is then
    returned to service and DK-1 given a clearing shuffle (the table is back in order)."""
    w = TableWriter(TABLE_ID, Game.TCP, START, chained=True)
    out: list[Envelope] = []

    def emit(cls: type[Envelope], **fields: object) -> Envelope:
        event = w.emit(cls, **fields)  # type: ignore[arg-type]
        out.append(event)
        return event

    config = TableConfig(
        game=Game.TCP,
        rules_submission_id="RS-TCP-2026-01",
        seats=("SEAT_1", "SEAT_2"),
        dealing_methods_allowed=frozenset({"HAND"}),
        wagers_enabled=frozenset({"ANTE", "PLAY"}),
        pair_bonus_mode="OFF",
    )
    emit(ev.TableConfigured, config=config, role=ActorRole.FLOOR, actor_id="F-01")
    emit(
        ev.DeviceRegistered,
        device_id=SHUFFLER,
        device_type="SHUFFLER",
        counts_each_shuffle=True,
        indicates_full_deck=True,
        role=ActorRole.FLOOR,
        actor_id="F-01",
    )
    for deck in ("DK-1", "DK-2"):
        w.deck_id = deck
        emit(ev.DeckIntroduced, declared_count=52, jokers=0, role=ActorRole.FLOOR, actor_id="F-01")

    def shuffle(deck: str, **report: object) -> None:
        keep, w.deck_id = w.deck_id, deck
        emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED", device_id=SHUFFLER)
        fields = {"device_card_count": 52, "device_full_deck_ok": True, **report}
        emit(ev.ShuffleCompleted, round_id=None, method="AUTOMATED", device_id=SHUFFLER, **fields)
        w.deck_id = keep

    def round_(no: int, deck: str, during: object = None) -> None:
        w.deck_id, w.round_id = deck, f"R{no}"
        emit(ev.RoundStarted, round_no=no, dealing_method="HAND", dealer_id="D-0001")
        emit(ev.WagerPlaced, wager_id=f"R{no}-A1", seat="SEAT_1", wager_type="ANTE", amount=500, role=ActorRole.PLAYER)
        emit(ev.NoMoreBetsAnnounced)
        emit(ev.DeckHeld, hand="RIGHT")
        if callable(during):
            during()
        for i, area in enumerate(("SEAT_1", "DEALER") * 3, start=1):
            emit(ev.CardDealt, deal_index=i, dealt_from="DECK_IN_HAND", to_area=area, card=FACES[i - 1])
        emit(ev.StubCounted, count=46)
        emit(ev.StubDiscarded)
        emit(ev.PlayerDecided, seat="SEAT_1", decision="FOLD", role=ActorRole.PLAYER)
        emit(ev.WagerSettled, wager_id=f"R{no}-A1", outcome="LOSS")
        emit(ev.RoundCompleted)
        w.round_id = None

    def jam_dk1() -> None:
        w.deck_id = "DK-1"
        emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED", device_id=SHUFFLER)
        emit(
            ev.ShufflerFaulted, round_id=None, device_id=SHUFFLER, fault="JAM", during="SHUFFLE", role=ActorRole.DEVICE
        )
        w.deck_id = "DK-2"

    shuffle("DK-1")
    shuffle("DK-2")
    round_(1, "DK-1")
    round_(2, "DK-2", during=jam_dk1)  # DK-1 jams in the shuffler while DK-2 is in play
    round_(3, "DK-1")  # the jammed deck dealt unshuffled
    shuffle("DK-1", device_card_count=None, device_full_deck_ok=None)  # no count: clears nothing
    round_(4, "DK-1")
    if returned:
        emit(ev.DeviceReturnedToService, round_id=None, device_id=SHUFFLER, role=ActorRole.FLOOR, actor_id="F-01")
        shuffle("DK-1")
    return out


LATE_TABLE = "TCP-R3L"


def late_remedy_trail(*, after_hours: float = 25.0) -> list[Envelope]:
    """A round dealt from a short deck (the stub count finds 45 of 46: TCP-679a.9-f-wrong-deck,
    remedies owed), the next round played without them, and the remedies (void, wagers returned,
    deck removed, stamped with the first round) recorded ``after_hours`` after it ended."""
    w = TableWriter(LATE_TABLE, Game.TCP, START, chained=True)
    out: list[Envelope] = []

    def emit(cls: type[Envelope], **fields: object) -> Envelope:
        event = w.emit(cls, **fields)  # type: ignore[arg-type]
        out.append(event)
        return event

    config = TableConfig(
        game=Game.TCP,
        rules_submission_id="RS-TCP-2026-01",
        seats=("SEAT_1", "SEAT_2"),
        dealing_methods_allowed=frozenset({"HAND"}),
        wagers_enabled=frozenset({"ANTE", "PLAY"}),
        pair_bonus_mode="OFF",
    )
    emit(ev.TableConfigured, config=config, role=ActorRole.FLOOR, actor_id="F-01")
    emit(ev.DeviceRegistered, device_id="SHF", device_type="SHUFFLER", role=ActorRole.FLOOR, actor_id="F-01")
    w.deck_id = "DK-1"
    emit(ev.DeckIntroduced, declared_count=52, jokers=0, role=ActorRole.FLOOR, actor_id="F-01")
    for no, stub in ((1, 45), (2, 46)):
        emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED", device_id="SHF")
        emit(ev.ShuffleCompleted, round_id=None, method="AUTOMATED", device_id="SHF")
        w.round_id = f"R{no}"
        emit(ev.RoundStarted, round_no=no, dealing_method="HAND", dealer_id="D-0001")
        emit(ev.WagerPlaced, wager_id=f"R{no}-A1", seat="SEAT_1", wager_type="ANTE", amount=500, role=ActorRole.PLAYER)
        emit(ev.NoMoreBetsAnnounced)
        emit(ev.DeckHeld, hand="RIGHT")
        for i, area in enumerate(("SEAT_1", "DEALER") * 3, start=1):
            emit(ev.CardDealt, deal_index=i, dealt_from="DECK_IN_HAND", to_area=area, card=FACES[i - 1 + 6 * no])
        emit(ev.StubCounted, count=stub)
        emit(ev.StubDiscarded)
        if no == 2:  # R1's wager is left for the remedy: returned, not settled
            emit(ev.PlayerDecided, seat="SEAT_1", decision="FOLD", role=ActorRole.PLAYER)
            emit(ev.WagerSettled, wager_id=f"R{no}-A1", outcome="LOSS")
        emit(ev.RoundCompleted)
        w.round_id = None
    w.round_id = "R1"
    emit(
        ev.RoundVoided,
        scope="ALL_HANDS",
        reason_code="IRREGULARITY",
        role=ActorRole.FLOOR,
        actor_id="F-01",
        after=after_hours * 3600,
    )
    emit(ev.WagersReturned, wager_ids=("R1-A1",))
    emit(ev.DeckRemoved, reason_code="WRONG_COUNT", role=ActorRole.FLOOR, actor_id="F-01")
    w.round_id = None
    return out
