"""A flood of rejected lines (issue 32 item 3): the audit's memory stays bounded, whatever the
count, and every rejected line is still one dead letter with its line number and reason.

Bounded is shown without timing: the Python memory an audit worker holds (tracemalloc's peak)
over 10,000 and over 100,000 rejected lines is the same within a small margin, and DuckDB holds a
row per rejected line only for a partition's first :data:`DEAD_LETTER_ROWS` (the rest are
counted, a few rows per chunk, whatever they state; a re-run with another number of workers adds
nothing). The peak resident memory of a whole run against a clean run is measured by
``bench/bench_rejected.py``.
"""

from __future__ import annotations

import io
import json
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dealtrail.ingest import audit as audit_module
from dealtrail.ingest.audit import DEAD_LETTER_BATCH, DEAD_LETTER_ROWS, Batch, audit_file, scan
from dealtrail.simulator.run import write_simulation
from projections.store.store import Store
from streams.engine import Plausibility

LIMITS = Plausibility(max_seq_jump=100_000, max_clock_skew=timedelta(hours=1))
REASONS = ("malformed_json", "schema_error", "schema_error")  # what the three kinds of bad line give


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """A 2-table, 0.2-hour simulated shift: its lines."""
    path = tmp_path_factory.mktemp("flood") / "shift.jsonl"
    write_simulation(path, tables=2, hours=0.2, seed=3, error_rate=0.1, duplicate_rate=0.0)
    return path.read_bytes().splitlines()


def bad_line(n: int, template: dict[str, object]) -> bytes:
    """The ``n``-th rejected line, one of three kinds in turn: not JSON, JSON that is no event,
    an event with a bad field."""
    kind = n % 3
    if kind == 0:
        return b"this is no JSON %d" % n
    if kind == 1:
        return b'{"note": "a heartbeat, not an event", "n": %d}' % n
    return json.dumps({**template, "event_id": f"BAD{n:012d}", "seq": f"x{n}"}).encode()


