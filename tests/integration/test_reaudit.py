"""``dealtrail reaudit``: a new generation of findings from the stored events, the per-rule
change against the previous generation, and reports that read the latest or a named one."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.ingest.audit import audit_file
from dealtrail.ingest.reaudit import reaudit
from dealtrail.simulator.run import write_simulation
from projections.reports.report import write_report
from projections.store.store import Store
from streams.engine import engine
from streams.engine.rules import three_card_prime

COLUMNS = "finding_id, revision, rule_id, status, severity, message, evidence_event_ids, trigger_event_id, late"


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("reaudit")
    events = folder / "events.jsonl"
    write_simulation(events, tables=3, hours=0.75, seed=21, error_rate=0.25, duplicate_rate=0.005)
    db = folder / "store.duckdb"
    with Store(db) as store:
        audit_file(events, store, snapshot_every=200)
    return db


@pytest.fixture
def db(audited: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store.duckdb"
    shutil.copy(audited, copy)
    return copy


def _generation(db: Path, n: int) -> set[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            tuple(map(str, r))
            for r in con.execute(f"SELECT {COLUMNS}, table_id FROM findings WHERE generation = ?", [n]).fetchall()
        }
    finally:
        con.close()


def test_reaudit_twice_without_a_rule_change_adds_identical_generations_and_says_no_change(db: Path) -> None:
    first = _generation(db, 1)
    assert first
    for n in (2, 3):
        result = CliRunner().invoke(app, ["reaudit", "--db", str(db), "--workers", "2"])
        assert result.exit_code == 0, result.output
        assert f"generation {n}:" in result.output
        assert f"no change: generation {n} holds the same findings as generation {n - 1}" in result.output
        assert _generation(db, n) == first
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT generation, previous, rulebook_revision, engine_version FROM generations").fetchall()
        events = con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
        assert con.execute("SELECT count(*) FROM dim_findings").fetchone()[0] == len(  # type: ignore[index]
            {f[0] for f in first}
        )
    finally:
        con.close()
    assert sorted(r[:2] for r in rows) == [(2, 1), (3, 2)]
    assert events > 0


def test_reaudit_exported_in_many_seq_ranges_gives_the_same_generation(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A share cut into several sorted export files (seq ranges) is applied in seq order per
    table, across the files: the same findings as the audit (the store's sort stays small)."""
    import dealtrail.ingest.reaudit as reaudit_module

    monkeypatch.setattr(reaudit_module, "SORT_ROWS", 300)
    exported: list[list[str]] = []
    export = reaudit_module._export

    def spy(*args: object) -> list[str]:
        paths = export(*args)  # type: ignore[arg-type]
        exported.append(paths)
        return paths

    monkeypatch.setattr(reaudit_module, "_export", spy)
    with Store(db) as store:
        result = reaudit(store, workers=2)
    assert result.no_change
    assert len(exported) == 2 and all(len(paths) > 3 for paths in exported)
    assert _generation(db, 2) == _generation(db, 1)
    with Store(db) as store:
        # a period with no snapshot of this engine before it applies the tables' whole trails:
        # the files are cut by the events exported, not by those of the period
        exported.clear()
        store.con.execute("DELETE FROM table_snapshots")
        last = store.con.execute("SELECT max(occurred_at) FROM events").fetchone()[0]  # type: ignore[index]
        result = reaudit(store, workers=2, start=last - timedelta(minutes=2))
        assert result.no_change
        assert len(exported) == 2 and all(len(paths) > 3 for paths in exported)


