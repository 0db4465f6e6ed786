"""The projector stores one row per fact and says how many duplicate deliveries it skipped
(issue 32): an unstamped copy of a stamped event in the same batch is the same fact, as it is
against a stored event in a later batch."""

from __future__ import annotations

from pathlib import Path

from dealtrail.ingest.projector import ProjectSummary, _write
from projections.store.store import BatchCounts, Store
from schemas.chain import Chainer
from schemas.codec import decode, encode
from tests.unit.test_projector_isolation import NAMES, TP, Consumer, Rec
from tests.unit.test_store import _events


def _stamped_and_bare() -> tuple[list[bytes], list[bytes]]:
    chainer = Chainer()
    events = [decode(raw) for raw in _events()]
    stamped = [chainer.stamp_encoded(e)[1] or encode(e) for e in events]
    bare = [encode(e.model_copy(update={"prev_hash": None, "hash": None})) for e in events]
    return stamped, bare


def test_a_stamped_event_and_its_unstamped_copy_in_one_batch_are_one_row_and_one_counted_duplicate(
    tmp_path: Path,
) -> None:
    stamped, bare = _stamped_and_bare()
    table = decode(stamped[0]).table_id.encode()
    lines = stamped + bare
    polled = {TP(NAMES[0], 0): [Rec(i, line, table) for i, line in enumerate(lines)]}
    summary = ProjectSummary(BatchCounts())
    with Store(tmp_path / "s.duckdb") as store:
        _write(store, Consumer(), "g", polled, NAMES, summary)
        rows = store.con.execute("SELECT count(*), count(DISTINCT event_id), count(payload->>'hash') FROM events")
        stored = rows.fetchone()
    assert stored == (len(stamped), len(stamped), len(stamped))
    assert (summary.written.events, summary.duplicates) == (len(stamped), len(bare))


def test_the_projectors_duplicates_count_copies_of_stored_events_and_redelivered_batches(tmp_path: Path) -> None:
    stamped, bare = _stamped_and_bare()
    table = decode(stamped[0]).table_id.encode()
    summary = ProjectSummary(BatchCounts())
    with Store(tmp_path / "s.duckdb") as store:
        first = {TP(NAMES[0], 0): [Rec(i, line, table) for i, line in enumerate(stamped)]}
        _write(store, Consumer(), "g", first, NAMES, summary)
        assert summary.duplicates == 0
        _write(store, Consumer(), "g", first, NAMES, summary)  # the same batch read again (a crash)
        later = {TP(NAMES[0], 0): [Rec(100 + i, line, table) for i, line in enumerate(bare)]}
        _write(store, Consumer(), "g", later, NAMES, summary)  # re-sent unstamped by another producer
    assert (summary.written.events, summary.duplicates) == (len(stamped), 2 * len(stamped))


def test_the_projectors_summary_line_says_how_many_duplicate_deliveries_it_skipped(tmp_path: Path) -> None:
    from dealtrail.cli.stream import project_line

    summary = ProjectSummary(BatchCounts(events=1_200), records=1_935, batches=3, duplicates=731)
    line = project_line(summary, tmp_path / "s.duckdb", stopped=False)
    assert "projected 1,935 records in 3 batches" in line
    assert "731 duplicate deliveries skipped: 1,200 events" in line
    assert project_line(ProjectSummary(BatchCounts()), tmp_path, stopped=True).startswith(
        "stopped: projected 0 records"
    )
