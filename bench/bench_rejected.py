"""Benchmark: the audit's peak memory with a flood of rejected lines against a clean run.

Builds one clean event file (a simulated floor) and one with the same events and ``--bad``
rejected lines (default 1,000,000) spread between them, a third of each kind: not JSON, JSON
that is no event, and an event with a bad field (a ``seq`` that is not a number). Each file is
audited by ``audit_file`` in a fresh Python process (``--workers`` worker processes; 1: the
writer applies the events itself) into a new store, with a dead-letter file.

Prints, for each run: its lines and dead letters, its seconds, and the peak resident memory
(``ru_maxrss``) of the writer process and of the largest worker process (MB); then the ratio
of the flooded run's peak to the clean run's (the issue asks for at most 1.10).

Stages (``--stages``, comma-separated; each flooded run is measured once per stage, against
one clean run): ``stored`` (the audit as it is), ``log-only`` (the dead letters go to the
dead-letter file and the store's log, no ``dead_letters`` row is inserted), ``anti-join`` (every
batch's dead letters are compared with the stored ones of their source, as if the source were
not new), ``memlimit-256MB`` (the store opened with DuckDB's memory limit at 256 MB; any size).
Each run also prints DuckDB's own memory at its end (``duckdb_memory()``, MB) and the
``dead_letters`` rows stored. ``--tracemalloc`` instead measures what Python holds per rejected
line on the audit's intake path (:func:`dealtrail.ingest.audit.scan` with a writer that keeps
nothing): the tracemalloc peak of the clean file and of each flooded one, and the bytes per line.

``--flood`` says what the rejected lines state (:data:`FLOODS`; comma-separated, one file each):
the three kinds in turn, or every line its own time (``distinct-times``) or its own time and
table (``distinct-tables``); each run also prints the ``dead_letter_counts`` rows stored.

Run: ``.venv/bin/python bench/bench_rejected.py [--bad 200000,1000000] [--workers 1]
[--flood kinds,distinct-times] [--stages stored,log-only] [--tracemalloc]`` (about two minutes
per run at a million lines). Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def good_lines(tables: int, hours: float) -> list[bytes]:
    """The lines of a simulated floor (``tables`` tables dealt for ``hours`` hours)."""
    from dealtrail.simulator.floor import FloorSpec, simulate
    from schemas.codec import encode

    return [encode(e) for e in simulate(FloorSpec(tables=tables, hours=hours, seed=7, error_rate=0.05))]


FLOODS = ("kinds", "distinct-times", "distinct-tables")
"""What the rejected lines state (``--flood``): ``kinds``, the three kinds in turn (the events
among them state the same table and time); ``distinct-times``, every line an event with a bad
field stating its own time (37 s apart: a chunk of 2,000 spans 20 hours); ``distinct-tables``,
the same with its own table too."""


def write_flooded(path: Path, good: list[bytes], bad: int, flood: str = "kinds") -> Path:
    """Write ``good`` with ``bad`` rejected lines (of the kind ``flood``: :data:`FLOODS`) spread
    between them into ``path``; returns it."""
    from datetime import UTC, datetime, timedelta

    template = json.loads(good[len(good) // 2])
    start = datetime(2026, 1, 1, tzinfo=UTC)
    every = max(1, bad // max(1, len(good)))  # bad lines after each good one, spread over the file
    written = 0
    with path.open("wb") as fh:
        for line in good:
            fh.write(line + b"\n")
            for _ in range(min(every, bad - written) if line is not good[-1] else bad - written):
                kind = written % 3
                if flood != "kinds":
                    doc = {**template, "event_id": f"BAD{written:020d}", "seq": f"x{written}"}
                    doc["occurred_at"] = (start + timedelta(seconds=37 * written)).isoformat()
                    if flood == "distinct-tables":
                        doc["table_id"] = f"X{written}"
                    fh.write(json.dumps(doc).encode() + b"\n")
                elif kind == 0:
                    fh.write(b"this is no JSON %d\n" % written)
                elif kind == 1:
                    fh.write(b'{"note": "a heartbeat, not an event", "n": %d}\n' % written)
                else:
                    doc = {**template, "event_id": f"BAD{written:020d}", "seq": f"x{written}"}
                    fh.write(json.dumps(doc).encode() + b"\n")
                written += 1
    return path


def _stage(stage: str) -> str | None:
    """Patch the store for ``stage`` (see the module docstring); the memory limit it asks for."""
    from projections.store.store import Store

    if stage == "log-only":
        insert = Store._insert_dead_letters

        def log_only(self: Store, dead_letters: Any, new_source: bool) -> int:
            self._log_dead_letters([d for d in dead_letters if d.get("compact")])
            return len(dead_letters)

        Store._insert_dead_letters = log_only  # type: ignore[method-assign]
        del insert
    elif stage == "anti-join":
        write_batch = Store.write_batch

        def compared(self: Store, *args: Any, **kwargs: Any) -> Any:
            kwargs["dead_letters_new"] = False
            return write_batch(self, *args, **kwargs)

        Store.write_batch = compared  # type: ignore[method-assign]
    elif stage.startswith("memlimit-"):
        return stage.removeprefix("memlimit-")
    elif stage != "stored":
        raise SystemExit(f"unknown stage {stage!r}")
    return None


def child(path: Path, workers: int, stage: str) -> None:
    """Audit ``path`` into a new store in this process (patched for ``stage``) and print the figures as JSON."""
    import resource
    import time

    from dealtrail.ingest.audit import audit_file
    from dealtrail.settings import Settings
    from projections.store.store import Store

    settings = Settings()
    limit = _stage(stage) or settings.duckdb_memory_limit
    db = path.with_name(f"{path.stem}-{stage}.duckdb")
    dl = path.with_name(f"{path.stem}-{stage}.rejected.jsonl")
    started = time.perf_counter()
    with Store(db, limit) as store, dl.open("w") as out:
        summary = audit_file(
            path,
            store,
            out,
            workers=workers,
            limits=settings.plausibility,
            max_record_bytes=settings.max_record_bytes,
            snapshot_every=settings.snapshot_every,
        )
        duck = store.con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()
        stored = store.con.execute("SELECT count(*) FROM dead_letters").fetchone()
        groups = store.con.execute("SELECT count(*) FROM dead_letter_counts").fetchone()
    seconds = time.perf_counter() - started
    rows = sum(1 for _ in dl.open("rb"))
    print(
        json.dumps(
            {
                "lines": summary.lines,
                "events": summary.events,
                "dead_letters": sum(summary.dead_letters.values()),
                "dead_letter_rows": rows,
                "stored_rows": int(stored[0]) if stored else 0,
                "count_rows": int(groups[0]) if groups else 0,
                "duckdb_mb": int(duck[0] or 0) / 1e6 if duck else 0.0,
                "seconds": seconds,
                "writer_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            }
        )
    )
    for p in (db, dl, db.with_name(db.name + ".dead-letters.jsonl")):
        p.unlink(missing_ok=True)


def python_peak(path: Path) -> tuple[int, int]:
    """The audit intake's Python memory over ``path``: (tracemalloc peak in bytes, dead letters
    handed over), scanning it as one audit worker does with a writer that keeps nothing."""
    import tracemalloc

    from dealtrail.ingest.audit import Batch, scan
    from dealtrail.settings import Settings

    handed = 0

    def emit(batch: Batch) -> None:
        nonlocal handed
        handed += len(batch.dead)
        if batch.events_file is not None:
            batch.events_file.unlink()

    with tempfile.TemporaryDirectory(prefix="dealtrail-bench-stage-") as stage:
        tracemalloc.start()
        try:
            scan(path, 0, 1, Path(stage), 50_000, emit, limits=Settings().plausibility)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return peak, handed


def run(path: Path, workers: int, stage: str) -> dict[str, float]:
    """Audit ``path`` in a fresh process; its figures."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path), "--workers", str(workers), "--stages", stage],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def report(name: str, f: dict[str, float]) -> None:
    """Print one run's figures."""
    print(
        f"{name}: {int(f['lines']):,} lines, {int(f['dead_letters']):,} dead letters "
        f"({int(f['dead_letter_rows']):,} in the file, {int(f['stored_rows']):,} rows stored, "
        f"{int(f['count_rows']):,} dead_letter_counts rows), "
        f"{f['seconds']:.1f} s, DuckDB at the end {f['duckdb_mb']:.0f} MB, "
        f"peak RSS writer {f['writer_mb']:.0f} MB, largest worker {f['worker_mb']:.0f} MB",
        flush=True,
    )


