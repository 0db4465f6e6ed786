"""Rulebook 10.4.3: every decision of sections 10.1 to 10.4 holds in every arrival order within the
reorder window, and for trails of one table or of many interleaved. The revision-4 trails (a jam
cleared by its reshuffle at a Three Card and a Pai Gow table, a jam left uncleared while the table
shuffles by hand, a table closed for two days with a remedy owed) are audited each alone, then
interleaved with each other and a simulated floor and shuffled within the window: each table's
findings are the same, finding for finding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from dealtrail.ingest.audit import audit_file
from projections.store.store import Store
from schemas.base import Envelope
from schemas.codec import encode
from streams.clock import FixedClock
from streams.engine import Plausibility
from streams.engine.reorder import ReorderLimits
from tests.reorder_trails import interleaved_with_a_floor
from tests.revision4_trail import HAND_TABLE, IDLE_TABLE, order_trails

WINDOW = ReorderLimits(events=50, seconds=30)
CLOCK = FixedClock(datetime(2027, 1, 1, tzinfo=UTC))
LIMITS = Plausibility(max_seq_jump=100_000, max_clock_skew=timedelta(hours=1), remedy_window=timedelta(hours=24))
Row = tuple[str, str, str | None, int, str]


def table_findings(db: Path) -> dict[str, set[Row]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT table_id, finding_id, rule_id, round_id, revision, status FROM findings").fetchall()
    finally:
        con.close()
    out: dict[str, set[Row]] = {}
    for table, *rest in rows:
        out.setdefault(str(table), set()).add((str(rest[0]), str(rest[1]), rest[2], int(rest[3]), str(rest[4])))
    return out


def audited(events: Path, db: Path, workers: int = 1) -> dict[str, set[Row]]:
    with Store(db) as store:  # judged as of a clock past the trails (the idle table reopens two days on)
        audit_file(events, store, workers=workers, reorder=WINDOW, limits=LIMITS, clock=CLOCK)
    return table_findings(db)


def audited_alone(trails: dict[str, list[Envelope]], folder: Path) -> dict[str, set[Row]]:
    """Each trail (by table) audited in a file of its own, in seq order: its table's findings."""
    out: dict[str, set[Row]] = {}
    for table, events in trails.items():
        path = folder / f"{table}.jsonl"
        path.write_bytes(b"".join(encode(e) + b"\n" for e in events))
        out[table] = audited(path, folder / f"{table}.duckdb").get(table, set())
    return out


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[Row]]:
    """Each revision-4 trail audited in a file of its own, in seq order."""
    return audited_alone(order_trails(), tmp_path_factory.mktemp("alone"))


def test_the_revision4_trails_alone_give_the_findings_of_each_decision(alone: dict[str, set[Row]]) -> None:
    rules = {table: sorted({(r[1], r[2]) for r in rows if r[3] == 0}) for table, rows in alone.items()}
    assert rules[HAND_TABLE] == [("PGP-645a.14-l-shuffler-fault", None)] + [
        ("PGP-645a.14-n-out-of-order", f"R{n}") for n in range(2, 6)
    ]
    assert rules[IDLE_TABLE] == [("DT-remedy-overdue", "R3"), ("TCP-679a.9-f-wrong-deck", "R3")]
    assert not any(r[1] == "DT-deal-after-device-fault" for rows in alone.values() for r in rows)


def test_interleaved_with_a_floor_and_shuffled_within_the_window_each_table_gives_its_findings_alone(
    alone: dict[str, set[Row]], tmp_path: Path
) -> None:
    assert_each_table_as_alone(alone, order_trails(), tmp_path)


def assert_each_table_as_alone(alone: dict[str, set[Row]], trails: dict[str, list[Envelope]], folder: Path) -> None:
    """Rulebook 10.4.3: the trails interleaved with a floor, in order and shuffled within the
    window, audited with one and two workers, give each table the findings it gave alone."""
    in_order, swapped = interleaved_with_a_floor(trails.values(), folder)
    for name, path, workers in (("interleaved", in_order, 1), ("swapped", swapped, 1), ("parallel", swapped, 2)):
        got = audited(path, folder / f"{name}.duckdb", workers=workers)
        for table, expected in alone.items():
            assert got.get(table, set()) == expected, f"{name}: {table}"
