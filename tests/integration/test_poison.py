"""No poison record (issue 19 item 3, rulebook 10.3.4): a record beyond the bounds or the
plausibility limits is dead-lettered with its own reason, leaves its table as it was, and the
rest of the trail is judged as if it had not arrived."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dealtrail.ingest.audit import audit_file
from dealtrail.simulator.run import write_simulation
from projections.store.store import Store
from streams.clock import FixedClock
from streams.engine import Plausibility

LIMITS = Plausibility(max_seq_jump=100_000, max_clock_skew=timedelta(hours=1))


@pytest.fixture(scope="module")
def trail(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """A 3-table, 0.5-hour simulated shift with injected errors: its lines."""
    path = tmp_path_factory.mktemp("poison") / "shift.jsonl"
    write_simulation(path, tables=3, hours=0.5, seed=5, error_rate=0.2, duplicate_rate=0.0)
    return path.read_bytes().splitlines()


def bad_copy(line: bytes, n: int, **changes: Any) -> bytes:
    """A new record made from a real line: a fresh event ID, unchained, with ``changes``."""
    doc = json.loads(line)
    doc.pop("prev_hash", None)
    doc.pop("hash", None)
    doc["event_id"] = f"POISON-{n}"
    doc.update(changes)
    return json.dumps(doc).encode()


def audited(
    tmp_path: Path, name: str, lines: list[bytes], limits: Plausibility | None = LIMITS, **kwargs: Any
) -> dict[str, Any]:
    """Audit ``lines``: the summary, the findings (finding ID, revision, status), the stored
    event IDs and the dead letters."""
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    dead = io.StringIO()
    with Store(tmp_path / f"{name}.duckdb") as store:
        summary = audit_file(path, store, dead, limits=limits, **kwargs)
        con = store.con
        findings = sorted(con.execute("SELECT finding_id, revision, status FROM findings").fetchall())
        events = {r[0] for r in con.execute("SELECT event_id FROM events").fetchall()}
    return {
        "summary": summary,
        "findings": findings,
        "events": events,
        "dead": [json.loads(x) for x in dead.getvalue().splitlines()],
    }


def test_a_seq_far_ahead_is_refused_and_the_rest_of_the_table_is_judged_as_without_it(
    trail: list[bytes], tmp_path: Path
) -> None:
    at = len(trail) // 3
    poisoned = [*trail[:at], bad_copy(trail[at], 1, seq=2**62), *trail[at:]]
    clean = audited(tmp_path, "clean", trail)
    dirty = audited(tmp_path, "dirty", poisoned)
    assert [(d["reason"], d["line"]) for d in dirty["dead"]] == [("implausible_seq_jump", at + 1)]
    assert dirty["findings"] == clean["findings"]
    assert dirty["events"] == clean["events"]


def test_a_new_tables_first_event_far_ahead_is_refused(trail: list[bytes], tmp_path: Path) -> None:
    # a table's trail starts at seq 1: a first event at 2**62 would make every later seq unstorable
    first = json.loads(trail[0])
    new = bad_copy(trail[0], 1, seq=2**62, table_id="NEW-TABLE", game=first["game"])
    dirty = audited(tmp_path, "dirty", [*trail, new])
    assert [(d["reason"], d["line"]) for d in dirty["dead"]] == [("implausible_seq_jump", len(trail) + 1)]


def test_without_the_limit_a_seq_far_ahead_poisons_the_rest_of_its_table(trail: list[bytes], tmp_path: Path) -> None:
    """What the limit prevents: the record becomes the table's head and the rest of its trail
    turns into contradictory-seq findings."""
    at = len(trail) // 3
    poisoned = [*trail[:at], bad_copy(trail[at], 1, seq=2**62), *trail[at:]]
    clean = audited(tmp_path, "clean", trail, None)
    dirty = audited(tmp_path, "dirty", poisoned, None)
    assert len(dirty["findings"]) > len(clean["findings"]) + 100


def test_an_occurred_at_far_after_its_recorded_at_is_refused(trail: list[bytes], tmp_path: Path) -> None:
    at = len(trail) // 2
    doc = json.loads(trail[at])
    poisoned = [
        *trail[:at],
        bad_copy(trail[at], 1, seq=doc["seq"], recorded_at="2026-11-27T10:00:00Z"),
        *trail[at:],
    ]
    clean = audited(tmp_path, "clean", trail)
    dirty = audited(tmp_path, "dirty", poisoned)
    assert [d["reason"] for d in dirty["dead"]] == ["implausible_clock_skew"]
    assert dirty["findings"] == clean["findings"]


def test_a_table_idle_for_weeks_is_not_implausible(trail: list[bytes], tmp_path: Path) -> None:
    docs = [json.loads(line) for line in trail]
    table = docs[0]["table_id"]
    half = len(docs) // 2
    later = []
    for i, doc in enumerate(docs):
        if doc["table_id"] == table and i >= half:
            for key in ("occurred_at", "recorded_at"):
                doc[key] = doc[key].replace("2026-11-", "2026-12-").replace("-12-27", "-12-29")
            doc.pop("prev_hash", None)
            doc.pop("hash", None)
        later.append(json.dumps(doc).encode())
    # audited after the trail's last event (whatever the date the test runs on: a time after the
    # intake's clock is refused as recorded_in_future)
    result = audited(tmp_path, "idle", later, clock=FixedClock(datetime(2026, 12, 30, tzinfo=UTC)))
    assert not result["dead"]


def test_the_limits_come_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from dealtrail.settings import Settings

    monkeypatch.setenv("DEALTRAIL_MAX_SEQ_JUMP", "7")
    monkeypatch.setenv("DEALTRAIL_MAX_CLOCK_SKEW", "PT5M")
    monkeypatch.setenv("DEALTRAIL_REMEDY_WINDOW", "PT36H")  # rulebook 10.3.5
    assert Settings().plausibility == Plausibility(7, timedelta(minutes=5), timedelta(hours=36))
    monkeypatch.delenv("DEALTRAIL_REMEDY_WINDOW")
    assert Settings().plausibility.remedy_window == timedelta(hours=24)
    assert Settings(max_seq_jump=100_000).plausibility.max_seq_jump == 100_000


def _stored_counts(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("events", "dead_letters")}
    finally:
        con.close()


def test_a_round_the_store_cannot_hold_is_dead_lettered_and_the_run_goes_on(
    trail: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dealtrail.ingest.audit as audit

    clean = audited(tmp_path, "clean", trail)
    real = audit.round_row
    poisoned: list[str] = []

    def too_big(*args: Any) -> dict[str, Any]:
        row = real(*args)
        if not poisoned:  # the first round: a number its INTEGER column cannot hold
            poisoned.append(row["round_id"])
            return {**row, "round_no": 2**31}
        return row

    monkeypatch.setattr(audit, "round_row", too_big)
    dirty = audited(tmp_path, "dirty", trail)
    assert [d["reason"] for d in dirty["dead"]] == ["store_error"]
    assert poisoned[0] in dirty["dead"][0]["raw"] and "round" in dirty["dead"][0]["detail"]
    assert dirty["events"] == clean["events"] and dirty["findings"] == clean["findings"]
    con = duckdb.connect(str(tmp_path / "dirty.duckdb"), read_only=True)
    try:
        rounds = {r[0] for r in con.execute("SELECT round_id FROM rounds").fetchall()}
        stored_dead = con.execute("SELECT reason FROM dead_letters").fetchall()
    finally:
        con.close()
    assert poisoned[0] not in rounds and len(rounds) == dirty["summary"].written.rounds
    assert stored_dead == [("store_error",)]


def test_an_event_the_store_refuses_is_dead_lettered_with_its_line_and_the_batch_stored_without_it(
    trail: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from projections.store.store import Store as StoreClass

    victim = json.loads(trail[len(trail) // 2])["event_id"]
    real = StoreClass._insert_event_rows

    def refuse(self: StoreClass, rows: Any) -> int:
        if victim in rows.column("event_id").to_pylist():
            raise duckdb.ConversionException(f"Could not convert the row of {victim}")
        return real(self, rows)

    monkeypatch.setattr(StoreClass, "_insert_event_rows", refuse)
    dirty = audited(tmp_path, "dirty", trail)
    assert [(d["reason"], d["line"]) for d in dirty["dead"]] == [("store_error", len(trail) // 2 + 1)]
    assert victim in dirty["dead"][0]["raw"] and "ConversionException" in dirty["dead"][0]["detail"]
    assert dirty["events"] == {json.loads(line)["event_id"] for line in trail} - {victim}


def test_each_refused_record_is_one_data_quality_incident_in_the_report_never_a_finding(
    trail: list[bytes], tmp_path: Path
) -> None:
    from datetime import UTC, datetime

    from projections.reports.report import query

    at = len(trail) // 3
    first = json.loads(trail[at])
    bad = [
        bad_copy(trail[at], 1, seq=2**62),
        bad_copy(trail[at], 2, occurred_at="0001-01-01T00:00:00Z"),
        bad_copy(trail[at], 3, seq=first["seq"], recorded_at="2026-11-27T10:00:00Z"),
        json.dumps(first)[:-1].encode() + b', "seq": 1}',
    ]
    clean = audited(tmp_path, "clean", trail)
    dirty = audited(tmp_path, "dirty", [*trail[:at], *bad, *trail[at:]])
    assert dirty["findings"] == clean["findings"]
    con = duckdb.connect(str(tmp_path / "dirty.duckdb"), read_only=True)
    try:
        start, end = datetime(2026, 11, 27, tzinfo=UTC), datetime(2026, 11, 28, tzinfo=UTC)
        rows = query(con, "rpt_dead_letters_by_reason", start, end).to_pylist()
        quality = query(con, "rpt_data_quality", start, end).to_pylist()[0]
    finally:
        con.close()
    assert quality["dead_letters"] + quality["dead_letters_undated"] == 4
    assert {r["reason"]: r["in_period"] + r["undated"] for r in rows} == {
        "implausible_seq_jump": 1,
        "out_of_bounds": 1,
        "implausible_clock_skew": 1,
        "malformed_json": 1,
    }


def test_dealtrail_audit_of_the_issues_bad_records_exits_0_with_each_reason_and_the_shifts_findings(
    trail: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from dealtrail.cli import app

    docs = [json.loads(line) for line in trail]
    third = len(docs) // 3
    rs = next(i for i, d in enumerate(docs) if d["type"] == "RoundStarted" and i > third)
    wp = next(i for i, d in enumerate(docs) if d["type"] == "WagerPlaced" and i > third)
    deep = json.dumps(docs[third + 9])[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    bad = {
        rs: (bad_copy(trail[rs], 1, round_no=2**31), "out_of_bounds"),
        third + 3: (bad_copy(trail[third + 3], 2, seq=2**62), "implausible_seq_jump"),
        third + 6: (bad_copy(trail[third + 6], 3, occurred_at="0001-01-01T00:00:00Z"), "out_of_bounds"),
        third + 8: (json.dumps(docs[third + 8])[:-1].encode() + b', "seq": 1}', "malformed_json"),
        third + 9: (deep.encode(), "malformed_json"),
        wp: (bad_copy(trail[wp], 4, amount=10**15), "out_of_bounds"),
    }
    mixed: list[bytes] = []
    for i, line in enumerate(trail):
        if i in bad:
            mixed.append(bad[i][0])
        mixed.append(line)
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(mixed) + b"\n")
    for key in ("DEALTRAIL_MAX_SEQ_JUMP", "DEALTRAIL_MAX_CLOCK_SKEW"):
        monkeypatch.delenv(key, raising=False)
    db = tmp_path / "cli.duckdb"
    rejected = tmp_path / "rejected.jsonl"
    result = CliRunner().invoke(app, ["audit", str(path), "--db", str(db), "--dead-letter", str(rejected)])
    assert result.exit_code == 0, result.output
    dead = [json.loads(x) for x in rejected.read_text().splitlines()]
    assert sorted(d["reason"] for d in dead) == sorted(reason for _, reason in bad.values())
    clean = audited(tmp_path, "clean", trail)
    con = duckdb.connect(str(db), read_only=True)
    try:
        findings = sorted(con.execute("SELECT finding_id, revision, status FROM findings").fetchall())
        events = {r[0] for r in con.execute("SELECT event_id FROM events").fetchall()}
    finally:
        con.close()
    assert findings == clean["findings"] and events == clean["events"]
