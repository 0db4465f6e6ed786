"""The simulator's table: one table's shift, its decks, devices, stub counts and injected errors.

The games' own dealing lives in a module each (:mod:`three_card_prime`, :mod:`chapter_691`,
:mod:`pai_gow_poker`), like the engine's rules; :mod:`dealtrail.simulator.floor` puts the tables of
a floor together. A table is given its game (:class:`GameSim`): how a round is dealt and which
errors can be injected into it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ulid import ULID

from dealtrail.simulator.builder import TableWriter
from schemas import events as ev
from schemas.base import ActorRole, Envelope, Game, Source, WagerType
from schemas.config import PairBonusMode, TableConfig

RANKS = "23456789TJQKA"
SUITS = "CDHS"
STANDARD = tuple(r + s for s in SUITS for r in RANKS)
SEATS = ("SEAT_1", "SEAT_2", "SEAT_3", "SEAT_4", "SEAT_5", "SEAT_6")
DEFAULT_START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
WRONG_DECKS = frozenset({"wrong-deck", "wrong-deck-mismatch", "long-deck", "short-deck"})
"""Kinds dealt from a deck that is not whole; a forced stub count finds it (subsection (f))."""
FAULT_DEALS = frozenset(
    {"device-fault-deal", "countless-shuffle-after-fault", "fault-during-shuffle", "jam-dealt-unshuffled"}
)
"""Kinds that deal on a device fault no shuffle cleared (DT-deal-after-device-fault)."""
STOPPING_FAULTS = ("JAM", "STOPPED", "INCOMPLETE_CYCLE")
"""The shuffler faults of § 645a.14(l): it jams, stops, or does not complete its cycle."""
CLOSING = "closed-owing-remedy"
"""The kind whose round owes a voiding remedy when the table closes for longer than the remedy
window (rulebook 10.4.2)."""


@dataclass(frozen=True)
class FloorSpec:
    """What to simulate.

    Attributes:
        tables: number of tables (games assigned TCP, C691, PGP in turn).
        hours: length of the shift (hours).
        seed: seed of every random choice.
        error_rate: probability (0..1) that a round carries an injected error.
        start: the shift's start time (timezone-aware).
        duplicate_rate: probability that an event is delivered twice, byte-identical (the audit
            must absorb it without a finding).
        floor_visit_rate: probability that, before a round without an injected error, a
            floorperson verifies the deck (half the visits) or replaces a damaged card with a new
            one of the same face (the other half); neither raises a finding.
        floor_events: deal what floors do (rulebook 10.4), as error kinds of their own: jams and
            stops cleared by a reshuffle in the same shuffler with no return to service (the
            common case, weighted above the others), a jammed deck dealt before it was
            reshuffled, devices taken out of service (covered or signed, or neither) while the
            table shuffles or deals by another method and then returned, a shoe fault remedied
            per § 645a.14(m) with the shoe left in use, and a table closed for longer than
            ``remedy_window`` with a voiding remedy still owed. False deals the floor as the
            simulator did before these kinds (every faulted device returned to service), byte
            for byte.
        remedy_window: the engine's remedy window (the setting ``remedy_window``, rulebook
            10.3.5): a table that closes owing a remedy stays closed 1 to 8 hours longer than
            this. The findings do not depend on it (10.4.2); the path the engine takes does.
    """

    tables: int = 24
    hours: float = 8.0
    seed: int = 7
    error_rate: float = 0.05
    start: datetime = DEFAULT_START
    duplicate_rate: float = 0.0
    floor_visit_rate: float = 0.08
    floor_events: bool = True
    remedy_window: timedelta = timedelta(hours=24)


@dataclass(frozen=True)
class Truth:
    """One finding the audit must produce: rule, table, round and the error kind injected."""

    rule_id: str
    table_id: str
    round_id: str | None
    injected: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (one line of the truth file)."""
        return {
            "rule_id": self.rule_id,
            "table_id": self.table_id,
            "round_id": self.round_id,
            "injected": self.injected,
        }


@dataclass
class Plan:
    """The flags one round is dealt with (all False: a correct round)."""

    kind: str | None = None
    expect: list[str] = field(default_factory=list)


@dataclass
class Outage:
    """A device taken out of service (rulebook 10.4.1 case a) for ``rounds_left`` more rounds,
    covered and/or signed out of order, while the table shuffles by hand (the shuffler) or deals
    from the hand (an automated dealing shoe)."""

    kind: str
    device_id: str
    marked: bool
    rounds_left: int


def table_ids(n: int) -> list[tuple[str, Game]]:
    """Table IDs and games for a floor of ``n`` tables: TCP-01, C691-01, PGP-01, TCP-02, ..."""
    games = (Game.TCP, Game.C691, Game.PGP)
    out = []
    for i in range(n):
        game = games[i % 3]
        out.append((f"{game.value}-{i // 3 + 1:02d}", game))
    return out


