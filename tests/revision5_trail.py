"""Tables on which rulebook revision 5 (section 10.5) changes the verdicts, as floors deal them:

- ``TCP-R5I`` rotates two decks through its counting shuffler; between two rounds the shuffler,
  standing empty, signals a fault (no deck named, ``during`` IDLE), and both decks, shuffled before
  it, are dealt on, each going through the shuffler to a clearing completion after its round.
  Revision 4 read a fault naming no deck as every deck's: DT-deal-after-device-fault on R3 and R4.
  Revision 5 (10.5.2): no finding.
- ``PGP-R5H`` sets the dealer's hand against the house way in its second round and resets it before
  settlement, and in its fourth settles a hand as set. Revision 4 raised PGP-645a.14-i-house-way at
  each setting (the first remedied by the reset). Revision 5 (10.5.3): the reset in time is no
  breach; the hand settled as set is one finding, raised at its settlement.
- ``TCP-R5S`` deals rounds two to six from a deck its counting shuffler shuffled before the first
  and never since, with no stub count. Revision 4 kept them exempt from the five-round count (the
  deck's last shuffle was counted). Revision 5 (10.5.4): not exempt, TCP-679a.9-d-stub-count-due at
  the sixth (both revisions raise (a)(1) on each).
- ``PGP-R5S`` covers its jammed shuffler and reshuffles the jammed deck in a registered spare; the
  spare-fed rounds are clean under both revisions (10.5.1 writes down what revision 4 did).

``tests/fixtures/revision4-findings.jsonl`` holds the findings the revision-4 engine (commit
291787f) gave this trail: the store "judged under revision 4" of the re-audit test.
"""

from __future__ import annotations

from datetime import UTC, datetime

from dealtrail.simulator.builder import TableWriter
from schemas import events as ev
from schemas.base import ActorRole, Envelope, Game
from tests.revision4_trail import _table as table

START = datetime(2026, 12, 3, 18, 0, tzinfo=UTC)
FACES = tuple(r + s for s in "CDHS" for r in "23456789TJQKA")
IDLE_TABLE = "TCP-R5I"
HOUSE_TABLE = "PGP-R5H"
STUB_TABLE = "TCP-R5S"
SPARE_TABLE = "PGP-R5S"


def _table(table_id: str, game: Game) -> tuple[TableWriter, list[Envelope], str]:
    return table(table_id, game, START)


def _register(w: TableWriter, device_id: str) -> Envelope:
    return w.emit(
        ev.DeviceRegistered,
        round_id=None,
        device_id=device_id,
        device_type="SHUFFLER",
        counts_each_shuffle=True,
        indicates_full_deck=True,
        role=ActorRole.FLOOR,
        actor_id="F-01",
    )


