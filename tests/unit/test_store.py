"""The store's bulk paths: raw events (the projector's) and staged files (the audit's) store
the same rows, and nothing twice."""

from __future__ import annotations

import glob
import hashlib
import json
import tempfile
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import pytest

from projections.store.event_rows import EventRowsFile, read_event_rows
from projections.store.store import NotAStoreError, Store, check_store_path, stage_line
from schemas.base import Game
from schemas.codec import decode, encode
from streams.engine.catalog import RULEBOOK_REVISION
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

        def fit(seq: int, table_id: str = "T1") -> str | None:
            found = store.state_before(table_id, seq, window=10)
            return None if found is None else json.loads(found[0])["s"]

        assert fit(1) is None  # a file from the table's start starts anew
        assert fit(101) == "day1"  # day 2 again: from day 1, not from its own end or days 1 and 2
        assert fit(201) == "days1and2"  # day 3: from the latest written of the two ending at 200
        assert fit(195) == "days1and2"  # day 3 repeats day 2's last 6 events: copies the engine knows
        assert fit(150) is None  # 51 events into day 2: its earlier events would look contradictory
        assert fit(205) is None  # 4 events not in the store: lost, or a file in between not audited yet
        assert fit(105) is None  # 4 missing after day 1 (day 2 holds them, and runs too far past 105)
        assert fit(5, table_id="T3") is None
        # the same table, seq range and last event again: kept as it was
        store.write_batch((), table_states=[_state_row(101, 200, "changed")])
        assert store.con.execute("SELECT count(*) FROM table_states").fetchone() == (4,)


def test_of_two_states_ending_at_the_same_event_in_one_batch_the_one_given_last_is_taken(tmp_path: Path) -> None:
    # DuckDB's window and anti-join do not keep the order they read: the rows must still go in
    # as given, either way round (this came out wrong about one time in 15 before)
    for k, order in enumerate((("day2", "days1and2"), ("days1and2", "day2"))):
        with Store(tmp_path / f"s{k}.duckdb") as store:
            rows = {"day2": _state_row(101, 200, "day2"), "days1and2": _state_row(1, 200, "days1and2")}
            for x in range(5):  # a few more batches, each of both rows again in another table
                store.write_batch((), table_states=[{**rows[name], "table_id": f"X{x}"} for name in order])
            store.write_batch((), table_states=[rows[name] for name in order])
            found = store.state_before("T1", 201, window=10)
            assert found is not None and json.loads(found[0])["s"] == order[-1]
            for x in range(5):
                found = store.state_before(f"X{x}", 201, window=10)
                assert found is not None and json.loads(found[0])["s"] == order[-1]


