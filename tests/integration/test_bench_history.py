"""`make bench-history` in its smoke mode: every figure line is printed, each with a number (no
timing is asserted: the figures depend on the machine)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dealtrail.simulator.floor import FloorSpec, simulate
from schemas.codec import encode

ROOT = Path(__file__).resolve().parents[2]

FIGURES = [
    "store events",
    "store bytes/event",
    "report s (whole store)",
    "report MB",
    "page p95 ms floor",
    "page p95 ms findings",
    "page p95 ms finding",
    "page p95 ms dealer",
    "page p95 ms table",
    "api p95 ms findings",
    "replica s",
    "archive s (one month)",
]
SUFFIXED = ["page p95 ms floor (rows fragment)", "page p95 ms findings (page 1)", "page p95 ms findings (deep page",
            "page p95 ms findings (table", "page p95 ms findings (rule"]  # fmt: skip


def test_bench_history_quick_prints_every_figure_with_a_number(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_history.py"), "--quick", "--cache", str(cache)],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines and all(line.startswith("1 hour ") for line in lines), lines
    figures = {}
    for line in lines:
        name, _, value = line.removeprefix("1 hour ").rpartition(": ")
        assert re.fullmatch(r"[0-9][0-9,]*(\.[0-9]+)?", value), line
        figures[name] = value
    for name in FIGURES:
        assert name in figures, f"no line {name!r} in:\n{run.stdout}"
    for prefix in SUFFIXED:
        assert any(name.startswith(prefix) for name in figures), f"no line {prefix!r} in:\n{run.stdout}"
    # the store is kept in the cache; the copy the replica and the archive worked on is not
    stores = list(cache.glob("*/store.duckdb"))
    assert len(stores) == 1 and not list(cache.glob("*/archive"))
    assert not list(cache.glob("*/events.jsonl"))


def _bench(monkeypatch: pytest.MonkeyPatch) -> Any:
    spec = importlib.util.spec_from_file_location("bench_history", ROOT / "bench" / "bench_history.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_history", bench)  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    return bench


def _fake_root(bench: Any, monkeypatch: pytest.MonkeyPatch, fake: Path, names: tuple[str, ...]) -> Path:
    """A copy of the files and folders ``names`` of the repository in ``fake``, made the bench's
    ROOT, so a test can change code there and see which cache keys follow."""
    for name in names:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, fake / name)
        else:
            (fake / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, fake / name)
    monkeypatch.setattr(bench, "ROOT", fake)
    return fake


def test_bench_history_simulators_in_parallel_write_the_floor_simulate_writes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bench = _bench(monkeypatch)
    floor = FloorSpec(tables=4, hours=0.5, seed=5, error_rate=0.2, start=datetime(2026, 10, 31, 23, 45, tzinfo=UTC))
    whole = b"".join(encode(e) + b"\n" for e in simulate(floor))
    simulated = bench.simulate_floor(floor, tmp_path / "events.jsonl", 3)
    assert simulated.events == whole.count(b"\n")
    assert simulated.last == max(e.recorded_at for e in simulate(floor))
    assert (tmp_path / "events.jsonl").read_bytes() == whole  # the same store follows from the same file
    assert [p.name for p in tmp_path.iterdir()] == ["events.jsonl"]


def test_bench_history_cache_key_follows_the_options_and_the_code_that_shape_a_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bench = _bench(monkeypatch)
    day, month = bench.StoreSpec(8, 24.0), bench.StoreSpec(8, 720.0)
    assert (day.label, month.label, bench.StoreSpec(3, 1.0).label) == ("1 day", "30 days", "1 hour")
    assert day.start < bench.BOUNDARY < day.start + timedelta(hours=24)  # two months: one can be archived
    keys = {bench.store_key(s) for s in (day, month, bench.StoreSpec(4, 24.0))}
    assert len(keys) == 3
    # the same options with other code (here: another copy of the engine) make another key
    fake = _fake_root(bench, monkeypatch, tmp_path / "root", bench.SHAPING)
    assert bench.store_key(day) == bench.store_key(day) and bench.store_key(day) in keys
    with (fake / "streams" / "engine" / "__init__.py").open("a") as fh:
        fh.write("\n# changed\n")
    assert bench.store_key(day) not in keys


def test_bench_history_audits_a_kept_event_file_again_instead_of_simulating(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With ``--keep-events`` the simulated file stays in the cache, in a folder keyed by the
    simulator's code: a new build (here: the store rebuilt) audits it without simulating, into
    the same store; a change of the simulator makes another key, one of the engine does not."""
    import duckdb

    bench = _bench(monkeypatch)
    spec = bench.StoreSpec(2, 0.5)
    kept = tmp_path / bench.events_key(spec)
    first = bench.build(spec, tmp_path / "a", False, 1, kept)
    assert (kept / "events.jsonl").exists() and (kept / "simulated.json").exists()

    def no_simulation(*args: Any) -> int:
        raise AssertionError("simulated again")

    simulate_floor = bench.simulate_floor
    monkeypatch.setattr(bench, "simulate_floor", no_simulation)
    second = bench.build(spec, tmp_path / "b", True, 1, kept)
    assert (kept / "events.jsonl").exists()
    monkeypatch.setattr(bench, "simulate_floor", simulate_floor)  # its code is part of the key

    def rows(db: Path) -> list[Any]:
        con = duckdb.connect(str(db), read_only=True)
        try:
            return con.execute("SELECT event_id, payload_hash, seq FROM events ORDER BY ALL").fetchall()
        finally:
            con.close()

    assert rows(first) == rows(second) and rows(first)
    # the key: the simulator's code and the options, not the engine's
    fake = _fake_root(bench, monkeypatch, tmp_path / "root", (*bench.SIMULATING, "streams/engine"))
    key = bench.events_key(spec)
    assert key == kept.name and bench.events_key(bench.StoreSpec(3, 0.5)) != key
    with (fake / "streams" / "engine" / "__init__.py").open("a") as fh:
        fh.write("\n# changed\n")
    assert bench.events_key(spec) == key
    with (fake / "dealtrail" / "simulator" / "table.py").open("a") as fh:
        fh.write("\n# changed\n")
    assert bench.events_key(spec) != key


