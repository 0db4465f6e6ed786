"""Soak run of the streaming pipeline on the real broker: publish at a steady rate for a while,
with workers and the projector running, and check that memory stays flat and nothing is lost.

Run with ``make soak`` (the broker must be up: ``make kafka-up``). Defaults: 3,000 events per
second (ten times a large floor's rate) for 10 minutes, two workers, one projector, 6
partitions. The run works in its own namespace ``soak-<random>`` and deletes its topics and
consumer groups at the end; every wait is bounded.

Every ``--sample`` seconds it prints the resident memory (RSS, MB) of each worker and of the
projector, and the lag (events published but not yet committed) of the worker group and of the
projector. At the end: RSS at the start (after a warm-up) and at the end of publishing, and
after the drain; how long the lag took to return to zero once publishing stopped; and the loss
check (distinct events in the file's published part against distinct events the projector
stored in DuckDB). Exit status 0 only if nothing was lost and both lags reached zero.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_audit import ensure_events  # noqa: E402
from bench_stream import Kafka, Procs, make_settings, worker_env  # noqa: E402

DEALTRAIL = Path(sys.executable).parent / "dealtrail"


def log(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def rss_mb(pid: int) -> float:
    """Resident set size of a process in megabytes (Linux ``/proc``); 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def trend(points: list[tuple[float, float]]) -> str:
    """Median RSS of the first and last third of ``(seconds, MB)`` samples, the maximum, and
    the least-squares slope in MB per minute (a leak shows as a steady positive slope)."""
    import statistics

    third = max(1, len(points) // 3)
    xs = [t / 60 for t, _ in points]
    ys = [v for _, v in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return (
        f"median {statistics.median(ys[:third]):.0f} MB in the first third, "
        f"{statistics.median(ys[-third:]):.0f} MB in the last; max {max(ys):.0f} MB; "
        f"slope {slope:+.2f} MB/min"
    )


def head(path: Path, n: int, out: Path) -> tuple[int, int]:
    """Copy the first ``n`` lines of ``path`` to ``out``; returns (lines, distinct event IDs)."""
    import json

    ids: set[str] = set()
    lines = 0
    with path.open("rb") as src, out.open("wb") as dst:
        for line in src:
            if lines >= n:
                break
            dst.write(line)
            ids.add(json.loads(line)["event_id"])
            lines += 1
    return lines, len(ids)


def lags(k: Kafka, settings: Any) -> tuple[int, int]:
    """(worker group lag, projector lag) on the events topic, in events."""
    topic = settings.topics.events.name
    end = k.end_total(topic)
    return end - k.committed_total(settings.topics.app_id, topic), end - k.committed_total(
        settings.topics.projector_group, topic
    )


def main(args: argparse.Namespace) -> int:
    from streams.kafka import create_topics

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    total = int(args.rate * args.minutes * 60)
    log(f"{args.rate:,.0f} events/s for {args.minutes:g} min = {total:,} events; {args.workers} worker(s)")
    source = ensure_events(total)
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    events = work / "events.jsonl"
    lines, distinct = head(source, total, events)
    settings = make_settings(f"soak-{uuid.uuid4().hex[:8]}", args.partitions)
    env = worker_env(settings)
    db = work / "soak.duckdb"
    k = Kafka(settings)
    procs = Procs(work)
    ok = False
    try:
        create_topics(settings.kafka, settings.topics)
        workers = [procs.start(f"worker-{i}", [str(DEALTRAIL), "worker"], env) for i in range(args.workers)]
        projector = procs.start("projector", [str(DEALTRAIL), "project", "--db", str(db)], env)
        k.wait_group(settings.topics.app_id, args.workers, 180, workers)
        named = [(f"worker-{i}", p) for i, p in enumerate(workers)] + [("projector", projector)]
        publisher = procs.start("publisher", [str(DEALTRAIL), "publish", "--rate", str(args.rate), str(events)], env)
        started = time.monotonic()
        samples: list[tuple[float, dict[str, float]]] = []
        warm: dict[str, float] | None = None
        while publisher.poll() is None:
            time.sleep(args.sample)
            for name, p in named:
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited with {p.returncode}:\n{procs.tail(p)}")
            rss = {name: rss_mb(p.pid) for name, p in named}
            elapsed = time.monotonic() - started
            if warm is None and elapsed >= args.warmup:
                warm = rss
            samples.append((elapsed, rss))
            wl, pl = lags(k, settings)
            log(
                f"t={elapsed:5.0f}s  " + "  ".join(f"{n} {v:6.1f} MB" for n, v in rss.items())
                + f"  lag: workers {wl:,}, projector {pl:,}"
            )  # fmt: skip
        if publisher.returncode != 0:
            raise RuntimeError(f"publisher exited with {publisher.returncode}:\n{procs.tail(publisher)}")
        published_in = time.monotonic() - started
        at_end = {name: rss_mb(p.pid) for name, p in named}
        log(f"published {lines:,} lines in {published_in:.0f}s ({lines / published_in:,.0f}/s); draining ...")
        drain_start = time.monotonic()
        drained: float | None = None
        while time.monotonic() - drain_start < args.drain_timeout:
            wl, pl = lags(k, settings)
            if wl == 0 and pl == 0:
                drained = time.monotonic() - drain_start
                break
            time.sleep(args.sample / 2)
        after = {name: rss_mb(p.pid) for name, p in named}
        procs.stop(projector, timeout=60)
        import duckdb

        con = duckdb.connect(str(db), read_only=True)
        try:
            stored = int(con.execute("SELECT count(DISTINCT event_id) FROM events").fetchone()[0])  # type: ignore[index]
            findings = int(con.execute("SELECT count(*) FROM findings").fetchone()[0])  # type: ignore[index]
        finally:
            con.close()
        warm = warm or (samples[0][1] if samples else at_end)
        print()
        print(f"rate: {lines / published_in:,.0f} events/s for {published_in:.0f} s ({lines:,} events)")
        steady = [(t, rss) for t, rss in samples if t >= args.warmup]
        for name, _ in named:
            growth = (at_end[name] - warm[name]) / warm[name] * 100 if warm[name] else 0.0
            print(
                f"RSS {name}: start {warm[name]:.1f} MB, end of publishing {at_end[name]:.1f} MB "
                f"({growth:+.1f}%), after drain {after[name]:.1f} MB"
            )
            if len(steady) >= 6:
                print(f"  after warm-up: {trend([(t, rss[name]) for t, rss in steady])}")
        print(
            f"lag back to zero: {f'{drained:.0f} s after publishing stopped' if drained is not None else 'NO'}"
            f" (limit {args.drain_timeout:.0f} s)"
        )
        print(f"events: {distinct:,} distinct published, {stored:,} stored, lost {distinct - stored:,}")
        print(f"finding revisions stored: {findings:,}")
        ok = drained is not None and stored == distinct
        return 0 if ok else 1
    finally:
        procs.stop_all()
        try:
            k.cleanup([settings.namespace], [settings.topics.app_id, settings.topics.projector_group])
        finally:
            k.close()
        log(f"work folder {work} ({'kept' if not ok else 'removed'})")
        if ok:
            import shutil

            shutil.rmtree(work, ignore_errors=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--rate", type=float, default=3000.0, help="events per second (3000)")
    p.add_argument("--minutes", type=float, default=10.0, help="minutes of publishing (10)")
    p.add_argument("--workers", type=int, default=2, help="worker processes in the group (2)")
    p.add_argument("--partitions", type=int, default=6, help="partitions per topic (6)")
    p.add_argument("--sample", type=float, default=15.0, help="seconds between samples (15)")
    p.add_argument("--warmup", type=float, default=120.0, help="seconds before the start RSS is taken (120)")
    p.add_argument("--drain-timeout", type=float, default=1800.0, help="seconds allowed for the lag to reach 0")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(parse_args(sys.argv[1:])))
