"""A casino floor that deals real rounds of the three seed games and makes dealers' mistakes.

Each table plays rounds with a shuffled deck from a seeded :class:`random.Random`, dealt exactly
as the rulebook requires; with probability ``error_rate`` a round carries one injected
procedural error (one *kind* of error per rule the engine checks, cycled per table so a long run
covers every rule ID). Each injection knows the findings it must cause; they are the *truth*
(``rule_id``, ``table_id``, ``round_id``) that the audit's findings must equal exactly.

Same seed, same events, same bytes.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterator
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
FAULT_DEALS = frozenset({"device-fault-deal", "countless-shuffle-after-fault", "fault-during-shuffle"})
"""Kinds that deal on a device fault no shuffle cleared (DT-deal-after-device-fault)."""


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
    """

    tables: int = 24
    hours: float = 8.0
    seed: int = 7
    error_rate: float = 0.05
    start: datetime = DEFAULT_START
    duplicate_rate: float = 0.0
    floor_visit_rate: float = 0.08


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

    def __init__(self, spec: FloorSpec, table_id: str, game: Game, index: int, truth: list[Truth]) -> None:
        self.spec = spec
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
        self.kinds = [k for k, inj in INJECTIONS[game].items() if inj.applies(self)]
        self.kind_cursor = self.rng.randrange(len(self.kinds))
        self.pending: list[Envelope] = []
        self.last_order: list[str] | None = None
        """The order of the current deck as last dealt since its shuffle (None: not dealt yet)."""
        self.cut_pending = False

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
        self.emit(
            ev.DeviceRegistered,
            source=Source.SYSTEM,
            role=ActorRole.FLOOR,
            actor_id="FLOOR-1",
            device_id=self.shuffler,
            device_type="SHUFFLER",
            counts_each_shuffle=self.counting,
            indicates_full_deck=self.counting,
        )
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
        manual = plan.kind == "manual-shuffle"
        kwargs: dict[str, Any] = {"round_id": None}
        if manual:
            self.emit(ev.ShuffleStarted, method="MANUAL", **kwargs)
            self.emit(ev.ShuffleCompleted, method="MANUAL", **kwargs)
            self.cut(plan)
            return
        if plan.kind == "countless-shuffle-after-fault":
            self.device_fault("COUNT_ERROR", "IDLE")
        self.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=self.shuffler, source=Source.SHUFFLER, **kwargs)
        if plan.kind == "fault-during-shuffle":
            self.device_fault("COUNT_ERROR", "SHUFFLE")
        if plan.kind in ("shuffler-jam", "shuffler-jam-uncovered"):
            self.device_fault("JAM", "SHUFFLE")
            self.expect("PGP-645a.14-l-shuffler-fault", None, plan.kind)
            if plan.kind == "shuffler-jam-uncovered":
                self.expect("PGP-645a.14-n-out-of-order", None, plan.kind)
            if plan.kind == "shuffler-jam":
                self.emit(
                    ev.ShuffleStarted, method="AUTOMATED", device_id=self.shuffler, source=Source.SHUFFLER, **kwargs
                )
            else:
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

    def cut(self, plan: Plan) -> None:
        """Chapter 691: the deck is cut after each shuffle (§ 691.4), unless the error is to skip it."""
        if self.game is not Game.C691:
            return
        if plan.kind == "cut-skipped":
            self.cut_pending = True
            return
        self.cut_pending = False
        self.emit(ev.DeckCut, round_id=None, cut_by="PLAYER", role=ActorRole.PLAYER, actor_id="P-CUT")

    def device_fault(self, fault: str, during: str) -> None:
        """The shuffler signals a fault on the deck in it (its deck and what it was doing)."""
        self.emit(
            ev.ShufflerFaulted,
            round_id=None,
            device_id=self.shuffler,
            fault=fault,
            indicator="RED_LIGHT",
            during=during,
            source=Source.SHUFFLER,
            role=ActorRole.DEVICE,
            actor_id=self.shuffler,
        )

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
        if self.suppress:
            return plan
        if self.w.clock > self.end - timedelta(minutes=12):
            return plan
        if self.rng.random() >= self.spec.error_rate:
            return plan
        for _ in range(len(self.kinds)):
            kind = self.kinds[self.kind_cursor % len(self.kinds)]
            self.kind_cursor += 1
            inj = INJECTIONS[self.game][kind]
            if inj.applies(self) and inj.ready(self):
                plan.kind = kind
                break
        return plan

    def play_round(self) -> None:
        """Shuffle and deal one round (with its injected error, if any)."""
        plan = self.pick_plan()
        inj = INJECTIONS[self.game].get(plan.kind) if plan.kind else None
        if plan.kind is None:
            self.floor_visit()
        if inj is not None and inj.before_shuffle is not None:
            inj.before_shuffle(self, plan)
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
        self.round_no += 1
        self.w.dealer_id = self.dealer_on_duty()
        round_id = f"{self.table_id}-R{self.round_no:05d}"
        self.w.round_id = round_id
        if plan.kind == "sequence-gap":
            self.w.emit(ev.NoMoreBetsAnnounced, round_id=None)  # an event lost before it reached us
            self.expect("DT-sequence-gap", round_id, plan.kind)
            self.expect("DT-chain-broken", round_id, plan.kind)
        self.emit(ev.RoundStarted, round_no=self.round_no, dealing_method=self.method, dealer_id=self.w.dealer_id)
        if plan.kind == "redealt-unshuffled":
            a1 = {Game.TCP: "TCP-679a.9-a1-shuffler-required", Game.C691: "C691-DH-a1-shuffler-required"}[self.game]
            plan.expect += [a1, "DT-deck-composition"]  # the same faces again, in the same order
        dealer = {Game.TCP: deal_tcp, Game.C691: deal_c691, Game.PGP: deal_pgp}[self.game]
        counted = dealer(self, plan, deck, round_id)
        for rule_id in plan.expect:
            self.expect(rule_id, round_id, plan.kind or "")
        self.close_stub_window(plan, counted, round_id)
        self.w.round_id = None
        if plan.kind not in WRONG_DECKS:
            self.last_order = deck
        if plan.kind in ("duplicate-card", "redealt-unshuffled"):
            self.verify_deck()  # the floor checks the deck the duplicate came from: it is whole

    def dealer_on_duty(self) -> str:
        """Dealers rotate every 45 minutes; each table has its own three."""
        stint = int((self.w.clock - self.spec.start).total_seconds() // 2700)
        return f"D-{self.table_id}-{stint % 3 + 1}"

    def exempt(self, plan: Plan) -> bool:
        """True if this round's shuffle came from a counting shuffler (no stub-count duty)."""
        return self.counting and plan.kind not in (
            "manual-shuffle",
            "shuffler-jam-uncovered",
            "countless-shuffle-after-fault",
        )

    def stub_in_scope(self) -> bool:
        """True if rounds of this table count toward the 5-round stub window."""
        return self.game is not Game.PGP

    def count_due(self, plan: Plan) -> bool:
        """Whether the dealer counts the stub this round."""
        inj = INJECTIONS[self.game].get(plan.kind) if plan.kind else None
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
        if not self.stub_in_scope() or self.exempt(plan):
            return
        if counted:
            self.stub_run = 0
            self.count_after = self.rng.randint(1, 4)
            return
        self.stub_run += 1
        if self.stub_run % 5 == 0:
            rule = {Game.TCP: "TCP-679a.9-d-stub-count-due", Game.C691: "C691-DH-d-stub-count-due"}[self.game]
            if self.method != "HAND":
                rule = "TCP-679a.8/10-stub-count-PROV"
            self.expect(rule, round_id, plan.kind or "stub-count-skipped")


# -- the three games --------------------------------------------------------------------------


def _amount(sim: TableSim) -> int:
    return sim.rng.choice((500, 1000, 1500, 2500))


def _remedy_void(sim: TableSim, wager_ids: list[str], rule_id: str, *, deck: bool = False) -> None:
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


def deal_tcp(sim: TableSim, plan: Plan, deck: list[str], round_id: str) -> bool:
    """Deal one Three Card Prime round (§ 679a.7, § 679a.9). Returns True if the stub was counted."""
    k = plan.kind
    hand = sim.method == "HAND"
    rng = sim.rng
    seats = sorted(rng.sample(SEATS, rng.randint(1, 6)), key=SEATS.index)
    wagers: dict[str, str] = {}
    ante_amount: dict[str, int] = {}
    pair: list[str] = []
    n = 0

    def wid() -> str:
        nonlocal n
        n += 1
        return f"{round_id}-W{n:02d}"

    for i, seat in enumerate(seats):
        amount = _amount(sim)
        ante_amount[seat] = amount
        w = wid()
        wagers[w] = seat
        instrument = "CASH_VERBAL" if (k == "cash-wager" and i == 0) else "CHIPS"
        seated = not (k == "unseated-wager" and i == 0)
        sim.emit(
            ev.WagerPlaced,
            wager_id=w,
            seat=seat,
            wager_type="ANTE",
            amount=amount,
            instrument=instrument,
            player_seated=seated,
            role=ActorRole.PLAYER,
            actor_id=f"P-{seat}",
        )
        forced = i == 0 and k in ("community-early", "fourth-card-missing")
        if rng.random() < 0.4 or forced:
            w = wid()
            wagers[w] = seat
            pair.append(seat)
            sim.emit(
                ev.WagerPlaced,
                wager_id=w,
                seat=seat,
                wager_type="PAIR_BONUS",
                amount=500,
                role=ActorRole.PLAYER,
                actor_id=f"P-{seat}",
            )
        if (sim.prime and rng.random() < 0.2) or (k == "prime-not-offered" and i == 0):
            w = wid()
            wagers[w] = seat
            sim.emit(
                ev.WagerPlaced,
                wager_id=w,
                seat=seat,
                wager_type="PRIME",
                amount=500,
                role=ActorRole.PLAYER,
                actor_id=f"P-{seat}",
            )
    if k == "cash-wager":
        plan.expect.append("TCP-679a.7-a-instrument")
    if k == "unseated-wager":
        plan.expect.append("TCP-679a.7-b-seated")
    if k == "prime-not-offered":
        plan.expect.append("TCP-679a.7-d23-optional-wager-enabled")
    if k == "community-not-elected":
        pass
    if k != "no-more-bets-skipped":
        sim.emit(ev.NoMoreBetsAnnounced)
    else:
        plan.expect.append("TCP-679a.9-a3-no-more-bets")
    if k == "late-wager":
        seat = seats[0]
        ante_id = next(w for w, s in wagers.items() if s == seat)
        ante_amount[seat] += 500
        sim.emit(
            ev.WagerChanged,
            wager_id=ante_id,
            seat=seat,
            wager_type="ANTE",
            amount=ante_amount[seat],
            role=ActorRole.PLAYER,
            actor_id=f"P-{seat}",
        )
        plan.expect.append("TCP-679a.7-c-late-wager")
    if hand:
        sim.emit(ev.DeckHeld, hand="RIGHT", over_inventory_container=k != "deck-not-over-container")
        if k == "deck-not-over-container":
            plan.expect.append("TCP-679a.9-a2-same-hand")
    if k == "manual-shuffle":
        plan.expect.append("TCP-679a.9-a1-shuffler-required")

    src = "DECK_IN_HAND" if hand else "MANUAL_SHOE"
    cards = iter(deck)
    idx = 0
    dealt: list[tuple[str, str]] = []

    def deal(area: str, face: str = "DOWN", card: str | None = None) -> Envelope:
        nonlocal idx
        idx += 1
        c = card if card is not None else next(cards)
        event = sim.emit(
            ev.CardDealt,
            deal_index=idx,
            dealt_from=src,
            to_area=area,
            face=face,
            card=c,
            source=Source.RFID,
            after=rng.uniform(0.3, 1.0),
        )
        dealt.append((area, c))
        return event

    order = [*seats, "DEALER"]
    for p in range(3):
        this = list(order)
        if k == "deal-out-of-order" and p == 0:
            this[0], this[1] = this[1], this[0]
        for j, area in enumerate(this):
            face = "UP" if (k == "face-up-card" and p == 1 and j == 0) else "DOWN"
            dup = dealt[0][1] if (k == "duplicate-card" and p == 2 and j == 0) else None
            deal(area, face, dup)
            if k == "same-hand-switched" and p == 1 and j == 0:
                sim.emit(ev.DeckHeld, hand="LEFT")
        if k == "community-early" and p == 1 and pair:
            deal("PAIR_BONUS_COMMUNITY")
    for rule, kind in (
        ("TCP-679a.9-b-deal-order", "deal-out-of-order"),
        ("TCP-679a.9-b-face-down", "face-up-card"),
        ("DT-deck-composition", "duplicate-card"),
        ("TCP-679a.9-a2-same-hand", "same-hand-switched"),
    ):
        if k == kind:
            plan.expect.append(rule)
    if k in FAULT_DEALS:
        plan.expect.append("DT-deal-after-device-fault")
    if k == "extra-dealer-card":
        deal("DEALER")
        plan.expect.append("TCP-679a.9-b-three-each")
    if pair:
        if sim.pair_mode is PairBonusMode.PER_PLAYER:
            for i, seat in enumerate(pair):
                if k == "fourth-card-missing" and i == 0:
                    plan.expect.append("TCP-679a.9-b-pair-bonus-4th")
                    continue
                deal(f"PAIR_BONUS_4TH_{seat[5:]}")
        elif k != "community-early":
            deal("PAIR_BONUS_COMMUNITY")
        else:
            plan.expect.append("TCP-679a.9-g-pair-bonus-community")
    misdeal = k in ("misdeal", "misdeal-mismatch", "misdeal-unremedied")
    if misdeal:
        deal("BURN")
        plan.expect.append("TCP-679a.9-f-misdeal-full-deck")
    counted = sim.count_due(plan)
    voided = False
    if counted:
        stub = len(deck) - len(dealt)
        sim.emit(ev.StubCounted, count=stub, method="OTHER" if k == "count-not-face-down" else "FACE_DOWN_ON_LAYOUT")
        if k == "count-not-face-down":
            plan.expect.append("TCP-679a.9-d-count-method")
        if misdeal and k != "misdeal-unremedied":
            sim.emit(ev.MisdealDetermined, misdealt=k == "misdeal", dealer_reconciled_total=52)
            if k == "misdeal-mismatch":
                plan.expect.append("TCP-679a.9-f-finding-mismatch")
            _remedy_void(sim, list(wagers), "TCP-679a.9-f-misdeal-full-deck")
            voided = True
        if k in WRONG_DECKS:
            plan.expect.append("TCP-679a.9-f-wrong-deck")
            sim.emit(ev.MisdealDetermined, misdealt=k == "wrong-deck-mismatch", dealer_reconciled_total=len(deck))
            if k == "wrong-deck-mismatch":
                plan.expect.append("TCP-679a.9-f-finding-mismatch")
            _remedy_void(sim, list(wagers), "TCP-679a.9-f-wrong-deck", deck=True)
            voided = True
    if k == "misdeal-unremedied":
        plan.expect.append("DT-remedy-overdue")
    if not voided:
        if k == "stub-exposed":
            sim.emit(ev.StubDiscarded, exposed=True)
            plan.expect.append("TCP-679a.9-c-stub-unexposed")
        elif k in ("stub-kept", "stub-kept-counted"):
            plan.expect.append("TCP-679a.9-e-correct-count" if counted else "TCP-679a.9-c-stub-unexposed")
        else:
            sim.emit(ev.StubDiscarded)
        for seat in seats:
            play = rng.random() < 0.7
            sim.emit(
                ev.PlayerDecided,
                seat=seat,
                decision="PLAY" if play else "FOLD",
                role=ActorRole.PLAYER,
                actor_id=f"P-{seat}",
            )
            if play:
                w = wid()
                wagers[w] = seat
                amount = ante_amount[seat] + (500 if (k == "play-not-ante" and seat == seats[0]) else 0)
                sim.emit(
                    ev.WagerPlaced,
                    wager_id=w,
                    seat=seat,
                    wager_type="PLAY",
                    amount=amount,
                    role=ActorRole.PLAYER,
                    actor_id=f"P-{seat}",
                )
                if amount != ante_amount[seat]:
                    plan.expect.append("TCP-679a.7-d1-play-equals-ante")
        reveal(sim, [(o, [c for a, c in dealt if a == o]) for o in (*seats, "DEALER")])
        for w in wagers:
            outcome = rng.choice(("WIN", "LOSS", "LOSS", "PUSH"))
            sim.emit(ev.WagerSettled, wager_id=w, outcome=outcome, payout=1000 if outcome == "WIN" else 0, after=0.4)
    sim.emit(ev.RoundCompleted)
    if k in WRONG_DECKS:
        sim.new_deck()
    return counted


def deal_c691(sim: TableSim, plan: Plan, deck: list[str], round_id: str) -> bool:
    """Deal one round of the Chapter 691 game: burn 1, five community cards. Returns True if counted."""
    k = plan.kind
    rng = sim.rng
    seats = sorted(rng.sample(SEATS, rng.randint(1, 6)), key=SEATS.index)
    wagers = []
    for i, seat in enumerate(seats):
        w = f"{round_id}-W{i + 1:02d}"
        wagers.append(w)
        sim.emit(
            ev.WagerPlaced,
            wager_id=w,
            seat=seat,
            wager_type="MAIN",
            amount=_amount(sim),
            role=ActorRole.PLAYER,
            actor_id=f"P-{seat}",
        )
    if k == "no-more-bets-skipped":
        plan.expect.append("C691-DH-a3-no-more-bets")
    else:
        sim.emit(ev.NoMoreBetsAnnounced)
    if k == "manual-shuffle":
        plan.expect.append("C691-DH-a1-shuffler-required")
    sim.emit(ev.DeckHeld, hand="LEFT", in_front_of_dealer=k != "deck-not-in-front")
    if k in ("deck-not-in-front", "cut-skipped"):
        plan.expect.append("C691-DH-a2-same-hand")
    cards = iter(deck)
    dealt: list[str] = []
    board: list[str] = []
    idx = 0

    def deal(area: str, face: str = "DOWN", card: str | None = None) -> None:
        nonlocal idx
        idx += 1
        c = card if card is not None else next(cards)
        dealt.append(c)
        if area.startswith("COMMUNITY_"):
            board.append(c)
        sim.emit(
            ev.CardDealt,
            deal_index=idx,
            to_area=area,
            face=face,
            card=c,
            source=Source.RFID,
            after=rng.uniform(0.3, 1.0),
        )

    misdeal = k in ("misdeal", "misdeal-unremedied")
    if k != "burn-skipped":
        deal("BURN")
    if misdeal:
        deal("BURN")
    community = 4 if k == "four-community" else 5
    for j in range(community):
        face = "UP" if (k == "face-up-card" and j == 2) else "DOWN"
        dup = next(c for c in dealt if c != "JK") if (k == "duplicate-card" and j == 3) else None
        deal(f"COMMUNITY_{j + 1}", face, dup)
        if k == "same-hand-switched" and j == 1:
            sim.emit(ev.DeckHeld, hand="RIGHT")
    for rule, kind in (
        ("C691-DH-b-burn-first", "burn-skipped"),
        ("C691-DH-b-five-community", "four-community"),
        ("C691-DH-b-face-down", "face-up-card"),
        ("DT-deck-composition", "duplicate-card"),
        ("C691-DH-a2-same-hand", "same-hand-switched"),
    ):
        if k == kind:
            plan.expect.append(rule)
    if k in FAULT_DEALS:
        plan.expect.append("DT-deal-after-device-fault")
    if misdeal:
        plan.expect += ["C691-DH-b-burn-first", "C691-DH-f-misdeal-full-deck"]
    counted = sim.count_due(plan)
    voided = False
    if counted:
        sim.emit(
            ev.StubCounted,
            count=len(deck) - len(dealt),
            method="OTHER" if k == "count-not-face-down" else "FACE_DOWN_ON_LAYOUT",
        )
        if k == "count-not-face-down":
            plan.expect.append("C691-DH-d-count-method")
        if k == "misdeal":
            sim.emit(ev.MisdealDetermined, misdealt=True, dealer_reconciled_total=54)
            _remedy_void(sim, wagers, "C691-DH-f-misdeal-full-deck")
            voided = True
        if k in WRONG_DECKS:
            plan.expect.append("C691-DH-f-wrong-deck")
            sim.emit(ev.MisdealDetermined, misdealt=False, dealer_reconciled_total=len(deck))
            _remedy_void(sim, wagers, "C691-DH-f-wrong-deck", deck=True)
            voided = True
    if k == "misdeal-unremedied":
        plan.expect.append("DT-remedy-overdue")
    if not voided:
        if k == "stub-exposed":
            sim.emit(ev.StubDiscarded, exposed=True)
            plan.expect.append("C691-DH-c-stub-unexposed")
        elif k == "stub-kept":
            plan.expect.append("C691-DH-c-stub-unexposed")
        else:
            sim.emit(ev.StubDiscarded)
        reveal(sim, [("COMMUNITY", board)])
        for w in wagers:
            outcome = rng.choice(("WIN", "LOSS", "LOSS"))
            sim.emit(ev.WagerSettled, wager_id=w, outcome=outcome, payout=1000 if outcome == "WIN" else 0, after=0.4)
    sim.emit(ev.RoundCompleted)
    if k in WRONG_DECKS:
        sim.new_deck()
    return counted


def deal_pgp(sim: TableSim, plan: Plan, deck: list[str], round_id: str) -> bool:
    """Deal one Pai Gow Poker round: dice for the starting position, seven stacks of seven."""
    k = plan.kind
    rng = sim.rng
    cfg_order = ("DEALER", *reversed(SEATS))
    seats = sorted(rng.sample(SEATS, rng.randint(1, 6)), key=SEATS.index)
    wagers: dict[str, str] = {}
    dice_wagers: list[str] = []
    for i, seat in enumerate(seats):
        w = f"{round_id}-W{i + 1:02d}"
        wagers[w] = seat
        sim.emit(
            ev.WagerPlaced,
            wager_id=w,
            seat=seat,
            wager_type="MAIN",
            amount=_amount(sim),
            role=ActorRole.PLAYER,
            actor_id=f"P-{seat}",
        )
    use_dice_wager = sim.dice_wagers and k != "rng-used"
    if use_dice_wager and k != "dice-wager-late":
        w = f"{round_id}-W90"
        wagers[w] = seats[0]
        dice_wagers.append(w)
        sim.emit(
            ev.WagerPlaced,
            wager_id=w,
            seat=seats[0],
            wager_type="SUM",
            amount=500,
            role=ActorRole.PLAYER,
            actor_id=f"P-{seats[0]}",
        )
    sim.emit(ev.NoMoreBetsAnnounced)
    if k == "rng-used":
        number = rng.randint(1, 12)
        sim.emit(ev.RngNumberDisplayed, number=number, source=Source.SYSTEM, role=ActorRole.DEVICE, actor_id="RNG-1")
        total = number
        plan.expect.append("PGP-645a.9-rng-PROV")
    else:
        shakes = 2 if k == "two-shakes" else rng.randint(3, 5)
        if k == "two-shakes":
            plan.expect.append("PGP-645a.9-shake-3x-PROV")
        sim.emit(ev.DiceShaken, shaker_id=f"{sim.table_id}-SHK", shake_count=shakes)
        if k == "dice-wager-late":
            w = f"{round_id}-W90"
            wagers[w] = seats[0]
            dice_wagers.append(w)
            sim.emit(
                ev.WagerPlaced,
                wager_id=w,
                seat=seats[0],
                wager_type="SUM",
                amount=500,
                role=ActorRole.PLAYER,
                actor_id=f"P-{seats[0]}",
            )
            plan.expect.append("PGP-645c.2-f-wager-before-shake")
        values = (rng.randint(1, 6), rng.randint(1, 6), rng.randint(1, 6))
        if k in ("dice-not-flat", "die-out"):
            sim.emit(ev.DiceRevealed, values=values, all_flat=k != "dice-not-flat", die_out_of_shaker=k == "die-out")
            sim.emit(ev.NoRollCalled, reason="NOT_FLAT" if k == "dice-not-flat" else "OUT_OF_SHAKER")
            sim.emit(ev.DiceShaken, shaker_id=f"{sim.table_id}-SHK", shake_count=3)
            plan.expect.append(
                "PGP-645a.14-a-no-roll-not-flat" if k == "dice-not-flat" else "PGP-645a.14-b-no-roll-out"
            )
            values = (rng.randint(1, 6), rng.randint(1, 6), rng.randint(1, 6))
        sim.emit(ev.DiceRevealed, values=values)
        if k == "dice-not-announced" and dice_wagers:
            plan.expect.append("PGP-645c.2-g-announce-dice")
        else:
            sim.emit(ev.DiceValuesAnnounced, values=values)
        total = sum(values)
        announced = total + 1 if k == "wrong-total" else total
        sim.emit(ev.DiceTotalAnnounced, total=announced)
        if k == "wrong-total":
            total = announced
            plan.expect.append("PGP-645a.14-c-wrong-total")
    start = cfg_order.index(cfg_order[(total - 1) % 7])
    if k == "wrong-start":
        start = (start + 2) % 7
        plan.expect.append("PGP-645a.9-start-position-PROV")
    sim.emit(ev.StartingPositionDetermined, position=cfg_order[start], basis="RNG" if k == "rng-used" else "DICE")
    src = "AUTO_SHOE" if sim.method == "AUTO_SHOE" else "DECK_IN_HAND"
    cards = iter(deck)
    idx = 0
    seen: list[str] = []
    stack_cards: dict[int, list[str]] = {}
    face_up = 0
    voided = False
    for s in range(1, 8):
        size = 6 if (k == "short-stack" and s == 3) else 7
        for c in range(size):
            if k == "shoe-fault" and s == 4 and c == 2:
                sim.emit(
                    ev.AutoShoeFaulted,
                    device_id=sim.shoe,
                    fault="JAM",
                    cards_dealt_so_far=idx,
                    source=Source.SHOE,
                    role=ActorRole.DEVICE,
                    actor_id=sim.shoe,
                )
                plan.expect.append("PGP-645a.14-m-shoe-fault")
                sim.emit(ev.CardsRemovedFromDevice, device_id=sim.shoe, count=len(deck) - idx - face_up)
                _remedy_void(sim, list(wagers), "PGP-645a.14-m-shoe-fault")
                sim.emit(ev.RoundCompleted)
                return False
            if k in ("one-face-up", "two-face-up") and (
                (s == 2 and c == 0) or (k == "two-face-up" and s == 5 and c == 3)
            ):
                face_up += 1
                sim.emit(
                    ev.CardFoundFaceUp,
                    location="SHOE" if src == "AUTO_SHOE" else "DECK",
                    card=next(cards),
                    disposition="DISCARD_RACK",
                )
            if k == "drawn-in-error" and s == 3 and c == 3:
                sim.emit(ev.CardDrawnInError, face_exposed=False, disposition="DISCARDED")
                next(cards)
                plan.expect.append("PGP-645a.14-g-drawn-in-error")
            idx += 1
            card = seen[0] if (k == "duplicate-card" and s == 6 and c == 0) else next(cards)
            seen.append(card)
            stack_cards.setdefault(s, []).append(card)
            sim.emit(
                ev.CardDealt,
                deal_index=idx,
                dealt_from=src,
                to_area=f"STACK_{s}",
                card=card,
                source=Source.RFID,
                after=rng.uniform(0.2, 0.6),
            )
            if k == "exposed-in-stacks" and s == 2 and c == 4:
                sim.emit(ev.CardExposed, card=card, location="STACK", phase="STACK_DEAL")
                plan.expect.append("PGP-645a.14-j-exposed-during-stacks")
    if k == "one-face-up":
        plan.expect.append("PGP-645a.14-f-one-face-up")
    if k == "two-face-up":
        plan.expect += ["PGP-645a.14-f-one-face-up", "PGP-645a.14-f-two-face-up"]
    if k == "duplicate-card":
        plan.expect.append("DT-deck-composition")
    if k in FAULT_DEALS:
        plan.expect.append("DT-deal-after-device-fault")
    sim.emit(ev.StubDiscarded, exposed=k == "leftover-exposed")
    if k == "leftover-exposed":
        plan.expect.append("PGP-645a.9-stacks-PROV")
    void_now = k in ("two-face-up", "wrong-total", "short-stack", "exposed-in-stacks")
    skipped = None
    for s in range(1, 8):
        pos = cfg_order[(start + s - 1) % 7]
        if k == "stack-skipped" and s == 7:
            skipped = pos
            continue
        size = 6 if (k == "short-stack" and s == 3) else 7
        sim.emit(ev.StackDelivered, stack_index=s, card_count=size, to_position=pos)
    if k == "short-stack":
        plan.expect.append("PGP-645a.14-hk-wrong-count")
    if skipped is not None:
        plan.expect += ["PGP-645a.9-stacks-PROV", "PGP-645a.9-unwagered-stacks-PROV"]
    if void_now:
        rule = {
            "two-face-up": "PGP-645a.14-f-two-face-up",
            "wrong-total": "PGP-645a.14-c-wrong-total",
            "short-stack": "PGP-645a.14-hk-wrong-count",
            "exposed-in-stacks": "PGP-645a.14-j-exposed-during-stacks",
        }[k or ""]
        _remedy_void(sim, list(wagers), rule)
        voided = True
    void_seat: str | None = None  # a seat whose hand the player voided: its hand wagers are returned
    if not voided:
        exposed_seat = seats[0]
        if k in ("player-card-exposed", "decision-after-look"):
            sim.emit(ev.CardExposed, card=deck[idx], location="PLAYER_HAND", seat=exposed_seat, phase="PLAY")
            plan.expect.append("PGP-645a.14-d-player-card-exposed")
            if k == "decision-after-look":
                sim.emit(ev.PlayerViewedCards, seat=exposed_seat, role=ActorRole.PLAYER, actor_id=f"P-{exposed_seat}")
                plan.expect.append("PGP-645a.14-d-decision-after-look")
            decision = rng.choice(("PLAY_OUT", "VOID"))
            sim.emit(
                ev.PlayerVoidDecided,
                seat=exposed_seat,
                decision=decision,
                role=ActorRole.PLAYER,
                actor_id=f"P-{exposed_seat}",
            )
            if decision == "VOID":
                void_seat = exposed_seat
                sim.emit(
                    ev.RoundVoided,
                    scope=exposed_seat,
                    reason_code="PLAYER_VOID",
                    rule_id="PGP-645a.14-d-player-card-exposed",
                )
        if k in ("dealer-card-exposed", "dealer-exposed-unremedied"):
            sim.emit(ev.CardExposed, card=deck[0], location="DEALER_HAND", phase="PLAY")
            plan.expect.append("PGP-645a.14-e-dealer-bank-exposed")
            if k == "dealer-card-exposed":
                _remedy_void(sim, list(wagers), "PGP-645a.14-e-dealer-bank-exposed")
                voided = True
            else:
                plan.expect.append("DT-remedy-overdue")
    if not voided:
        for seat in seats:
            if k == "decision-after-look" and seat == seats[0]:
                continue
            sim.emit(ev.PlayerViewedCards, seat=seat, role=ActorRole.PLAYER, actor_id=f"P-{seat}")
        house = k != "house-way-missed"
        sim.emit(
            ev.HandSet, owner="DEALER", five_card=tuple(deck[0:5]), two_card=tuple(deck[5:7]), matches_house_way=house
        )
        if not house:
            plan.expect.append("PGP-645a.14-i-house-way")
            sim.emit(ev.HandReset, owner="DEALER")
        held = {cfg_order[(start + s - 1) % 7]: cards for s, cards in stack_cards.items()}
        reveal(sim, [(o, held.get(o, [])) for o in ("DEALER", *seats)])
        for w, seat in wagers.items():
            outcome = rng.choice(("WIN", "LOSS", "PUSH"))
            if seat == void_seat and w not in dice_wagers:
                outcome = "PUSH"  # the voided hand's wager is returned, never won or lost
            sim.emit(ev.WagerSettled, wager_id=w, outcome=outcome, payout=1000 if outcome == "WIN" else 0, after=0.4)
    sim.emit(ev.RoundCompleted)
    return False


@dataclass(frozen=True)
class Injection:
    """One kind of error: where it applies (``applies``: the table; ``ready``: the table's state
    now), and whether it forces the stub count (True/False)."""

    applies: Callable[[TableSim], bool] = lambda _s: True
    ready: Callable[[TableSim], bool] = lambda _s: True
    count: bool | None = None
    before_shuffle: Callable[[TableSim, Plan], None] | None = None


def _hand(s: TableSim) -> bool:
    return s.method == "HAND"


def _not_counting(s: TableSim) -> bool:
    return not s.counting


def _suppress(s: TableSim, _plan: Plan) -> None:
    s.suppress = 5


def _sequence_conflict(s: TableSim, plan: Plan) -> None:
    """Re-send an old seq with other content (the conflicting duplicate kind of DT-sequence-gap)."""
    s.w.seq -= 1
    s.emit(ev.NoMoreBetsAnnounced, round_id=None)
    s.expect("DT-sequence-gap", None, plan.kind or "")


def _redeal_ready(s: TableSim) -> bool:
    return s.last_order is not None and not s.cut_pending


COMMON = {
    "duplicate-card": Injection(),
    "device-fault-deal": Injection(),
    "fault-during-shuffle": Injection(),
    "countless-shuffle-after-fault": Injection(applies=lambda s: s.counting),
    "sequence-gap": Injection(),
    "sequence-conflict": Injection(before_shuffle=_sequence_conflict),
}

INJECTIONS: dict[Game, dict[str, Injection]] = {
    Game.TCP: {
        **COMMON,
        "cash-wager": Injection(),
        "unseated-wager": Injection(),
        "late-wager": Injection(),
        "play-not-ante": Injection(),
        "prime-not-offered": Injection(applies=lambda s: not s.prime),
        "manual-shuffle": Injection(applies=_hand, count=True),
        "deck-not-over-container": Injection(applies=_hand),
        "same-hand-switched": Injection(applies=_hand),
        "no-more-bets-skipped": Injection(applies=_hand),
        "deal-out-of-order": Injection(applies=_hand),
        "extra-dealer-card": Injection(applies=_hand, count=False),
        "face-up-card": Injection(applies=_hand),
        "fourth-card-missing": Injection(
            applies=lambda s: _hand(s) and s.pair_mode is PairBonusMode.PER_PLAYER, count=False
        ),
        "community-early": Injection(applies=lambda s: _hand(s) and s.pair_mode is PairBonusMode.COMMUNITY),
        "stub-exposed": Injection(applies=_hand),
        "stub-kept": Injection(applies=_hand),
        "stub-kept-counted": Injection(applies=_hand, count=True),
        "count-not-face-down": Injection(applies=_hand, count=True),
        "misdeal": Injection(applies=_hand, count=True),
        "misdeal-mismatch": Injection(applies=_hand, count=True),
        "misdeal-unremedied": Injection(applies=_hand, count=True),
        "wrong-deck": Injection(applies=lambda s: _hand(s) and _not_counting(s), count=True),
        "wrong-deck-mismatch": Injection(applies=lambda s: _hand(s) and _not_counting(s), count=True),
        "long-deck": Injection(applies=lambda s: _hand(s) and _not_counting(s), count=True),
        "short-deck": Injection(applies=lambda s: _hand(s) and _not_counting(s), count=True),
        "redealt-unshuffled": Injection(applies=_hand, ready=_redeal_ready),
        "stub-count-skipped": Injection(applies=_not_counting, before_shuffle=_suppress),
        "shuffle-count-mismatch": Injection(applies=lambda s: s.counting),
    },
    Game.C691: {
        **COMMON,
        "manual-shuffle": Injection(count=True),
        "deck-not-in-front": Injection(),
        "same-hand-switched": Injection(),
        "no-more-bets-skipped": Injection(),
        "burn-skipped": Injection(count=False),
        "four-community": Injection(count=False),
        "face-up-card": Injection(),
        "stub-exposed": Injection(),
        "stub-kept": Injection(),
        "count-not-face-down": Injection(count=True),
        "misdeal": Injection(count=True),
        "misdeal-unremedied": Injection(count=True),
        "wrong-deck": Injection(applies=_not_counting, count=True),
        "long-deck": Injection(applies=_not_counting, count=True),
        "short-deck": Injection(applies=_not_counting, count=True),
        "redealt-unshuffled": Injection(ready=_redeal_ready),
        "cut-skipped": Injection(),
        "stub-count-skipped": Injection(applies=_not_counting, before_shuffle=_suppress),
        "shuffle-count-mismatch": Injection(applies=lambda s: s.counting),
    },
    Game.PGP: {
        **COMMON,
        "dice-not-flat": Injection(),
        "die-out": Injection(),
        "wrong-total": Injection(),
        "player-card-exposed": Injection(),
        "decision-after-look": Injection(),
        "dealer-card-exposed": Injection(),
        "dealer-exposed-unremedied": Injection(),
        "one-face-up": Injection(),
        "two-face-up": Injection(),
        "drawn-in-error": Injection(),
        "short-stack": Injection(),
        "house-way-missed": Injection(),
        "exposed-in-stacks": Injection(),
        "shuffler-jam": Injection(),
        "shuffler-jam-uncovered": Injection(),
        "shoe-fault": Injection(applies=lambda s: s.method == "AUTO_SHOE"),
        "dice-wager-late": Injection(applies=lambda s: s.dice_wagers),
        "dice-not-announced": Injection(applies=lambda s: s.dice_wagers),
        "two-shakes": Injection(),
        "wrong-start": Injection(),
        "rng-used": Injection(),
        "leftover-exposed": Injection(),
        "stack-skipped": Injection(),
        "shuffle-count-mismatch": Injection(applies=lambda s: s.counting),
    },
}
"""Every kind of error the simulator injects, per game."""


def simulate(spec: FloorSpec, truth: list[Truth] | None = None) -> Iterator[Envelope]:
    """Yield the events of a whole floor, merged across tables by ``occurred_at`` (then table, seq).

    Args:
        spec: what to simulate.
        truth: a list that receives the expected findings as the simulation runs (complete once
            the iterator is exhausted).

    Yields:
        Events in time order; each table's events stay in seq order.
    """
    sink = truth if truth is not None else []
    sims = [TableSim(spec, table_id, game, i // 3, sink) for i, (table_id, game) in enumerate(table_ids(spec.tables))]

    def key(e: Envelope) -> tuple[datetime, str, int]:
        return (e.occurred_at, e.table_id, e.seq)

    yield from heapq.merge(*(s.events() for s in sims), key=key)
