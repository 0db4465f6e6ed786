"""The floor's device state is the engine's own (rulebook 10.3.1, 10.3.2): read from the latest
engine state the store keeps for the table, per device and per deck."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from dealtrail.ingest.audit import audit_file
from projections.models.device_state import table_device_state
from projections.store.store import Store
from schemas import events as ev
from schemas.codec import encode
from tests.revision3_trail import SHUFFLER, TABLE_ID, trail


def _audited(tmp_path: Path, events: list[ev.DealingEvent]) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(encode(e) + b"\n" for e in events))
    db = tmp_path / "store.duckdb"
    with Store(db) as store:
        audit_file(path, store)
    return db


def test_a_jammed_deck_left_unshuffled_is_faulted_and_its_shuffler_not_back_in_use(tmp_path: Path) -> None:
    events = trail()  # DK-1 jammed in the shuffler; a count-less completion later cleared nothing
    jam = next(e for e in events if isinstance(e, ev.ShufflerFaulted))
    with Store(_audited(tmp_path, events)) as store:
        got = table_device_state(store.con, TABLE_ID)
    assert got is not None
    assert got["status"] == "faulted" and got["fault_event_id"] == jam.event_id
    assert got["devices"][SHUFFLER]["status"] == "faulted"
    assert got["decks"]["DK-1"] == {"status": "faulted", "fault_event_id": jam.event_id, "suspect_finding_id": None}
    assert got["decks"]["DK-2"]["status"] == "dealt"  # dealt in R2 since its shuffle, never faulted
    assert got["as_of_seq"] == events[-1].seq


def test_returned_to_service_and_the_jammed_deck_reshuffled_the_table_is_in_service(tmp_path: Path) -> None:
    events = trail(returned=True)
    with Store(_audited(tmp_path, events)) as store:
        got = table_device_state(store.con, TABLE_ID)
        assert table_device_state(store.con, "NO-SUCH-TABLE") is None
    assert got is not None and got["status"] == "in service" and got["fault_event_id"] is None
    assert got["decks"]["DK-1"]["status"] == "shuffled" and got["devices"][SHUFFLER]["status"] == "in service"


def test_a_jam_cleared_by_its_own_reshuffle_leaves_the_table_in_service_with_no_return_to_service(
    tmp_path: Path,
) -> None:
    from tests.revision4_trail import TCP_TABLE, tcp_trail

    events = tcp_trail()  # the shuffle before R2 jammed and was run again in the same shuffler (10.4.1)
    assert not any(isinstance(e, ev.DeviceReturnedToService) for e in events)
    with Store(_audited(tmp_path, events)) as store:
        got = table_device_state(store.con, TCP_TABLE)
    assert got is not None and got["status"] == "in service" and got["fault_event_id"] is None
    assert got["devices"][f"{TCP_TABLE}-SHF"]["status"] == "in service"


def test_a_jam_not_yet_cleared_shows_its_shuffler_faulted_though_it_stays_in_use(tmp_path: Path) -> None:
    from tests.revision4_trail import TCP_TABLE, tcp_trail

    events = tcp_trail()
    jam = next(i for i, e in enumerate(events) if isinstance(e, ev.ShufflerFaulted))
    with Store(_audited(tmp_path, events[: jam + 1])) as store:
        got = table_device_state(store.con, TCP_TABLE)
    assert got is not None and got["devices"][f"{TCP_TABLE}-SHF"]["status"] == "faulted"
    assert got["devices"][f"{TCP_TABLE}-SHF"]["fault_event_id"] == events[jam].event_id


def test_the_latest_state_of_each_table_is_its_highest_seq_a_file_end_state_before_a_snapshot(
    audited_shift: Path, tmp_path: Path
) -> None:
    import json
    import shutil

    import duckdb

    from projections.models.device_state import latest_states

    db = tmp_path / "states.duckdb"
    shutil.copy(audited_shift, db)
    con = duckdb.connect(str(db))
    try:
        ends = con.execute("SELECT table_id, last_seq FROM table_states ORDER BY table_id").fetchall()
        assert len(ends) > 2
        # snapshots before each file-end state, one at the same seq (the state wins the tie) and,
        # for the first table, one after it (the snapshot wins)
        for n, (table, seq) in enumerate(ends):
            for at, marker in ((seq - 50, "older"), (seq, "tie"), *(((seq + 5, "newer"),) if n == 0 else ())):
                con.execute(
                    """INSERT INTO table_snapshots BY NAME SELECT $t AS table_id, $s AS last_seq, 'e' AS last_event_id,
                       now() AS last_occurred_at, 0 AS events_through, 'v' AS engine_version, 3 AS rulebook_revision,
                       'x' AS state_sha256, json_object('marker', $m) AS state""",
                    {"t": table, "s": at, "m": marker},
                )
        rows = []
        for pref, source in ((1, "table_states"), (0, "table_snapshots")):
            found = con.execute(f"SELECT table_id, last_seq, state::VARCHAR FROM {source}").fetchall()
            rows += [(t, int(s), pref, x) for t, s, x in found]
        latest: dict[str, tuple[int, int, str]] = {}
        for table, seq, pref, state in rows:
            if table not in latest or (seq, pref) > latest[table][:2]:
                latest[table] = (seq, pref, state)
        got = latest_states(con)
        assert got == {t: (seq, json.loads(state)) for t, (seq, _, state) in latest.items()}
        first, second = ends[0][0], ends[1][0]
        assert got[first][1] == {"marker": "newer"} and "marker" not in got[second][1]
        assert latest_states(con, second) == {second: got[second]}
    finally:
        con.close()


def test_the_floor_says_since_when_a_fault_is_shown_near_the_latest_event_or_long_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The floor's ``since`` of a shown fault is its event's time, looked for within a day of the
    floor's latest event first and in the whole history when the fault is older than that."""
    from projections.models import device_state

    events = trail()
    jam = next(e for e in events if isinstance(e, ev.ShufflerFaulted))
    with Store(_audited(tmp_path, events)) as store:
        near = device_state.floor_device_states(store.con)[TABLE_ID]
        monkeypatch.setattr(device_state, "FAULT_NEAR", timedelta(0))  # the fault is "older" than the bound
        far = device_state.floor_device_states(store.con)[TABLE_ID]
    assert near["status"] == far["status"] == "faulted" and near["fault_event_id"] == jam.event_id
    assert near["since"] == far["since"] == jam.occurred_at


