"""Benchmark of the store's other copies on a store of your choice (the demo's by default):
the read replica and the archive of a month to Parquet.

Prints:
  store MB, store events: the store measured (a copy of it is used; the store is not changed)
  replica s (writer held): the part of a replica copy that holds the writer (checkpoint and
  file copy; median of 3), replica s (total): the whole copy, ``replica_meta`` and replace
  included
  archive events: the events of the month archived; the demo store is one shift, so the events
  of every other table are moved back by one month (columns only) to make an older month of
  about half the store
  archive s (one month): copy to Parquet, check, delete, and each step; compact s: the copy of
  the remaining store to a new file that gives the space back
  store MB after archive, archive MB: the live file after and the Parquet folder

Run: ``.venv/bin/python bench/bench_copies.py [--db out/dealtrail.duckdb]`` (``make demo`` first).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from projections.store.archive import archive, compact
from projections.store.replica import write_replica


def main() -> None:
    """Measure and print the figures (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=Path("out/dealtrail.duckdb"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dealtrail-bench-copies-") as tmp:
        db = Path(tmp) / "store.duckdb"
        shutil.copyfile(args.db, db)
        con = duckdb.connect(str(db))
        con.execute("SET TimeZone = 'UTC'")
        events = con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
        print(f"store MB: {db.stat().st_size / 1e6:.1f}")
        print(f"store events: {events:,}")
        copies = [write_replica(con, db, Path(tmp) / "replica.duckdb") for _ in range(3)]
        print(f"replica s (writer held): {statistics.median(c.locked_seconds for c in copies):.3f}")
        print(f"replica s (total): {statistics.median(c.total_seconds for c in copies):.3f}")
        (Path(tmp) / "replica.duckdb").unlink()
        month = con.execute("SELECT strftime(min(occurred_at), '%Y-%m') FROM events").fetchone()[0]  # type: ignore[index]
        picked = """table_id IN (SELECT DISTINCT table_id FROM events ORDER BY table_id
                                 LIMIT (SELECT count(DISTINCT table_id) // 2 FROM events))"""
        con.execute(f"UPDATE events SET occurred_at = occurred_at - INTERVAL 1 MONTH WHERE {picked}")
        con.execute(f"UPDATE table_snapshots SET last_occurred_at = last_occurred_at - INTERVAL 1 MONTH WHERE {picked}")
        con.execute("CHECKPOINT")
        folder = Path(tmp) / "archive"
        result = archive(con, db, str(month), folder, datetime.now(UTC))
        con.close()
        result.compact_seconds = compact(db)
        print(f"archive events: {result.events:,} ({result.snapshots:,} snapshots, {len(result.parts)} parts)")
        steps = result.copy_seconds + result.verify_seconds + result.delete_seconds
        print(f"archive s (one month): {steps:.2f}")
        print(f"archive s copy: {result.copy_seconds:.2f}")
        print(f"archive s verify: {result.verify_seconds:.2f}")
        print(f"archive s delete: {result.delete_seconds:.2f}")
        print(f"compact s: {result.compact_seconds:.2f}")
        print(f"store MB after archive: {db.stat().st_size / 1e6:.1f}")
        print(f"archive MB: {sum(p.stat().st_size for p in folder.rglob('*') if p.is_file()) / 1e6:.1f}")


if __name__ == "__main__":
    main()
