"""The audit of a shift dealt the way floors deal (rulebook revision 4, the simulator's
``floor_events``): jams and stops cleared by a reshuffle in the same shuffler with no return to
service, a jammed deck dealt before its reshuffle, devices taken out of service (covered or
signed, or neither) and returned, a shoe fault remedied per § 645a.14(m), and a table closed past
the remedy window owing a voiding remedy. The stored detections equal the truth file exactly, as
for every simulated shift (A2); a kind the simulator mispredicts fails it."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from dealtrail.ingest.audit import audit_file
from dealtrail.simulator.run import write_simulation
from projections.store.store import Store
from streams.engine import Plausibility
from tests.unit.test_simulator import FLOOR_KINDS  # the kinds the simulator tests name, one list

WINDOW = timedelta(hours=24)
LIMITS = Plausibility(100_000, timedelta(hours=1), WINDOW)
"""The settings' defaults (max_seq_jump, max_clock_skew, remedy_window), as the demo audits."""


@pytest.fixture(scope="module")
def floor_audit(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, str]], Path]:
    """A 6-table, 3-hour shift with errors in 30 % of rounds and the floor events on, audited as
    the demo audits (remedy window, reorder window, snapshots): (truth rows, store)."""
    folder = tmp_path_factory.mktemp("floor")
    events, truth, db = folder / "events.jsonl", folder / "truth.jsonl", folder / "floor.duckdb"
    write_simulation(events, 6, 3.0, 48, 0.3, 0.002, truth, remedy_window=WINDOW)
    with Store(db) as store:
        summary = audit_file(events, store, limits=LIMITS, snapshot_every=1000)
    assert not summary.dead_letters
    return [json.loads(line) for line in truth.read_text().splitlines()], db


def test_A2_a_shift_with_the_floor_events_on_stores_exactly_the_truth(
    floor_audit: tuple[list[dict[str, str]], Path],
) -> None:
    rows, db = floor_audit
    assert {r["injected"] for r in rows} >= FLOOR_KINDS
    with duckdb.connect(str(db), read_only=True) as con:
        found = Counter(map(tuple, con.execute("SELECT rule_id, table_id, round_id FROM fct_detections").fetchall()))
    expected = Counter((r["rule_id"], r["table_id"], r["round_id"]) for r in rows)
    assert expected - found == Counter(), "missed"
    assert found - expected == Counter(), "extra"


def test_a_table_closed_past_the_remedy_window_is_charged_at_its_first_event_after_it(
    floor_audit: tuple[list[dict[str, str]], Path],
) -> None:
    rows, db = floor_audit
    owed = {(r["table_id"], r["round_id"]) for r in rows if r["injected"] == "closed-owing-remedy"}
    with duckdb.connect(str(db), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        charged = con.execute(
            """
            SELECT f.table_id, f.round_id, e.type, e.occurred_at - r.ended_at
            FROM fct_detections f
            JOIN events e ON e.event_id = f.trigger_event_id
            JOIN (SELECT round_id, max(occurred_at) AS ended_at FROM events GROUP BY round_id) r
              ON r.round_id = f.round_id
            WHERE f.rule_id = 'DT-remedy-overdue'
            """
        ).fetchall()
    late = {(t, r): (kind, gap) for t, r, kind, gap in charged if (t, r) in owed}
    assert owed and set(late) == owed
    for kind, gap in late.values():  # not the next round's start: the window closed (10.4.2)
        assert kind != "RoundStarted"
        assert gap >= WINDOW
