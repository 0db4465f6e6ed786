"""Factories for the rule tests: one table's event trail, built in order with the simulator's
``TableWriter``, and a clean round of each game with hooks to alter it.

A test reads as given / when / then:

    t = tcp()                                   # given a configured table (fixture factory)
    log = t.tcp_round("R1", hooks={...})        # when a round is dealt, altered by a hook
    [f] = t.raised("TCP-...")                   # then the rule fires once, with this evidence

Round builders emit the correct procedure step by step. Each ``hooks`` entry names a point of the
round (see ``*_HOOKS``) and is called there with the trail; what it returns (an event or a tuple
of events) is kept in the round log under the hook's name, so the test can name the events that
prove a finding. Builders refuse unknown hook names, so a misspelt hook cannot silently turn a
test into a tautology.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from dealtrail.simulator.builder import TableWriter
from schemas import events as ev
from schemas.base import Envelope, Game
from schemas.config import TableConfig
from schemas.findings import Finding, FindingStatus
from streams.engine import RULES_BY_ID, TableState, fold

START = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
TABLE_ID = "T-01"
DECK_ID = "DK-1"
SHUFFLER = "SHF-1"
SHOE = "SHOE-1"
SEATS = ("SEAT_1", "SEAT_2", "SEAT_3", "SEAT_4", "SEAT_5", "SEAT_6")
FULL_DECK = tuple(r + s for s in "CDHS" for r in "23456789TJQKA")
"""The 52 rank+suit cards; clean rounds draw their faces from here (no repeats within a shuffle)."""
ANTE = 500
"""Ante amount in cents."""

Hook = Callable[["Trail"], Any]

TCP_HOOKS = frozenset(
    {
        "before_start",
        "after_start",
        "after_wagers",
        "after_nmb",
        "after_held",
        "after_deal",
        "after_stub",
        "after_discard",
        "before_settle",
        "before_complete",
        "after_complete",
    }
)
C691_HOOKS = TCP_HOOKS
PGP_HOOKS = frozenset(
    {
        "before_start",
        "after_start",
        "after_wagers",
        "after_nmb",
        "before_dice",
        "after_reveal",
        "after_dice",
        "after_stacks_dealt",
        "after_discard",
        "after_delivery",
        "before_settle",
        "before_complete",
        "after_complete",
    }
)


def sanitize(rule_id: str) -> str:
    """A rule ID as it appears in a test function name: ``TCP-679a.9-b-face-down`` -> ``TCP_679a_9_b_face_down``."""
    return "".join(c if c.isalnum() else "_" for c in rule_id)


def count_order(seats: Sequence[str]) -> list[str]:
    """Pai Gow positions in counting order (rulebook § 621a.6(c) analog): the dealer is 1 and the
    count goes counter-clockwise, i.e. from the dealer's right, the reverse of the clockwise
    dealing order of the seats."""
    return ["DEALER", *reversed(seats)]


def position_for(total: int, seats: Sequence[str] = SEATS) -> str:
    """The position a dice total (or RNG number) counts to."""
    order = count_order(seats)
    return order[(total - 1) % len(order)]


class RoundLog(dict[str, Any]):
    """The named events of one built round (``log["started"]``, ``log["nmb"]``, hook results),
    plus ``cards`` (CardDealt in deal order), ``stacks`` (StackDelivered in order) and ``wagers``."""

    def __init__(self, round_id: str) -> None:
        super().__init__()
        self.round_id = round_id
        self.cards: list[ev.CardDealt] = []
        self.stacks: list[ev.StackDelivered] = []
        self.wagers: dict[str, ev.WagerPlaced] = {}

    def id(self, name: str) -> str:
        """The event ID of the named event."""
        return self[name].event_id

    def ids(self, *names: str) -> tuple[str, ...]:
        """The event IDs of the named events, in the given order."""
        return tuple(self.id(n) for n in names)

    def card_ids(self, *indexes: int) -> tuple[str, ...]:
        """Event IDs of the dealt cards at the given positions of the deal (0-based)."""
        return tuple(self.cards[i].event_id for i in indexes)

    def cards_to(self, area: str) -> tuple[str, ...]:
        """Event IDs of the cards dealt to one area, in deal order."""
        return tuple(c.event_id for c in self.cards if c.to_area == area)


class Trail:
    """The events of one table, in order, and the findings the engine raises for them."""

    SHUFFLER = SHUFFLER
    SHOE = SHOE

    def __init__(self, game: Game, table_id: str = TABLE_ID) -> None:
        self.game = game
        self.writer = TableWriter(table_id, game, START)
        self.events: list[Envelope] = []
        self.config: TableConfig | None = None
        self.counting_shuffler = True
        self.round_wagers: dict[str, dict[str, ev.WagerPlaced]] = {}
        self.rounds_started = 0

    # -- raw events ---------------------------------------------------------------------------
    def emit(self, cls: type[Envelope], **fields: Any) -> Any:
        """Stamp and record the next event of the table."""
        event = self.writer.emit(cls, **fields)
        self.events.append(event)
        if isinstance(event, ev.WagerPlaced) and event.round_id is not None:
            self.round_wagers.setdefault(event.round_id, {})[event.wager_id] = event
        return event

    def append(self, event: Envelope) -> Envelope:
        """Record an event built elsewhere (duplicates, out-of-sequence copies)."""
        self.events.append(event)
        return event

    # -- engine -------------------------------------------------------------------------------
    def run(self) -> tuple[TableState | None, list[Finding]]:
        """Fold every event through the engine."""
        return fold(self.events)

    def findings(self) -> list[Finding]:
        """Every finding and revision, in the order raised."""
        return self.run()[1]

    def raised(self, rule_id: str) -> list[Finding]:
        """The new findings (revision 0) of one rule."""
        return [f for f in self.findings() if f.rule_id == rule_id and f.revision == 0]

    def rule_ids(self) -> set[str]:
        """The rule IDs of all new findings."""
        return {f.rule_id for f in self.findings() if f.revision == 0}

    def assert_raised(self, rule_id: str, *, round_id: str | None, evidence: Iterable[str]) -> Finding:
        """Exactly one new finding of ``rule_id``, at this table and round, proven by exactly
        ``evidence`` (event IDs in order), open, with the catalogue's citation and severity."""
        found = self.raised(rule_id)
        assert len(found) == 1, f"{rule_id}: expected 1 finding, got " + repr(
            [(f.round_id, f.evidence_event_ids, f.message) for f in found]
        )
        f = found[0]
        spec = RULES_BY_ID[rule_id]
        assert f.rule_id == rule_id
        assert f.table_id == TABLE_ID
        assert f.round_id == round_id
        assert f.evidence_event_ids == tuple(evidence), f.message
        assert f.status == FindingStatus.OPEN
        assert (f.citation, f.severity, f.provisional) == (spec.citation, spec.severity, spec.provisional)
        return f

    def assert_not_raised(self, rule_id: str) -> None:
        """No finding of ``rule_id`` at all."""
        found = self.raised(rule_id)
        assert found == [], f"{rule_id} raised: " + repr([(f.evidence_event_ids, f.message) for f in found])

    def assert_clean(self) -> None:
        """No finding of any rule."""
        found = self.findings()
        assert found == [], repr([(f.rule_id, f.evidence_event_ids, f.message) for f in found])

    def history(self, finding_id: str) -> list[Finding]:
        """All revisions of one finding, in order."""
        return [f for f in self.findings() if f.finding_id == finding_id]

    # -- table setup --------------------------------------------------------------------------
    def configure(self, counting_shuffler: bool = True, jokers: int = 0, declared: int = 52, **config: Any) -> Trail:
        """TableConfigured, a shuffler (counting or not), an automated shoe and one deck."""
        self.config = TableConfig(game=self.game, rules_submission_id="RS-2026-01", **config)
        self.counting_shuffler = counting_shuffler
        self.emit(ev.TableConfigured, config=self.config, role="FLOOR", actor_id="F-01")
        self.emit(
            ev.DeviceRegistered,
            device_id=SHUFFLER,
            device_type="SHUFFLER",
            counts_each_shuffle=counting_shuffler,
            indicates_full_deck=counting_shuffler,
            role="FLOOR",
            actor_id="F-01",
        )
        self.emit(ev.DeviceRegistered, device_id=SHOE, device_type="AUTO_SHOE", role="FLOOR", actor_id="F-01")
        self.writer.deck_id = DECK_ID
        self.emit(ev.DeckIntroduced, declared_count=declared, jokers=jokers, role="FLOOR", actor_id="F-01")
        return self

    @property
    def deck_size(self) -> int:
        assert self.config is not None
        return self.config.cards_per_deck

    def shuffle(self, method: str = "AUTOMATED", **completed: Any) -> tuple[ev.ShuffleStarted, ev.ShuffleCompleted]:
        """A full shuffle of the deck; an automated shuffle by a counting device reports its count.
        A Chapter 691 deck is then cut (§ 691.4; the cut a schema version 2 trail records)."""
        device = SHUFFLER if method == "AUTOMATED" else None
        report: dict[str, Any] = {}
        if method == "AUTOMATED" and self.counting_shuffler:
            report = {"device_card_count": self.deck_size, "device_full_deck_ok": True}
        report.update(completed)
        started = self.emit(ev.ShuffleStarted, method=method, device_id=device)
        done = self.emit(ev.ShuffleCompleted, method=method, device_id=device, **report)
        if self.game is Game.C691 and done.mode == "SHUFFLE" and done.device_full_deck_ok is not False:
            self.emit(ev.DeckCut, cut_by="PLAYER")
        return started, done

    # -- remedies -----------------------------------------------------------------------------
    def void_all(self, rule_id: str | None = None) -> ev.RoundVoided:
        """RoundVoided for all hands of the current round."""
        return self.emit(ev.RoundVoided, scope="ALL_HANDS", reason_code="IRREGULARITY", rule_id=rule_id)

    def return_wagers(self, round_id: str | None = None) -> ev.WagersReturned:
        """WagersReturned for every wager placed in the round."""
        rid = round_id or self.writer.round_id
        assert rid is not None
        return self.emit(ev.WagersReturned, wager_ids=tuple(self.round_wagers.get(rid, {})), round_id=rid)

    def start_round(self, round_id: str, method: str = "HAND") -> ev.RoundStarted:
        """A bare RoundStarted (no shuffle, no wagers): the deadline of open remedies."""
        log = RoundLog(round_id)
        self._start(log, method, None)
        return log["started"]

    def reshuffle(self) -> ev.ShuffleCompleted:
        """A new automated shuffle of the deck; returns its ShuffleCompleted."""
        return self.shuffle("AUTOMATED")[1]

    def remove_deck(self) -> ev.DeckRemoved:
        """DeckRemoved for the deck in use."""
        return self.emit(ev.DeckRemoved, reason_code="WRONG_COUNT", role="FLOOR", actor_id="F-01")

    def complete(self) -> ev.RoundCompleted:
        """RoundCompleted for the current round, leaving the trail between rounds."""
        done = self.emit(ev.RoundCompleted)
        self.writer.round_id = None
        return done

    # -- helpers for round builders -----------------------------------------------------------
    @staticmethod
    def _check_hooks(hooks: dict[str, Hook] | None, allowed: frozenset[str]) -> dict[str, Hook]:
        hooks = dict(hooks or {})
        unknown = set(hooks) - allowed
        if unknown:
            raise ValueError(f"unknown hook point(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        return hooks

    def _hook(self, hooks: dict[str, Hook], name: str, log: RoundLog) -> None:
        if name in hooks:
            result = hooks[name](self)
            if result is not None:
                log[name] = result

    def _start(self, log: RoundLog, method: str, round_no: int | None) -> None:
        self.rounds_started += 1
        self.writer.round_id = log.round_id
        log["started"] = self.emit(
            ev.RoundStarted, round_no=round_no or self.rounds_started, dealing_method=method, dealer_id="D-0001"
        )

    def _wager(self, log: RoundLog, seat: str, wager_type: str, amount: int) -> ev.WagerPlaced:
        wager_id = f"{log.round_id}-{wager_type}-{seat[5:]}"
        placed = self.emit(
            ev.WagerPlaced,
            wager_id=wager_id,
            seat=seat,
            wager_type=wager_type,
            amount=amount,
            role="PLAYER",
            actor_id=f"P-{seat[5:]}",
        )
        log.wagers[wager_id] = placed
        return placed

    def _deal(self, log: RoundLog, plan: Iterable[str | tuple[str, dict[str, Any]]], dealt_from: str) -> None:
        faces = iter(FULL_DECK)
        for i, step in enumerate(plan, start=1):
            area, extra = (step, {}) if isinstance(step, str) else step
            fields: dict[str, Any] = {"card": next(faces), "dealt_from": dealt_from, **extra}
            log.cards.append(self.emit(ev.CardDealt, deal_index=i, to_area=area, **fields))

    def _settle(self, log: RoundLog) -> None:
        for wager_id in self.round_wagers.get(log.round_id, {}):
            self.emit(ev.WagerSettled, wager_id=wager_id, outcome="LOSS")

    def _finish(self, log: RoundLog, hooks: dict[str, Hook], settle: bool, complete: bool) -> None:
        self._hook(hooks, "before_settle", log)
        if settle:
            self._settle(log)
        self._hook(hooks, "before_complete", log)
        if complete:
            log["completed"] = self.complete()
            self._hook(hooks, "after_complete", log)

    # -- Three Card Prime ---------------------------------------------------------------------
    def tcp_plan(self, antes: Sequence[str], pair_bonus: Sequence[str] = ()) -> list[str]:
        """The correct deal: three passes, one card at a time clockwise over the Ante seats and
        the dealer last; then a fourth card per Pair Bonus seat (PER_PLAYER) or one Pair Bonus
        community card (COMMUNITY, if any Pair Bonus Wager was placed)."""
        assert self.config is not None
        order = [s for s in self.config.seats if s in antes] + ["DEALER"]
        plan = order * 3
        if self.config.pair_bonus_mode == "PER_PLAYER":
            plan += [f"PAIR_BONUS_4TH_{s[5:]}" for s in self.config.seats if s in pair_bonus]
        elif self.config.pair_bonus_mode == "COMMUNITY" and pair_bonus:
            plan.append("PAIR_BONUS_COMMUNITY")
        return plan

    def tcp_round(
        self,
        round_id: str = "R1",
        *,
        antes: Sequence[str] = ("SEAT_1", "SEAT_3"),
        pair_bonus: Sequence[str] = (),
        prime: Sequence[str] = (),
        method: str = "HAND",
        round_no: int | None = None,
        shuffle: str | None = "AUTOMATED",
        announce: bool = True,
        hold: bool = True,
        deal: Sequence[str | tuple[str, dict[str, Any]]] | None = None,
        stub: int | str | None = "FULL_DECK",
        stub_kwargs: dict[str, Any] | None = None,
        discard: bool = True,
        discard_exposed: bool = False,
        play: dict[str, int] | None = None,
        settle: bool = True,
        complete: bool = True,
        hooks: dict[str, Hook] | None = None,
    ) -> RoundLog:
        """A Three Card Prime round, correct unless altered.

        ``stub="FULL_DECK"`` counts the stub the full deck leaves after the cards actually dealt
        (so a wrong distribution reads as a misdeal); an int counts that many; None skips the
        count. ``play`` maps seats to Play Wager amounts (default: every Ante seat plays its Ante).
        """
        hooks = self._check_hooks(hooks, TCP_HOOKS)
        log = RoundLog(round_id)
        if shuffle is not None:
            log["shuffle_started"], log["shuffled"] = self.shuffle(shuffle)
        self._hook(hooks, "before_start", log)
        self._start(log, method, round_no)
        self._hook(hooks, "after_start", log)
        for seat in antes:
            self._wager(log, seat, "ANTE", ANTE)
        for seat in pair_bonus:
            self._wager(log, seat, "PAIR_BONUS", 100)
        for seat in prime:
            self._wager(log, seat, "PRIME", 100)
        self._hook(hooks, "after_wagers", log)
        if announce:
            log["nmb"] = self.emit(ev.NoMoreBetsAnnounced)
        self._hook(hooks, "after_nmb", log)
        if hold and method == "HAND":
            log["held"] = self.emit(ev.DeckHeld, hand="RIGHT")
        self._hook(hooks, "after_held", log)
        plan = deal if deal is not None else self.tcp_plan(antes, pair_bonus)
        source = {"HAND": "DECK_IN_HAND", "MANUAL_SHOE": "MANUAL_SHOE", "AUTO_SHOE": "AUTO_SHOE"}[method]
        self._deal(log, plan, source)
        self._hook(hooks, "after_deal", log)
        if stub is not None:
            count = self.deck_size - len(log.cards) if stub == "FULL_DECK" else stub
            log["stub"] = self.emit(ev.StubCounted, count=count, **(stub_kwargs or {}))
        self._hook(hooks, "after_stub", log)
        if discard:
            log["discard"] = self.emit(ev.StubDiscarded, exposed=discard_exposed)
        self._hook(hooks, "after_discard", log)
        plays = {s: ANTE for s in antes} if play is None else play
        for seat, amount in plays.items():
            self.emit(ev.PlayerDecided, seat=seat, decision="PLAY", role="PLAYER", actor_id=f"P-{seat[5:]}")
            log[f"play_{seat}"] = self._wager(log, seat, "PLAY", amount)
        self._finish(log, hooks, settle, complete)
        return log

    # -- Chapter 691 --------------------------------------------------------------------------
    C691_PLAN = ("BURN", "COMMUNITY_1", "COMMUNITY_2", "COMMUNITY_3", "COMMUNITY_4", "COMMUNITY_5")

    def c691_round(
        self,
        round_id: str = "R1",
        *,
        bettors: Sequence[str] = ("SEAT_2", "SEAT_4"),
        method: str = "HAND",
        round_no: int | None = None,
        shuffle: str | None = "AUTOMATED",
        announce: bool = True,
        hold: bool = True,
        deal: Sequence[str | tuple[str, dict[str, Any]]] | None = None,
        stub: int | str | None = "FULL_DECK",
        stub_kwargs: dict[str, Any] | None = None,
        discard: bool = True,
        discard_exposed: bool = False,
        settle: bool = True,
        complete: bool = True,
        hooks: dict[str, Hook] | None = None,
    ) -> RoundLog:
        """A Chapter 691 round dealt from the hand: 1 burn + 5 community cards face down, stub 48."""
        hooks = self._check_hooks(hooks, C691_HOOKS)
        log = RoundLog(round_id)
        if shuffle is not None:
            log["shuffle_started"], log["shuffled"] = self.shuffle(shuffle)
        self._hook(hooks, "before_start", log)
        self._start(log, method, round_no)
        self._hook(hooks, "after_start", log)
        for seat in bettors:
            self._wager(log, seat, "MAIN", ANTE)
        self._hook(hooks, "after_wagers", log)
        if announce:
            log["nmb"] = self.emit(ev.NoMoreBetsAnnounced)
        self._hook(hooks, "after_nmb", log)
        if hold and method == "HAND":
            log["held"] = self.emit(ev.DeckHeld, hand="LEFT")
        self._hook(hooks, "after_held", log)
        source = {"HAND": "DECK_IN_HAND", "MANUAL_SHOE": "MANUAL_SHOE", "AUTO_SHOE": "AUTO_SHOE"}[method]
        self._deal(log, self.C691_PLAN if deal is None else deal, source)
        self._hook(hooks, "after_deal", log)
        if stub is not None:
            count = self.deck_size - len(log.cards) if stub == "FULL_DECK" else stub
            log["stub"] = self.emit(ev.StubCounted, count=count, **(stub_kwargs or {}))
        self._hook(hooks, "after_stub", log)
        if discard:
            log["discard"] = self.emit(ev.StubDiscarded, exposed=discard_exposed)
        self._hook(hooks, "after_discard", log)
        self._finish(log, hooks, settle, complete)
        return log

    # -- Pai Gow Poker ------------------------------------------------------------------------
    def pgp_round(
        self,
        round_id: str = "R1",
        *,
        bettors: Sequence[str] = ("SEAT_1", "SEAT_3", "SEAT_5"),
        dice_wagers: dict[str, str] | None = None,
        method: str = "HAND",
        round_no: int | None = None,
        shuffle: str | None = "AUTOMATED",
        announce: bool = True,
        dice: tuple[int, int, int] | None = (2, 3, 4),
        shakes: int = 3,
        shake_mode: str = "MANUAL",
        announce_values: bool = True,
        announced_total: int | None = None,
        rng: int | None = None,
        start: str | None = None,
        deliver: Sequence[tuple[str, int]] | None = None,
        discard_exposed: bool = False,
        house_way: bool = True,
        views: Sequence[str] | None = None,
        settle: bool = True,
        complete: bool = True,
        hooks: dict[str, Hook] | None = None,
    ) -> RoundLog:
        """A Pai Gow Poker round: dice shaken (>= 3 times), revealed flat, values and total
        announced, seven stacks of seven cards dealt and delivered in counting order from the
        position the total counts to, the 4 leftover cards discarded unexposed, the dealer's
        hand set the house way, wagers settled.

        ``announced_total`` defaults to the dice sum; ``start`` defaults to the position the
        announced total (or ``rng``) counts to, as a dealer would deal; ``deliver`` overrides
        the (position, card count) of each stack delivered; ``views`` the seats whose players
        look at and set their hands (default: the bettors).
        """
        hooks = self._check_hooks(hooks, PGP_HOOKS)
        assert self.config is not None
        log = RoundLog(round_id)
        if shuffle is not None:
            log["shuffle_started"], log["shuffled"] = self.shuffle(shuffle)
        self._hook(hooks, "before_start", log)
        self._start(log, method, round_no)
        self._hook(hooks, "after_start", log)
        for seat in bettors:
            self._wager(log, seat, "MAIN", ANTE)
        for seat, wager_type in (dice_wagers or {}).items():
            self._wager(log, seat, wager_type, 100)
        self._hook(hooks, "after_wagers", log)
        if announce:
            log["nmb"] = self.emit(ev.NoMoreBetsAnnounced)
        self._hook(hooks, "after_nmb", log)
        self._hook(hooks, "before_dice", log)
        if rng is not None:
            log["rng"] = self.emit(ev.RngNumberDisplayed, number=rng, role="DEVICE", actor_id="RNG-1")
            count = rng
        else:
            assert dice is not None
            log["shaken"] = self.emit(ev.DiceShaken, shaker_id="SHK-1", shake_count=shakes, mode=shake_mode)
            log["revealed"] = self.emit(ev.DiceRevealed, values=dice)
            self._hook(hooks, "after_reveal", log)
            if announce_values:
                log["values"] = self.emit(ev.DiceValuesAnnounced, values=dice)
            count = sum(dice) if announced_total is None else announced_total
            log["total"] = self.emit(ev.DiceTotalAnnounced, total=count)
        first = start or position_for(count, self.config.seats)
        log["start_position"] = self.emit(
            ev.StartingPositionDetermined, position=first, basis="RNG" if rng is not None else "DICE"
        )
        self._hook(hooks, "after_dice", log)
        stacks, size = self.config.pgp_stacks, self.config.pgp_stack_size
        source = {"HAND": "DECK_IN_HAND", "MANUAL_SHOE": "MANUAL_SHOE", "AUTO_SHOE": "AUTO_SHOE"}[method]
        self._deal(log, [f"STACK_{s}" for _ in range(size) for s in range(1, stacks + 1)], source)
        self._hook(hooks, "after_stacks_dealt", log)
        log["discard"] = self.emit(ev.StubDiscarded, exposed=discard_exposed)
        self._hook(hooks, "after_discard", log)
        if deliver is None:
            order = count_order(self.config.seats)
            k = order.index(first)
            deliver = [(p, size) for p in (order[k:] + order[:k])[:stacks]]
        for index, (position, cards) in enumerate(deliver, start=1):
            log.stacks.append(self.emit(ev.StackDelivered, stack_index=index, card_count=cards, to_position=position))
        self._hook(hooks, "after_delivery", log)
        for seat in bettors if views is None else views:
            self.emit(ev.PlayerViewedCards, seat=seat, role="PLAYER", actor_id=f"P-{seat[5:]}")
            self.emit(ev.HandSet, owner=seat, role="PLAYER", actor_id=f"P-{seat[5:]}")
        log["dealer_set"] = self.emit(ev.HandSet, owner="DEALER", matches_house_way=house_way)
        self._finish(log, hooks, settle, complete)
        return log


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def tcp() -> Callable[..., Trail]:
    """Factory: a configured Three Card Prime table (6 seats, Pair Bonus per player, Prime and Pair
    Bonus offered, hand dealing and shoes allowed, counting shuffler unless told otherwise)."""

    def make(**config: Any) -> Trail:
        config.setdefault("seats", SEATS)
        config.setdefault("wagers_enabled", frozenset({"ANTE", "PLAY", "PRIME", "PAIR_BONUS"}))
        config.setdefault("pair_bonus_mode", "PER_PLAYER")
        config.setdefault("dealing_methods_allowed", frozenset({"HAND", "MANUAL_SHOE", "AUTO_SHOE"}))
        return Trail(Game.TCP).configure(declared=52, jokers=0, **config)

    return make


@pytest.fixture
def c691() -> Callable[..., Trail]:
    """Factory: a configured Chapter 691 table (54-card deck with 2 jokers, hand dealing)."""

    def make(**config: Any) -> Trail:
        config.setdefault("seats", SEATS)
        config.setdefault("wagers_enabled", frozenset({"MAIN"}))
        return Trail(Game.C691).configure(declared=54, jokers=2, **config)

    return make


@pytest.fixture
def pgp() -> Callable[..., Trail]:
    """Factory: a configured Pai Gow Poker table (6 seats + dealer = 7 positions, 53-card deck with
    one joker, house way HW-1, manual dice, dice wagers offered)."""

    def make(**config: Any) -> Trail:
        config.setdefault("seats", SEATS)
        config.setdefault("wagers_enabled", frozenset({"MAIN", "SUM", "MATCH", "BEAT_IT"}))
        config.setdefault("house_way_id", "HW-1")
        config.setdefault("dealing_methods_allowed", frozenset({"HAND", "AUTO_SHOE"}))
        return Trail(Game.PGP).configure(declared=53, jokers=1, **config)

    return make
