"""How ``dealtrail replay`` groups events into rounds for its text output (issue 36): a shuffle
between two events of one round does not split the round in two."""

from __future__ import annotations

from dealtrail.investigate.replay import shown_rounds


def test_a_shuffle_inside_a_round_is_shown_in_that_round_and_not_split_it() -> None:
    assert shown_rounds(["R1", "R1", None, "R1"]) == ["R1", "R1", "R1", "R1"]


def test_a_shuffle_between_two_rounds_stays_between_rounds() -> None:
    assert shown_rounds(["R1", None, None, "R2", None]) == [
        "R1",
        "between rounds",
        "between rounds",
        "R2",
        "between rounds",
    ]
    assert shown_rounds([None, "R1"]) == ["between rounds", "R1"]
    assert shown_rounds([]) == []
