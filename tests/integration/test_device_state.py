"""The floor's device state is the engine's own (rulebook 10.3.1, 10.3.2): read from the latest
engine state the store keeps for the table, per device and per deck."""

from __future__ import annotations

from pathlib import Path

from dealtrail.audit import audit_file
from projections.device_state import table_device_state
from projections.store import Store
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
