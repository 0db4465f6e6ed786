"""Benchmark of the embedded audit on 1,000,000 simulated events (``--quick``: 100,000).

Prints, in one run over the same lines:
  ceiling events/s: pydantic TypeAdapter.validate_json alone (the most an audit could do)
  audit events/s: the whole `dealtrail audit` (parse, validate, rules, DuckDB write), with the
  worker count `dealtrail audit` picks
  audit/ceiling ratio, the audit's CPU time per event (all its processes) and its peak
  memory (RSS of a fresh process)
  engine us/event: the engine's `apply` alone over the decoded events, given each event's line
  as the audit gives it (CPU time of this process: the machine is shared, wall time lies)
  store us/event: the DuckDB write alone, CPU time of the writer process (DuckDB's threads
  included): the events staged as the audit's workers stage them (Arrow IPC files of the
  events rows), with the findings and rounds the engine raised, on the same events
  staging us/event: building those Arrow rows in a worker (CPU time), on the same events
  audit writer CPU us/event, audit workers CPU us/event: the audit's CPU time per event split
  by process (getrusage of the writer and of its workers, start-up included)
  audit 1 worker events/s, audit 2 workers events/s: the audit with 1 and 2 worker processes
  replay ms (8 h store), replay ms (10 day store): `dealtrail replay --round` of one round near
  the end of a single table simulated for 8 hours and for 10 days (``--quick``: 2 days),
  audited with the default snapshot interval; opening the store and the replay, not Python's
  start-up
  reaudit events/s: `dealtrail reaudit` of the audit's store (workers: one per core)
Not part of `make test`: run `make bench` (``make bench BENCH_ARGS=--quick`` for a fast run).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"


def ensure_events(n: int) -> Path:
    """Simulate a floor until at least ``n`` events, cached in bench/data/."""
    from dealtrail.simulator.floor import FloorSpec, simulate
    from schemas.codec import encode

    path = DATA / f"events-chained-{n}.jsonl"  # the simulator chains its events (older caches did not)
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    spec = FloorSpec(tables=48, hours=24.0, seed=1, error_rate=0.03)
    tmp = path.with_suffix(".part")
    with tmp.open("wb") as fh:
        for i, event in enumerate(simulate(spec)):
            if i >= n:
                break
            fh.write(encode(event) + b"\n")
    tmp.rename(path)
    return path


def ceiling(path: Path) -> tuple[int, float]:
    from schemas.codec import EVENT_ADAPTER

    validate = EVENT_ADAPTER.validate_json
    n = 0
    t0 = time.perf_counter()
    with path.open("rb") as fh:
        for line in fh:
            validate(line)
            n += 1
    return n, time.perf_counter() - t0


def audit_in_subprocess(path: Path, workers: int | None = None, db: Path | None = None) -> dict[str, float]:
    db = db or Path(tempfile.mkdtemp()) / "bench.duckdb"
    code = f"""
import json, resource, time
from pathlib import Path
from dealtrail.ingest.audit import audit_file
from dealtrail.settings import Settings
from projections.store.store import Store
t0 = time.perf_counter()
# as `dealtrail audit` opens it: with the DuckDB memory limit and snapshot interval of the settings
settings = Settings()
with Store(Path({str(db)!r}), settings.duckdb_memory_limit) as store:
    s = audit_file(Path({str(path)!r}), store, workers={workers!r}, snapshot_every=settings.snapshot_every)
dt = time.perf_counter() - t0
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
peak = (me.ru_maxrss + kids.ru_maxrss) / 1024
out = {{"events": s.events, "seconds": dt, "cpu": cpu, "peak_mb": peak, "workers": s.workers}}
out["writer_cpu"], out["workers_cpu"] = me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime
print(json.dumps(out))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def engine_and_store(path: Path) -> tuple[float, float, float]:
    """Microseconds of CPU per event of the engine alone, of the DuckDB write alone and of
    staging (building the Arrow rows), same events."""
    from dealtrail.ingest.audit import Auditor
    from projections.store.event_rows import EventRowsFile, read_event_rows
    from projections.store.store import Store
    from schemas.codec import decode, encode
    from streams.engine import TableState, apply

    events = []
    lines = []
    with path.open("rb") as fh:
        for line in fh:
            events.append(decode(line))
            lines.append(line)
    states: dict[str, TableState] = {}
    # The events held here for the measurement are frozen out of the garbage collector: the
    # audit holds one batch at a time, not a million decoded events for every collection to walk.
    gc.freeze()
    t0 = time.process_time()
    for event, line in zip(events, lines, strict=True):
        table = event.table_id
        states[table], _ = apply(states.get(table), event, line)
    engine_us = (time.process_time() - t0) / len(events) * 1e6
    gc.unfreeze()
    del lines, states
    auditor = Auditor()  # the findings and round rows the store receives (not timed)
    for event in events:
        auditor.apply(event)
    folder = Path(tempfile.mkdtemp())
    batches = []
    datas = [encode(event) for event in events]  # the canonical bytes the worker holds anyway
    t0 = time.process_time()
    for k in range(0, len(events), 50_000):  # the audit's batch (BATCH_LINES)
        rows = EventRowsFile(folder / f"stage-{k}.arrow")
        for i in range(k, min(k + 50_000, len(events))):
            rows.add(i + 1, events[i], datas[i])
        rows.close()
        batches.append(rows.path)
    staging_us = (time.process_time() - t0) / len(events) * 1e6
    findings, rounds = auditor.findings, auditor.rounds
    n = len(events)
    del events, datas, auditor
    with Store(folder / "store.duckdb", "200MB") as store:
        t0 = time.process_time()  # this process's CPU, DuckDB's threads included
        for i, stage in enumerate(batches):
            last = i == len(batches) - 1
            store.write_batch((), findings if last else (), rounds if last else (), event_rows=read_event_rows(stage))
        seconds = time.process_time() - t0
    return engine_us, seconds / n * 1e6, staging_us