def test_a_state_read_by_a_row_id_that_no_longer_names_the_chosen_row_is_read_by_table_and_seq(
    audited_shift: Path, tmp_path: Path
) -> None:
    """Rows renumbered between the choice and the read (a writer's checkpoint): the states
    returned are still those of the chosen tables and seqs, never another row's."""
    import shutil
    from typing import Any

    import duckdb

    from projections.models.device_state import latest_states

    db = tmp_path / "states.duckdb"
    shutil.copy(audited_shift, db)
    con = duckdb.connect(str(db))
    try:
        expected = latest_states(con)
        assert len(expected) > 2

        class Renumbered:
            """A connection whose reads by row ID land one row further on."""

            def execute(self, sql: str, params: Any = None) -> Any:
                if "rowid IN" in sql:
                    params = {"r": [r + 1 for r in params["r"]]}
                return con.execute(sql, params)

        assert latest_states(Renumbered()) == expected  # type: ignore[arg-type]
    finally:
        con.close()


def test_the_floor_reads_a_state_again_whenever_its_text_changes_and_lists_no_removed_deck(tmp_path: Path) -> None:
    """The floor keeps each table's last reading while the state's text is the same: another
    state of the same table (another store, the same table ID) is read afresh, and going back
    gives the first reading again; decks the state names as removed are left out of it; a caller
    that changes what it was given changes no later reading."""
    import json

    from projections.models import device_state

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with Store(_audited(tmp_path / "a", trail())) as a, Store(_audited(tmp_path / "b", trail(returned=True))) as b:
        assert device_state.floor_device_states(a.con)[TABLE_ID]["status"] == "faulted"
        assert device_state.floor_device_states(b.con)[TABLE_ID]["status"] == "in service"
        assert device_state.floor_device_states(a.con)[TABLE_ID]["status"] == "faulted"
        _seq, text = device_state._latest_texts(a.con)[TABLE_ID]
    state = json.loads(text)
    state["decks"]["DK-2"]["removed"] = True
    removed = json.dumps(state)
    assert device_state.device_state(state)["decks"]["DK-2"]["status"] == "removed"
    floor = device_state._floor_state(TABLE_ID, removed)
    assert "DK-2" not in floor["decks"] and floor["decks"]["DK-1"]["status"] == "faulted"
    again = device_state._floor_state(TABLE_ID, text)
    assert again["decks"].keys() == {"DK-1", "DK-2"}
    again["decks"]["DK-1"]["status"] = "changed by a caller"
    again["devices"].clear()
    kept = device_state._floor_state(TABLE_ID, text)  # the reading kept is not the caller's copy
    assert kept["decks"]["DK-1"]["status"] == "faulted" and kept["devices"]


def test_the_floor_reads_no_state_again_while_each_tables_latest_state_row_is_the_same(tmp_path: Path) -> None:
    """The floor asks every second: a table whose latest stored state is the same row as at the last
    request is not read again (a month's states are 1.5 MB); a later state of it is."""
    from typing import Any

    from projections.models import device_state

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    returned = _audited(tmp_path / "b", trail(returned=True))
    with Store(returned) as b:
        later = device_state._latest_texts(b.con)[TABLE_ID][1]
    with Store(_audited(tmp_path / "a", trail())) as a:

        class Spy:
            """The store's connection, noting each statement."""

            def __init__(self) -> None:
                self.sql: list[str] = []

            def execute(self, sql: str, params: Any = None) -> Any:
                self.sql.append(sql)
                return a.con.execute(sql, params)

        first = device_state.floor_device_states(a.con)
        assert first[TABLE_ID]["status"] == "faulted"
        spy = Spy()
        assert device_state.floor_device_states(spy) == first  # type: ignore[arg-type]
        assert spy.sql and not any("state::VARCHAR" in q for q in spy.sql), spy.sql
        # a snapshot after the audit's last state: the table's latest state is another row
        a.con.execute(
            """INSERT INTO table_snapshots BY NAME
               SELECT table_id, last_seq + 1 AS last_seq, last_event_id, NULL AS last_hash,
                      now() AS last_occurred_at, 0 AS events_through, 'test' AS engine_version,
                      3 AS rulebook_revision, sha256($s) AS state_sha256, $s AS state
               FROM table_states WHERE table_id = $t""",
            {"s": later, "t": TABLE_ID},
        )
        spy = Spy()
        now = device_state.floor_device_states(spy)  # type: ignore[arg-type]
        assert any("state::VARCHAR" in q for q in spy.sql)
        assert (
            now[TABLE_ID]["status"] == "in service" and now[TABLE_ID]["as_of_seq"] == first[TABLE_ID]["as_of_seq"] + 1
        )
