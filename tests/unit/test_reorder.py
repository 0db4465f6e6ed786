"""The reorder window (streams.engine.reorder): events of a table released in seq order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from streams.engine.reorder import Reorder, ReorderLimits, TableWindow

T0 = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)


def at(seq: int) -> datetime:
    return T0 + timedelta(seconds=seq)


def run(window: TableWindow[int], seqs: list[int]) -> list[int]:
    out: list[int] = []
    for s in seqs:
        out += window.push(s, at(s), s)
    return out + window.flush()


def test_an_in_order_trail_goes_straight_through_and_nothing_is_held() -> None:
    w: TableWindow[int] = TableWindow()
    for s in range(1, 50):
        assert w.push(s, at(s), s) == [s]
        assert len(w) == 0


def test_a_swapped_pair_is_released_in_seq_order_once_the_missing_seq_arrives() -> None:
    w: TableWindow[int] = TableWindow()
    assert w.push(1, at(1), 1) == [1]
    assert w.push(3, at(3), 3) == []
    assert w.push(2, at(2), 2) == [2, 3]


def test_the_window_gives_up_on_a_missing_seq_when_it_holds_more_than_its_events() -> None:
    w: TableWindow[int] = TableWindow(limits=ReorderLimits(events=3, seconds=3600))
    assert [w.push(s, at(s), s) for s in (1, 3, 4, 5)] == [[1], [], [], []]
    assert w.push(6, at(6), 6) == [3, 4, 5, 6]  # four held: seq 2 is given up on
    assert w.push(2, at(2), 2) == [2]  # later than the window: handed on at once, the engine judges it


def test_the_window_gives_up_on_a_missing_seq_after_its_seconds_of_event_time() -> None:
    w: TableWindow[int] = TableWindow(limits=ReorderLimits(events=1000, seconds=30))
    w.push(1, at(1), 1)
    assert w.push(3, at(3), 3) == []
    assert w.push(20, at(20), 20) == []
    assert w.push(34, at(34), 34) == [3]  # 3 happened 31 s before 34; 20 waits on
    assert w.flush() == [20, 34]


def test_copies_within_the_window_follow_the_first_in_arrival_order() -> None:
    w: TableWindow[str] = TableWindow()
    w.push(1, at(1), "1")
    assert w.push(3, at(3), "3a") == []
    assert w.push(3, at(3), "3b") == []
    assert w.push(2, at(2), "2") == ["2", "3a", "3b"]


def test_held_events_survive_a_restore_and_release_as_before() -> None:
    w: TableWindow[int] = TableWindow()
    for s in (1, 4, 3, 6):
        w.push(s, at(s), s)
    again: TableWindow[int] = TableWindow(w.last)
    again.restore(w.held())
    assert again.push(2, at(2), 2) == [2, 3, 4]
    assert again.flush() == [6]


def test_a_window_of_zero_events_applies_in_arrival_order() -> None:
    w: TableWindow[int] = TableWindow(limits=ReorderLimits(events=0))
    assert run(w, [1, 3, 2, 4]) == [1, 3, 2, 4]


def test_the_tables_of_a_reorder_are_independent() -> None:
    r: Reorder[str] = Reorder()
    assert r.window("A").push(2, at(2), "A2") == []
    assert r.window("B").push(1, at(1), "B1") == ["B1"]
    assert r.window("A").push(1, at(1), "A1") == ["A1", "A2"]
    assert r.window("C", last_seq=10).push(11, at(11), "C11") == ["C11"]
    assert r.flush() == []


def _local_shuffles(n: int, reach: int) -> st.SearchStrategy[list[int]]:
    """Permutations of 1..n in which no event moves more than ``reach`` places."""
    return st.lists(st.floats(0, reach, allow_nan=False), min_size=n, max_size=n).map(
        lambda keys: [s for _, s in sorted((i + k, i + 1) for i, k in enumerate(keys))]
    )


@given(st.integers(1, 120).flatmap(lambda n: _local_shuffles(n, 8)))
def test_any_permutation_within_the_window_gives_the_in_order_output(seqs: list[int]) -> None:
    w: TableWindow[int] = TableWindow(limits=ReorderLimits(events=10, seconds=30))
    assert run(w, seqs) == sorted(seqs)


@given(st.permutations(list(range(1, 40))))
def test_any_permutation_of_a_trail_shorter_than_the_window_gives_the_in_order_output(seqs: list[int]) -> None:
    w: TableWindow[int] = TableWindow(limits=ReorderLimits(events=100, seconds=3600))
    assert run(w, seqs) == sorted(seqs)


@given(st.lists(st.integers(1, 60), max_size=200), st.integers(0, 20))
def test_every_event_is_released_exactly_once_and_held_events_stay_bounded(seqs: list[int], events: int) -> None:
    w: TableWindow[int] = TableWindow(limits=ReorderLimits(events=events, seconds=30))
    out: list[int] = []
    for s in seqs:
        out += w.push(s, at(s), s)
        assert len(w) <= events
    assert sorted(out + w.flush()) == sorted(seqs)
