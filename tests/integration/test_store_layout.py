"""The store's layout: each batch's events in table, seq and arrival order, batches in arrival
order (``projections.store.store.BATCH_ORDER``), so one table's consecutive events lie in consecutive
rows and a replay reads only their rows' payloads."""

from __future__ import annotations

from pathlib import Path

import duckdb


def test_each_tables_events_are_stored_in_seq_order_and_a_replays_run_in_consecutive_rows(
    audited_shift: Path,
) -> None:
    con = duckdb.connect(str(audited_shift), read_only=True)
    try:
        tables = [t for (t,) in con.execute("SELECT DISTINCT table_id FROM events ORDER BY 1").fetchall()]
        assert len(tables) > 2
        for table in tables:
            out_of_order = con.execute(
                """SELECT count(*) FROM (
                       SELECT seq, lag(seq) OVER (ORDER BY rowid) AS before FROM events WHERE table_id = ?
                   ) WHERE seq < before""",
                [table],
            ).fetchone()
            assert out_of_order == (0,), f"{table}: events stored out of seq order"
        # a run of 200 consecutive seqs of one table (as a replay reads them) in 200 consecutive rows
        table, first = con.execute(
            "SELECT table_id, min(seq) + 100 FROM events GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
        ).fetchone()  # type: ignore[misc]
        span = con.execute(
            "SELECT max(rowid) - min(rowid), count(*) FROM events WHERE table_id = ? AND seq > ? AND seq <= ?",
            [table, first, first + 200],
        ).fetchone()
        assert span is not None and span[1] == 200 and span[0] < 400, span
    finally:
        con.close()
