"""Two tables on which rulebook revision 4 (section 10.4.1) changes the verdicts: a shuffler jams
and the dealer clears it and reshuffles the cards in the same shuffler, then deals on, as floors
do every day; nobody returns the shuffler to service.

Revision 3 read every stopping fault as making the device unusable until a
``DeviceReturnedToService``: DT-deal-after-device-fault on every later round at both tables and, at
the Pai Gow table, PGP-645a.14-n-out-of-order on every round too. Revision 4 clears a jam by its own
remedy: the Pai Gow table keeps its PGP-645a.14-l-shuffler-fault (remedied by the reshuffle) and
nothing else is raised. ``tests/fixtures/revision3-findings.jsonl`` holds the findings the
revision-3 engine (commit 6326922) gave this trail: the store "judged under revision 3" of the
re-audit test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dealtrail.simulator.builder import TableWriter
from schemas import events as ev
from schemas.base import ActorRole, Envelope, Game
from schemas.config import TableConfig

START = datetime(2026, 12, 2, 18, 0, tzinfo=UTC)
FACES = tuple(r + s for s in "CDHS" for r in "23456789TJQKA")
TCP_TABLE = "TCP-R4"
PGP_TABLE = "PGP-R4"
HAND_TABLE = "PGP-R4H"
IDLE_TABLE = "TCP-R4I"
ROUNDS = 5


def _table(table_id: str, game: Game, start: datetime = START) -> tuple[TableWriter, list[Envelope], str]:
    """A configured table of two seats dealt by hand, its counting shuffler, and deck DK-1 (also
    the revision-5 trails' start): the writer, the events so far, the shuffler's ID."""
    w = TableWriter(table_id, game, start, chained=True)
    out: list[Envelope] = []
    shuffler = f"{table_id}-SHF"
    config = TableConfig(
        game=game,
        rules_submission_id=f"RS-{game.value}-2026-01",
        seats=("SEAT_1", "SEAT_2"),
        dealing_methods_allowed=frozenset({"HAND"}),
        wagers_enabled=frozenset({"ANTE", "PLAY"} if game is Game.TCP else {"MAIN"}),
        **({"pair_bonus_mode": "OFF"} if game is Game.TCP else {"house_way_id": "HW-1"}),
    )
    out.append(w.emit(ev.TableConfigured, config=config, role=ActorRole.FLOOR, actor_id="F-01"))
    out.append(
        w.emit(
            ev.DeviceRegistered,
            device_id=shuffler,
            device_type="SHUFFLER",
            counts_each_shuffle=True,
            indicates_full_deck=True,
            role=ActorRole.FLOOR,
            actor_id="F-01",
        )
    )
    w.deck_id = "DK-1"
    size = 52 if game is Game.TCP else 53
    out.append(w.emit(ev.DeckIntroduced, declared_count=size, jokers=size - 52, role=ActorRole.FLOOR, actor_id="F-01"))
    return w, out, shuffler


def _shuffle(
    w: TableWriter, out: list[Envelope], shuffler: str, size: int, jam: bool = False, by_hand: bool = False
) -> None:
    if by_hand:
        out.append(w.emit(ev.ShuffleStarted, round_id=None, method="MANUAL"))
        out.append(w.emit(ev.ShuffleCompleted, round_id=None, method="MANUAL"))
        return
    out.append(w.emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED", device_id=shuffler))
    if jam:  # the dealer clears the jam and runs the same cards through the same shuffler again
        out.append(
            w.emit(
                ev.ShufflerFaulted,
                round_id=None,
                device_id=shuffler,
                fault="JAM",
                during="SHUFFLE",
                role=ActorRole.DEVICE,
                actor_id=shuffler,
            )
        )
        out.append(w.emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED", device_id=shuffler))
    report = {"device_card_count": size, "device_full_deck_ok": True}
    out.append(w.emit(ev.ShuffleCompleted, round_id=None, method="AUTOMATED", device_id=shuffler, **report))


def tcp_trail(table_id: str = TCP_TABLE, short_stub_in: int = 0, idle_hours: float = 0) -> list[Envelope]:
    """Three Card Prime: five hand-dealt rounds, the shuffle before the second jammed and redone.

    ``short_stub_in``: the round whose stub count finds 45 of 46 cards (TCP-679a.9-f-wrong-deck:
    void, wagers returned and the deck removed owed, none done); ``idle_hours``: the table stands
    idle that long before its next round (closed overnight).
    """
    w, out, shuffler = _table(table_id, Game.TCP)
    for no in range(1, ROUNDS + 1):
        if no == short_stub_in + 1 and idle_hours:
            w.clock += timedelta(hours=idle_hours)
        _shuffle(w, out, shuffler, 52, jam=no == 2)
        w.round_id = f"R{no}"
        out.append(w.emit(ev.RoundStarted, round_no=no, dealing_method="HAND", dealer_id="D-0001"))
        wager = {"wager_id": f"R{no}-A1", "seat": "SEAT_1", "wager_type": "ANTE", "amount": 500}
        out.append(w.emit(ev.WagerPlaced, **wager, role=ActorRole.PLAYER))
        out.append(w.emit(ev.NoMoreBetsAnnounced))
        out.append(w.emit(ev.DeckHeld, hand="RIGHT"))
        for i, area in enumerate(("SEAT_1", "DEALER") * 3, start=1):
            out.append(w.emit(ev.CardDealt, deal_index=i, dealt_from="DECK_IN_HAND", to_area=area, card=FACES[i - 1]))
        out.append(w.emit(ev.StubCounted, count=45 if no == short_stub_in else 46))
        out.append(w.emit(ev.StubDiscarded))
        out.append(w.emit(ev.PlayerDecided, seat="SEAT_1", decision="FOLD", role=ActorRole.PLAYER))
        out.append(w.emit(ev.WagerSettled, wager_id=f"R{no}-A1", outcome="LOSS"))
        out.append(w.emit(ev.RoundCompleted))
        w.round_id = None
    return out


def pgp_trail(table_id: str = PGP_TABLE, by_hand_after_jam: bool = False) -> list[Envelope]:
    """Pai Gow Poker: five hand-dealt rounds of seven stacks, the shuffle before the second jammed
    and redone; with ``by_hand_after_jam``, the jammed shuffler is left as it is (neither covered
    nor signed) and the cards are shuffled by hand for the second round on (another method on an
    uncleared fault, rulebook 10.4.1: PGP-645a.14-n-out-of-order on each of those rounds)."""
    w, out, shuffler = _table(table_id, Game.PGP)
    for no in range(1, ROUNDS + 1):
        if by_hand_after_jam and no >= 2:
            if no == 2:
                out.append(w.emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED", device_id=shuffler))
                fault = {"fault": "JAM", "during": "SHUFFLE", "role": ActorRole.DEVICE, "actor_id": shuffler}
                out.append(w.emit(ev.ShufflerFaulted, round_id=None, device_id=shuffler, **fault))
            _shuffle(w, out, shuffler, 53, by_hand=True)
        else:
            _shuffle(w, out, shuffler, 53, jam=no == 2)
        w.round_id = f"R{no}"
        out.append(w.emit(ev.RoundStarted, round_no=no, dealing_method="HAND", dealer_id="D-0001"))
        out.append(w.emit(ev.NoMoreBetsAnnounced))
        for i in range(1, 50):
            area = f"STACK_{(i - 1) % 7 + 1}"
            out.append(w.emit(ev.CardDealt, deal_index=i, dealt_from="DECK_IN_HAND", to_area=area, card=FACES[i - 1]))
        out.append(w.emit(ev.StubDiscarded))
        out.append(w.emit(ev.RoundCompleted))
        w.round_id = None
    return out


def trail() -> list[Envelope]:
    """Both tables' events, the Three Card table's first (each table in seq order)."""
    return [*tcp_trail(), *pgp_trail()]


def order_trails() -> dict[str, list[Envelope]]:
    """One trail per revision-4 decision, by table (rulebook 10.4.3 interleaves them): a jam cleared
    by its reshuffle at a Three Card and a Pai Gow table, a Pai Gow jam left uncleared while the
    table shuffles by hand, and a Three Card table closed for two days with a remedy owed."""
    return {
        TCP_TABLE: tcp_trail(),
        PGP_TABLE: pgp_trail(),
        HAND_TABLE: pgp_trail(HAND_TABLE, by_hand_after_jam=True),
        IDLE_TABLE: tcp_trail(IDLE_TABLE, short_stub_in=3, idle_hours=48),
    }
