"""Benchmark of publishing an event older than its table's last 256 (issue 37 item 4): the
publisher compares it with what the events topic holds at its seq, reading the partition in
chunks and keeping only the records at that seq, so its memory does not grow with the history.

Prints, for a table trail of each size (one table, simulated, published first):
  history events: the events of the table on its partition
  compare s: wall time of ``publish`` of a file of 3 old events (two copies, one changed); most
  of it is kafka-python reading the partition's records (about 0.1 ms each here)
  compare peak MB (tracemalloc): the peak of Python allocations during the same publish run
  again under tracemalloc (its producer and consumers included); bounded = about the same for
  every history size
  result: already_published and rejected counts (2 and 1 conflicts_with_published)

Needs a broker: ``DEALTRAIL_KAFKA_BOOTSTRAP=host:port .venv/bin/python bench/bench_old_event.py
[--sizes 10000 100000]``; each size gets its own namespace ``bench-old-<random>-<size>``.
"""

from __future__ import annotations

import argparse
import json
import secrets
import tempfile
import time
import tracemalloc
from pathlib import Path


def main() -> None:
    """Measure and print the figures (see the module docstring)."""
    from dealtrail.settings import Settings
    from dealtrail.simulator.run import write_simulation
    from streams.kafka import create_topics
    from streams.publish import Publisher, publish_file

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    args = ap.parse_args()
    tag = secrets.token_hex(3)
    with tempfile.TemporaryDirectory(prefix="dealtrail-bench-old-") as tmp:
        for size in args.sizes:
            s = Settings(namespace=f"bench-old-{tag}-{size}", partitions=1)
            create_topics(s.kafka, s.topics)
            trail = Path(tmp) / f"trail-{size}.jsonl"
            write_simulation(trail, tables=1, hours=size / 3_600, seed=5, error_rate=0.0)
            lines = [line for line in trail.read_bytes().splitlines() if line.strip()]

            def publish(path: Path) -> object:
                publisher = Publisher(s.kafka, s.topics)  # noqa: B023  # called in this iteration only
                try:
                    return publish_file(path, publisher, max_record_bytes=1024 * 1024)
                finally:
                    publisher.close()

            publish(trail)
            old = json.loads(lines[10])
            changed = {**old, "occurred_at": old["occurred_at"][:19] + ".123456Z"}
            again = Path(tmp) / f"old-{size}.jsonl"
            again.write_bytes(lines[10] + b"\n" + lines[20] + b"\n" + json.dumps(changed).encode() + b"\n")
            started = time.perf_counter()
            summary = publish(again)
            took = time.perf_counter() - started
            tracemalloc.start()  # a second run for the memory (tracemalloc slows it several times)
            publish(again)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            print(f"history events: {len(lines):,}")
            print(f"  compare s: {took:.2f}")
            print(f"  compare peak MB (tracemalloc): {peak / 1e6:.1f}")
            print(f"  result: {summary}")


if __name__ == "__main__":
    main()
