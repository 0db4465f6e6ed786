"""The simulator deals correct rounds and its injected errors are exactly what the engine finds."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dealtrail.simulator.floor import INJECTIONS, FloorSpec, Truth, simulate
from dealtrail.simulator.run import write_simulation
from schemas.base import Envelope
from streams.engine import RULES, apply


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
