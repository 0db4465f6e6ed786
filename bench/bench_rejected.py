"""Benchmark: the audit's peak memory with a flood of rejected lines against a clean run.

Builds one clean event file (a simulated floor) and one with the same events and ``--bad``
rejected lines (default 1,000,000) spread between them, a third of each kind: not JSON, JSON
that is no event, and an event with a bad field (a ``seq`` that is not a number). Each file is
audited by ``audit_file`` in a fresh Python process (``--workers`` worker processes; 1: the
writer applies the events itself) into a new store, with a dead-letter file.

Prints, for each run: its lines and dead letters, its seconds, and the peak resident memory
(``ru_maxrss``) of the writer process and of the largest worker process (MB); then the ratio
of the flooded run's peak to the clean run's (the issue asks for at most 1.10).

Run: ``.venv/bin/python bench/bench_rejected.py [--bad 1000000] [--workers 1]`` (about two
minutes at a million lines). Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_files(folder: Path, bad: int, tables: int, hours: float) -> tuple[Path, Path, int]:
    """Write ``clean.jsonl`` and ``flooded.jsonl`` in ``folder``; returns both and the event count."""
    from dealtrail.simulator.floor import FloorSpec, simulate
    from schemas.codec import encode

    good = [encode(e) for e in simulate(FloorSpec(tables=tables, hours=hours, seed=7, error_rate=0.05))]
    clean, flooded = folder / "clean.jsonl", folder / "flooded.jsonl"
    clean.write_bytes(b"".join(line + b"\n" for line in good))
    template = json.loads(good[len(good) // 2])
    every = max(1, bad // max(1, len(good)))  # bad lines after each good one, spread over the file
    written = 0
    with flooded.open("wb") as fh:
        for line in good:
            fh.write(line + b"\n")
            for _ in range(min(every, bad - written) if line is not good[-1] else bad - written):
                kind = written % 3
                if kind == 0:
                    fh.write(b"this is no JSON %d\n" % written)
                elif kind == 1:
                    fh.write(b'{"note": "a heartbeat, not an event", "n": %d}\n' % written)
                else:
                    doc = {**template, "event_id": f"BAD{written:020d}", "seq": f"x{written}"}
                    fh.write(json.dumps(doc).encode() + b"\n")
                written += 1
    return clean, flooded, len(good)


def child(path: Path, workers: int) -> None:
    """Audit ``path`` into a new store in this process and print the figures as JSON."""
    import resource
    import time

    from dealtrail.ingest.audit import audit_file
    from dealtrail.settings import Settings
    from projections.store.store import Store

    settings = Settings()
    db = path.with_suffix(".duckdb")
    dl = path.with_suffix(".rejected.jsonl")
    started = time.perf_counter()
    with Store(db, settings.duckdb_memory_limit) as store, dl.open("w") as out:
        summary = audit_file(
            path,
            store,
            out,
            workers=workers,
            limits=settings.plausibility,
            max_record_bytes=settings.max_record_bytes,
            snapshot_every=settings.snapshot_every,
        )
    seconds = time.perf_counter() - started
    rows = sum(1 for _ in dl.open("rb"))
    print(
        json.dumps(
            {
                "lines": summary.lines,
                "events": summary.events,
                "dead_letters": sum(summary.dead_letters.values()),
                "dead_letter_rows": rows,
                "seconds": seconds,
                "writer_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            }
        )
    )


def run(path: Path, workers: int) -> dict[str, float]:
    """Audit ``path`` in a fresh process; its figures."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path), "--workers", str(workers)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    """Build the files, audit each in a fresh process and print the figures (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bad", type=int, default=1_000_000, help="rejected lines in the flooded file")
    ap.add_argument("--workers", type=int, default=1, help="audit worker processes (1: in the writer)")
    ap.add_argument("--tables", type=int, default=6)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.workers)
        return
    with tempfile.TemporaryDirectory(prefix="dealtrail-bench-rejected-") as tmp:
        clean, flooded, events = write_files(Path(tmp), args.bad, args.tables, args.hours)
        print(f"events: {events:,}; rejected lines in the flooded file: {args.bad:,}; workers: {args.workers}")
        figures = {}
        for name, path in (("clean", clean), ("flooded", flooded)):
            f = figures[name] = run(path, args.workers)
            print(
                f"{name}: {int(f['lines']):,} lines, {int(f['dead_letters']):,} dead letters "
                f"({int(f['dead_letter_rows']):,} rows in the file), {f['seconds']:.1f} s, "
                f"peak RSS writer {f['writer_mb']:.0f} MB, largest worker {f['worker_mb']:.0f} MB"
            )
        for key in ("writer_mb", "worker_mb") if args.workers > 1 else ("writer_mb",):
            ratio = figures["flooded"][key] / figures["clean"][key]
            print(f"peak RSS flooded/clean ({key.removesuffix('_mb')}): {ratio:.3f}")


if __name__ == "__main__":
    main()
