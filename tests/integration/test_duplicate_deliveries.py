"""An exact copy is never a new fact, however far back (issue 32): a file re-sent whole, or its
tail re-sent after the next file, audits to exactly what the deduplicated input gives, with
and without the simulator's hashes, and the summary counts the copies."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.ingest.audit import AuditSummary, audit_file
from dealtrail.ingest.reaudit import reaudit
from dealtrail.simulator.run import write_simulation
from projections.store.event_rows import EventRowsFile, read_event_rows
from projections.store.store import Store
from schemas.codec import decode, encode
from streams.seen import SeenIndex
from tests.helpers import write_unchained

FINDING_COLUMNS = "finding_id, revision, rule_id, table_id, round_id, status, message, evidence_event_ids::VARCHAR"


@pytest.fixture(scope="module", params=["hashed", "unhashed"])
def days(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two consecutive "days" of one simulated trail (2 tables), with dealing errors and a few
    lost and conflicting events: (day1, day2), as the simulator writes them (hashed) or
    without their chain fields (unhashed)."""
    folder = tmp_path_factory.mktemp("days")
    whole = folder / "whole.jsonl"
    write_simulation(whole, tables=2, hours=1.0, seed=7, error_rate=0.1)
    if request.param == "unhashed":
        whole = write_unchained(whole, folder / "unhashed.jsonl")
    lines = whole.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    day1, day2 = folder / "day1.jsonl", folder / "day2.jsonl"
    day1.write_bytes(b"".join(lines[:half]))
    day2.write_bytes(b"".join(lines[half:]))
    return day1, day2


def _audit(path: Path, db: Path, workers: int = 1) -> AuditSummary:
    with Store(db) as store:
        return audit_file(path, store, workers=workers)


def _findings(db: Path) -> set[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {tuple(r) for r in con.execute(f"SELECT {FINDING_COLUMNS} FROM findings").fetchall()}
    finally:
        con.close()


def _rows(db: Path) -> tuple[int, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute("SELECT count(*), count(DISTINCT event_id) FROM events").fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0]), int(row[1])


def _verify(db: Path) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["verify", "--db", str(db)])
    return r.exit_code, " ".join(r.output.replace(str(db), "DB").split())


def _cat(out: Path, *parts: bytes) -> Path:
    out.write_bytes(b"".join(parts))
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_sent_twice_audits_as_the_file_once(days: tuple[Path, Path], tmp_path: Path, workers: int) -> None:
    day1, _ = days
    twice = _cat(tmp_path / "twice.jsonl", day1.read_bytes(), day1.read_bytes())
    once = _audit(day1, tmp_path / "once.duckdb")
    again = _audit(twice, tmp_path / "twice.duckdb", workers=workers)
    lines = len(day1.read_bytes().splitlines())
    assert _findings(tmp_path / "twice.duckdb") == _findings(tmp_path / "once.duckdb")
    assert _rows(tmp_path / "twice.duckdb") == (once.written.events, once.written.events)
    assert again.duplicates == once.duplicates + lines and again.events == once.events
    assert _verify(tmp_path / "twice.duckdb") == _verify(tmp_path / "once.duckdb")


def test_a_days_tail_re_sent_after_it_audits_as_the_days_once(days: tuple[Path, Path], tmp_path: Path) -> None:
    day1, day2 = days
    tail = b"".join(day2.read_bytes().splitlines(keepends=True)[-600:])
    both = _cat(tmp_path / "both.jsonl", day1.read_bytes(), day2.read_bytes())
    resent = _cat(tmp_path / "resent.jsonl", both.read_bytes(), tail)
    once = _audit(both, tmp_path / "once.duckdb")
    again = _audit(resent, tmp_path / "resent.duckdb")
    assert _findings(tmp_path / "resent.duckdb") == _findings(tmp_path / "once.duckdb")
    assert _rows(tmp_path / "resent.duckdb") == (once.written.events, once.written.events)
    assert again.duplicates == once.duplicates + 600
    assert _verify(tmp_path / "resent.duckdb") == _verify(tmp_path / "once.duckdb")


