"""The simulator deals correct rounds and its injected errors are exactly what the engine finds."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dealtrail.simulator.floor import INJECTIONS, FloorSpec, Truth, simulate
from dealtrail.simulator.run import write_simulation
from schemas.base import Envelope
from schemas.codec import encode
from streams.engine import RULES, Plausibility, apply


def _audit(
    spec: FloorSpec, truth: list[Truth] | None = None, events: list[Envelope] | None = None
) -> tuple[Counter[tuple[str, str, str | None]], Counter[tuple[str, str, str | None]]]:
    truth = [] if truth is None else truth
    states: dict = {}
    found: dict[str, tuple[str, str, str | None]] = {}
    for event in simulate(spec, truth):
        if events is not None:
            events.append(event)
        state, findings = apply(states.get(event.table_id), event)
        states[event.table_id] = state
        for f in findings:
            if f.revision == 0:
                found[f.finding_id] = (f.rule_id, f.table_id, f.round_id)
    expected = Counter((t.rule_id, t.table_id, t.round_id) for t in truth)
    return expected, Counter(found.values())


@given(seed=st.integers(min_value=0, max_value=10_000))
@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
def test_a_clean_simulated_shift_raises_no_finding(seed: int) -> None:
    expected, found = _audit(FloorSpec(tables=3, hours=0.4, seed=seed, error_rate=0.0, duplicate_rate=0.01))
    assert not expected
    assert not found


@given(seed=st.integers(min_value=0, max_value=10_000))
@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
def test_injected_errors_are_found_exactly_no_miss_no_extra(seed: int) -> None:
    expected, found = _audit(FloorSpec(tables=6, hours=0.5, seed=seed, error_rate=0.3, duplicate_rate=0.005))
    assert sum(expected.values()) > 0
    assert expected - found == Counter(), "missed"
    assert found - expected == Counter(), "extra"


def test_a_long_run_injects_every_rule_and_finds_each_exactly() -> None:
    expected, found = _audit(FloorSpec(tables=12, hours=3, seed=5, error_rate=0.25))
    assert found == expected
    injected_rules = {rule for rule, _t, _r in expected}
    checked = {r.rule_id for r in RULES}
    assert injected_rules == checked, f"never injected: {sorted(checked - injected_rules)}"


def test_every_injection_kind_is_reachable() -> None:
    for game, kinds in INJECTIONS.items():
        assert kinds, game


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    digests = []
    for name in ("a", "b"):
        out, truth = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.truth.jsonl"
        write_simulation(out, tables=3, hours=0.3, seed=99, error_rate=0.2, truth_path=truth)
        digests.append((hashlib.sha256(out.read_bytes()).hexdigest(), hashlib.sha256(truth.read_bytes()).hexdigest()))
    assert digests[0] == digests[1]
    write_simulation(tmp_path / "c.jsonl", tables=3, hours=0.3, seed=100, error_rate=0.2)
    assert hashlib.sha256((tmp_path / "c.jsonl").read_bytes()).hexdigest() != digests[0][0]


@pytest.mark.parametrize("rate", [0.0, 1.0])
def test_error_rate_bounds_are_accepted(rate: float) -> None:
    expected, found = _audit(FloorSpec(tables=3, hours=0.2, seed=3, error_rate=rate))
    assert found == expected


REVISION_2_KINDS = {
    "redealt-unshuffled",
    "countless-shuffle-after-fault",
    "fault-during-shuffle",
    "device-fault-deal",
    "long-deck",
    "short-deck",
    "cut-skipped",
}
"""The error kinds rulebook revision 2 added or re-judged (issue #11)."""


def test_a_fresh_seed_shift_with_the_revision_2_kinds_injected_finds_exactly_the_truth() -> None:
    truth: list[Truth] = []
    expected, found = _audit(FloorSpec(tables=6, hours=0.75, seed=8101, error_rate=0.5), truth)
    assert {t.injected for t in truth} >= REVISION_2_KINDS
    assert expected - found == Counter(), "missed"
    assert found - expected == Counter(), "extra"


NEW_EVENT_TYPES = {"HandsRevealed", "DeckCut", "DeckVerified", "CardAddedToDeck", "CardRemovedFromDeck"}


@given(seed=st.integers(min_value=10_001, max_value=10**9))
@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
def test_clean_days_stay_clean_with_every_revision_2_event_recorded(seed: int) -> None:
    events: list[Envelope] = []
    spec = FloorSpec(tables=3, hours=0.25, seed=seed, error_rate=0.0, floor_visit_rate=0.5)
    expected, found = _audit(spec, events=events)
    assert not expected
    assert not found
    for game in ("TCP", "C691", "PGP"):
        types = {e.type for e in events if e.game == game}
        wanted = NEW_EVENT_TYPES - ({"DeckCut"} if game != "C691" else set())
        assert wanted <= types, (game, wanted - types)


REVISION_3_KINDS = {"idle-deck-jam", "idle-deck-fault-cleared", "in-play-deck-fault"}
"""The two-deck rotation's errors (rulebook 10.3.1): a jam of the deck in the shuffler while the
other is dealt, cleared but not reshuffled (its next round is the breach) or reshuffled (no
finding), and a fault flagged on the deck in play before its deal."""


def test_a_two_deck_rotation_with_faults_on_either_deck_finds_exactly_the_truth() -> None:
    truth: list[Truth] = []
    events: list[Envelope] = []
    expected, found = _audit(FloorSpec(tables=3, hours=2, seed=31, error_rate=0.4), truth, events)
    assert {t.injected for t in truth} >= REVISION_3_KINDS - {"idle-deck-fault-cleared"}  # that one raises nothing
    rotating = {e.deck_id for e in events if e.table_id == "TCP-01" and e.type == "RoundStarted"}
    assert len(rotating) == 2  # two decks dealt in turn
    in_play, on_idle, on_play = None, 0, 0
    for e in events:
        if e.table_id == "TCP-01" and e.type == "RoundStarted":
            in_play = e.deck_id
        elif e.table_id == "TCP-01" and e.type == "ShufflerFaulted":
            on_idle += e.deck_id != in_play
            on_play += e.deck_id == in_play
    jams = sum(1 for t in truth if t.injected == "idle-deck-jam") // 2  # two findings each
    assert on_idle > jams > 0 and on_play > 0  # faults on the idle deck cleared by a reshuffle, too
    assert expected - found == Counter(), "missed"
    assert found - expected == Counter(), "extra"


# -- rulebook revision 4: what floors do (FloorSpec.floor_events) ----------------------------------

FLOOR_KINDS = {
    "jam-cleared",
    "jam-dealt-unshuffled",
    "out-of-service-unmarked",
    "out-of-service-marked",
    "shoe-fault-cleared",
    "closed-owing-remedy",
    "spare-shuffler",
}
"""The floor's own events (rulebook 10.4, 10.5): jams and stops cleared by a reshuffle in the same
shuffler, a jammed deck dealt before its reshuffle, devices out of service and returned, a shoe
fault remedied per (m), a table closed past the remedy window owing a remedy, a jammed deck
reshuffled in a spare shuffler (the faults of an empty shuffler and the house-way resets raise
nothing, so the truth does not name them: their own tests find them in the events)."""
STOPPING = {"JAM", "STOPPED", "INCOMPLETE_CYCLE"}
WINDOW = timedelta(hours=24)
LIMITS = Plausibility(100_000, timedelta(hours=1), WINDOW)
FLOOR = FloorSpec(tables=6, hours=3, seed=53, error_rate=0.3)


@dataclass(frozen=True)
class Shift:
    """A simulated shift with the floor events on, applied by the engine with the default remedy window."""

    events: list[Envelope]
    truth: list[Truth]
    expected: Counter[tuple[str, str, str | None]]
    found: Counter[tuple[str, str, str | None]]
    overdue_at: dict[tuple[str, str | None], str]
    """(table, round) -> the event at which DT-remedy-overdue was raised for it."""

    def by_table(self) -> dict[str, list[Envelope]]:
        """Each table's events in seq order (without the duplicates the floor delivers twice)."""
        out: dict[str, dict[int, Envelope]] = {}
        for e in self.events:
            out.setdefault(e.table_id, {})[e.seq] = e
        return {t: [byseq[s] for s in sorted(byseq)] for t, byseq in out.items()}

    def truth_of(self, kind: str) -> set[tuple[str, str, str | None]]:
        return {(t.rule_id, t.table_id, t.round_id) for t in self.truth if t.injected == kind}


@pytest.fixture(scope="module")
def floor_shift() -> Shift:
    truth: list[Truth] = []
    events: list[Envelope] = []
    states: dict = {}
    found: dict[str, tuple[str, str, str | None]] = {}
    overdue_at: dict[tuple[str, str | None], str] = {}
    for event in simulate(FLOOR, truth):
        events.append(event)
        state, findings = apply(states.get(event.table_id), event, limits=LIMITS)
        states[event.table_id] = state
        for f in findings:
            if f.revision == 0:
                found[f.finding_id] = (f.rule_id, f.table_id, f.round_id)
            if f.rule_id == "DT-remedy-overdue":
                overdue_at[f.table_id, f.round_id] = f.trigger_event_id
    expected = Counter((t.rule_id, t.table_id, t.round_id) for t in truth)
    return Shift(events, truth, expected, Counter(found.values()), overdue_at)


def _after(events: list[Envelope], i: int, stop: str = "RoundStarted") -> list[Envelope]:
    """The events after ``events[i]`` up to and including the next of type ``stop``."""
    out = []
    for e in events[i + 1 :]:
        out.append(e)
        if e.type == stop:
            break
    return out


def test_a_shift_with_the_floor_events_on_finds_exactly_the_truth(floor_shift: Shift) -> None:
    assert {t.injected for t in floor_shift.truth} >= FLOOR_KINDS
    assert floor_shift.expected - floor_shift.found == Counter(), "missed"
    assert floor_shift.found - floor_shift.expected == Counter(), "extra"


def test_jams_and_stops_are_cleared_by_a_reshuffle_in_the_same_shuffler_with_no_return_to_service(
    floor_shift: Shift,
) -> None:
    cleared: Counter[str] = Counter()
    for table, events in floor_shift.by_table().items():
        for i, e in enumerate(events):
            if e.type != "ShufflerFaulted" or e.fault not in STOPPING:
                continue
            until_deal = _after(events, i)
            types = [x.type for x in until_deal]
            if "DeviceReturnedToService" in types or "DeviceTakenOutOfService" in types:
                continue
            done = [
                x
                for x in until_deal
                if x.type == "ShuffleCompleted" and x.device_id == e.device_id and x.deck_id == e.deck_id
            ]
            if done and done[0].device_full_deck_ok is not False:
                cleared[table.split("-")[0]] += 1
    assert set(cleared) == {"TCP", "C691", "PGP"}, cleared
    # the jam raises § 645a.14(l) at Pai Gow, and nothing at the other games (10.4.1)
    assert {t.table_id.split("-")[0] for t in floor_shift.truth if t.injected == "jam-cleared"} == {"PGP"}
    assert {r for r, _t, _r in floor_shift.truth_of("jam-cleared")} == {"PGP-645a.14-l-shuffler-fault"}


def test_a_jammed_deck_dealt_before_its_reshuffle_is_charged_for_that_round_only(floor_shift: Shift) -> None:
    charged = {
        (t, r) for rule, t, r in floor_shift.truth_of("jam-dealt-unshuffled") if rule == "DT-deal-after-device-fault"
    }
    seen = set()
    for table, events in floor_shift.by_table().items():
        for i, e in enumerate(events):
            if e.type == "ShufflerFaulted" and e.fault in STOPPING:
                until_deal = _after(events, i)
                if (
                    until_deal
                    and until_deal[-1].type == "RoundStarted"
                    and "ShuffleCompleted" not in {x.type for x in until_deal}
                ):
                    seen.add((table, until_deal[-1].round_id))
    assert charged and charged <= seen
    assert {t.split("-")[0] for t, _r in charged} == {"TCP", "C691", "PGP"}


def test_devices_are_taken_out_of_service_covered_or_signed_or_neither_and_returned(floor_shift: Shift) -> None:
    marked, unmarked = 0, 0
    for table, events in floor_shift.by_table().items():
        for i, e in enumerate(events):
            if e.type != "DeviceTakenOutOfService":
                continue
            rest = events[i + 1 :]
            back = next(j for j, x in enumerate(rest) if x.type == "DeviceReturnedToService")
            assert rest[back].device_id == e.device_id
            rounds = [x.round_id for x in rest[:back] if x.type == "RoundStarted"]
            spare = (x for x in rest[:back] if x.type == "ShuffleCompleted" and (x.device_id or "").endswith("-SPARE"))
            if any(spare):
                assert len(rounds) == 1  # covered while a spare stands in for one round (10.5.1)
                continue
            assert 2 <= len(rounds) <= 4
            n = {
                t.round_id
                for t in floor_shift.truth
                if t.rule_id == "PGP-645a.14-n-out-of-order" and t.table_id == table
            }
            if e.covered or e.out_of_order_sign:
                marked += 1
                assert not n & set(rounds)  # covered or signed: no (n)
            else:
                unmarked += 1
                if table.startswith("PGP"):
                    assert set(rounds) <= n  # one (n) per round shuffled or dealt by another method
    assert marked and unmarked
    kinds = {t.injected for t in floor_shift.truth}
    assert {"out-of-service-unmarked", "out-of-service-marked"} <= kinds


def test_a_fault_of_the_empty_shuffler_leaves_the_deck_in_play_dealt_clean(floor_shift: Shift) -> None:
    # rulebook 10.5.2: no deck named, recorded during IDLE; the round dealt next raises no fault finding
    charged = {(t, r) for rule, t, r in floor_shift.expected if rule == "DT-deal-after-device-fault"}
    seen = 0
    for table, events in floor_shift.by_table().items():
        for i, e in enumerate(events):
            if e.type != "ShufflerFaulted" or e.during != "IDLE" or e.deck_id is not None:
                continue
            seen += 1
            started = _after(events, i)[-1]
            assert (table, started.round_id) not in charged
    assert seen >= 2


def test_a_spare_shuffler_reshuffles_the_jammed_deck_and_no_deal_is_on_a_fault(floor_shift: Shift) -> None:
    # rulebook 10.5.1: the jammed deck reshuffled in a registered spare is not dealt on the jam
    spare_rounds = set()
    for table, events in floor_shift.by_table().items():
        for i, e in enumerate(events):
            if e.type == "ShuffleCompleted" and e.device_id and e.device_id.endswith("-SPARE"):
                spare_rounds.add((table, _after(events, i)[-1].round_id))
    assert len(spare_rounds) >= 2
    charged = {(t, r) for rule, t, r in floor_shift.expected if rule == "DT-deal-after-device-fault"}
    assert not spare_rounds & charged
    assert {r for r, _t, _r in floor_shift.truth_of("spare-shuffler")} <= {
        "PGP-645a.14-l-shuffler-fault",
        "PGP-645a.14-n-out-of-order",
    }


def test_a_house_way_reset_before_settlement_raises_nothing_and_one_settled_as_set_raises_one(
    floor_shift: Shift,
) -> None:
    # rulebook 10.5.3
    resets = [e for e in floor_shift.events if e.type == "HandReset"]
    assert resets
    house_way = {r for rule, _t, r in floor_shift.expected if rule == "PGP-645a.14-i-house-way"}
    assert not {e.round_id for e in resets} & house_way


def test_a_shoe_fault_remedied_per_m_leaves_the_shoe_in_use(floor_shift: Shift) -> None:
    in_use = 0
    for events in floor_shift.by_table().values():
        for i, e in enumerate(events):
            if e.type == "AutoShoeFaulted":
                after = _after(events, i)
                types = [x.type for x in after]
                if "DeviceReturnedToService" not in types and after[-1].dealing_method == "AUTO_SHOE":
                    in_use += 1
    assert in_use
    assert {r for r, _t, _r in floor_shift.truth_of("shoe-fault-cleared")} == {"PGP-645a.14-m-shoe-fault"}


def test_a_table_closed_past_the_remedy_window_owes_its_remedy_and_is_charged_at_its_next_event(
    floor_shift: Shift,
) -> None:
    closed = {}
    for table, events in floor_shift.by_table().items():
        for i, (prev, nxt) in enumerate(itertools.pairwise(events)):
            if nxt.occurred_at - prev.occurred_at > WINDOW:
                owing = next(e.round_id for e in reversed(events[: i + 1]) if e.round_id)
                closed[table, owing] = nxt
    owed = {(t, r) for rule, t, r in floor_shift.truth_of("closed-owing-remedy") if rule == "DT-remedy-overdue"}
    assert owed and owed == set(closed)
    for key, reopened in closed.items():  # raised at the table's first event past the window (10.4.2)
        assert floor_shift.overdue_at[key] == reopened.event_id
        assert reopened.type != "RoundStarted"
    assert {t.split("-")[0] for t, _r in owed} == {"TCP", "C691", "PGP"}


def test_with_the_floor_events_off_none_of_their_kinds_is_dealt() -> None:
    truth: list[Truth] = []
    spec = FloorSpec(tables=6, hours=1, seed=41, error_rate=0.3, floor_events=False)
    types = {e.type for e in simulate(spec, truth)}
    assert not {t.injected for t in truth} & FLOOR_KINDS
    assert "DeviceTakenOutOfService" not in types


def test_a_floor_without_errors_deals_the_same_bytes_with_the_floor_events_on_or_off() -> None:
    def trail(on: bool) -> str:
        spec = FloorSpec(tables=6, hours=0.3, seed=3521801, error_rate=0.0, floor_visit_rate=0.5, floor_events=on)
        return hashlib.sha256(b"".join(encode(e) for e in simulate(spec))).hexdigest()

    assert trail(True) == trail(False)
