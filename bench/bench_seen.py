"""Benchmark of the duplicate-delivery index (``streams/seen.py``) and of an audit of a file sent twice.

Prints:
  seen note us/event: the copy key of an event's canonical JSON and its entry in the index
  (what every applied event costs the audit, the worker and the re-audit; CPU time)
  seen lookup us/copy (spilled): the look-up of a copy whose table and seq lie in the spill
  file (a pread), key of the copy included
  seen peak RSS MB at N events: a fresh process's peak memory after noting N events of 48
  tables (memory bound: 4 MiB of chunks in memory, the rest on disk), and its spill file's size
  audit s / peak MB, file once and file twice: ``dealtrail audit`` (one worker) of a simulated
  file and of the same file twice in a row, wall time and peak RSS of the process

Not part of ``make test``: ``.venv/bin/python bench/bench_seen.py [--events N]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import json, resource, sys, tempfile
from pathlib import Path
from streams.seen import SeenIndex
n = int(sys.argv[1])
with tempfile.TemporaryDirectory() as tmp:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    index = SeenIndex(Path(tmp))
    tables = [f"T-{k:02d}" for k in range(48)]
    for seq in range(1, n // 48 + 1):
        for t in tables:
            index.add(t, seq, (seq, seq))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    spill = index.spilled_bytes / 1e6
    print(json.dumps({"peak_mb": peak / 1024, "grew_mb": (peak - before) / 1024, "spill_mb": spill}))
    index.close()
"""

AUDIT = """
import json, resource, sys, time
from pathlib import Path
from dealtrail.ingest.audit import audit_file
from projections.store.store import Store
t = time.perf_counter()
with Store(sys.argv[2]) as store:
    s = audit_file(Path(sys.argv[1]), store, workers=1)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "lines": s.lines, "duplicates": s.duplicates, "events": s.events}))
"""


def _child(code: str, *args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    """Measure and print the figures (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=5_000_000, help="events noted for the memory figure")
    ap.add_argument("--hours", type=float, default=2.0, help="simulated hours of the audited file (8 tables)")
    args = ap.parse_args()

    from dealtrail.simulator.run import write_simulation
    from schemas.codec import decode, encode
    from streams.seen import SeenIndex

    with tempfile.TemporaryDirectory(prefix="dealtrail-bench-seen-") as tmp:
        folder = Path(tmp)
        events = folder / "events.jsonl"
        write_simulation(events, tables=8, hours=args.hours, seed=5, error_rate=0.05)
        decoded = [decode(line) for line in events.read_bytes().splitlines()]
        data = [encode(e) for e in decoded]
        # two chunks in memory per table: each table's newest seqs stay there, most look-ups read the file
        index = SeenIndex(folder, memory_chunks=16)
        t0 = time.process_time()
        for e, d in zip(decoded, data, strict=True):
            index.note(e, d, applied=not index.knows(e.table_id, e.seq))  # the first at a seq is applied
        note = (time.process_time() - t0) / len(decoded) * 1e6
        t0 = time.process_time()
        hits = sum(index.is_copy(e, d) for e, d in zip(decoded[:20_000], data[:20_000], strict=True))
        lookup = (time.process_time() - t0) / min(20_000, len(decoded)) * 1e6
        assert hits == min(20_000, len(decoded))
        index.close()
        print(f"seen note us/event: {note:.2f}")
        print(f"seen lookup us/copy (spilled): {lookup:.2f}")
        mem = _child(CHILD, str(args.events))
        print(
            f"seen peak RSS MB at {args.events:,} events: {mem['peak_mb']:.0f} "
            f"(grew {mem['grew_mb']:.1f} while noting; spill file {mem['spill_mb']:.0f} MB)"
        )
        twice = folder / "twice.jsonl"
        twice.write_bytes(events.read_bytes() * 2)
        once_r = _child(AUDIT, str(events), str(folder / "once.duckdb"))
        twice_r = _child(AUDIT, str(twice), str(folder / "twice.duckdb"))
        for name, r in (("once", once_r), ("twice", twice_r)):
            print(
                f"audit file {name}: {r['seconds']:.1f} s, peak MB {r['peak_mb']:.0f} "
                f"({int(r['lines']):,} lines, {int(r['duplicates']):,} duplicate deliveries skipped)"
            )


if __name__ == "__main__":
    main()