def test_a_store_written_before_findings_had_a_rulebook_revision_opens_and_reads_them_as_revision_1(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.duckdb"
    t = Trail(Game.TCP).configure(
        declared=52,
        jokers=0,
        seats=SEATS,
        wagers_enabled=frozenset({"ANTE", "PLAY"}),
        dealing_methods_allowed=frozenset({"HAND"}),
    )
    t.tcp_round("R1", antes=("SEAT_2",), shuffle=None)  # no recorded shuffle: (a)(1)
    [finding] = t.findings()
    with Store(db) as s:
        s.write_batch([], findings=[finding.model_copy(update={"rulebook_revision": 1})])
    with duckdb.connect(str(db)) as con:  # the store as it was before the column existed
        con.execute("ALTER TABLE findings DROP COLUMN rulebook_revision")
    again = finding.model_copy(update={"finding_id": "f" * 32})
    with Store(db) as s:
        s.write_batch([], findings=[again])
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT finding_id, rulebook_revision FROM findings ORDER BY finding_id").fetchall()
    assert rows == sorted([(finding.finding_id, 1), ("f" * 32, RULEBOOK_REVISION)])  # new ones: the current
    assert again.rulebook_revision == RULEBOOK_REVISION


def _arrow_stage(path: Path, arrivals_and_lines: list[tuple[int, bytes]]) -> int:
    rows = EventRowsFile(path)
    for arrival, raw in arrivals_and_lines:
        rows.add(arrival, decode(raw), raw)
    rows.close()
    return rows.rows


def test_arrow_rows_store_the_same_rows_as_the_staged_json_path(tmp_path: Path) -> None:
    # the audit's workers build the events rows in Arrow; the values must be those the writer
    # derived from the JSON before, also for an instant written with another offset
    events = [decode(raw) for raw in _events()]
    new_york = events[1].occurred_at.astimezone(ZoneInfo("America/New_York"))
    events[1] = events[1].model_copy(update={"occurred_at": new_york})
    lines = [encode(e) for e in events]
    assert b"-05:00" in lines[1] or b"-04:00" in lines[1]
    staged = tmp_path / "staged.jsonl"
    staged.write_bytes(b"".join(stage_line(i, raw) for i, raw in enumerate(lines, 1)))
    with Store(tmp_path / "json.duckdb") as s:
        assert s.write_batch((), events_file=staged).events == len(lines)
    # an exact copy later in the batch is left out (the first arrival is kept)
    stage = tmp_path / "rows.arrow"
    assert _arrow_stage(stage, [*enumerate(lines, 1), (len(lines) + 1, lines[0])]) == len(lines)
    with Store(tmp_path / "arrow.duckdb") as s:
        assert s.write_batch((), event_rows=read_event_rows(stage)).events == len(lines)
        assert s.write_batch((), event_rows=read_event_rows(stage)).events == 0  # written twice, stored once
    assert _rows(tmp_path / "json.duckdb") == _rows(tmp_path / "arrow.duckdb")
    with duckdb.connect(str(tmp_path / "arrow.duckdb"), read_only=True) as con:
        stored = con.execute("SELECT payload::VARCHAR, payload_hash FROM events ORDER BY arrival").fetchall()
    assert [p.encode() for p, _ in stored] == lines  # the canonical bytes, as they were hashed
    assert [h for _, h in stored] == [hashlib.md5(raw).hexdigest() for raw in lines]


def test_an_unchained_copy_of_a_stored_chained_event_is_not_stored_again_but_other_content_is(
    tmp_path: Path,
) -> None:
    from schemas.chain import Chainer
    from schemas.codec import decode

    chainer = Chainer()
    events = [decode(raw) for raw in _events()]
    chained = [chainer.stamp_encoded(e)[1] or encode(e) for e in events]
    bare = [encode(e.model_copy(update={"prev_hash": None, "hash": None})) for e in events]
    relinked = [encode(e.model_copy(update={"prev_hash": "ab" * 32, "hash": "cd" * 32})) for e in events]
    other = events[1].model_copy(update={"actor": events[1].actor.model_copy(update={"id": "D-OTHER"}), "hash": None})
    with Store(tmp_path / "s.duckdb") as s:
        assert s.write_batch(list(enumerate(chained, 1))).events == len(events)
        assert s.write_batch(list(enumerate(bare, 100))).events == 0  # the same facts, sent unchained
        assert s.write_batch(list(enumerate(relinked, 200))).events == len(events)  # another chain: not copies
        assert s.write_batch([(300, encode(other))]).events == 1  # the same ID, other content: kept beside


def test_an_unchained_copy_in_the_same_batch_as_its_chained_event_is_not_stored_twice(tmp_path: Path) -> None:
    from schemas.chain import Chainer

    chainer = Chainer()
    events = [decode(raw) for raw in _events()]
    chained = [chainer.stamp_encoded(e)[1] or encode(e) for e in events]
    bare = [encode(e.model_copy(update={"prev_hash": None, "hash": None})) for e in events]
    relinked = [encode(e.model_copy(update={"prev_hash": "ab" * 32, "hash": "cd" * 32})) for e in events]
    batch = [(n, raw) for n, raw in enumerate(chained, 1)] + [(100 + n, raw) for n, raw in enumerate(bare)]
    with Store(tmp_path / "s.duckdb") as s:
        assert s.write_batch(batch).events == len(events)  # one row per fact: the chained one
        stored = s.con.execute("SELECT count(DISTINCT event_id), count(*), count(payload->>'hash') FROM events")
        assert stored.fetchone() == (len(events), len(events), len(events))
        # another chain is other content, also within one batch (the rule is the same as across batches)
        assert s.write_batch([(300 + n, raw) for n, raw in enumerate(relinked)]).events == len(events)


def test_an_unchained_event_then_its_chained_copy_in_one_batch_store_as_across_two(tmp_path: Path) -> None:
    from schemas.chain import Chainer

    chainer = Chainer()
    events = [decode(raw) for raw in _events()]
    chained = [chainer.stamp_encoded(e)[1] or encode(e) for e in events]
    bare = [encode(e.model_copy(update={"prev_hash": None, "hash": None})) for e in events]
    with Store(tmp_path / "one.duckdb") as one, Store(tmp_path / "two.duckdb") as two:
        in_one = one.write_batch(list(enumerate(bare, 1)) + list(enumerate(chained, 100))).events
        in_two = (
            two.write_batch(list(enumerate(bare, 1))).events + two.write_batch(list(enumerate(chained, 100))).events
        )
    assert in_one == in_two
