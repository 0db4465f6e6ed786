"""Rulebook 10.4.3 for revision 5's decisions: the revision-5 trails (a fault of the empty shuffler
at a two-deck table, a house-way hand reset before settlement and one settled as set, rounds no
shuffle fed at a counting table, a jammed deck reshuffled in a spare) give the same findings alone,
interleaved with each other and a simulated floor, and shuffled within the reorder window, with one
and two workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_revision4_order import Row, assert_each_table_as_alone, audited_alone
from tests.revision5_trail import HOUSE_TABLE, IDLE_TABLE, SPARE_TABLE, STUB_TABLE, order_trails


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[Row]]:
    """Each revision-5 trail audited in a file of its own, in seq order."""
    return audited_alone(order_trails(), tmp_path_factory.mktemp("alone5"))


def test_the_revision5_trails_alone_give_the_findings_of_each_decision(alone: dict[str, set[Row]]) -> None:
    rules = {table: sorted({(r[1], r[2]) for r in rows if r[3] == 0}) for table, rows in alone.items()}
    assert rules[IDLE_TABLE] == []  # 10.5.2
    assert rules[HOUSE_TABLE] == [("PGP-645a.14-i-house-way", "R4")]  # 10.5.3
    assert rules[STUB_TABLE] == sorted(
        [("TCP-679a.9-a1-shuffler-required", f"R{n}") for n in range(2, 7)] + [("TCP-679a.9-d-stub-count-due", "R6")]
    )  # 10.5.4
    assert rules[SPARE_TABLE] == [("PGP-645a.14-l-shuffler-fault", None)]  # 10.5.1


def test_revision5_trails_interleaved_with_a_floor_and_shuffled_within_the_window_give_their_findings_alone(
    alone: dict[str, set[Row]], tmp_path: Path
) -> None:
    assert_each_table_as_alone(alone, order_trails(), tmp_path)