class TableSim:
    """Plays one table's shift. Iterate :meth:`events` to get its events in order."""

    def __init__(
        self, spec: FloorSpec, table_id: str, game: Game, index: int, truth: list[Truth], rules: GameSim
    ) -> None:
        self.spec = spec
        self.rules = rules
        self.table_id = table_id
        self.game = game
        self.rng = random.Random(f"{spec.seed}:{table_id}")
        self.truth = truth
        self.end = spec.start + timedelta(hours=spec.hours)
        start = spec.start + timedelta(seconds=self.rng.uniform(0, 60))
        self.w = TableWriter(table_id, game, start, new_id=self._new_id, chained=True)
        self.index = index
        self.counting = index % 2 == 0 if game is not Game.PGP else index % 4 == 2
        self.method = "HAND"
        if game is Game.TCP and index % 4 == 3:
            self.method = "MANUAL_SHOE"
        if game is Game.PGP and index % 3 == 1:
            self.method = "AUTO_SHOE"
        self.pair_mode = PairBonusMode.COMMUNITY if (game is Game.TCP and index % 2 == 1) else PairBonusMode.PER_PLAYER
        self.prime = game is Game.TCP and index % 3 != 0
        self.dice_wagers = game is Game.PGP and index % 2 == 0
        self.shuffler = f"{table_id}-SHF"
        self.shoe = f"{table_id}-SHOE"
        self.deck_no = 0
        self.round_no = 0
        self.stub_run = 0
        self.count_after = self.rng.randint(1, 4)
        self.suppress = 0
        self.pending: list[Envelope] = []
        self.last_order: list[str] | None = None
        """The order of the current deck as last dealt since its shuffle (None: not dealt yet)."""
        self.cut_pending = False
        self.rotation = game is Game.TCP and self.counting and self.method == "HAND" and index % 4 == 0
        """Two decks rotate through the one counting shuffler: each round is dealt from the deck
        shuffled during the round before, while the other deck is shuffled (rulebook 10.3.1)."""
        self.decks: list[str] = []
        self.orders: dict[str, list[str]] = {}
        """Each rotating deck's order as its last completed shuffle left it."""
        self.carry: list[tuple[str, str]] = []
        """Findings (rule, kind) the next round must raise: an error made during this one."""
        self.dealing = self.method
        """This round's dealing method: the table's, or from the hand while its shoe is out of service."""
        self.hand_shuffled = False
        """This round's deck was shuffled by hand (no counting shuffler fed it)."""
        self.unshuffled = False
        """This round's deck had no shuffle since its last round (rulebook 10.5.4: not exempt)."""
        self.spare = f"{table_id}-SHF-SPARE"
        self.spare_registered = False
        self.outage: Outage | None = None
        self.closed = False
        """The table closed once already with a remedy owed (:data:`CLOSING`)."""
        dealt = [(k, inj) for k, inj in rules.injections.items() if inj.applies(self) and self.may(inj)]
        self.kinds = cycle([(k, inj.weight) for k, inj in dealt if not inj.appended])
        # where the table starts in its cycle: drawn over the kinds other than the floor events and
        # scaled to the whole cycle, so that a floor without errors deals the same bytes whether
        # the floor events are on or off (and the same as before they existed)
        plain = sum(1 for inj in rules.injections.values() if inj.applies(self) and not inj.floor_event)
        self.kind_cursor = self.rng.randrange(plain) * len(self.kinds) // plain
        # the kinds added later come after all the others, so the cycle before them stays as it was
        self.kinds += [k for k, inj in dealt if inj.appended]

    # -- plumbing -----------------------------------------------------------------------------
    def _new_id(self, _table: str, _seq: int, when: datetime) -> str:
        ms = int(when.timestamp() * 1000)
        return str(ULID.from_bytes(ms.to_bytes(6, "big") + self.rng.randbytes(10)))

    def emit(self, cls: type[Envelope], **fields: Any) -> Envelope:
        """Emit the next event of this table (stamped by the writer) into the output queue."""
        if "after" not in fields:
            fields["after"] = self.rng.uniform(0.5, 2.5)
        event = self.w.emit(cls, **fields)
        self.pending.append(event)
        if self.spec.duplicate_rate and self.rng.random() < self.spec.duplicate_rate:
            self.pending.append(event)
        return event

    def expect(self, rule_id: str, round_id: str | None, kind: str) -> None:
        """Record a finding the audit must raise."""
        self.truth.append(Truth(rule_id, self.table_id, round_id, kind))

    def may(self, inj: Injection) -> bool:
        """Whether this floor deals the kind at all (:attr:`FloorSpec.floor_events`)."""
        return self.spec.floor_events or not inj.floor_event

    @property
    def config(self) -> TableConfig:
        """This table's configuration."""
        wagers = {WagerType.ANTE, WagerType.PLAY}
        if self.game is Game.TCP:
            wagers.add(WagerType.PAIR_BONUS)
            if self.prime:
                wagers.add(WagerType.PRIME)
        elif self.game is Game.C691:
            wagers = {WagerType.MAIN}
        else:
            wagers = {WagerType.MAIN} | ({WagerType.SUM} if self.dice_wagers else set())
        return TableConfig(
            game=self.game,
            rules_submission_id=f"RS-{self.game.value}-2026-01",
            seats=SEATS,
            dealing_methods_allowed=frozenset({self.method}),
            wagers_enabled=frozenset(wagers),
            pair_bonus_mode=self.pair_mode if self.game is Game.TCP else PairBonusMode.OFF,
            house_way_id="HW-1" if self.game is Game.PGP else None,
        )

    def deck_cards(self) -> list[str]:
        """A fresh deck for this game: 52 cards plus 0, 2 or 1 jokers."""
        jokers = {Game.TCP: 0, Game.C691: 2, Game.PGP: 1}[self.game]
        return list(STANDARD) + ["JK"] * jokers

    # -- the shift ----------------------------------------------------------------------------
    def events(self) -> Iterator[Envelope]:
        """Yield this table's events in seq order until the shift ends."""
        self.emit(
            ev.TableConfigured, source=Source.SYSTEM, role=ActorRole.FLOOR, actor_id="FLOOR-1", config=self.config
        )
        self.register_shuffler(self.shuffler, source=Source.SYSTEM)
        if self.method == "AUTO_SHOE":
            self.emit(
                ev.DeviceRegistered,
                source=Source.SYSTEM,
                role=ActorRole.FLOOR,
                actor_id="FLOOR-1",
                device_id=self.shoe,
                device_type="AUTO_SHOE",
            )
        self.new_deck()
        if self.rotation:
            self.decks = [self.w.deck_id or "", ""]
            self.new_deck()
            self.decks[1] = self.w.deck_id or ""
            self.w.deck_id = self.decks[0]
            self.shuffle_rotating(self.decks[0], Plan())
        yield from self._drain()
        while self.w.clock < self.end - timedelta(minutes=3):
            self.play_round()
            yield from self._drain()

    def _drain(self) -> Iterator[Envelope]:
        out, self.pending = self.pending, []
        yield from out

    def new_deck(self) -> None:
        """Bring a new deck to the table."""
        self.last_order = None
        self.deck_no += 1
        self.w.deck_id = f"{self.table_id}-DK{self.deck_no:03d}"
        cards = self.deck_cards()
        self.emit(
            ev.DeckIntroduced,
            round_id=None,
            role=ActorRole.FLOOR,
            actor_id="FLOOR-1",
            declared_count=len(cards),
            jokers=cards.count("JK"),
        )

    def shuffle(self, deck: list[str], plan: Plan) -> None:
        """Shuffle ``deck`` in place and record it (automated; counting shuffler reports)."""
        self.rng.shuffle(deck)
        manual = plan.kind == "manual-shuffle" or (self.outage is not None and self.outage.device_id == self.shuffler)
        kwargs: dict[str, Any] = {"round_id": None}
        if manual:
            self.hand_shuffled = True
            self.emit(ev.ShuffleStarted, method="MANUAL", **kwargs)
            self.emit(ev.ShuffleCompleted, method="MANUAL", **kwargs)
            self.cut(plan)
            return
        if plan.kind == "countless-shuffle-after-fault":
            self.device_fault("COUNT_ERROR", "IDLE")
        self.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=self.shuffler, source=Source.SHUFFLER, **kwargs)
        if plan.kind == "spare-shuffler":
            self.shuffle_in_spare(deck, plan)
            return
        if plan.kind == "fault-during-shuffle":
            self.device_fault("COUNT_ERROR", "SHUFFLE")
        if plan.kind in ("jam-cleared", "jam-dealt-unshuffled"):
            self.jam(plan.kind, len(deck))
            if plan.kind == "jam-dealt-unshuffled":
                return  # the cards go from the jammed shuffler to the deal as they lie (10.4.1)
            # the dealer clears it and reshuffles in the same shuffler: no return to service (10.4.1)
            self.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=self.shuffler, source=Source.SHUFFLER, **kwargs)
        if plan.kind in ("shuffler-jam", "shuffler-jam-uncovered"):
            self.device_fault("JAM", "SHUFFLE")
            self.expect("PGP-645a.14-l-shuffler-fault", None, plan.kind)
            if plan.kind == "shuffler-jam-uncovered":  # the round dealt from the hand shuffle (10.3.2)
                plan.expect.append("PGP-645a.14-n-out-of-order")
            if plan.kind == "shuffler-jam":
                self.return_device(self.shuffler)  # cleared by the floor: back in use (rulebook 10.3.2)
                self.emit(
                    ev.ShuffleStarted, method="AUTOMATED", device_id=self.shuffler, source=Source.SHUFFLER, **kwargs
                )
            else:
                self.hand_shuffled = True
                self.emit(ev.ShuffleStarted, method="MANUAL", **kwargs)
                self.emit(ev.ShuffleCompleted, method="MANUAL", **kwargs)
                self.cut(plan)
                return
        count = len(deck) if self.counting else None
        full = (len(deck) == len(self.deck_cards())) if self.counting else None
        if plan.kind == "countless-shuffle-after-fault":
            count = full = None  # the counting device reported nothing for this shuffle
        self.emit(
            ev.ShuffleCompleted,
            method="AUTOMATED",
            device_id=self.shuffler,
            device_card_count=count,
            device_full_deck_ok=full,
            source=Source.SHUFFLER,
            role=ActorRole.DEVICE,
            actor_id=self.shuffler,
            **kwargs,
        )
        if full is not False:
            self.cut(plan)

    def shuffle_in_spare(self, deck: list[str], plan: Plan) -> None:
        """``spare-shuffler`` (rulebook 10.5.1): the shuffler jams on the deck; the floor covers it
        (half the time) and brings a spare, registered at the table, in which the deck is fully
        reshuffled. The reshuffled deck is not dealt on a fault; at Pai Gow the jam is
        PGP-645a.14-l-shuffler-fault and, with the jammed shuffler left uncovered, the round is
        another method's round for § 645a.14(n). The jammed shuffler returns to service after the
        round (:meth:`play_round`)."""
        self.jam(plan.kind or "", len(deck))
        if self.rng.random() < 0.5:
            self.emit(
                ev.DeviceTakenOutOfService,
                round_id=None,
                device_id=self.shuffler,
                covered=True,
                out_of_order_sign=self.rng.random() < 0.5,
                role=ActorRole.FLOOR,
                actor_id="FLOOR-1",
            )
        elif self.game is Game.PGP:
            plan.expect.append("PGP-645a.14-n-out-of-order")
        if not self.spare_registered:
            self.register_shuffler(self.spare, round_id=None)
            self.spare_registered = True
        self.rng.shuffle(deck)
        spare = {"round_id": None, "device_id": self.spare, "source": Source.SHUFFLER}
        self.emit(ev.ShuffleStarted, method="AUTOMATED", **spare)
        self.emit(
            ev.ShuffleCompleted,
            method="AUTOMATED",
            device_card_count=len(deck) if self.counting else None,
            device_full_deck_ok=True if self.counting else None,
            role=ActorRole.DEVICE,
            actor_id=self.spare,
            **spare,
        )
        self.cut(plan)

    def register_shuffler(self, device_id: str, **fields: Any) -> None:
        """The floor registers a shuffler at the table, counting like the table's own."""
        self.emit(
            ev.DeviceRegistered,
            role=ActorRole.FLOOR,
            actor_id="FLOOR-1",
            device_id=device_id,
            device_type="SHUFFLER",
            counts_each_shuffle=self.counting,
            indicates_full_deck=self.counting,
            **fields,
        )

    def empty_shuffler_fault(self) -> None:
        """``empty-shuffler-fault`` (rulebook 10.5.2): the shuffler signals a fault while it stands
        empty (no deck named, ``during`` IDLE). The deck in play, shuffled before it, is dealt
        without a finding; the next deck shuffled in the device clears it."""
        self.device_fault(self.rng.choice((*STOPPING_FAULTS, "COUNT_ERROR")), "IDLE", empty=True)

    def cut(self, plan: Plan) -> None:
        """Chapter 691: the deck is cut after each shuffle (§ 691.4), unless the error is to skip it."""
        if self.game is not Game.C691:
            return
        if plan.kind == "cut-skipped":
            self.cut_pending = True
            return
        self.cut_pending = False
        self.emit(ev.DeckCut, round_id=None, cut_by="PLAYER", role=ActorRole.PLAYER, actor_id="P-CUT")

    def device_fault(self, fault: str, during: str, deck_id: str | None = None, empty: bool = False) -> None:
        """The shuffler signals a fault on the deck in it (its deck and what it was doing);
        ``deck_id`` names another deck than the table's current one; ``empty``: no deck is in it
        (the event names none)."""
        fields: dict[str, Any] = {} if deck_id is None and not empty else {"deck_id": deck_id}
        self.emit(
            ev.ShufflerFaulted,
            round_id=None,
            **fields,
            device_id=self.shuffler,
            fault=fault,
            indicator="RED_LIGHT",
            during=during,
            source=Source.SHUFFLER,
            role=ActorRole.DEVICE,
            actor_id=self.shuffler,
        )

    def jam(self, kind: str, cards: int, deck_id: str | None = None) -> None:
        """The shuffler jams, stops or does not complete its cycle on the deck in it, and the
        dealer takes the cards out (§ 645a.14(l): PGP-645a.14-l-shuffler-fault at a Pai Gow table)."""
        self.device_fault(self.rng.choice(STOPPING_FAULTS), "SHUFFLE", deck_id=deck_id)
        if self.game is Game.PGP:
            self.expect("PGP-645a.14-l-shuffler-fault", None, kind)
        fields: dict[str, Any] = {} if deck_id is None else {"deck_id": deck_id}
        self.emit(ev.CardsRemovedFromDevice, round_id=None, **fields, device_id=self.shuffler, count=cards)

    def take_out_of_service(self, plan: Plan) -> None:
        """Start an outage (``out-of-service-*``): the floor takes the shuffler (or, at a table dealt
        from an automated shoe, the shoe half the time) out of service, after a jam of the
        shuffler half the time, covered and/or signed out of order (``out-of-service-marked``) or
        neither, for 2 to 4 rounds."""
        kind = plan.kind or ""
        device = self.shoe if self.method == "AUTO_SHOE" and self.rng.random() < 0.5 else self.shuffler
        if device == self.shuffler and self.rng.random() < 0.5:
            self.emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED", device_id=device, source=Source.SHUFFLER)
            self.jam(kind, len(self.deck_cards()))
        covered, sign = False, False
        if kind == "out-of-service-marked":
            covered, sign = self.rng.choice(((True, False), (False, True), (True, True)))
        self.emit(
            ev.DeviceTakenOutOfService,
            round_id=None,
            device_id=device,
            covered=covered,
            out_of_order_sign=sign,
            role=ActorRole.FLOOR,
            actor_id="FLOOR-1",
        )
        self.outage = Outage(kind, device, covered or sign, self.rng.randint(2, 4))

    def outage_findings(self, outage: Outage) -> list[str]:
        """What a round shuffled or dealt by another method during ``outage`` raises: (a)(1) for a
        hand-dealt round shuffled by hand (TCP, C691); (n) at Pai Gow unless the device is covered
        or signed (rulebook 10.3.2, 10.4.1)."""
        if self.game is Game.PGP:
            return [] if outage.marked else ["PGP-645a.14-n-out-of-order"]
        if outage.device_id == self.shuffler and self.method == "HAND":
            return ["TCP-679a.9-a1-shuffler-required" if self.game is Game.TCP else "C691-DH-a1-shuffler-required"]
        return []

    def end_outage(self) -> None:
        """After each outage round: the device returns to service after its last one."""
        outage = self.outage
        if outage is None:
            return
        outage.rounds_left -= 1
        if outage.rounds_left <= 0:
            self.return_device(outage.device_id)
            self.outage = None

    def close_table(self) -> None:
        """The table closes after a round that owes a voiding remedy (:data:`CLOSING`) and opens
        again 1 to 8 hours after the remedy window ends; its shift goes on as long as it had left.
        At the opening a floorperson verifies the deck: the table's first event past the window,
        where DT-remedy-overdue is raised for the round that owed it (rulebook 10.4.2)."""
        gap = self.spec.remedy_window + timedelta(seconds=self.rng.uniform(3600, 8 * 3600))
        self.w.clock += gap
        self.end += gap
        self.closed = True
        self.verify_deck()

    def return_device(self, device_id: str) -> None:
        """The floor returns a faulted device to service (rulebook 10.3.2: only this, or
        registering it again, puts it back in use)."""
        self.emit(
            ev.DeviceReturnedToService, round_id=None, device_id=device_id, role=ActorRole.FLOOR, actor_id="FLOOR-1"
        )

    def shuffle_rotating(self, deck_id: str, plan: Plan) -> None:
        """Two-deck rotation: the counting shuffler shuffles ``deck_id`` (the deck not in play),
        with the rotation's errors (rulebook 10.3.1): a jam of it that is cleared but not
        reshuffled (the next round, dealt from it, is dealt on its unresolved fault and with no
        shuffle since its last round), or a fault of it followed by a complete reshuffle (no
        finding: the deck in play was shuffled before the fault)."""
        fields: dict[str, Any] = {"round_id": None, "deck_id": deck_id, "device_id": self.shuffler}
        shuffler = {"source": Source.SHUFFLER, "role": ActorRole.DEVICE, "actor_id": self.shuffler}
        self.emit(ev.ShuffleStarted, method="AUTOMATED", **fields, source=Source.SHUFFLER)
        if plan.kind == "jam-cleared":  # cleared and reshuffled in the same shuffler (10.4.1)
            self.jam(plan.kind, len(self.deck_cards()), deck_id=deck_id)
            self.emit(ev.ShuffleStarted, method="AUTOMATED", **fields, source=Source.SHUFFLER)
        if plan.kind in ("idle-deck-jam", "idle-deck-fault-cleared"):
            fault = "JAM" if plan.kind == "idle-deck-jam" or self.rng.random() < 0.5 else "COUNT_ERROR"
            self.device_fault(fault, "SHUFFLE", deck_id=deck_id)
            self.return_device(self.shuffler)
            if plan.kind == "idle-deck-jam":
                self.carry = [
                    ("DT-deal-after-device-fault", plan.kind),
                    ("TCP-679a.9-a1-shuffler-required", plan.kind),
                ]
                return  # its cards stay as they were: the next round deals them unshuffled
            self.emit(ev.ShuffleStarted, method="AUTOMATED", **fields, source=Source.SHUFFLER)
        order = self.deck_cards()
        self.rng.shuffle(order)
        self.emit(
            ev.ShuffleCompleted,
            method="AUTOMATED",
            device_card_count=len(order),
            device_full_deck_ok=True,
            **fields,
            **shuffler,
        )
        self.orders[deck_id] = order

    def floor_visit(self) -> None:
        """Now and then, between rounds, a floorperson verifies the deck or replaces a damaged card
        with a new one of the same face (authorised): neither may raise a finding."""
        roll = self.rng.random()
        rate = self.spec.floor_visit_rate
        if roll < rate / 2:
            self.verify_deck()
        elif roll < rate:
            card = self.rng.choice(STANDARD)
            for cls, reason in ((ev.CardRemovedFromDeck, "DAMAGED"), (ev.CardAddedToDeck, "REPLACEMENT")):
                self.emit(
                    cls,
                    round_id=None,
                    card=card,
                    reason=reason,
                    authorised_by="FLOOR-1",
                    role=ActorRole.FLOOR,
                    actor_id="FLOOR-1",
                )

    def verify_deck(self) -> None:
        """A floorperson counts and checks the deck: complete."""
        self.emit(
            ev.DeckVerified,
            round_id=None,
            count=len(self.deck_cards()),
            composition_ok=True,
            result="OK",
            verified_by="FLOOR-1",
            role=ActorRole.FLOOR,
            actor_id="FLOOR-1",
        )

    def pick_plan(self) -> Plan:
        """Choose whether this round carries an error, and which."""
        plan = Plan()
        if self.outage is not None:
            return Plan(kind=self.outage.kind)
        if self.suppress:
            return plan
        if self.w.clock > self.end - timedelta(minutes=12):
            return plan
        if self.rng.random() >= self.spec.error_rate:
            return plan
        for _ in range(len(self.kinds)):
            kind = self.kinds[self.kind_cursor % len(self.kinds)]
            self.kind_cursor += 1
            inj = self.rules.injections[kind]
            if inj.applies(self) and inj.ready(self):
                plan.kind = kind
                break
        return plan

    def play_round(self) -> None:
        """Shuffle and deal one round (with its injected error, if any)."""
        plan = self.pick_plan()
        inj = self.rules.injections.get(plan.kind) if plan.kind else None
        self.hand_shuffled = False
        if plan.kind is None:
            self.floor_visit()
        if inj is not None and inj.before_shuffle is not None:
            inj.before_shuffle(self, plan)
        if self.rotation:
            self.play_rotating_round(plan)
            return
        deck = self.deck_cards()
        if plan.kind in ("wrong-deck", "wrong-deck-mismatch", "shuffle-count-mismatch"):
            deck.remove(self.rng.choice([c for c in deck if c != "JK"]))
        if plan.kind in ("long-deck", "short-deck"):
            card = self.rng.choice(STANDARD)
            if plan.kind == "long-deck":
                deck.append(card)
            else:
                deck.remove(card)
            cls = ev.CardAddedToDeck if plan.kind == "long-deck" else ev.CardRemovedFromDeck
            self.emit(cls, round_id=None, card=card, reason="OTHER", role=ActorRole.DEALER)
            self.expect("DT-deck-composition", None, plan.kind)
        if plan.kind == "redealt-unshuffled":
            assert self.last_order is not None
            deck = list(self.last_order)
        else:
            self.shuffle(deck, plan)
        if plan.kind == "shuffle-count-mismatch":
            self.expect("ALL-shuffle-count-mismatch-PROV", None, plan.kind)
            self.emit(
                ev.DeckRemoved,
                round_id=None,
                reason_code="COUNT_MISMATCH",
                rule_id="ALL-shuffle-count-mismatch-PROV",
                role=ActorRole.FLOOR,
                actor_id="FLOOR-1",
            )
            self.new_deck()
            deck = self.deck_cards()
            self.shuffle(deck, Plan())
        if plan.kind == "device-fault-deal":
            self.device_fault("COUNT_ERROR", "IDLE")  # logged after the completion, before the deal
        elif plan.kind == "empty-shuffler-fault":
            self.empty_shuffler_fault()  # the deck is out of the shuffler, about to be dealt
        self.unshuffled = plan.kind in ("redealt-unshuffled", "jam-dealt-unshuffled")
        round_id = self.next_round(plan)
        self.dealing = "HAND" if self.outage is not None and self.outage.device_id == self.shoe else self.method
        if self.outage is not None:
            plan.expect += self.outage_findings(self.outage)
        if plan.kind == "jam-dealt-unshuffled" and self.method == "HAND" and self.game is not Game.PGP:
            # a deck dealt again with no completed shuffle since its last round (10.1.1); at the
            # Chapter 691 table, taken into the hand before its § 691.4 shuffle and cut was complete
            plan.expect += {
                Game.TCP: ["TCP-679a.9-a1-shuffler-required"],
                Game.C691: ["C691-DH-a1-shuffler-required", "C691-DH-a2-same-hand"],
            }[self.game]
        self.emit(ev.RoundStarted, round_no=self.round_no, dealing_method=self.dealing, dealer_id=self.w.dealer_id)
        if plan.kind == "redealt-unshuffled":
            a1 = {Game.TCP: "TCP-679a.9-a1-shuffler-required", Game.C691: "C691-DH-a1-shuffler-required"}[self.game]
            plan.expect += [a1, "DT-deck-composition"]  # the same faces again, in the same order
        counted = self.rules.deal(self, plan, deck, round_id)
        for rule_id in plan.expect:
            self.expect(rule_id, round_id, plan.kind or "")
        self.close_stub_window(plan, counted, round_id)
        self.w.round_id = None
        if plan.kind == "shoe-fault":
            self.return_device(self.shoe)  # repaired after the voided round (rulebook 10.3.2)
        elif plan.kind in ("shuffler-jam-uncovered", "spare-shuffler"):
            self.return_device(self.shuffler)
        self.end_outage()
        if plan.kind == CLOSING:
            self.close_table()
        if plan.kind not in WRONG_DECKS:
            self.last_order = deck
        if plan.kind in ("duplicate-card", "redealt-unshuffled"):
            self.verify_deck()  # the floor checks the deck the duplicate came from: it is whole

    def next_round(self, plan: Plan) -> str:
        """Number the next round, put the dealer on duty at it and return its ID; a planned
        ``sequence-gap`` loses an event here (a gap, and the chain broken after it)."""
        self.round_no += 1
        self.w.dealer_id = self.dealer_on_duty()
        round_id = f"{self.table_id}-R{self.round_no:05d}"
        self.w.round_id = round_id
        if plan.kind == "sequence-gap":
            self.w.emit(ev.NoMoreBetsAnnounced, round_id=None)  # an event lost before it reached us
            self.expect("DT-sequence-gap", round_id, plan.kind)
            self.expect("DT-chain-broken", round_id, plan.kind)
        return round_id

    def play_rotating_round(self, plan: Plan) -> None:
        """One round of a two-deck table: dealt from the deck shuffled during the round before,
        while the other deck goes through the shuffler (with the rotation's errors)."""
        in_play, idle = self.decks[self.round_no % 2], self.decks[(self.round_no + 1) % 2]
        self.w.deck_id = in_play
        deck = list(self.orders[in_play])
        round_id = self.next_round(plan)
        self.emit(ev.RoundStarted, round_no=self.round_no, dealing_method=self.method, dealer_id=self.w.dealer_id)
        self.unshuffled = bool(self.carry)  # the deck jammed idle and dealt as it lay (10.5.4)
        for rule_id, kind in self.carry:
            self.expect(rule_id, round_id, kind)
        self.carry = []
        if plan.kind == "in-play-deck-fault":  # the shuffler flags the deck now in play, before its deal
            self.device_fault("COUNT_ERROR", "IDLE", deck_id=in_play)
            plan.expect.append("DT-deal-after-device-fault")
        elif plan.kind == "empty-shuffler-fault":  # between the two decks' turns in it
            self.empty_shuffler_fault()
        self.shuffle_rotating(idle, plan)  # the other deck goes through the shuffler meanwhile
        counted = self.rules.deal(self, plan, deck, round_id)
        for rule_id in plan.expect:
            self.expect(rule_id, round_id, plan.kind or "")
        self.close_stub_window(plan, counted, round_id)
        self.w.round_id = None
        self.w.deck_id = in_play
        if plan.kind == "duplicate-card":
            self.verify_deck()  # the floor checks the deck the duplicate came from: it is whole
        if plan.kind == CLOSING:
            self.close_table()

    def dealer_on_duty(self) -> str:
        """Dealers rotate every 45 minutes; each table has its own three."""
        stint = int((self.w.clock - self.spec.start).total_seconds() // 2700)
        return f"D-{self.table_id}-{stint % 3 + 1}"

    def exempt(self, plan: Plan) -> bool:
        """True if this round's deck was fed by a shuffle of a counting shuffler since its last
        round (no stub-count duty; rulebook section 8, 10.5.4)."""
        return (
            self.counting
            and not self.hand_shuffled
            and not self.unshuffled
            and plan.kind
            not in (
                "manual-shuffle",
                "shuffler-jam-uncovered",
                "countless-shuffle-after-fault",
            )
        )

    def stub_in_scope(self) -> bool:
        """True if rounds of this table count toward the 5-round stub window."""
        return self.game is not Game.PGP

    def count_due(self, plan: Plan) -> bool:
        """Whether the dealer counts the stub this round."""
        inj = self.rules.injections.get(plan.kind) if plan.kind else None
        if inj is not None and inj.count is not None:
            return inj.count
        if self.suppress:
            return False
        if self.exempt(plan):
            return self.rng.random() < 0.05
        return self.stub_run >= self.count_after

    def close_stub_window(self, plan: Plan, counted: bool, round_id: str) -> None:
        """Mirror the engine's stub window (rulebook decision 1) to know when the count is overdue."""
        if self.suppress:
            self.suppress -= 1
        if not self.stub_in_scope():
            return
        exempt = self.exempt(plan)
        if counted:  # a stub count resets the window, in an exempt round too (10.5.4)
            self.stub_run = 0
            if not exempt:  # the dealer's next count is drawn after a count that was due
                self.count_after = self.rng.randint(1, 4)
            return
        if exempt:
            return
        self.stub_run += 1
        if self.stub_run % 5 == 0:
            rule = {Game.TCP: "TCP-679a.9-d-stub-count-due", Game.C691: "C691-DH-d-stub-count-due"}[self.game]
            if self.method != "HAND":
                rule = "TCP-679a.8/10-stub-count-PROV"
            self.expect(rule, round_id, plan.kind or "stub-count-skipped")


# -- shared by the games --------------------------------------------------------------------


def wager_amount(sim: TableSim) -> int:
    """A wager's amount in cents, drawn from the table's generator (500 to 2,500)."""
    return sim.rng.choice((500, 1000, 1500, 2500))


def deal_card(sim: TableSim, index: int, area: str, face: str, card: str, **where: Any) -> Envelope:
    """One card dealt (``CardDealt``, read by the shoe's RFID) as the ``index``-th of the round,
    to ``area`` with ``face`` up or down; ``where``: the event's optional fields (``dealt_from``)."""
    return sim.emit(
        ev.CardDealt,
        deal_index=index,
        **where,
        to_area=area,
        face=face,
        card=card,
        source=Source.RFID,
        after=sim.rng.uniform(0.3, 1.0),
    )


def place_main_wager(sim: TableSim, wager_id: str, seat: str) -> None:
    """A player's main wager at ``seat`` (``WagerPlaced``, MAIN, :func:`wager_amount`)."""
    sim.emit(
        ev.WagerPlaced,
        wager_id=wager_id,
        seat=seat,
        wager_type="MAIN",
        amount=wager_amount(sim),
        role=ActorRole.PLAYER,
        actor_id=f"P-{seat}",
    )


def settle(sim: TableSim, wager_ids: Iterable[str], outcomes: tuple[str, ...]) -> None:
    """Each wager settled with an outcome drawn from ``outcomes`` (a win pays 1,000 cents)."""
    for w in wager_ids:
        outcome = sim.rng.choice(outcomes)
        sim.emit(ev.WagerSettled, wager_id=w, outcome=outcome, payout=1000 if outcome == "WIN" else 0, after=0.4)


def complete_round(sim: TableSim, kind: str | None, counted: bool) -> bool:
    """The round completed (a wrong deck is replaced after it); returns ``counted``."""
    sim.emit(ev.RoundCompleted)
    if kind in WRONG_DECKS:
        sim.new_deck()
    return counted


def discard_stub(sim: TableSim, plan: Plan, unexposed_rule: str, kept: tuple[tuple[str, str], ...]) -> None:
    """The stub goes to the discard rack unexposed, unless the round's kind errs: "stub-exposed"
    (discarded face up: ``unexposed_rule`` expected) or a kind of ``kept`` (kind, rule expected:
    the stub stays on the table)."""
    k = plan.kind
    if k == "stub-exposed":
        sim.emit(ev.StubDiscarded, exposed=True)
        plan.expect.append(unexposed_rule)
    elif k in dict(kept):
        plan.expect.append(dict(kept)[k])
    else:
        sim.emit(ev.StubDiscarded)


def remedy_void(sim: TableSim, wager_ids: list[str], rule_id: str, *, deck: bool = False) -> None:
    """The floor voids every hand and returns the wagers (and removes the deck with ``deck``)."""
    sim.emit(
        ev.RoundVoided,
        scope="ALL_HANDS",
        reason_code="IRREGULARITY",
        rule_id=rule_id,
        role=ActorRole.FLOOR,
        actor_id="FLOOR-1",
    )
    sim.emit(ev.WagersReturned, wager_ids=tuple(wager_ids))
    if deck:
        sim.emit(ev.DeckRemoved, reason_code="WRONG_COUNT", rule_id=rule_id, role=ActorRole.FLOOR, actor_id="FLOOR-1")


def reveal(sim: TableSim, hands: list[tuple[str, list[str]]]) -> None:
    """Settlement: the hands are turned face up (rulebook 10.1.4: a showdown, not an exposure)."""
    sim.emit(
        ev.HandsRevealed,
        hands=tuple(ev.RevealedHand(owner=owner, cards=tuple(cards)) for owner, cards in hands),
    )


@dataclass(frozen=True)
class Injection:
    """One kind of error: where it applies (``applies``: the table; ``ready``: the table's state
    now), and whether it forces the stub count (True/False).

    ``weight`` is how many places the kind takes in a table's cycle of kinds (1: as often as any
    other; a floor's common events more); ``floor_event`` marks the kinds of
    :attr:`FloorSpec.floor_events`; ``appended`` kinds (revision 5's) are tried after every other
    kind of the cycle, once a round, so that what a table dealt before them is dealt the same."""

    applies: Callable[[TableSim], bool] = lambda _s: True
    ready: Callable[[TableSim], bool] = lambda _s: True
    count: bool | None = None
    before_shuffle: Callable[[TableSim, Plan], None] | None = None
    weight: int = 1
    floor_event: bool = False
    appended: bool = False


def cycle(kinds: list[tuple[str, int]]) -> list[str]:
    """A table's cycle of kinds: each kind once, in order, and each extra place of a kind of
    ``weight`` w spread evenly through the cycle (places j/w of the way round from it).

    Args:
        kinds: ``(kind, weight)`` in order; weights >= 1.

    Returns:
        The kinds in the order a table tries them (all weights 1: the kinds as given).
    """
    base = [k for k, _w in kinds]
    slots: list[tuple[float, int, str]] = [(float(i), 0, k) for i, k in enumerate(base)]
    for i, (k, w) in enumerate(kinds):
        slots += [((i + j * len(base) / w) % len(base) + 0.5, j, k) for j in range(1, w)]
    return [k for _pos, _j, k in sorted(slots)]


def hand_dealt(s: TableSim) -> bool:
    """The table deals from the dealer's hand (an injection only such tables can carry)."""
    return s.method == "HAND"


def single_deck(s: TableSim) -> bool:
    """The table deals one deck, shuffled before each round (not a two-deck rotation)."""
    return not s.rotation


def rotating(s: TableSim) -> bool:
    """The table rotates two decks through its shuffler (rulebook 10.3.1)."""
    return s.rotation


def rotation_ready(s: TableSim) -> bool:
    """The idle deck was dealt before, and no error of the last round is still to show."""
    return s.round_no >= 1 and not s.carry


def not_counting(s: TableSim) -> bool:
    """The table's shuffler does not count each shuffle (so the stub count is due)."""
    return not s.counting


def suppress_counts(s: TableSim, _plan: Plan) -> None:
    """Skip the stub count for the next 5 rounds (the stub-count-due rules fire)."""
    s.suppress = 5


def sequence_conflict(s: TableSim, plan: Plan) -> None:
    """Re-send an old seq with other content (the conflicting duplicate kind of DT-sequence-gap)."""
    s.w.seq -= 1
    s.emit(ev.NoMoreBetsAnnounced, round_id=None)
    s.expect("DT-sequence-gap", None, plan.kind or "")


def redeal_ready(s: TableSim) -> bool:
    """The deck in use was dealt since its shuffle and is not waiting for its cut."""
    return s.last_order is not None and not s.cut_pending


def start_outage(s: TableSim, plan: Plan) -> None:
    """The first round of an outage takes the device out of service (the others go on with it)."""
    if s.outage is None:
        s.take_out_of_service(plan)


def closing_table(s: TableSim) -> bool:
    """The second table of each game is the one that closes for the night (a rare event: at most
    three tables of a floor)."""
    return s.index == 1


def closing_ready(s: TableSim) -> bool:
    """A table closes for the night once, after two hours open at least."""
    return not s.closed and s.w.clock - s.spec.start >= timedelta(hours=2)


COMMON: dict[str, Injection] = {
    "duplicate-card": Injection(),
    "device-fault-deal": Injection(applies=single_deck),
    "fault-during-shuffle": Injection(applies=single_deck),
    "countless-shuffle-after-fault": Injection(applies=lambda s: s.counting and single_deck(s)),
    "sequence-gap": Injection(),
    "sequence-conflict": Injection(before_shuffle=sequence_conflict),
    "idle-deck-jam": Injection(applies=rotating, ready=rotation_ready),
    "idle-deck-fault-cleared": Injection(applies=rotating, ready=rotation_ready),
    "in-play-deck-fault": Injection(applies=rotating, ready=rotation_ready),
    # the floor's own events (FloorSpec.floor_events, rulebook 10.4)
    "jam-cleared": Injection(ready=lambda s: not s.carry, weight=3, floor_event=True),
    "jam-dealt-unshuffled": Injection(applies=single_deck, ready=redeal_ready, floor_event=True),
    "out-of-service-unmarked": Injection(applies=single_deck, before_shuffle=start_outage, floor_event=True),
    "out-of-service-marked": Injection(applies=single_deck, before_shuffle=start_outage, floor_event=True),
    # revision 5's (rulebook 10.5.1, 10.5.2)
    "empty-shuffler-fault": Injection(ready=lambda s: not s.carry, floor_event=True, appended=True),
    "spare-shuffler": Injection(applies=single_deck, floor_event=True, appended=True),
}


@dataclass(frozen=True)
class GameSim:
    """What the simulator knows of one game.

    Attributes:
        deal: deals one round ``(table, plan, deck, round_id)`` and returns True if the stub was
            counted.
        injections: every kind of error it can inject, in the order a table cycles through them.
    """

    deal: Callable[[TableSim, Plan, list[str], str], bool]
    injections: dict[str, Injection]
