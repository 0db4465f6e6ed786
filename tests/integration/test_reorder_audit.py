"""One answer whatever the arrival order (issue 19 item 6, rulebook 10.1.2): the audit and the
re-audit judge a table's events in seq order within the reorder window, and a late arrival
beyond it the same way."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from dealtrail.ingest.audit import audit_file
from dealtrail.ingest.reaudit import reaudit
from dealtrail.simulator.run import write_simulation
from projections.store.store import Store
from streams.engine.reorder import ReorderLimits
from tests.reorder_trails import shuffled

WINDOW = ReorderLimits(events=50, seconds=30)


def findings(db: Path, generation: int = 1) -> set[tuple[str, int, str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT finding_id, revision, status FROM findings WHERE generation = ?", [generation]
        ).fetchall()
        return {(a, int(b), c) for a, b, c in rows}
    finally:
        con.close()


def audited(events: Path, db: Path, workers: int = 1) -> Path:
    with Store(db) as store:
        audit_file(events, store, workers=workers, reorder=WINDOW)
    return db


@pytest.fixture(scope="module")
def trail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("reorder")
    events = folder / "events.jsonl"
    write_simulation(events, tables=3, hours=0.75, seed=5, error_rate=0.25, duplicate_rate=0.003)
    return events


def test_a_trail_shuffled_within_the_window_gives_the_findings_of_the_trail_in_order(
    trail: Path, tmp_path: Path
) -> None:
    swapped = shuffled(trail, tmp_path / "swapped.jsonl")
    assert swapped.read_bytes() != trail.read_bytes()
    expected = findings(audited(trail, tmp_path / "in-order.duckdb"))
    assert expected
    assert findings(audited(swapped, tmp_path / "swapped.duckdb")) == expected
    assert findings(audited(swapped, tmp_path / "parallel.duckdb", workers=2)) == expected


def test_a_late_arrival_beyond_the_window_is_judged_alike_by_the_audit_and_the_reaudit(
    trail: Path, tmp_path: Path
) -> None:
    moved = shuffled(trail, tmp_path / "moved.jsonl", far=4, far_by=400)
    db = audited(moved, tmp_path / "moved.duckdb")
    first = findings(db)
    assert first != findings(audited(trail, tmp_path / "in-order.duckdb"))  # the late events are judged
    with Store(db) as store:
        result = reaudit(store, workers=1, reorder=WINDOW)
    assert result.generation == 2
    assert findings(db, 2) == first
