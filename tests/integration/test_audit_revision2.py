"""The audit under rulebook revision 2: a newer schema version is dead-lettered with its own
reason, every stored finding carries the revision, the CLI says which revision it applied and the
report shows it."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.ingest.audit import audit_file
from projections.store.store import Store
from streams.engine.catalog import RULEBOOK_REVISION


def test_an_event_of_a_newer_schema_version_is_dead_lettered_and_the_rest_audited(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _truth = small_shift
    lines = events.read_text().splitlines()
    newer = json.loads(lines[10])
    newer["schema_version"] = 3
    newer["seq"] = 10**9  # not a copy of an event already in the file
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join([*lines[:20], json.dumps(newer), *lines[20:]]) + "\n")
    db, dl = tmp_path / "m.duckdb", tmp_path / "rejected.jsonl"
    with Store(db) as store, dl.open("w") as fh:
        audit_file(mixed, store, fh)
    [rejected] = [json.loads(line) for line in dl.read_text().splitlines()]
    assert rejected["reason"] == "unsupported_schema_version"
    assert rejected["line"] == 21
    with duckdb.connect(str(db), read_only=True) as con:
        revisions = con.execute("SELECT DISTINCT rulebook_revision FROM findings").fetchall()
        stored = con.execute("SELECT count(*) FROM events").fetchone()
    assert revisions == [(RULEBOOK_REVISION,)]
    assert stored is not None and stored[0] > 0


def test_the_audit_prints_the_rulebook_revision_and_the_report_shows_it(audited_shift: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    events = tmp_path / "e.jsonl"
    r = runner.invoke(app, ["simulate", "--tables", "3", "--hours", "0.2", "--seed", "77", "--out", str(events)])
    assert r.exit_code == 0, r.output
    db = tmp_path / "d.duckdb"
    r = runner.invoke(app, ["audit", str(events), "--db", str(db), "--dead-letter", str(tmp_path / "dl.jsonl")])
    assert r.exit_code == 0, r.output
    assert f"rulebook revision {RULEBOOK_REVISION} applied" in r.output
    r = runner.invoke(app, ["report", "--db", str(audited_shift), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "Rulebook revision</th>" in html
    assert f"as read in the dealtrail rulebook, revision {RULEBOOK_REVISION}" in html


def test_the_report_of_a_store_written_before_the_rulebook_revision_column_reads_revision_1(
    audited_shift: Path, tmp_path: Path
) -> None:
    old = tmp_path / "old.duckdb"
    old.write_bytes(audited_shift.read_bytes())
    with duckdb.connect(str(old)) as con:  # the findings table as it was before revision 2
        con.execute("ALTER TABLE findings DROP COLUMN rulebook_revision")
    r = CliRunner().invoke(app, ["report", "--db", str(old), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    html = (tmp_path / "rep" / "report.html").read_text()
    assert '<td class="n">1</td><td class="n">' in html