def test_bench_history_store_holds_every_event_it_simulates_even_past_the_nominal_end(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 51 item 6: a table that closes owing a remedy deals its last hours a day and more past
    the store's nominal end; the audit's clock stands after the last event, so every simulated
    event is stored, and a store missing events (here: the old clock at the nominal end) fails
    loudly and leaves no store that looks whole."""
    import duckdb

    bench = _bench(monkeypatch)
    monkeypatch.setattr(bench, "ERROR_RATE", 0.3)  # C691-02 (the fifth table) closes owing a remedy in 2.5 h
    spec = bench.StoreSpec(5, 2.5)
    kept = tmp_path / "kept"
    db = bench.build(spec, tmp_path / "whole", False, 1, kept)
    simulated = json.loads((kept / "simulated.json").read_text(encoding="utf-8"))
    nominal_end = spec.start + timedelta(hours=spec.hours)
    assert datetime.fromisoformat(simulated["last"]) > nominal_end + timedelta(hours=24)  # the cause
    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
        late = con.execute("SELECT count(*) FROM events WHERE recorded_at > ?", [nominal_end]).fetchone()[0]  # type: ignore[index]
    finally:
        con.close()
    assert stored == simulated["events"] and late > 0
    assert bench.check_whole("2.5 hours", stored, stored) == f"2.5 hours events simulated = events stored: {stored:,}"

    monkeypatch.setattr(bench, "audit_clock", lambda s: nominal_end + timedelta(hours=1))  # the old clock
    cut = r"not whole: .* simulated, .* stored \(dead letters recorded_in_future"
    with pytest.raises(bench.StoreIncomplete, match=cut):
        bench.build(spec, tmp_path / "cut", False, 1, kept)
    assert not (tmp_path / "cut" / "store.duckdb").exists()