def flooded(folder: Path, good: list[bytes], bad: int) -> Path:
    """The good lines with ``bad`` rejected lines after the first half of them."""
    template = json.loads(good[len(good) // 2])
    half = len(good) // 2
    path = folder / f"flood-{bad}.jsonl"
    with path.open("wb") as fh:
        fh.writelines(line + b"\n" for line in good[:half])
        fh.writelines(bad_line(n, template) + b"\n" for n in range(bad))
        fh.writelines(line + b"\n" for line in good[half:])
    return path


def worker_peak(path: Path, stage: Path) -> tuple[int, int, int]:
    """Scan ``path`` as an audit worker does, handing each batch to a writer that keeps nothing:
    (tracemalloc peak in bytes, dead letters handed over, the most in one batch)."""
    handed = most = 0

    def emit(batch: Batch) -> None:
        nonlocal handed, most
        handed += len(batch.dead)
        most = max(most, len(batch.dead))
        if batch.events_file is not None:
            batch.events_file.unlink()

    stage.mkdir()
    tracemalloc.start()
    try:
        scan(path, 0, 1, stage, 50_000, emit, limits=LIMITS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, handed, most


def test_a_workers_memory_does_not_grow_with_the_rejected_lines(good: list[bytes], tmp_path: Path) -> None:
    few = flooded(tmp_path, good, 10_000)
    many = flooded(tmp_path, good, 100_000)
    peak_few, handed_few, _ = worker_peak(few, tmp_path / "few")
    peak_many, handed_many, most = worker_peak(many, tmp_path / "many")
    assert (handed_few, handed_many) == (10_000, 100_000)
    assert most < 10_000  # handed over as they come, not held to the end of the batch
    # ten times the rejected lines, the same memory (a held dead letter costs over 1 KB: holding
    # them all would add about 100 MB here)
    assert peak_many < peak_few * 1.2 + 2 * 1024 * 1024, (peak_few, peak_many)


def test_every_rejected_line_of_a_flood_is_one_dead_letter_row(good: list[bytes], tmp_path: Path) -> None:
    path = flooded(tmp_path, good, 30_000)
    dead = io.StringIO()
    rows_at_progress: list[int] = []
    with Store(tmp_path / "store.duckdb") as store:
        summary = audit_file(
            path, store, dead, progress=lambda _n: rows_at_progress.append(dead.getvalue().count("\n")), limits=LIMITS
        )
        stored = store.con.execute("SELECT reason, sum(lines)::BIGINT FROM stg_dead_letters GROUP BY ALL").fetchall()
        events = store.con.execute("SELECT count(*) FROM events").fetchone()
        again = audit_file(path, store, io.StringIO(), limits=LIMITS)  # the same file again: nothing twice
        stored_again = store.con.execute("SELECT sum(lines)::BIGINT FROM stg_dead_letters").fetchone()
        logged = store.dead_letter_log.read_text().count("\n")
    rows = [json.loads(x) for x in dead.getvalue().splitlines()]
    half = len(good) // 2
    assert [r["line"] for r in rows] == list(range(half + 1, half + 30_001))
    assert [r["reason"] for r in rows] == [REASONS[n % 3] for n in range(30_000)]
    assert summary.dead_letters == {"malformed_json": 10_000, "schema_error": 20_000}
    assert dict(stored) == {"malformed_json": 10_000, "schema_error": 20_000}
    assert events == (len(good),)
    assert sum(again.dead_letters.values()) == 30_000 and stored_again == (30_000,)
    assert again.written.dead_letters == 0 and logged == 30_000
    assert summary.events == len(good)
    # the file received them batch by batch while the audit went on, not all at its end
    assert len([n for n in rows_at_progress if 0 < n < 30_000]) >= 2, rows_at_progress


def test_an_audits_dead_letters_keep_their_raw_input_in_the_stores_log_and_a_reference_in_duckdb(
    good: list[bytes], tmp_path: Path
) -> None:
    template = json.loads(good[len(good) // 2])
    bad = [bad_line(n, template) for n in range(6)] + [b"\xff\xfe not UTF-8"]
    path = tmp_path / "some-bad.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in good[:5] + bad + good[5:]))
    with Store(tmp_path / "store.duckdb") as store:
        audit_file(path, store, io.StringIO(), limits=LIMITS)
        rows = store.con.execute(
            """SELECT position, raw, raw_file, byte_offset, byte_length, occurred_at, table_id
               FROM dead_letters ORDER BY byte_offset"""
        ).fetchall()
        log = store.dead_letter_log
        logged = [json.loads(x) for x in log.read_text().splitlines()]
        audit_file(path, store, io.StringIO(), limits=LIMITS)  # again: nothing stored or logged twice
        again = store.con.execute("SELECT count(*) FROM dead_letters").fetchone()
        logged_again = log.read_text().count("\n")
    data = path.read_bytes()
    assert [data[off : off + n] for _, _, _, off, n, _, _ in rows] == bad  # the reference finds each line
    assert [p for p, *_ in rows] == [f"line {n}" for n in range(6, 13)]
    assert {(raw, raw_file) for _, raw, raw_file, *_ in rows} == {("", str(log))}  # no raw bytes in DuckDB
    stated = [(t is not None, table) for *_, t, table in rows]
    assert stated == [(False, None), (False, None), (True, template["table_id"])] * 2 + [(False, None)]
    assert [(d["position"], d["byte_offset"]) for d in logged] == [(p, off) for p, _, _, off, *_ in rows]
    assert [d["raw"].encode() for d in logged[:6]] == bad[:6]  # the raw input, whole, in the log
    assert again == (7,) and logged_again == 7
    assert log.stat().st_mode & 0o777 == 0o600


def _dead(n: int, template: dict[str, object], compact: bool) -> dict[str, object]:
    raw = bad_line(n, template).decode()
    return {"source": "f.jsonl", "position": f"line {n}", "reason": "r", "detail": "d", "raw": raw, "compact": compact}


def test_the_reports_count_compact_dead_letters_as_they_counted_rows_with_their_raw_input(
    good: list[bytes], tmp_path: Path
) -> None:
    from projections.reports.report import query

    template = json.loads(good[len(good) // 2])
    figures = []
    for name, compact in (("full", False), ("compact", True)):
        with Store(tmp_path / f"{name}.duckdb") as store:
            store.write_batch((), dead_letters=[_dead(n, template, compact) for n in range(30)])
            if not compact:  # a row written before the columns existed: its date is read from raw
                store.con.execute("UPDATE dead_letters SET occurred_at = NULL, table_id = NULL")
            figures.append(
                [
                    query(store.con, q, start, end, table).to_pylist()
                    for q in ("rpt_data_quality", "rpt_dead_letters_by_reason")
                    for start, end in (
                        (None, None),
                        (datetime(2000, 1, 1, tzinfo=UTC), datetime(2001, 1, 1, tzinfo=UTC)),
                    )
                    for table in (None, str(template["table_id"]), "OTHER")
                ]
            )
    assert figures[0] == figures[1]
    assert figures[0][0][0]["dead_letters"] == 10 and figures[0][0][0]["dead_letters_undated"] == 20


def test_a_compact_dead_letter_costs_the_store_a_fraction_of_one_with_its_raw_input(
    good: list[bytes], tmp_path: Path
) -> None:
    """What DuckDB holds (and caches) per dead letter: the stored blocks of the table after a
    checkpoint. The bench (bench/bench_rejected.py) measures the peak memory of a whole run."""
    template = json.loads(good[len(good) // 2])
    blocks = {}
    for name, compact in (("full", False), ("compact", True)):
        with Store(tmp_path / f"{name}.duckdb") as store:
            for start in range(0, 60_000, 2_000):
                store.write_batch((), dead_letters=[_dead(n, template, compact) for n in range(start, start + 2_000)])
            store.con.execute("CHECKPOINT")
            found = store.con.execute(
                "SELECT count(DISTINCT block_id) FROM pragma_storage_info('dead_letters') WHERE block_id >= 0"
            ).fetchone()
            blocks[name] = int(found[0]) if found else 0
    assert blocks["compact"] * 3 < blocks["full"], blocks


def _figures(store: Store, table: str) -> list[object]:
    """The reports' dead-letter figures of ``store``, whole and for one day, all tables and ``table``."""
    from projections.reports.report import query

    return [
        query(store.con, q, start, end, t).to_pylist()
        for q in ("rpt_data_quality", "rpt_dead_letters_by_reason")
        for start, end in ((None, None), (datetime(2000, 1, 1, tzinfo=UTC), datetime(2001, 1, 1, tzinfo=UTC)))
        for t in (None, table)
    ]


def test_a_flood_past_a_workers_first_rows_is_counted_a_few_rows_per_batch_with_the_same_figures(
    good: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = flooded(tmp_path, good, 30_000)
    table = str(json.loads(good[len(good) // 2])["table_id"])
    with Store(tmp_path / "counted.duckdb") as store:
        audit_file(path, store, io.StringIO(), limits=LIMITS)
        rows = store.con.execute("SELECT count(*) FROM dead_letters").fetchall()[0]
        groups = store.con.execute("SELECT count(*), sum(lines)::BIGINT FROM dead_letter_counts").fetchall()[0]
        logged = [json.loads(x) for x in store.dead_letter_log.read_text().splitlines()]
        counted = _figures(store, table)
    monkeypatch.setattr(audit_module, "DEAD_LETTER_ROWS", 10**9)  # every dead letter a row, as before
    with Store(tmp_path / "rows.duckdb") as store:
        audit_file(path, store, io.StringIO(), limits=LIMITS)
        assert store.con.execute("SELECT count(*) FROM dead_letters").fetchall()[0] == (30_000,)
        assert _figures(store, table) == counted
    # two partitions: the 20,000 lines that name no table (partition 0: its first
    # DEAD_LETTER_ROWS are rows) and the 10,000 events of one table (all rows)
    assert rows == (2 * DEAD_LETTER_ROWS,)
    assert groups is not None and groups[1] == 30_000 - 2 * DEAD_LETTER_ROWS
    # the two kinds of line counted here state two (reason, table, time): two rows a chunk
    assert groups[0] <= 2 * (-(-(30_000 - 2 * DEAD_LETTER_ROWS) // DEAD_LETTER_BATCH) + 1), groups
    half = len(good) // 2
    # each line once (a chunk's lines are logged when it is complete, after later rows)
    assert sorted(int(d["position"].split()[1]) for d in logged) == list(range(half + 1, half + 30_001))


def test_a_parallel_re_run_of_a_flood_counts_nothing_twice(good: list[bytes], tmp_path: Path) -> None:
    path = flooded(tmp_path, good, 2 * DEAD_LETTER_ROWS + 6_000)
    with Store(tmp_path / "store.duckdb") as store:
        first = audit_file(path, store, io.StringIO(), workers=2, limits=LIMITS)
        again = audit_file(path, store, io.StringIO(), workers=2, limits=LIMITS)
        stored = store.con.execute("SELECT sum(lines)::BIGINT FROM stg_dead_letters").fetchall()[0]
        logged = store.dead_letter_log.read_text().count("\n")
    assert first.written.dead_letters == 2 * DEAD_LETTER_ROWS + 6_000
    assert again.written.dead_letters == 0
    assert stored == (2 * DEAD_LETTER_ROWS + 6_000,) and logged == 2 * DEAD_LETTER_ROWS + 6_000


def test_a_counted_batch_written_again_adds_nothing_and_one_with_a_changed_line_is_counted(
    good: list[bytes], tmp_path: Path
) -> None:
    template = json.loads(good[len(good) // 2])
    batch = [_dead(n, template, True) for n in range(30)]
    changed = [*batch[:29], {**batch[29], "raw": "another line at the same position"}]
    with Store(tmp_path / "store.duckdb") as store:
        first = store.write_batch((), dead_letters=batch, dead_letters_counted=True)
        again = store.write_batch((), dead_letters=batch, dead_letters_counted=True)
        other = store.write_batch((), dead_letters=changed, dead_letters_counted=True)
        groups = store.con.execute("SELECT reason, table_id, lines FROM dead_letter_counts ORDER BY rowid").fetchall()
        rows = store.con.execute("SELECT count(*) FROM dead_letters").fetchall()
        logged = store.dead_letter_log.read_text().count("\n")
    assert (first.dead_letters, again.dead_letters, other.dead_letters) == (30, 0, 30)
    assert rows == [(0,)] and logged == 60
    # per batch: the lines that state no table (not JSON, no event) and the events of one table
    # (the changed line states none)
    expected = [("r", None, 20), ("r", template["table_id"], 10), ("r", None, 21), ("r", template["table_id"], 9)]
    assert sorted(groups, key=str) == sorted(expected, key=str)


def test_counted_dead_letters_touch_the_report_periods_they_state(good: list[bytes], tmp_path: Path) -> None:
    from dealtrail.reporting.schedule import ReportWatch

    template = json.loads(good[len(good) // 2])
    stated = datetime.fromisoformat(str(template["occurred_at"]))
    with Store(tmp_path / "store.duckdb") as store:
        watch = ReportWatch()
        assert watch.touched(store.con) is None  # the first call: every period
        store.write_batch((), dead_letters=[_dead(n, template, True) for n in range(30)], dead_letters_counted=True)
        spans = watch.touched(store.con)
    assert spans == [(stated, stated)]


def _stating(n: int, at: datetime | None, table: str, template: dict[str, object]) -> dict[str, object]:
    """A compact dead letter of an event with a bad field that states ``table`` and the time ``at``."""
    doc = {**template, "event_id": f"BAD{n:012d}", "seq": f"x{n}", "table_id": table}
    doc["occurred_at"] = at.isoformat() if at is not None else None
    return {"source": "f.jsonl", "position": f"line {n}", "reason": "schema_error", "detail": "d"} | {
        "raw": json.dumps(doc),
        "compact": True,
    }


def _period_figures(
    store: Store, periods: list[tuple[datetime, datetime]], table: str | None
) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """The dead-letter figures of ``store`` (rpt_data_quality, rpt_dead_letters_by_reason) for each period."""
    from projections.reports.report import query

    return [
        (
            query(store.con, "rpt_data_quality", start, end, table).to_pylist(),
            query(store.con, "rpt_dead_letters_by_reason", start, end, table).to_pylist(),
        )
        for start, end in periods
    ]


def test_a_counted_batch_whose_every_line_states_another_time_and_table_gains_a_few_rows_with_the_same_hourly_figures(
    good: list[bytes], tmp_path: Path
) -> None:
    from projections.store.store import COUNT_GROUPS

    template = json.loads(good[len(good) // 2])
    base = datetime(2026, 3, 1, 9, tzinfo=UTC)
    batch = [_stating(n, base + timedelta(seconds=3 * n), f"T{n % 20}", template) for n in range(2_000)]
    hours = [(base + timedelta(hours=h), base + timedelta(hours=h + 1)) for h in range(-1, 3)]
    days = [(datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC))]
    # a day in a zone 5:30 from UTC, and a period that ends within a quarter hour
    odd = [(datetime(2026, 2, 28, 18, 30, tzinfo=UTC), datetime(2026, 3, 1, 18, 30, tzinfo=UTC))]
    cut = [(base, base + timedelta(minutes=20))]
    with Store(tmp_path / "counted.duckdb") as store:
        store.write_batch((), dead_letters=batch, dead_letters_counted=True)
        groups = store.con.execute("SELECT count(*), sum(lines)::BIGINT FROM dead_letter_counts").fetchall()[0]
        counted = _period_figures(store, hours + days + odd, None)
        counted_cut = _period_figures(store, cut, None)[0]
        counted_table = _period_figures(store, days, "T1")[0]
    with Store(tmp_path / "rows.duckdb") as store:
        store.write_batch((), dead_letters=batch)  # one row each
        rows = _period_figures(store, hours + days + odd, None)
        rows_cut = _period_figures(store, cut, None)[0]
        rows_table = _period_figures(store, days, "T1")[0]
    # 2,000 times over 100 minutes, 20 tables: the quarter hours, no table
    assert groups == (7, 2_000) and groups[0] <= COUNT_GROUPS
    for figures in counted + rows:  # the figures have no unattributable lines here
        assert figures[0][0]["dead_letters_unattributable"] == 0
    assert counted == rows
    assert [f[0][0]["dead_letters"] for f in rows] == [0, 1_200, 800, 0, 2_000, 2_000]
    # a period that cuts a quarter hour: the quarter's lines are not attributable to it, and said so
    assert (rows_cut[0][0]["dead_letters"], rows_cut[0][0]["dead_letters_unattributable"]) == (400, 0)
    assert (counted_cut[0][0]["dead_letters"], counted_cut[0][0]["dead_letters_unattributable"]) == (300, 300)
    assert counted_cut[1] == [{"reason": "schema_error", "in_period": 300, "undated": 0, "unattributable": 300}]
    # a report of one of the 20 tables: the groups keep no table, so their lines are not attributable
    assert rows_table[0][0]["dead_letters"] == 100
    assert (counted_table[0][0]["dead_letters"], counted_table[0][0]["dead_letters_unattributable"]) == (0, 2_000)


def test_a_counted_batch_of_times_all_over_the_calendar_gains_a_row_per_reason_and_kind_of_time(
    good: list[bytes], tmp_path: Path
) -> None:
    template = json.loads(good[len(good) // 2])
    start = datetime(1990, 1, 1, tzinfo=UTC)
    times = [start + timedelta(days=19 * n, seconds=n) for n in range(1_990)] + [None] * 10  # 1990 to 2093
    batch = [_stating(n, at, "T1", template) for n, at in enumerate(times)]
    whole = [(datetime(2000, 1, 1, tzinfo=UTC), datetime(2101, 1, 1, tzinfo=UTC))]
    with Store(tmp_path / "counted.duckdb") as store:
        store.write_batch((), dead_letters=batch, dead_letters_counted=True)
        groups = store.con.execute(
            "SELECT table_id, occurred_at, lines FROM dead_letter_counts ORDER BY first_occurred_at NULLS LAST"
        ).fetchall()
        counted = _period_figures(store, whole, None) + _period_figures(store, whole, "T1")
        year = _period_figures(store, [(datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))], None)
    with Store(tmp_path / "rows.duckdb") as store:
        store.write_batch((), dead_letters=batch)
        rows = _period_figures(store, whole, None) + _period_figures(store, whole, "T1")
    undated = sum(1 for at in times if at is None or at.year < 2000)
    # before 2000, in 2000-2100, none: three rows, the one table kept (the batch states one)
    assert groups == [("T1", None, undated - 10), ("T1", None, 2_000 - undated), ("T1", None, 10)]
    assert counted == rows
    assert rows[0][0][0]["dead_letters"] == 2_000 - undated and rows[0][0][0]["dead_letters_undated"] == undated
    assert year[0][0][0]["dead_letters"] == 0 and year[0][0][0]["dead_letters_unattributable"] == 2_000 - undated


def test_a_re_run_with_another_number_of_workers_adds_no_dead_letter(good: list[bytes], tmp_path: Path) -> None:
    """The first run with one worker, the second with three: the partitions of the file's tables
    (and so which dead letters are rows and how the rest are chunked) are the same."""
    template = json.loads(good[len(good) // 2])
    half = len(good) // 2
    path = tmp_path / "spread.jsonl"
    with path.open("wb") as fh:
        fh.writelines(line + b"\n" for line in good[:half])
        for n in range(2 * DEAD_LETTER_ROWS + 6_000):  # a third name no table, the rest one of 7
            doc = {**template, "event_id": f"BAD{n:012d}", "seq": f"x{n}", "table_id": f"T{n % 7}"}
            fh.write((b"no JSON %d" % n if n % 3 == 0 else json.dumps(doc).encode()) + b"\n")
        fh.writelines(line + b"\n" for line in good[half:])
    table = str(template["table_id"])
    by_reason = "SELECT reason, stated_table_id, sum(lines)::BIGINT FROM stg_dead_letters GROUP BY ALL ORDER BY ALL"
    with Store(tmp_path / "store.duckdb") as store:
        first = audit_file(path, store, io.StringIO(), workers=1, limits=LIMITS)
        stored, figures = store.con.execute(by_reason).fetchall(), _figures(store, table)
        logged = store.dead_letter_log.read_text().count("\n")
        again = audit_file(path, store, io.StringIO(), workers=3, limits=LIMITS)
        assert store.con.execute(by_reason).fetchall() == stored
        assert _figures(store, table) == figures
        assert store.dead_letter_log.read_text().count("\n") == logged
        third = audit_file(path, store, io.StringIO(), workers=2, limits=LIMITS)
        assert store.con.execute(by_reason).fetchall() == stored
    assert again.workers == 3
    assert first.written.dead_letters == logged == 2 * DEAD_LETTER_ROWS + 6_000
    assert again.written.dead_letters == third.written.dead_letters == 0
    assert sum(again.dead_letters.values()) == 2 * DEAD_LETTER_ROWS + 6_000


def test_a_report_names_counted_dead_letters_not_attributable_to_its_period_and_says_nothing_of_them_when_none(
    good: list[bytes], tmp_path: Path
) -> None:
    from projections.reports.report import write_report

    template = json.loads(good[len(good) // 2])
    base = datetime(2026, 3, 1, 9, tzinfo=UTC)
    batch = [_stating(n, base + timedelta(seconds=3 * n), "T1", template) for n in range(2_000)]
    db = tmp_path / "store.duckdb"
    with Store(db) as store:
        store.write_batch((), dead_letters=batch, dead_letters_counted=True)
    cut = write_report(db, tmp_path / "cut", base, base + timedelta(minutes=20))
    hour = write_report(db, tmp_path / "hour", base, base + timedelta(hours=1))
    cut_dq = json.loads(cut.summary.read_text())["data_quality"]
    hour_dq = json.loads(hour.summary.read_text())["data_quality"]
    assert (cut_dq["dead_letters"], cut_dq["dead_letters_unattributable"]) == (300, 300)
    assert cut_dq["dead_letters_by_reason"] == {"schema_error": {"in_period": 300, "undated": 0, "unattributable": 300}}
    assert "time not attributable" in cut.html.read_text()
    # a period the groups fall in whole: the figures and the page as for dead letters stored one by one
    assert hour_dq["dead_letters"] == 1_200 and "dead_letters_unattributable" not in hour_dq
    assert hour_dq["dead_letters_by_reason"] == {"schema_error": {"in_period": 1_200, "undated": 0}}
    assert "not attributable" not in hour.html.read_text()
