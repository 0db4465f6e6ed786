"""A file that continues one audited before (the next shift of the same tables) goes on from
the table states the earlier audit stored: the store ends up as if both files were audited as one."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.ingest.audit import AuditSummary, audit_file
from projections.store.store import Store
from tests.helpers import write_unchained


def _split(events: Path, folder: Path, at: float = 0.5) -> tuple[Path, Path]:
    """The file cut in two at ``at`` of its lines: (first part, the part that continues it)."""
    lines = events.read_bytes().splitlines(keepends=True)
    cut = int(len(lines) * at)
    first, second = folder / "first.jsonl", folder / "second.jsonl"
    first.write_bytes(b"".join(lines[:cut]))
    second.write_bytes(b"".join(lines[cut:]))
    return first, second


def _rows(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Everything the audit wrote but the per-file bookkeeping (dead-letter sources, states)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            "events": con.execute("SELECT event_id, payload::VARCHAR FROM events ORDER BY ALL").fetchall(),
            "findings": con.execute(
                "SELECT * EXCLUDE (evidence_event_ids, remedy_event_ids), "
                "evidence_event_ids::VARCHAR, remedy_event_ids::VARCHAR "
                "FROM findings ORDER BY finding_id, revision"
            ).fetchall(),
            "rounds": con.execute("SELECT * FROM rounds ORDER BY table_id, round_id").fetchall(),
            "dead_letters": con.execute("SELECT reason, detail FROM dead_letters ORDER BY ALL").fetchall(),
        }
    finally:
        con.close()


def _audited(rows: dict[str, list[tuple[object, ...]]]) -> dict[str, list[tuple[object, ...]]]:
    """The rows of :func:`_rows` but the dead letters."""
    return {k: v for k, v in rows.items() if k != "dead_letters"}


def _state_rows(db: Path) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return int(con.execute("SELECT count(*) FROM table_states").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def _audit(path: Path, db: Path, workers: int = 1) -> AuditSummary:
    with Store(db) as store:
        return audit_file(path, store, workers=workers, batch_lines=2_000)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_that_continues_an_earlier_one_gives_the_store_of_one_audit_of_both(
    small_shift: tuple[Path, Path], tmp_path: Path, workers: int
) -> None:
    events, _ = small_shift
    first, second = _split(events, tmp_path)
    whole, parts = tmp_path / "whole.duckdb", tmp_path / "parts.duckdb"
    one = _audit(events, whole)
    a = _audit(first, parts, workers)
    b = _audit(second, parts, workers)
    assert not a.dead_letters and not b.dead_letters
    assert (a.resumed, b.resumed) == (0, one.tables) and b.tables == one.tables
    assert a.events + b.events == one.events
    assert a.detections + b.detections == one.detections
    assert _rows(parts) == _rows(whole)


@pytest.mark.parametrize("chained", [True, False], ids=["chained", "unchained"])
def test_a_file_that_repeats_the_last_events_of_the_one_before_adds_nothing_twice(
    small_shift: tuple[Path, Path], tmp_path: Path, chained: bool
) -> None:
    # unchained, the audit stamps the repeated events: as the first copies were stamped
    events = small_shift[0] if chained else write_unchained(small_shift[0], tmp_path / "plain.jsonl")
    lines = events.read_bytes().splitlines(keepends=True)
    cut = len(lines) // 2
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(b"".join(lines[:cut]))
    second.write_bytes(b"".join(lines[cut - 40 :]))  # an export that starts a little early
    whole, parts = tmp_path / "whole.duckdb", tmp_path / "parts.duckdb"
    one = _audit(events, whole)
    _audit(first, parts)
    b = _audit(second, parts, workers=2)
    assert not b.dead_letters and b.resumed == one.tables
    assert b.duplicates >= 40  # the repeated lines are exact copies, ignored by the engine
    assert _rows(parts) == _rows(whole)


def test_auditing_either_file_again_adds_nothing(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, _ = small_shift
    first, second = _split(events, tmp_path, at=0.4)
    db = tmp_path / "again.duckdb"
    _audit(first, db)
    _audit(second, db)
    rows, states = _rows(db), _state_rows(db)
    for path in (second, first, events, second):
        again = _audit(path, db)
        assert (again.written.events, again.written.findings, again.written.rounds, again.written.dead_letters) == (
            0,
            0,
            0,
            0,
        ), path.name
        assert not again.dead_letters
    # the whole file starts anew at seq 1 (nothing to go on from); the second part again goes on
    # from the state the first part left, not from the one it left itself or the whole file left
    assert _rows(db) == rows
    assert _state_rows(db) == states + 6  # the whole file's end states: a seq range of their own


def test_a_part_of_a_file_audited_whole_before_is_refused_not_reported_as_contradictory(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    _, second = _split(events, tmp_path)
    # a TableConfigured in the part must not start its table anew: the store holds the table's
    # earlier events, which a new start would report as missing
    lines = second.read_bytes().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if b'"TCP-01"' in line][10]
    configured = json.loads(next(line for line in events.read_bytes().splitlines() if b'"TCP-01"' in line))
    replaced = json.loads(lines[at])
    configured.update({k: replaced[k] for k in ("event_id", "seq", "occurred_at", "recorded_at", "prev_hash", "hash")})
    lines[at] = json.dumps(configured).encode() + b"\n"
    second.write_bytes(b"".join(lines))
    db = tmp_path / "whole-then-part.duckdb"
    _audit(events, db)
    rows = _rows(db)
    part = _audit(second, db)
    # no stored state ends where the part begins, and going on from the whole file's end would
    # call every event of the part contradictory: the part's tables are refused
    assert part.resumed == 0 and set(part.dead_letters) == {"does_not_continue"}
    assert sum(part.dead_letters.values()) == part.lines
    assert (part.written.events, part.written.findings, part.written.rounds) == (0, 0, 0)
    assert _audited(_rows(db)) == _audited(rows)
    details = {detail for reason, detail in _rows(db)["dead_letters"]}
    assert all("events into this file, and an audit recognises at most 193" in d for d in details), details


def test_a_file_audited_before_the_one_it_continues_waits_for_it(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    lines = events.read_bytes().splitlines(keepends=True)
    third = len(lines) // 3
    pieces = [tmp_path / f"s{k}.jsonl" for k in (1, 2, 3)]
    for k, piece in enumerate(pieces):
        piece.write_bytes(b"".join(lines[k * third : (k + 1) * third if k < 2 else None]))
    whole, parts = tmp_path / "whole.duckdb", tmp_path / "parts.duckdb"
    _audit(events, whole)
    _audit(pieces[0], parts)
    early = _audit(pieces[2], parts)  # the second shift is missing
    assert early.resumed == 0 and set(early.dead_letters) == {"does_not_continue"}
    assert early.written.findings == 0
    details = {detail for _, detail in _rows(parts)["dead_letters"]}
    assert all("before this file takes it up: audit the file in between first" in d for d in details), details
    _audit(pieces[1], parts)
    late = _audit(pieces[2], parts)
    assert late.resumed == 6 and not late.dead_letters
    got, want = _rows(parts), _rows(whole)
    assert _audited(got) == _audited(want)
    assert {reason for reason, _ in got["dead_letters"]} == {"does_not_continue"}  # kept: they happened


def test_events_lost_between_two_files_are_refused_until_audited_with_the_file_before(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    first, second = _split(events, tmp_path)
    last = [json.loads(line) for line in first.read_bytes().splitlines() if b'"TCP-01"' in line][-1]
    lines = second.read_bytes().splitlines(keepends=True)
    lost = next(i for i, line in enumerate(lines) if json.loads(line)["table_id"] == "TCP-01")
    assert json.loads(lines[lost])["seq"] == last["seq"] + 1  # the event right after the first file's
    second.write_bytes(b"".join(lines[:lost] + lines[lost + 1 :]))
    db = tmp_path / "gap.duckdb"
    _audit(first, db)
    b = _audit(second, db)
    # the other tables go on; TCP-01 is refused: the store cannot tell lost events from a file
    # not audited yet
    assert b.resumed == 5 and set(b.dead_letters) == {"does_not_continue"}

    def gaps() -> list[tuple[object, ...]]:
        con = duckdb.connect(str(db), read_only=True)
        try:
            return con.execute(
                "SELECT evidence_event_ids, message FROM fct_detections WHERE rule_id = 'DT-sequence-gap' "
                "AND table_id = 'TCP-01' AND list_contains(evidence_event_ids, ?)",
                [last["event_id"]],
            ).fetchall()
        finally:
            con.close()

    assert gaps() == []
    # audited together with the file before, the engine sees the gap and reports it
    both = tmp_path / "both.jsonl"
    both.write_bytes(first.read_bytes() + second.read_bytes())
    again = _audit(both, db)
    assert not again.dead_letters
    after = next(json.loads(line) for line in lines[lost + 1 :] if json.loads(line)["table_id"] == "TCP-01")
    seq = last["seq"]
    assert gaps() == [([last["event_id"], after["event_id"]], f"seq jumped from {seq} to {seq + 2}: 1 events missing.")]


def test_an_unchained_continuation_is_stamped_on_from_the_stored_chain(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    plain = write_unchained(events, tmp_path / "plain.jsonl")
    first, second = _split(plain, tmp_path)
    whole, parts = tmp_path / "whole.duckdb", tmp_path / "parts.duckdb"
    _audit(plain, whole)
    _audit(first, parts)
    _audit(second, parts, workers=2)
    # the same stamps as one audit of the whole file: the chain runs on across the two files
    assert _rows(parts)["events"] == _rows(whole)["events"]
    result = CliRunner().invoke(app, ["verify", "--db", str(parts)])
    assert result.exit_code == 0, result.output


def test_the_cli_says_how_many_tables_went_on_from_an_earlier_audit(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    first, second = _split(events, tmp_path)
    db = tmp_path / "cli.duckdb"
    runner = CliRunner()
    out = runner.invoke(app, ["audit", str(first), "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert "went on from" not in out.output
    out = runner.invoke(app, ["audit", str(second), "--db", str(db)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "6 tables (6 went on from an earlier audit)" in text
    assert "dead letters: 0" in text


def test_a_continuation_audited_before_the_file_it_continues_is_dead_lettered_with_a_hint(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    _, second = _split(events, tmp_path)
    out = CliRunner().invoke(app, ["audit", str(second), "--db", str(tmp_path / "alone.duckdb")])
    assert out.exit_code == 1, out.output  # no line accepted: the summary, the hint, and a non-zero exit
    assert "unconfigured_table" in out.output and "nothing was accepted" in out.output
    assert "audit the file before this one into the same --db first" in " ".join(out.output.split())