def single_table(hours: float, seed: int = 3) -> Path:
    """One table simulated for ``hours``, audited into a store (cached in bench/data/)."""
    from dealtrail.simulator.floor import FloorSpec, simulate
    from schemas.codec import encode

    db = DATA / f"one-table-{hours:g}h.duckdb"
    if db.exists():
        return db
    DATA.mkdir(parents=True, exist_ok=True)
    events = DATA / f"one-table-{hours:g}h.jsonl"
    with events.open("wb") as fh:
        for event in simulate(FloorSpec(tables=1, hours=hours, seed=seed, error_rate=0.03)):
            fh.write(encode(event) + b"\n")
    part = db.with_suffix(".part")
    part.unlink(missing_ok=True)
    audit_in_subprocess(events, None, part)
    part.rename(db)
    events.unlink()
    return db


def replay_ms(db: Path) -> float:
    """Milliseconds to replay one round near the end of the store's single table (as
    `dealtrail replay --table T --round R` does it, in a fresh process, start-up excluded)."""
    code = f"""
import time
from dealtrail.investigate.replay import Window, replay, snapshot_start, stored_events, stored_findings
from projections.store.store import connect_read_only
con = connect_read_only({str(db)!r})
table, = con.execute("SELECT table_id FROM events LIMIT 1").fetchone()
round_id, = con.execute(
    "SELECT round_id FROM rounds WHERE table_id = ? ORDER BY round_no DESC LIMIT 1 OFFSET 3", [table]
).fetchone()
con.close()
t0 = time.perf_counter()
con = connect_read_only({str(db)!r})
window = Window(round_id=round_id)
start = snapshot_start(con, table, window)
stored = stored_findings(con, table, start.last_seq)
trail = list(stored_events(con, table, start.last_seq))
result = replay(table, trail, stored, window, None, start if start.state is not None else None)
con.close()
assert result.steps and result.matches
print((time.perf_counter() - t0) * 1000)
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def reaudit_rate(db: Path) -> float:
    code = f"""
import time
from pathlib import Path
from dealtrail.ingest.reaudit import reaudit
from projections.store.store import Store
with Store(Path({str(db)!r}), "200MB") as store:
    t0 = time.perf_counter()
    r = reaudit(store)
    print(r.events / (time.perf_counter() - t0))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from dealtrail.ingest.audit import default_workers

    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=None, help="events audited (default 1,000,000)")
    parser.add_argument("--quick", action="store_true", help="100,000 events and a 2-day store instead of 10 days")
    args = parser.parse_args()
    events = args.events or (100_000 if args.quick else 1_000_000)
    long_days = 2 if args.quick else 10
    path = ensure_events(events)
    n, secs = ceiling(path)
    ceil = n / secs
    runs: dict[int, dict[str, float]] = {}
    dbs: dict[int, Path] = {}
    for workers in (1, 2):
        dbs[workers] = Path(tempfile.mkdtemp()) / "bench.duckdb"
        runs[workers] = audit_in_subprocess(path, workers, dbs[workers])
    result = runs.get(default_workers(path)) or audit_in_subprocess(path)
    rate = result["events"] / result["seconds"]
    print(f"events: {n}")
    print(f"ceiling events/s: {ceil:,.0f}")
    print(f"audit events/s: {rate:,.0f}")
    print(f"audit/ceiling ratio: {rate / ceil:.2f}")
    print(f"audit workers: {result['workers']}")
    # CPU of the writer and its workers together (incl. their start-up): what the cores must supply
    cpu_us = result["cpu"] / result["events"] * 1e6
    print(f"audit CPU us/event: {cpu_us:.0f}  (all processes; the ceiling's: {1e6 / ceil:.1f})")
    print(f"audit peak memory MB: {result['peak_mb']:.0f}  (writer process + largest worker)")
    for workers in (1, 2):
        r = runs[workers]
        print(
            f"audit {workers} worker{'s' if workers > 1 else ''} CPU us/event: writer "
            f"{r['writer_cpu'] / r['events'] * 1e6:.1f}, workers {r['workers_cpu'] / r['events'] * 1e6:.1f}"
        )
    engine_us, store_us, staging_us = engine_and_store(path)
    print(f"engine us/event: {engine_us:.1f}")
    print(f"store us/event: {store_us:.1f}")
    print(f"staging us/event: {staging_us:.1f}")
    for workers in (1, 2):
        r = runs[workers]
        print(f"audit {workers} worker{'s' if workers > 1 else ''} events/s: {r['events'] / r['seconds']:,.0f}")
    print(f"audit 2 workers / 1 worker: {runs[1]['seconds'] / runs[2]['seconds']:.2f}")
    print(f"replay ms (8 h store): {replay_ms(single_table(8.0)):.0f}")
    print(f"replay ms ({long_days} day store): {replay_ms(single_table(24.0 * long_days)):.0f}")
    print(f"reaudit events/s: {reaudit_rate(dbs[2]):,.0f}")


if __name__ == "__main__":
    main()
