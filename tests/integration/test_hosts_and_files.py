"""What varies between hosts and users, varied: the host's time zone, the umask, a store held by
a writer, output paths that are folders or files, inputs with nothing in them (issue #10)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.reporting.schedule import Schedule, run_forever
from projections.reports.report import write_report
from projections.store.store import Store, connect_read_only

START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, tz: str = "UTC", umask: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run the dealtrail CLI in a process of its own (the host zone is read once per process)."""
    env = {**os.environ, "TZ": tz}
    return subprocess.run(
        [sys.executable, "-m", "dealtrail.cli", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, " ".join(r.output.split())


@pytest.fixture(scope="module")
def flawed_store(small_shift: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small shift plus rejected lines of three kinds (two dated in the shift, one undated)."""
    from dealtrail.ingest.audit import audit_file

    events, _ = small_shift
    folder = tmp_path_factory.mktemp("flawed")
    lines = events.read_bytes().splitlines()
    first = json.loads(lines[0])
    bad = [
        b'{"type": "CardDealt", "event_id": ',  # malformed_json, undated
        json.dumps({**first, "event_id": "X-1", "colour": "red"}).encode(),  # schema_error, dated
        json.dumps({**first, "event_id": "X-2", "type": "CardTeleported"}).encode(),  # unknown_event_type
    ]
    path = folder / "events.jsonl"
    path.write_bytes(b"\n".join([*lines[:50], *bad, *lines[50:]]) + b"\n")
    db = folder / "flawed.duckdb"
    with Store(db) as store, (folder / "rejected.jsonl").open("w") as dl:
        audit_file(path, store, dl)
    return db


def test_every_duckdb_session_dealtrail_opens_is_in_utc(audited_shift: Path, tmp_path: Path) -> None:
    code = (
        "import sys; from projections.store.store import Store, connect_read_only\n"
        "s = Store(sys.argv[1]); r = s.con.execute(\"SELECT current_setting('TimeZone')\").fetchone()[0]; s.close()\n"
        "c = connect_read_only(sys.argv[2]); o = c.execute(\"SELECT current_setting('TimeZone')\").fetchone()[0]\n"
        "print(r, o, c.execute('SELECT min(occurred_at) FROM events').fetchone()[0].utcoffset())\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "new.duckdb"), str(audited_shift)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "TZ": "America/New_York"},
        cwd=ROOT,
    )
    assert r.stdout.split() == ["UTC", "UTC", "0:00:00"]


def test_a_report_is_the_same_on_a_utc_host_and_a_new_york_host(flawed_store: Path, tmp_path: Path) -> None:
    outputs = {}
    for tz in ("UTC", "America/New_York"):
        out = tmp_path / tz.replace("/", "-")
        stamp = "2026-11-28T06:00:00+00:00"  # the header's generation time, fixed for the comparison
        r = _cli("report", "--db", str(flawed_store), "--out", str(out), "--generated-at", stamp, tz=tz)
        assert r.returncode == 0, r.stderr
        outputs[tz] = {p.name: p.read_bytes() for p in out.iterdir()}
    utc, ny = outputs["UTC"], outputs["America/New_York"]
    assert set(utc) == {"report.html", "findings.csv", "findings.parquet", "summary.json"}
    for name in ("findings.csv", "findings.parquet", "summary.json", "report.html"):
        assert utc[name] == ny[name], name
    csv = utc["findings.csv"].decode()
    assert "+00" in csv and "-05" not in csv and "-04" not in csv
    summary = json.loads(utc["summary.json"])
    assert all(d["occurred_at"].endswith("+00:00") for d in summary["device_faults"])


def test_replay_text_is_the_same_on_both_hosts_and_shows_the_zone_asked_for(audited_shift: Path) -> None:
    con = connect_read_only(audited_shift)
    try:
        table = str(con.execute("SELECT min(table_id) FROM events").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()
    args = ("replay", "--db", str(audited_shift), "--table", table, "--to", (START + timedelta(minutes=10)).isoformat())
    texts = [_cli(*args, tz=tz) for tz in ("UTC", "America/New_York")]
    assert texts[0].returncode == texts[1].returncode == 0, texts[0].stderr
    assert texts[0].stdout == texts[1].stdout
    assert "time (UTC)" in texts[0].stdout and "18:0" in texts[0].stdout and "+00:00" in texts[0].stdout
    local = _cli(*args, "--tz", "America/New_York")
    assert "time (America/New_York)" in local.stdout and "13:0" in local.stdout and "-05:00" in local.stdout


def test_the_report_html_shows_times_in_the_zone_asked_for_labelled(audited_shift: Path, tmp_path: Path) -> None:
    code, out = _run("report", "--db", str(audited_shift), "--out", str(tmp_path / "r"), "--tz", "America/New_York")
    assert code == 0, out
    html = (tmp_path / "r" / "report.html").read_text()
    assert "Times are shown in America/New_York" in html and "-05:00 America/New_York" in html
    code, out = _run("report", "--db", str(audited_shift), "--out", str(tmp_path / "r2"), "--tz", "Mars/Olympus")
    assert code == 2 and "unknown time zone" in out and not (tmp_path / "r2").exists()


def test_the_data_quality_section_breaks_rejected_input_down_by_reason(flawed_store: Path, tmp_path: Path) -> None:
    files = write_report(flawed_store, tmp_path / "r")
    dq = json.loads(files.summary.read_text())["data_quality"]
    by_reason = dq["dead_letters_by_reason"]
    assert by_reason["malformed_json"] == {"in_period": 0, "undated": 1}
    assert by_reason["schema_error"]["in_period"] >= 1
    assert by_reason["unknown_event_type"]["in_period"] >= 1
    assert sum(v["in_period"] for v in by_reason.values()) == dq["dead_letters"]
    assert sum(v["undated"] for v in by_reason.values()) == dq["dead_letters_undated"]
    html = files.html.read_text()
    assert "Rejected input by reason" in html and "<code>unknown_event_type</code>" in html


def test_a_period_without_events_says_so_instead_of_reporting_a_clean_period(
    audited_shift: Path, tmp_path: Path
) -> None:
    empty = write_report(audited_shift, tmp_path / "e", START + timedelta(days=3), START + timedelta(days=4))
    summary = json.loads(empty.summary.read_text())
    assert summary["period"]["events"] == 0 and summary["period"]["no_events"] is True
    html = empty.html.read_text()
    assert "No dealing event in this period" in html
    assert "Every required remedy was carried out" not in html
    # the tables of rounds say so too, rather than show a header over nothing
    for region in ("Stub-count compliance", "Rounds dealt"):
        assert "No dealing event in this period." in _region(html, region)
    written = write_report(audited_shift, tmp_path / "f")
    full = json.loads(written.summary.read_text())
    assert full["period"]["events"] > 0 and full["period"]["no_events"] is False
    for region in ("Stub-count compliance", "Rounds dealt"):
        table = _region(written.html.read_text(), region)
        assert "No dealing event" not in table and "No round was dealt" not in table and "<td" in table


def _region(html: str, label: str) -> str:
    """The table of the page's scrolling region named ``label``."""
    return html.split(f'aria-label="{label}"', 1)[1].split("</table>", 1)[0]


# ---- brief contention -------------------------------------------------------------------------


@pytest.fixture
def held_store(audited_shift: Path, tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A copy of the store, held open for writing by another process until it is killed."""
    db = tmp_path / "held.duckdb"
    shutil.copy(audited_shift, db)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from projections.store.store import Store; "
         "s = Store(sys.argv[1]); print('ready', flush=True); time.sleep(600)", str(db)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    try:
        yield db, holder
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_schedule_retries_a_busy_store_at_its_next_poll_and_says_so_once(
    held_store: tuple[Path, subprocess.Popen[str]], tmp_path: Path
) -> None:
    db, holder = held_store
    busy: list[str] = []
    written: list[list[Path]] = []
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:  # the writer finishes while the schedule waits
            holder.kill()
            holder.wait()

    run_forever(db, tmp_path / "p", Schedule("0 * * * *"), clock=lambda: START + timedelta(hours=3), sleep=sleep,
                poll_seconds=5.0, on_written=written.append, iterations=5, on_busy=busy.append)  # fmt: skip
    assert len(busy) == 1 and str(db) in busy[0] and "busy" in busy[0]
    assert sleeps == [5.0] * 4
    assert [[f"{p.parent.name}/{p.name}" for p in w] for w in written] == [
        ["2026-11-27T1800+0000_UTC/rev-0001", "2026-11-27T1900+0000_UTC/rev-0001"]
    ]


def test_one_shot_commands_refuse_a_busy_store_at_once(held_store: tuple[Path, subprocess.Popen[str]]) -> None:
    db, _ = held_store
    # a busy store is exit code 1 ("the command ran and failed"), whichever command meets it
    code, out = _run("schedule", "--every", "day", "--db", str(db), "--once")
    assert code == 1 and "read-only" in out and "writing it?" in out, out
    code, out = _run("report", "--db", str(db), "--out", str(db.parent / "report-busy"))
    assert code == 1 and "read-only" in out and "writing it?" in out, out
    (db.parent / "one.jsonl").write_text("")
    code, out = _run("audit", str(db.parent / "one.jsonl"), "--db", str(db))
    assert code == 1 and "for writing" in out and "writing it?" in out, out


# ---- owner-only files -------------------------------------------------------------------------


def _modes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): oct(stat.S_IMODE(p.stat().st_mode)) for p in root.rglob("*")}


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_every_file_and_folder_the_cli_writes_is_owner_only_whatever_the_umask(umask: int, tmp_path: Path) -> None:
    x = tmp_path / "x"
    steps = [
        ("simulate", "--tables", "3", "--hours", "0.3", "--seed", "3", "--error-rate", "0.2",
         "--out", str(x / "sim" / "events.jsonl"), "--truth", str(x / "sim" / "truth.jsonl")),
        ("audit", str(x / "sim" / "events.jsonl"), "--db", str(x / "db" / "s.duckdb")),
        ("report", "--db", str(x / "db" / "s.duckdb"), "--out", str(x / "report" / "all")),
        ("schedule", "--every", "0 * * * *", "--db", str(x / "db" / "s.duckdb"), "--out", str(x / "periods"),
         "--now", "2026-12-31T00:00:00Z"),
        ("replay", "--db", str(x / "db" / "s.duckdb"), "--table", "TCP-01", "--html", str(x / "incident" / "p.html")),
        ("digest", "--db", str(x / "db" / "s.duckdb"), "--out", str(x / "digest" / "d.json")),
    ]  # fmt: skip
    for args in steps:
        r = _cli(*args, umask=umask)
        assert r.returncode in (0, 3), (args[0], r.stderr)
    modes = _modes(x)
    assert any(name.endswith("report.html") for name in modes) and "incident/p.html" in modes
    assert "db/s.rejected.jsonl" in modes and "digest/d.json" in modes and "sim/truth.jsonl" in modes
    wrong = {n: m for n, m in modes.items() if m != ("0o700" if (x / n).is_dir() else "0o600")}
    assert not wrong


def test_the_write_ahead_log_is_owner_only_during_a_write_whatever_the_umask(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    line = events.read_bytes().splitlines()[0]
    old = os.umask(0)
    try:
        store = Store(tmp_path / "new" / "w.duckdb")
        try:
            store.write_batch([(1, line)])
            wal = tmp_path / "new" / "w.duckdb.wal"
            assert wal.exists()
            assert stat.S_IMODE(wal.stat().st_mode) == 0o600
            assert stat.S_IMODE((tmp_path / "new" / "w.duckdb").stat().st_mode) == 0o600
            assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
        finally:
            store.close()
    finally:
        os.umask(old)


def test_what_duckdb_spills_while_writing_is_in_an_owner_only_folder_whatever_the_umask(tmp_path: Path) -> None:
    folder = tmp_path / "spill"
    folder.mkdir(mode=0o755)
    old = os.umask(0)
    try:
        store = Store(folder / "s.duckdb", "64MB")
        try:  # a sort larger than the memory limit spills to <store>.tmp
            store.con.execute("SET threads = 1")
            store.con.execute("CREATE TEMP TABLE big AS SELECT md5(range::VARCHAR) AS s FROM range(3000000)")
            store.con.execute("CREATE TEMP TABLE sorted AS SELECT s FROM big ORDER BY s")
            spill = folder / "s.duckdb.tmp"
            assert any(spill.iterdir()), "the sort should have spilled"
            assert stat.S_IMODE(spill.stat().st_mode) == 0o700
        finally:
            store.close()
    finally:
        os.umask(old)
    assert not (folder / "s.duckdb.tmp").exists(), "the spill folder goes with the store's close"


# ---- checks that cannot pass by accident ------------------------------------------------------


def test_verify_of_an_empty_store_fails_with_one_line(tmp_path: Path) -> None:
    Store(tmp_path / "empty.duckdb").close()
    code, out = _run("verify", "--db", str(tmp_path / "empty.duckdb"))
    assert code == 1 and "holds no event" in out


def test_verify_against_a_digest_without_tables_fails(audited_shift: Path, tmp_path: Path) -> None:
    digest = tmp_path / "d.json"
    digest.write_text('{"tables": {}}\n')
    code, out = _run("verify", "--db", str(audited_shift), "--against", str(digest))
    assert code == 1 and "holds no table" in out


def test_verify_of_one_table_against_a_digest_checks_only_that_table(audited_shift: Path, tmp_path: Path) -> None:
    digest = tmp_path / "d.json"
    code, out = _run("digest", "--db", str(audited_shift), "--out", str(digest))
    assert code == 0, out
    data = json.loads(digest.read_text())
    table = sorted(data["tables"])[0]
    data["tables"]["GHOST-01"] = {"head_seq": 5, "head_hash": "0" * 64, "events": 5}
    digest.write_text(json.dumps(data))
    code, out = _run("verify", "--db", str(audited_shift), "--table", table, "--against", str(digest))
    assert code == 0 and "GHOST-01" not in out, out
    code, out = _run("verify", "--db", str(audited_shift), "--against", str(digest))
    assert code == 4 and "GHOST-01: in the digest but not in the store" in out
    code, out = _run("verify", "--db", str(audited_shift), "--table", "GHOST-01", "--against", str(digest))
    assert code == 2 and "no stored event for table 'GHOST-01'" in out


def test_a_missing_against_file_is_refused_before_the_check_runs(tmp_path: Path) -> None:
    # the store does not exist either: the --against error comes first, so nothing was checked
    code, out = _run("verify", "--db", str(tmp_path / "none.duckdb"), "--against", str(tmp_path / "gone.json"))
    assert code == 2 and "--against" in out and "no such file" in out


# ---- every error one line ---------------------------------------------------------------------


def test_output_paths_of_the_wrong_kind_are_usage_errors_that_leave_no_folder(
    audited_shift: Path, tmp_path: Path
) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    folder = tmp_path / "folder"
    folder.mkdir()
    cases = [
        ("report", "--db", str(audited_shift), "--out", str(a_file)),
        ("report", "--db", str(audited_shift), "--out", str(a_file / "sub")),
        ("digest", "--db", str(audited_shift), "--out", str(folder)),
        ("replay", "--db", str(audited_shift), "--table", "TCP-01", "--html", str(folder)),
        ("simulate", "--tables", "1", "--hours", "0.1", "--out", str(folder)),
        ("simulate", "--tables", "1", "--hours", "0.1", "--out", str(tmp_path / "s.jsonl"), "--truth", str(folder)),
        ("demo", "--out", str(a_file)),
        ("schedule", "--every", "day", "--db", str(audited_shift), "--out", str(a_file), "--once"),
        ("audit", str(a_file), "--db", str(tmp_path / "n.duckdb"), "--dead-letter", str(folder)),
    ]
    before = sorted(tmp_path.rglob("*"))
    for args in cases:
        r = CliRunner().invoke(app, list(args))
        assert r.exit_code == 2, (args, r.output)
        assert r.output.startswith("error:") and "Traceback" not in r.output, (args, r.output)
        assert r.output.count("error:") == 1, (args, r.output)
    assert sorted(tmp_path.rglob("*")) == before


def test_a_report_of_a_missing_store_leaves_no_empty_folder(tmp_path: Path) -> None:
    code, out = _run("report", "--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path / "r" / "deep"))
    assert code == 2 and "no dealtrail database" in out
    assert not (tmp_path / "r").exists()
