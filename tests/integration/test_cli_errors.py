"""Clear errors instead of tracebacks or silent success: paths that are not what they should
be, empty or inverted periods, unknown tables and rounds, Ctrl-C during an audit; and a
byte-order mark, which is skipped."""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.investigate.replay import replay, stored_events, stored_findings
from projections.store.store import connect_read_only


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, " ".join(r.output.split())


def _first_table(db: Path) -> str:
    con = connect_read_only(db)
    try:
        return str(con.execute("SELECT min(table_id) FROM events").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def test_audit_refuses_a_db_path_that_holds_another_kind_of_file(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    csv = tmp_path / "findings.csv"
    csv.write_text("finding_id,rule_id\nx,y\n")
    code, out = _run("audit", str(events), "--db", str(csv))
    assert code == 2 and "is not a DuckDB database" in out
    assert csv.read_text() == "finding_id,rule_id\nx,y\n"
    for command in ("report", "verify", "digest"):
        code, out = _run(command, "--db", str(events))
        assert code == 2 and "is not a DuckDB database" in out, (command, out)


def test_an_output_path_that_is_a_folder_gives_an_error_line_not_a_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "adir"
    folder.mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "dealtrail.cli", "simulate", "--tables", "3", "--hours", "0.1", "--out", str(folder)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert "error:" in r.stderr and "is a folder" in r.stderr and "Traceback" not in r.stderr


def test_an_inverted_period_is_refused(audited_shift: Path, tmp_path: Path) -> None:
    code, out = _run(
        "report", "--db", str(audited_shift), "--out", str(tmp_path / "r"),
        "--from", "2026-11-28T02:00:00Z", "--to", "2026-11-27T18:00:00Z",
    )  # fmt: skip
    assert code == 2 and "--from must be before --to" in out
    code, out = _run(
        "replay", "--db", str(audited_shift), "--table", _first_table(audited_shift),
        "--from", "2026-11-28T02:00:00Z", "--to", "2026-11-28T02:00:00Z",
    )  # fmt: skip
    assert code == 2 and "--from must be before --to" in out


def test_verify_of_an_unknown_table_is_an_error(audited_shift: Path) -> None:
    code, out = _run("verify", "--db", str(audited_shift), "--table", "NOPE")
    assert code == 2 and "no stored event for table 'NOPE'" in out


def test_replay_of_an_unknown_round_is_an_error(audited_shift: Path) -> None:
    code, out = _run("replay", "--db", str(audited_shift), "--table", _first_table(audited_shift), "--round", "NOPE-R1")
    assert code == 2 and "no stored event of round 'NOPE-R1'" in out


def test_replay_at_an_event_stops_the_trail_there(audited_shift: Path) -> None:
    table = _first_table(audited_shift)
    con = connect_read_only(audited_shift)
    try:
        trail = list(stored_events(con, table))
        stored = stored_findings(con, table)
    finally:
        con.close()
    middle = trail[len(trail) // 2][0]
    result = replay(table, trail, stored, at=middle)
    assert result.steps[-1].event.event_id == middle
    assert len(result.steps) == len(trail) // 2 + 1
    assert result.matches  # the findings up to there, on both sides
    assert len(replay(table, trail, stored).steps) == len(trail)


def test_a_byte_order_mark_at_the_start_of_a_file_is_skipped(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, _ = small_shift
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + events.read_bytes())
    dead = tmp_path / "dead.jsonl"
    code, out = _run("audit", str(bom), "--db", str(tmp_path / "bom.duckdb"), "--dead-letter", str(dead))
    assert code == 0, out
    plain = tmp_path / "plain.jsonl"
    code2, _ = _run("audit", str(events), "--db", str(tmp_path / "plain.duckdb"), "--dead-letter", str(plain))
    assert code2 == 0
    assert dead.read_text() == plain.read_text().replace(str(events), str(bom))
    assert stat.S_IMODE(dead.stat().st_mode) == 0o600  # it holds raw input, like the database
    counts = []
    for name in ("bom.duckdb", "plain.duckdb"):
        with duckdb.connect(str(tmp_path / name), read_only=True) as con:
            counts.append(con.execute("SELECT count(*), count(DISTINCT table_id) FROM events").fetchone())
    assert counts[0] == counts[1]


def test_ctrl_c_during_an_audit_says_interrupted_and_exits_130(long_file: Path, tmp_path: Path) -> None:
    big = long_file
    # a shell's background job starts with Ctrl-C ignored: put Python's own handler back first
    start = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv = ['dealtrail', *sys.argv[1:]]; runpy.run_module('dealtrail.cli', run_name='__main__')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", start, "audit", str(big), "--db", str(tmp_path / "int.duckdb")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    db = tmp_path / "int.duckdb"
    deadline = time.monotonic() + 60
    while not db.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2.0)  # into the audit: the workers start and stage their first batches (it takes ~10 s here)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out[-500:], err[-2000:])
    assert "interrupted" in err and "Traceback" not in err


def test_a_dead_letter_file_left_readable_by_others_is_made_owner_only(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    dead = tmp_path / "dead.jsonl"
    dead.write_text("left from before\n")
    dead.chmod(0o644)
    code, out = _run("audit", str(events), "--db", str(tmp_path / "a.duckdb"), "--dead-letter", str(dead))
    assert code == 0, out
    assert stat.S_IMODE(dead.stat().st_mode) == 0o600
    assert dead.read_text() == ""  # emptied: this run rejected nothing
