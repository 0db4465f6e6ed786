"""Time that cannot be true is refused at the edge (issue 32 item 2): one event stamped
2099-12-31 (both times) in the middle of a 2026 shift is dead-lettered by the audit as
``recorded_in_future`` before the engine, the rest of the trail is judged as if it had not
arrived, and the period still being dealt stays provisional."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dealtrail.ingest.audit import audit_file
from dealtrail.simulator.run import write_simulation
from projections.reports.report import judge_status
from projections.store.store import Store
from streams.clock import FixedClock
from streams.engine import Plausibility

LIMITS = Plausibility(max_seq_jump=100_000, max_clock_skew=timedelta(hours=1))
SHIFT_START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)  # the simulator's default start
DURING = FixedClock(SHIFT_START + timedelta(minutes=40))  # the intake's clock while the shift is dealt
GRACE = timedelta(minutes=15)


@pytest.fixture(scope="module")
def trail(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """A 3-table, 0.5-hour simulated shift from 18:00 UTC: its lines."""
    path = tmp_path_factory.mktemp("future") / "shift.jsonl"
    write_simulation(path, tables=3, hours=0.5, seed=5, error_rate=0.2, duplicate_rate=0.0)
    return path.read_bytes().splitlines()


def stamped_2099(line: bytes) -> bytes:
    """A new event made from a real line (next seq of its table), stamped 2099-12-31 both times."""
    doc = json.loads(line)
    doc.pop("prev_hash", None)
    doc.pop("hash", None)
    doc.update(event_id="FUTURE-1", occurred_at="2099-12-31T12:00:00Z", recorded_at="2099-12-31T12:00:00Z")
    return json.dumps(doc).encode()


def audited(tmp_path: Path, name: str, lines: list[bytes], **kwargs: Any) -> dict[str, Any]:
    """Audit ``lines``: the summary, the findings, the stored event IDs, the dead letters and the
    status of the hour being dealt (18:00 to 19:00) and of its first quarter."""
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    dead = io.StringIO()
    with Store(tmp_path / f"{name}.duckdb") as store:
        summary = audit_file(path, store, dead, limits=LIMITS, **kwargs)
        con = store.con
        out = {
            "summary": summary,
            "findings": sorted(con.execute("SELECT finding_id, revision, status FROM findings").fetchall()),
            "events": {r[0] for r in con.execute("SELECT event_id FROM events").fetchall()},
            "dead": [json.loads(x) for x in dead.getvalue().splitlines()],
            "hour": judge_status(con, SHIFT_START, SHIFT_START + timedelta(hours=1), GRACE),
            "quarter": judge_status(con, SHIFT_START, SHIFT_START + timedelta(minutes=15), GRACE),
        }
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_an_event_stamped_2099_in_a_2026_shift_is_dead_lettered_and_the_period_stays_provisional(
    trail: list[bytes], tmp_path: Path, workers: int
) -> None:
    at = len(trail) // 2
    dirty = [*trail[:at], stamped_2099(trail[at]), *trail[at:]]
    clean = audited(tmp_path, "clean", trail, clock=DURING, workers=workers)
    found = audited(tmp_path, "dirty", dirty, clock=DURING, workers=workers)
    assert [(d["reason"], d["line"]) for d in found["dead"]] == [("recorded_in_future", at + 1)]
    assert "2099-12-31T12:00:00+00:00" in found["dead"][0]["detail"]
    assert "FUTURE-1" not in found["events"]
    assert found["findings"] == clean["findings"]  # judged as if it had not arrived
    assert found["events"] == clean["events"]
    assert found["hour"] is not None and found["hour"]["status"] == "provisional", found["hour"]
    assert found["hour"]["final_on"] == []


def test_the_system_clock_is_the_audits_clock_by_default(trail: list[bytes], tmp_path: Path) -> None:
    at = len(trail) // 3
    found = audited(tmp_path, "now", [*trail[:at], stamped_2099(trail[at]), *trail[at:]], workers=1)
    assert [d["reason"] for d in found["dead"]] == ["recorded_in_future"]
    assert found["hour"]["status"] == "provisional"


def test_an_old_file_audited_later_is_accepted(trail: list[bytes], tmp_path: Path) -> None:
    found = audited(tmp_path, "late", trail, clock=FixedClock(datetime(2027, 6, 1, tzinfo=UTC)), workers=1)
    assert found["dead"] == []
    assert found["summary"].events == len(trail)


def test_a_final_status_names_the_tables_last_events_that_made_it_final(trail: list[bytes], tmp_path: Path) -> None:
    found = audited(tmp_path, "quarter", trail, clock=DURING, workers=1)
    quarter = found["quarter"]
    assert quarter["status"] == "final"
    tables = sorted({json.loads(line)["table_id"] for line in trail})
    assert [t["table_id"] for t in quarter["final_on"]] == tables
    last: dict[str, int] = {}
    for line in trail:
        doc = json.loads(line)
        last[doc["table_id"]] = max(last.get(doc["table_id"], 0), doc["seq"])
    assert {t["table_id"]: t["seq"] for t in quarter["final_on"]} == last
    assert all(t["occurred_at"] >= "2026-11-27T18:15:00" for t in quarter["final_on"])
    assert all(t["table_id"] in quarter["reason"] for t in quarter["final_on"])