def _without_tcp_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule change: the Three Card Prime rule module no longer runs (integrity rules still do)."""
    rules = dict(engine.GAME_RULES)
    for game, checks in rules.items():
        rules[game] = tuple(c for c in checks if c is not three_card_prime.check)
    monkeypatch.setattr(engine, "GAME_RULES", rules)


def test_reaudit_after_a_rule_change_lists_per_rule_what_it_withdrew(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_tcp_rules(monkeypatch)
    before = _generation(db, 1)
    tcp = {f for f in before if f[2].startswith("TCP-")}
    assert tcp
    with Store(db) as store:
        result = reaudit(store, workers=1)  # in this process: the patched engine
    assert result.generation == 2 and not result.no_change
    gone = before - _generation(db, 2)
    # the rules' findings, and the overdue remedies they had opened
    assert tcp <= gone and all(f in tcp or f[2] == "DT-remedy-overdue" for f in gone)
    withdrawn = {d.rule_id: d.withdrawn for d in result.diff if d.withdrawn}
    assert withdrawn == {r: sum(1 for f in gone if f[2] == r) for r in {f[2] for f in gone}}
    assert not any(d.added for d in result.diff)
    some = next(d for d in result.diff if d.withdrawn)
    assert some.rounds_withdrawn and all("/" in r for r in some.rounds_withdrawn)
    assert _generation(db, 2) | gone == before
    # reports read the latest generation; --generation 1 reads the one before
    latest = write_report(db, tmp_path / "latest")
    old = write_report(db, tmp_path / "old", generation=1)
    assert old.findings - latest.findings == len({f[0] for f in gone if f[1] == "0"})
    page = latest.html.read_text(encoding="utf-8")
    assert "Generation 2" in page and "against generation 1" in page and some.rule_id in page
    assert "latest is generation 2" in old.html.read_text(encoding="utf-8")
    cli = CliRunner().invoke(app, ["report", "--db", str(db), "--out", str(tmp_path / "g9"), "--generation", "9"])
    assert cli.exit_code == 2 and "no generation 9" in cli.output


def test_reaudit_of_one_table_and_a_period_carries_the_rest_over(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _without_tcp_rules(monkeypatch)
    before = _generation(db, 1)
    con = duckdb.connect(str(db), read_only=True)
    table, lo, hi = con.execute(
        "SELECT table_id, min(occurred_at), max(occurred_at) FROM events WHERE table_id LIKE 'TCP%' GROUP BY 1"
    ).fetchone()  # type: ignore[misc]
    observed = dict(con.execute("SELECT finding_id || '/' || revision, observed_at FROM findings").fetchall())
    con.close()
    start, end = lo + (hi - lo) / 3, lo + (hi - lo) * 2 / 3
    with Store(db) as store:
        result = reaudit(store, table=table, start=start, end=end, workers=1)
    gone = before - _generation(db, 2)
    assert any(f[2].startswith("TCP-") for f in gone), "the period should hold findings of the changed rules"
    # only findings of that table observed in the period were re-evaluated
    assert all(f[9] == table and start <= observed[f"{f[0]}/{f[1]}"] < end for f in gone)
    changed = {f for f in before if f[9] == table and f[2].startswith("TCP-")}
    assert {f for f in changed if start <= observed[f"{f[0]}/{f[1]}"] < end} <= gone
    assert not _generation(db, 2) - before
    assert sum(d.withdrawn for d in result.diff) == len(gone)
    assert result.tables == 1
    con = duckdb.connect(str(db), read_only=True)
    try:
        scope = con.execute("SELECT scope FROM generations").fetchone()[0]  # type: ignore[index]
    finally:
        con.close()
    assert f"table {table}" in scope and start.isoformat() in scope
    assert end - start > timedelta(minutes=5)


def test_reaudit_refuses_a_store_another_process_is_writing(db: Path) -> None:
    import subprocess
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, sys; c = duckdb.connect({str(db)!r}); print('ok', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        result = CliRunner().invoke(app, ["reaudit", "--db", str(db)])
    finally:
        holder.communicate("")
    assert result.exit_code == 1
    assert "cannot open" in result.output and "Traceback" not in result.output


def test_reaudit_of_an_unknown_table_is_one_error_line(db: Path) -> None:
    result = CliRunner().invoke(app, ["reaudit", "--db", str(db), "--table", "NOPE-01"])
    assert result.exit_code == 1
    assert "no stored event of table 'NOPE-01'" in result.output


def test_a_store_from_before_generations_gets_generation_1(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    schema = (Path(__file__).resolve().parents[2] / "projections" / "store" / "sql" / "001_schema.sql").read_text()
    old = schema[: schema.index("CREATE TABLE IF NOT EXISTS table_snapshots")]
    con.execute(old)
    con.execute(
        """INSERT INTO findings (finding_id, revision, rule_id, citation, game, severity, provisional, table_id,
           round_id, status, message, required_remedy, evidence_event_ids, trigger_event_id, observed_at,
           remedy_event_ids, remedy_delay_seconds, late)
           VALUES ('f1', 0, 'DT-sequence-gap', 'c', 'TCP', 'integrity', false, 'TCP-01',
           NULL, 'open', 'm', NULL, ['e1'], 'e1', '2026-11-27 18:00:00+00', [], NULL, false)"""
    )
    con.close()
    with Store(db) as store:
        assert store.generation == 1
        assert store.con.execute("SELECT generation FROM findings").fetchall() == [(1,)]
        assert store.con.execute("SELECT finding_id FROM dim_findings").fetchall() == [("f1",)]


def test_reaudit_keeps_snapshots_of_its_engine_for_the_replays_after_it(db: Path) -> None:
    from dealtrail.investigate.replay import Window, replay, snapshot_start, stored_events, stored_findings

    con = duckdb.connect(str(db))
    con.execute("DELETE FROM table_snapshots")  # as after a rule change: none of this engine
    con.close()
    with Store(db) as store:
        reaudit(store, workers=2, snapshot_every=200)
    con = duckdb.connect(str(db), read_only=True)
    try:
        table, round_id = con.execute(
            "SELECT table_id, round_id FROM rounds ORDER BY completed_at DESC LIMIT 1"
        ).fetchone()  # type: ignore[misc]
        assert con.execute("SELECT count(*) FROM table_snapshots").fetchone()[0] > 3  # type: ignore[index]
        start = snapshot_start(con, table, Window(round_id=round_id))
        assert start.state is not None and not start.skipped
        window = Window(round_id=round_id)
        quick = replay(
            table,
            stored_events(con, table, start.last_seq),
            stored_findings(con, table, start.last_seq),
            window,
            start=start,
        )
        whole = replay(table, stored_events(con, table), stored_findings(con, table), window)
    finally:
        con.close()
    assert quick.matches and whole.matches
    assert [s.state for s in quick.steps] == [s.state for s in whole.steps]
    assert quick.events_total < whole.events_total
