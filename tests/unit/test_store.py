"""The store's bulk paths: raw events (the projector's) and staged files (the audit's) store
the same rows, and nothing twice."""

from __future__ import annotations

import glob
import tempfile
from pathlib import Path

import duckdb
import pytest

from projections.store import NotAStoreError, Store, check_store_path, stage_line
from schemas.base import Game
from schemas.codec import encode
from tests.unit.rules.conftest import SEATS, Trail


def _events() -> list[bytes]:
    t = Trail(Game.TCP).configure(
        declared=52,
        jokers=0,
        seats=SEATS,
        wagers_enabled=frozenset({"ANTE", "PLAY"}),
        dealing_methods_allowed=frozenset({"HAND"}),
    )
    t.tcp_round("R1", antes=("SEAT_2",))
    return [encode(e) for e in t.events]


def _rows(db: Path) -> list[tuple[object, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT * EXCLUDE (payload), payload::VARCHAR FROM events ORDER BY seq, arrival").fetchall()


def test_raw_events_and_a_staged_file_store_the_same_rows_once(tmp_path: Path) -> None:
    lines = _events()
    assert len(lines) >= 3
    with Store(tmp_path / "raw.duckdb") as s:
        assert s.write_batch(list(enumerate(lines, 1))).events == len(lines)
        assert s.write_batch(list(enumerate(lines, 1))).events == 0  # a redelivery adds nothing
    staged = tmp_path / "staged.jsonl"
    staged.write_bytes(b"".join(stage_line(i, raw) for i, raw in enumerate(lines, 1)))
    with Store(tmp_path / "file.duckdb") as s:
        assert s.write_batch((), events_file=staged).events == len(lines)
    assert _rows(tmp_path / "raw.duckdb") == _rows(tmp_path / "file.duckdb")


def test_the_staging_folder_is_made_only_for_raw_events_and_removed_on_close(tmp_path: Path) -> None:
    pattern = str(Path(tempfile.gettempdir()) / "dealtrail-stage-*")
    before = set(glob.glob(pattern))
    with Store(tmp_path / "s.duckdb") as s:
        s.write_batch(())
        assert set(glob.glob(pattern)) == before
        s.write_batch(list(enumerate(_events(), 1)))
        assert len(set(glob.glob(pattern)) - before) == 1
    assert set(glob.glob(pattern)) == before


def test_a_path_holding_other_data_is_not_a_store(tmp_path: Path) -> None:
    other = tmp_path / "findings.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(NotAStoreError, match="not a DuckDB database"):
        Store(other)
    with pytest.raises(NotAStoreError, match="is a folder"):
        check_store_path(tmp_path)
    check_store_path(tmp_path / "new.duckdb")  # missing: DuckDB creates it
    (tmp_path / "empty.duckdb").touch()
    check_store_path(tmp_path / "empty.duckdb")
    with Store(tmp_path / "real.duckdb"):
        pass
    check_store_path(tmp_path / "real.duckdb")


def _state_row(first: int, last: int, state: str, table_id: str = "T1") -> dict[str, object]:
    return {
        "table_id": table_id,
        "first_seq": first,
        "last_seq": last,
        "last_event_id": f"E{last}",
        "source": "f.jsonl",
        "state": f'{{"s": "{state}"}}',
        "stamps": "[]",
    }


def test_the_state_a_file_goes_on_from_is_the_one_ending_just_before_it(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store:
        store.write_batch(
            (),
            table_states=[
                _state_row(1, 100, "day1"),
                _state_row(101, 200, "day2"),
                _state_row(1, 200, "days1and2"),
                _state_row(1, 300, "other table", table_id="T2"),
            ],
        )
        assert store.state_before("T1", 1) is None  # a file from the table's start starts anew
        assert store.state_before("T1", 101) == ('{"s": "day1"}', "[]")  # day 2 again: from day 1, not its own
        assert store.state_before("T1", 150) == ('{"s": "days1and2"}', "[]")  # overlaps: the latest end, latest written
        assert store.state_before("T1", 201) == ('{"s": "days1and2"}', "[]")
        assert store.state_before("T1", 260) == ('{"s": "days1and2"}', "[]")  # events missing in between
        assert store.state_before("T3", 260) is None
        # the same table, seq range and last event again: kept as it was
        store.write_batch((), table_states=[_state_row(101, 200, "changed")])
        assert store.con.execute("SELECT count(*) FROM table_states").fetchone() == (4,)