def test_a_clean_trail_sent_twice_verifies_clean(tmp_path: Path) -> None:
    events = tmp_path / "clean.jsonl"
    write_simulation(events, tables=2, hours=0.5, seed=3, error_rate=0.0)
    for name, path in (("hashed", events), ("unhashed", write_unchained(events, tmp_path / "bare.jsonl"))):
        twice = _cat(tmp_path / f"{name}-twice.jsonl", path.read_bytes(), path.read_bytes())
        db = tmp_path / f"{name}.duckdb"
        _audit(twice, db)
        code, out = _verify(db)
        assert code == 0, out
        assert _rows(db)[0] == _rows(db)[1] == len(path.read_bytes().splitlines())


def test_an_old_event_re_sent_with_other_content_is_one_contradiction(tmp_path: Path) -> None:
    events = tmp_path / "clean.jsonl"
    write_simulation(events, tables=1, hours=0.5, seed=3, error_rate=0.0)
    lines = events.read_bytes().splitlines(keepends=True)
    assert len(lines) > 1_000
    old = decode(lines[10])  # far further back than the engine's own memory of 256 events
    altered = old.model_copy(update={"actor": old.actor.model_copy(update={"id": "D-SOMEONE-ELSE"})})
    resent = _cat(tmp_path / "resent.jsonl", *lines, encode(altered) + b"\n", encode(altered) + b"\n", lines[10])
    summary = _audit(resent, tmp_path / "resent.duckdb")
    con = duckdb.connect(str(tmp_path / "resent.duckdb"), read_only=True)
    gaps = con.execute("SELECT evidence_event_ids, message FROM findings WHERE rule_id = 'DT-sequence-gap'").fetchall()
    con.close()
    assert len(gaps) == 1 and gaps[0][0][-1] == old.event_id, gaps  # the altered copy, once
    assert summary.duplicates == 2  # its own copy, and the original's


def test_the_cli_summary_counts_the_duplicate_deliveries(days: tuple[Path, Path], tmp_path: Path) -> None:
    day1, _ = days
    twice = _cat(tmp_path / "twice.jsonl", day1.read_bytes(), day1.read_bytes())
    r = CliRunner().invoke(app, ["audit", str(twice), "--db", str(tmp_path / "cli.duckdb")])
    lines = 2 * len(day1.read_bytes().splitlines())
    assert r.exit_code == 0, r.output
    assert f"of {lines:,} lines, {lines // 2:,} duplicate deliveries skipped" in " ".join(r.output.split())


def test_the_seen_index_spills_old_chunks_to_an_owner_only_file_and_reads_them_back(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        index = SeenIndex(tmp_path, memory_chunks=2)
        for seq in range(1, 10_000):
            index.add("T", seq, (seq, -seq))
    finally:
        os.umask(old)
    assert index.spilled_bytes > 0
    spill = next(tmp_path.iterdir())
    assert spill.stat().st_mode & 0o077 == 0
    assert index.get("T", 3) == (3, -3) and index.get("T", 9_999) == (9_999, -9_999)
    assert index.get("T", 10_000) is None and index.get("U", 3) is None
    index.add("T", 5, (55, 0))  # a chunk on disk, changed: read back into memory
    assert index.get("T", 5) == (55, 0) and index.get("T", 6) == (6, -6)
    index.close()
    assert not any(tmp_path.iterdir())


def test_reaudit_skips_exact_copies_a_store_holds_from_before_they_were_skipped(tmp_path: Path) -> None:
    events = tmp_path / "clean.jsonl"
    write_simulation(events, tables=1, hours=0.5, seed=3, error_rate=0.1)
    db = tmp_path / "store.duckdb"
    _audit(events, db)
    with Store(db) as store:
        payloads = [
            str(p) for (p,) in store.con.execute("SELECT payload::VARCHAR FROM events ORDER BY seq LIMIT 50").fetchall()
        ]
        # the same events stored again with other chain stamps, as an unhashed file sent twice
        # was stored before: unchained copies, after the whole trail
        copies = [decode(p).model_copy(update={"prev_hash": None, "hash": None}) for p in payloads]
        rows = EventRowsFile(tmp_path / "copies.arrow")
        for i, copy in enumerate(copies):
            rows.add(10**9 + i, copy, encode(copy))
        rows.close()
        assert store.write_batch((), event_rows=read_event_rows(rows.path)).events == len(copies)
        result = reaudit(store, workers=1)
    assert result.duplicates == len(copies)
    assert result.no_change, result.diff
