"""Benchmark of the embedded audit on 1,000,000 simulated events.

Prints, in one run over the same lines:
  ceiling events/s: pydantic TypeAdapter.validate_json alone (the most an audit could do)
  audit events/s: the whole `dealtrail audit` (parse, validate, rules, DuckDB write)
  audit/ceiling ratio, the audit's CPU time per event (all its processes) and its peak
  memory (RSS of a fresh process).
Not part of `make test`: run `make bench`.
"""

from __future__ import annotations

import argparse
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


def audit_in_subprocess(path: Path) -> dict[str, float]:
    code = f"""
import json, resource, time
from pathlib import Path
from dealtrail.audit import audit_file
from dealtrail.settings import Settings
from projections.store import Store
t0 = time.perf_counter()
# as `dealtrail audit` opens it: with the DuckDB memory limit of the settings
with Store(Path({str(Path(tempfile.mkdtemp()) / "bench.duckdb")!r}), Settings().duckdb_memory_limit) as store:
    s = audit_file(Path({str(path)!r}), store)
dt = time.perf_counter() - t0
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
peak = (me.ru_maxrss + kids.ru_maxrss) / 1024
print(json.dumps({{"events": s.events, "seconds": dt, "cpu": cpu, "peak_mb": peak, "workers": s.workers}}))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    path = ensure_events(args.events)
    n, secs = ceiling(path)
    ceil = n / secs
    result = audit_in_subprocess(path)
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


if __name__ == "__main__":
    main()
