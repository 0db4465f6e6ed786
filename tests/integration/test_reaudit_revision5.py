"""``dealtrail reaudit`` of a store judged under rulebook revision 4: the new generation is judged
under revision 5 and the printout lists, per rule, what revision 5 adds and withdraws: the
house-way finding of a hand reset before settlement (10.5.3), the DT-deal-after-device-fault of
decks dealt after a fault of the empty shuffler that they were never in (10.5.2), and the
stub-count-due of a counting table whose rounds no shuffle fed (10.5.4).

The store "judged under revision 4" is the trail of :mod:`tests.revision5_trail` audited, with its
generation-1 findings replaced by those the revision-4 engine gave it
(``tests/fixtures/revision4-findings.jsonl``, written by that engine, commit 291787f).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from projections.models.generations import generation_diff
from tests.integration.test_reaudit_revision4 import _findings, judged_store
from tests.revision5_trail import HOUSE_TABLE, IDLE_TABLE, SPARE_TABLE, STUB_TABLE, trail

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "revision4-findings.jsonl"
FAULT = "DT-deal-after-device-fault"
HOUSE_WAY = "PGP-645a.14-i-house-way"
STUB_DUE = "TCP-679a.9-d-stub-count-due"
A1 = "TCP-679a.9-a1-shuffler-required"
JAM = "PGP-645a.14-l-shuffler-fault"


@pytest.fixture
def revision4_store(tmp_path: Path) -> Path:
    return judged_store(trail(), FIXTURE, tmp_path)


def test_reaudit_of_a_store_judged_under_revision_4_lists_what_revision_5_adds_and_withdraws_per_rule(
    revision4_store: Path,
) -> None:
    a1 = [(A1, STUB_TABLE, f"R{n}") for n in range(2, 7)]
    assert _findings(revision4_store, 1) == sorted(
        [(FAULT, IDLE_TABLE, "R3", 4), (FAULT, IDLE_TABLE, "R4", 4)]
        + [(HOUSE_WAY, HOUSE_TABLE, "R2", 4), (HOUSE_WAY, HOUSE_TABLE, "R4", 4), (JAM, SPARE_TABLE, None, 4)]
        + [(*f, 4) for f in a1]
    )
    result = CliRunner().invoke(app, ["reaudit", "--db", str(revision4_store), "--workers", "1"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # the printout wraps at the terminal's width
    assert "rulebook revision 5); compared with generation 1 (judged under rulebook revision 4)" in out
    assert "what rulebook revision 5 adds and withdraws against revision 4" in out
    for rule_id in (FAULT, HOUSE_WAY, STUB_DUE):
        assert rule_id in out
    con = duckdb.connect(str(revision4_store), read_only=True)
    try:
        diff = {d.rule_id: d for d in generation_diff(con, 2, 1)}
        assert con.execute("SELECT rulebook_revision FROM generations WHERE generation = 2").fetchall() == [(5,)]
    finally:
        con.close()
    # 10.5.2: the decks dealt after the empty shuffler's fault were never in it
    assert (diff[FAULT].added, diff[FAULT].withdrawn) == (0, 2)
    assert diff[FAULT].rounds_withdrawn == [f"{IDLE_TABLE}/R3", f"{IDLE_TABLE}/R4"]
    # 10.5.3: the hand reset before settlement is withdrawn (its finding and its remedied revision);
    # the one settled as set stays, raised now at its settlement: a finding of its own, same round
    house = diff[HOUSE_WAY]
    assert (house.added, house.withdrawn) == (1, 3)
    assert house.rounds_withdrawn == [f"{HOUSE_TABLE}/R2", f"{HOUSE_TABLE}/R4"]
    assert house.rounds_added == [f"{HOUSE_TABLE}/R4"]
    # 10.5.4: rounds fed by no shuffle are not exempt: the stub count is due at the sixth
    assert (diff[STUB_DUE].added, diff[STUB_DUE].withdrawn) == (1, 0)
    assert diff[STUB_DUE].rounds_added == [f"{STUB_TABLE}/R6"]
    assert not diff[A1].moved and not diff[JAM].moved  # 10.5.1 writes down what revision 4 did
    assert _findings(revision4_store, 2) == sorted(
        [(HOUSE_WAY, HOUSE_TABLE, "R4", 5), (JAM, SPARE_TABLE, None, 5), (STUB_DUE, STUB_TABLE, "R6", 5)]
        + [(*f, 5) for f in a1]
    )


def test_the_revision4_fixture_is_the_trail_it_names() -> None:
    ids = {e.event_id for e in trail()}
    for line in FIXTURE.read_text().splitlines():
        f = json.loads(line)
        assert f["rulebook_revision"] == 4 and set(f["evidence_event_ids"]) <= ids