def _shuffle(w: TableWriter, out: list[Envelope], device_id: str, size: int) -> None:
    """A full counted shuffle of the writer's current deck in ``device_id``."""
    out.append(w.emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED", device_id=device_id))
    report = {"device_card_count": size, "device_full_deck_ok": True}
    out.append(w.emit(ev.ShuffleCompleted, round_id=None, method="AUTOMATED", device_id=device_id, **report))


def _fault(w: TableWriter, out: list[Envelope], device_id: str, during: str, **fields: object) -> None:
    fault = {"fault": "STOPPED" if during == "IDLE" else "JAM", "during": during, "role": ActorRole.DEVICE}
    out.append(w.emit(ev.ShufflerFaulted, round_id=None, device_id=device_id, actor_id=device_id, **fault, **fields))


def _tcp_round(w: TableWriter, out: list[Envelope], no: int, stub: bool = True, faces: int = 0) -> None:
    """A hand-dealt Three Card round; ``faces``: where in the deck its six cards start."""
    w.round_id = f"R{no}"
    out.append(w.emit(ev.RoundStarted, round_no=no, dealing_method="HAND", dealer_id="D-0001"))
    wager = {"wager_id": f"R{no}-A1", "seat": "SEAT_1", "wager_type": "ANTE", "amount": 500}
    out.append(w.emit(ev.WagerPlaced, **wager, role=ActorRole.PLAYER))
    out.append(w.emit(ev.NoMoreBetsAnnounced))
    out.append(w.emit(ev.DeckHeld, hand="RIGHT"))
    for i, area in enumerate(("SEAT_1", "DEALER") * 3, start=1):
        card = FACES[faces + i - 1]
        out.append(w.emit(ev.CardDealt, deal_index=i, dealt_from="DECK_IN_HAND", to_area=area, card=card))
    if stub:
        out.append(w.emit(ev.StubCounted, count=46))
    out.append(w.emit(ev.StubDiscarded))
    out.append(w.emit(ev.PlayerDecided, seat="SEAT_1", decision="FOLD", role=ActorRole.PLAYER))
    out.append(w.emit(ev.WagerSettled, wager_id=f"R{no}-A1", outcome="LOSS"))
    out.append(w.emit(ev.RoundCompleted))
    w.round_id = None


def _pgp_round(w: TableWriter, out: list[Envelope], no: int, house_way: str = "SET") -> None:
    """A Pai Gow round of seven stacks; ``house_way``: SET (as the house way), RESET (set against it,
    reset before settlement) or SETTLED (set against it and settled as set)."""
    w.round_id = f"R{no}"
    out.append(w.emit(ev.RoundStarted, round_no=no, dealing_method="HAND", dealer_id="D-0001"))
    out.append(w.emit(ev.WagerPlaced, wager_id=f"R{no}-M1", seat="SEAT_1", wager_type="MAIN", amount=500))
    out.append(w.emit(ev.NoMoreBetsAnnounced))
    for i in range(1, 50):
        area = f"STACK_{(i - 1) % 7 + 1}"
        out.append(w.emit(ev.CardDealt, deal_index=i, dealt_from="DECK_IN_HAND", to_area=area, card=FACES[i - 1]))
    out.append(w.emit(ev.StubDiscarded))
    out.append(w.emit(ev.HandSet, owner="DEALER", matches_house_way=house_way == "SET"))
    if house_way == "RESET":
        out.append(w.emit(ev.HandReset, owner="DEALER"))
        out.append(w.emit(ev.HandSet, owner="DEALER", matches_house_way=True))
    out.append(w.emit(ev.WagerSettled, wager_id=f"R{no}-M1", outcome="LOSS"))
    out.append(w.emit(ev.RoundCompleted))
    w.round_id = None


def idle_trail() -> list[Envelope]:
    """Two decks rotating through one counting shuffler; the empty shuffler faults before R3."""
    w, out, shuffler = _table(IDLE_TABLE, Game.TCP)
    w.deck_id = "DK-2"
    out.append(w.emit(ev.DeckIntroduced, declared_count=52, jokers=0, role=ActorRole.FLOOR, actor_id="F-01"))
    for deck in ("DK-1", "DK-2"):
        w.deck_id = deck
        _shuffle(w, out, shuffler, 52)
    for no in range(1, 6):
        if no == 3:
            w.deck_id = None
            _fault(w, out, shuffler, "IDLE")  # standing empty, both decks shuffled before it
        w.deck_id = "DK-1" if no % 2 else "DK-2"
        _tcp_round(w, out, no)
        _shuffle(w, out, shuffler, 52)  # the deck just dealt goes through the shuffler
    return out


def house_way_trail() -> list[Envelope]:
    """Four Pai Gow rounds: R2's dealer hand reset before settlement, R4's settled as set."""
    w, out, shuffler = _table(HOUSE_TABLE, Game.PGP)
    for no in range(1, 5):
        _shuffle(w, out, shuffler, 53)
        _pgp_round(w, out, no, house_way={2: "RESET", 4: "SETTLED"}.get(no, "SET"))
    return out


def stub_trail() -> list[Envelope]:
    """Six hand-dealt Three Card rounds from one counted shuffle, no stub count."""
    w, out, shuffler = _table(STUB_TABLE, Game.TCP)
    _shuffle(w, out, shuffler, 52)
    for no in range(1, 7):
        _tcp_round(w, out, no, stub=False, faces=6 * (no - 1))  # the cards the deck holds next
    return out


def spare_trail() -> list[Envelope]:
    """The shuffler jams on the deck; the floor covers it and the deck is reshuffled in a spare."""
    w, out, shuffler = _table(SPARE_TABLE, Game.PGP)
    spare = f"{SPARE_TABLE}-SHF-SPARE"
    _shuffle(w, out, shuffler, 53)
    _pgp_round(w, out, 1)
    out.append(w.emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED", device_id=shuffler))
    _fault(w, out, shuffler, "SHUFFLE")
    covered = {"covered": True, "out_of_order_sign": False, "role": ActorRole.FLOOR, "actor_id": "F-01"}
    out.append(w.emit(ev.DeviceTakenOutOfService, round_id=None, device_id=shuffler, **covered))
    out.append(_register(w, spare))
    for no in (2, 3):
        _shuffle(w, out, spare, 53)
        _pgp_round(w, out, no)
    return out


def order_trails() -> dict[str, list[Envelope]]:
    """One trail per revision-5 decision, by table (rulebook 10.4.3 interleaves them)."""
    return {
        IDLE_TABLE: idle_trail(),
        HOUSE_TABLE: house_way_trail(),
        STUB_TABLE: stub_trail(),
        SPARE_TABLE: spare_trail(),
    }


def trail() -> list[Envelope]:
    """Every table's events, one table after another (each in seq order)."""
    return [e for events in order_trails().values() for e in events]
