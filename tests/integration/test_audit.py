"""The embedded audit end to end: file -> engine -> DuckDB -> report, bad input, idempotency."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.ingest.audit import AuditSummary, AuditWorkerError, audit_file
from projections.reports.report import write_report
from projections.store.store import Store
from schemas.codec import decode, encode


def _truth(path: Path) -> Counter[tuple[str, str, str | None]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return Counter((r["rule_id"], r["table_id"], r["round_id"]) for r in rows)


def _counts(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("events", "findings", "rounds", "dead_letters")
        }
    finally:
        con.close()


def test_audit_stores_exactly_the_injected_findings(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, truth = small_shift
    db = tmp_path / "a.duckdb"
    with Store(db) as store:
        summary = audit_file(events, store)
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT rule_id, table_id, round_id FROM fct_detections").fetchall()
    columns = {r[0] for r in con.execute("DESCRIBE findings").fetchall()}
    con.close()
    assert Counter(map(tuple, rows)) == _truth(truth)
    assert {"finding_id", "rule_id", "citation", "game", "severity", "table_id", "round_id", "status"} <= columns
    assert summary.events > 1000
    assert not summary.dead_letters


def test_auditing_a_file_twice_adds_nothing(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, _ = small_shift
    db = tmp_path / "twice.duckdb"
    with Store(db) as store:
        first = audit_file(events, store, batch_lines=2_000)
    once = _counts(db)
    with Store(db) as store:
        second = audit_file(events, store, batch_lines=3_333)
    assert _counts(db) == once
    assert second.written.events == second.written.findings == second.written.rounds == 0
    assert first.written.events == once["events"]


def test_exact_duplicate_lines_are_stored_once(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, _ = small_shift
    lines = events.read_bytes().splitlines()
    assert len(lines) != len(set(lines)), "the fixture shift should carry redelivered events"
    db = tmp_path / "dups.duckdb"
    with Store(db) as store:
        audit_file(events, store)
    assert _counts(db)["events"] == len(set(lines))


def test_bad_lines_go_to_the_dead_letter_file_and_the_rest_is_audited(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, truth = small_shift
    good = events.read_text().splitlines()
    first = json.loads(good[0])
    bad = [
        '{"type": "CardDealt", "event_id": "x",',  # truncated JSON
        json.dumps({**first, "seq": "one"}),  # wrong type
        json.dumps({**first, "type": "CardTeleported"}),  # unknown event type
        json.dumps({k: v for k, v in first.items() if k not in ("table_id", "occurred_at")}),  # missing envelope
        json.dumps({**next(json.loads(g) for g in good if '"CardDealt"' in g), "table_id": "GHOST-99", "seq": 1}),
    ]
    mixed = tmp_path / "mixed.jsonl"
    body = [*good[:3], bad[0], bad[1], *good[3:50], bad[2], "", bad[3], *good[50:], bad[4]]
    mixed.write_text("\n".join(body) + "\n")
    db, dl = tmp_path / "m.duckdb", tmp_path / "rejected.jsonl"
    with Store(db) as store, dl.open("w") as fh:
        summary = audit_file(mixed, store, fh)
    rejected = [json.loads(line) for line in dl.read_text().splitlines()]
    assert [r["reason"] for r in rejected] == [
        "malformed_json",
        "schema_error",
        "unknown_event_type",
        "schema_error",
        "unconfigured_table",
    ]
    assert [r["line"] for r in rejected] == [4, 5, 53, 55, len(body)]
    assert all(r["detail"] and r["raw"] for r in rejected)
    assert "seq" in rejected[1]["detail"] and "GHOST-99" in rejected[4]["detail"]
    assert sum(summary.dead_letters.values()) == 5
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT rule_id, table_id, round_id FROM fct_detections").fetchall()
    dead = con.execute("SELECT count(*) FROM dead_letters").fetchone()[0]
    con.close()
    assert Counter(map(tuple, rows)) == _truth(truth)
    assert dead == 5


def test_report_writes_html_csv_and_parquet(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, truth = small_shift
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        audit_file(events, store)
    files = write_report(db, tmp_path / "report")
    html = files.html.read_text()
    assert files.findings == sum(_truth(truth).values())
    assert "Stub-count compliance" in html and "<svg" in html
    con = duckdb.connect()
    assert con.execute(f"SELECT count(*) FROM '{files.parquet}'").fetchone()[0] == files.findings
    assert con.execute(f"SELECT count(*) FROM read_csv('{files.csv}')").fetchone()[0] == files.findings
    again = write_report(db, tmp_path / "report2")
    assert again.html.read_text() == html


def test_report_period_filters_findings(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, _ = small_shift
    db = tmp_path / "p.duckdb"
    with Store(db) as store:
        audit_file(events, store)
    runner = CliRunner()
    result = runner.invoke(
        app, ["report", "--db", str(db), "--out", str(tmp_path / "early"), "--to", "2026-11-27T18:20:00+00:00"]
    )
    assert result.exit_code == 0, result.output
    early = (
        duckdb.connect()
        .execute(f"SELECT max(detected_at) FROM '{tmp_path / 'early' / 'findings.parquet'}'")
        .fetchone()[0]
    )
    assert early is None or early.isoformat() < "2026-11-27T18:20:00+00:00"
    result = runner.invoke(app, ["report", "--db", str(db), "--out", str(tmp_path / "x"), "--from", "yesterday"])
    assert result.exit_code == 2
    assert "ISO 8601" in result.output


def test_cli_simulate_audit_report(tmp_path: Path) -> None:
    runner = CliRunner()
    events, truth, db = tmp_path / "e.jsonl", tmp_path / "t.jsonl", tmp_path / "d.duckdb"
    r = runner.invoke(
        app,
        [
            "simulate",
            "--tables",
            "3",
            "--hours",
            "0.3",
            "--seed",
            "4",
            "--error-rate",
            "0.3",
            "--out",
            str(events),
            "--truth",
            str(truth),
        ],
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["audit", str(events), "--db", str(db), "--dead-letter", str(tmp_path / "dl.jsonl")])
    assert r.exit_code == 0, r.output
    assert "Findings detected" in r.output and "dead letters: 0" in r.output
    r = runner.invoke(app, ["report", "--db", str(db), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "rep" / "report.html").exists()
    r = runner.invoke(app, ["report", "--db", str(tmp_path / "missing.duckdb"), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 2 and "no dealtrail database" in r.output


def test_parallel_audit_gives_the_same_store_as_one_process(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, truth = small_shift
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    with Store(one) as store:
        s1 = audit_file(events, store, workers=1)
    with Store(two) as store:
        s2 = audit_file(events, store, workers=2, batch_lines=1_000)
    assert s2.workers == 2
    assert (s1.events, s1.duplicates, s1.lines, s1.tables, s1.detections) == (
        s2.events,
        s2.duplicates,
        s2.lines,
        s2.tables,
        s2.detections,
    )
    assert _counts(one) == _counts(two)
    con = duckdb.connect(str(two), read_only=True)
    rows = con.execute("SELECT rule_id, table_id, round_id FROM fct_detections").fetchall()
    con.close()
    assert Counter(map(tuple, rows)) == _truth(truth)


def test_an_invalid_setting_is_a_clear_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEALTRAIL_PARTITIONS", "0")
    result = CliRunner().invoke(app, ["topics", "list"])
    assert result.exit_code == 2
    assert "invalid settings: DEALTRAIL_PARTITIONS" in " ".join(result.output.split())
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_parallel_audit_whose_worker_is_killed_fails_instead_of_waiting_forever(
    long_file: Path, tmp_path: Path
) -> None:
    big = long_file
    outcome: list[BaseException | AuditSummary] = []

    def run() -> None:
        try:
            with Store(tmp_path / "killed.duckdb") as store:
                outcome.append(audit_file(big, store, workers=2, batch_lines=500))
        except BaseException as exc:
            outcome.append(exc)

    before = {p.pid for p in mp.active_children()}
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    victims: list[int] = []
    while not victims and time.monotonic() < deadline:
        victims = [p.pid for p in mp.active_children() if p.pid not in before and p.pid is not None]
        time.sleep(0.05)
    assert victims, "no audit worker started"
    time.sleep(0.5)
    os.kill(victims[0], signal.SIGKILL)
    thread.join(timeout=120)
    assert not thread.is_alive(), "the audit kept waiting for a dead worker"
    assert len(outcome) == 1 and isinstance(outcome[0], AuditWorkerError), outcome
    assert "died (exit code -9)" in str(outcome[0])


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to find the worker processes")
def test_the_workers_of_a_killed_parallel_audit_exit_too(long_file: Path, tmp_path: Path) -> None:
    big = long_file
    code = (
        "from pathlib import Path\n"
        "from dealtrail.ingest.audit import audit_file\n"
        "from projections.store.store import Store\n"
        "if __name__ == '__main__':\n"
        f"    with Store(Path({str(tmp_path / 'orphan.duckdb')!r})) as s:\n"
        f"        audit_file(Path({str(big)!r}), s, workers=2, batch_lines=500)\n"
    )
    script = tmp_path / "run_audit.py"
    script.write_text(code)
    parent = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 60
        kids: set[int] = set()
        while len(kids) < 3 and time.monotonic() < deadline:  # two workers and the resource tracker
            kids = _children(parent.pid)
            time.sleep(0.1)
        assert len(kids) >= 2, kids
        time.sleep(1.0)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(Path(f"/proc/{k}").exists() for k in kids):
        time.sleep(0.2)
    alive = {k for k in kids if Path(f"/proc/{k}").exists()}
    for k in alive:
        os.kill(k, signal.SIGKILL)
    assert not alive, "worker processes outlived the killed audit"


def test_the_summary_counts_the_exact_duplicates_the_engine_ignored(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    seen: set[bytes] = set()
    copies = 0
    for line in events.read_bytes().splitlines():
        copies += line in seen
        seen.add(line)
    assert copies > 0  # the shift is simulated with re-delivered events
    with Store(tmp_path / "dups.duckdb") as store:
        summary = audit_file(events, store)
    assert summary.duplicates == copies
    assert summary.events == summary.written.events  # each event once; its copies are the duplicates
    assert summary.lines == summary.events + summary.duplicates
    r = CliRunner().invoke(app, ["audit", str(events), "--db", str(tmp_path / "cli.duckdb")])
    assert f"{copies:,} duplicate deliveries skipped" in " ".join(r.output.split())


def test_a_copy_written_with_other_spacing_and_key_order_is_the_same_event(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, truth = small_shift
    lines = events.read_bytes().splitlines(keepends=True)
    copies = [100, 2_000, 5_000]
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i in copies:  # re-sent by a producer that writes JSON its own way
            doc = json.loads(line)
            out.append(json.dumps(dict(reversed(list(doc.items()))), indent=1).replace("\n", " ").encode() + b"\n")
    resent = tmp_path / "resent.jsonl"
    resent.write_bytes(b"".join(out))
    with Store(tmp_path / "plain.duckdb") as store:
        plain = audit_file(events, store)
    db = tmp_path / "resent.duckdb"
    with Store(db) as store:
        summary = audit_file(resent, store)
    assert summary.duplicates == plain.duplicates + len(copies)
    assert summary.written.events == plain.written.events and not summary.dead_letters
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT rule_id, table_id, round_id FROM fct_detections").fetchall()
    con.close()
    assert Counter(map(tuple, rows)) == _truth(truth)


def test_a_parallel_audit_of_dev_stdin_reads_the_file_behind_it(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, _ = small_shift
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from dealtrail.ingest.audit import audit_file\n"
        "from projections.store.store import Store\n"
        "if __name__ == '__main__':\n"
        "    with Store(Path(sys.argv[1])) as s:\n"
        "        summary = audit_file(Path('/dev/stdin'), s, workers=2, batch_lines=5_000)\n"
        "    print(summary.workers, summary.lines, summary.events)\n"
    )
    script = tmp_path / "stdin_audit.py"
    script.write_text(code)
    with events.open("rb") as stdin:
        out = subprocess.run(
            [sys.executable, str(script), str(tmp_path / "stdin.duckdb")],
            stdin=stdin,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout.split()
    lines = sum(1 for line in events.read_bytes().splitlines() if line.strip())
    assert out[:2] == ["2", str(lines)]  # both workers read the whole file, not their own empty stdin
    assert _counts(tmp_path / "stdin.duckdb")["events"] > 0


def test_a_large_file_is_audited_by_one_worker_per_usable_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dealtrail.ingest.audit as audit_module

    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_bytes(b"{}\n")
    with large.open("wb") as fh:  # sparse: the size is all that counts
        fh.truncate(audit_module.PARALLEL_MIN_BYTES)
    monkeypatch.setattr(audit_module.os, "sched_getaffinity", lambda _pid: set(range(6)), raising=False)
    assert audit_module.default_workers(large) == 6
    assert audit_module.default_workers(small) == 1
    monkeypatch.delattr(audit_module.os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(audit_module.os, "cpu_count", lambda: 3)
    assert audit_module.default_workers(large) == 3


def test_the_audits_arrow_rows_store_what_the_json_staging_stored(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    # The workers build the events rows in Arrow (no JSON parsed in the writer); the store must
    # hold the rows the JSON staging path (the projector's read_json path, as the audit used it
    # before) makes of the same accepted events: every column, the payload bytes and hashes.
    events, _ = small_shift
    lines = events.read_bytes().splitlines()
    again = tmp_path / "again.jsonl"  # redelivered lines across batches, one with other spacing
    spaced = json.dumps(json.loads(lines[40]), indent=1).replace("\n", " ").encode()
    again.write_bytes(b"\n".join([*lines, lines[10], lines[2000], spaced, b"not json"]) + b"\n")
    db = tmp_path / "arrow.duckdb"
    with Store(db) as store:
        summary = audit_file(again, store, workers=2, batch_lines=700)
        assert audit_file(again, store, workers=2, batch_lines=700).written.events == 0  # idempotent
    assert sum(summary.dead_letters.values()) == 1
    with duckdb.connect(str(db), read_only=True) as con:
        accepted = con.execute("SELECT arrival, payload::VARCHAR FROM events ORDER BY arrival").fetchall()
    by_line = dict(enumerate(again.read_bytes().splitlines(), 1))
    assert accepted and all(encode(decode(by_line[a])) == p.encode() for a, p in accepted)
    assert len(accepted) == len(set(lines))
    reference = tmp_path / "json.duckdb"
    with Store(reference) as store:
        store.write_batch([(a, p.encode()) for a, p in accepted])
    query = "SELECT * EXCLUDE (payload), payload::VARCHAR FROM events ORDER BY event_id, payload_hash"
    with duckdb.connect(str(db), read_only=True) as a, duckdb.connect(str(reference), read_only=True) as b:
        assert a.execute(query).fetchall() == b.execute(query).fetchall()