def main() -> None:
    """Build the files, audit each in a fresh process and print the figures (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--bad", default="1000000", help="rejected lines in the flooded file (comma-separated: one file each)"
    )
    ap.add_argument("--workers", type=int, default=1, help="audit worker processes (1: in the writer)")
    ap.add_argument("--stages", default="stored", help="comma-separated: stored, log-only, anti-join, memlimit-SIZE")
    ap.add_argument("--tracemalloc", action="store_true", help="measure the intake's Python memory per line instead")
    ap.add_argument("--flood", default="kinds", help="comma-separated: " + ", ".join(FLOODS))
    ap.add_argument("--tables", type=int, default=6)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.workers, args.stages)
        return
    counts = [int(n) for n in args.bad.split(",")]
    stages = args.stages.split(",")
    with tempfile.TemporaryDirectory(prefix="dealtrail-bench-rejected-") as tmp:
        good = good_lines(args.tables, args.hours)
        clean = write_flooded(Path(tmp) / "clean.jsonl", good, 0)
        print(f"events: {len(good):,}; rejected lines: {', '.join(f'{n:,}' for n in counts)}; workers: {args.workers}")
        if args.tracemalloc:
            base, _ = python_peak(clean)
            print(f"tracemalloc peak, clean: {base / 1e6:.1f} MB", flush=True)
            for bad in counts:
                peak, handed = python_peak(write_flooded(Path(tmp) / f"flood-{bad}.jsonl", good, bad))
                print(
                    f"tracemalloc peak, {bad:,} rejected lines ({handed:,} handed over): {peak / 1e6:.1f} MB, "
                    f"{(peak - base) / max(1, bad):.2f} bytes per rejected line over the clean file",
                    flush=True,
                )
            return
        base = run(clean, args.workers, "stored")
        report("clean", base)
        for bad in counts:
            for flood in args.flood.split(","):
                flooded = write_flooded(Path(tmp) / f"flood-{bad}.jsonl", good, bad, flood)
                for stage in stages:
                    f = run(flooded, args.workers, stage)
                    name = f"{bad:,} rejected ({flood}), {stage}"
                    report(name, f)
                    for key in ("writer_mb", "worker_mb") if args.workers > 1 else ("writer_mb",):
                        ratio = f[key] / base[key]
                        print(f"peak RSS flooded/clean ({key.removesuffix('_mb')}, {name}): {ratio:.3f}")
                flooded.unlink()


if __name__ == "__main__":
    main()
