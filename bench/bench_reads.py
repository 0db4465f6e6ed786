"""Benchmark of reads on record (issue 34, item 6): what recording a reading in the access log
costs each page of the console, and what the access-log forwarder's idle round costs the store.

Run with ``make bench-reads`` (no broker needed: the console of ``dealtrail serve``, embedded, in
this process through FastAPI's test client). Set-up: a simulated shift (``--tables`` 4,
``--hours`` 1, error rate 0.15) audited into a store in a temporary folder, one admin signed in,
and ``--log`` entries already in the access log (the log grows with every reading: a busy
console adds thousands a day).

Each page is fetched ``--repeat`` times (after one warm-up) in three ways:

  none      the reading is not recorded (the console before this change)
  deferred  recorded as built: the entry is made in the request and stored by the recorder
            thread (``AccessLog.record_read``), so the response does not wait for the store
  inline    recorded in the request, under the write lock, before the response (what a
            synchronous ``record`` would cost; in the streaming deployment the wait is a broker
            round trip instead)

Prints one line per page on stdout: the median and p95 in ms of each way, and the median's
difference of ``deferred`` and ``inline`` from ``none``; then the recording call alone as a
request makes it (deferred: making and queueing the entry; inline: storing it), which a busy
machine's noise does not drown; then the forwarder's first round over the whole log and its idle
round (one JSON-lines target, caught up) in ms. Options: ``--tables``, ``--hours``, ``--repeat`` (30), ``--log``
(100,000).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
warnings.filterwarnings("ignore", message=r"Using `httpx` with `starlette.testclient` is deprecated")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

from dealtrail.console import auth, guard  # noqa: E402
from dealtrail.console.app import ConsoleConfig, create_app  # noqa: E402
from dealtrail.ingest.audit import audit_file  # noqa: E402
from dealtrail.reporting.access_forward import AccessForwarder, Cursor, JsonLinesSender  # noqa: E402
from dealtrail.simulator.run import write_simulation  # noqa: E402
from projections.models import reviews  # noqa: E402
from projections.models.reviews import FindingFilter, ReviewDue  # noqa: E402
from projections.records import access_log  # noqa: E402
from projections.store.store import Store  # noqa: E402
from schemas.access import AccessEntry  # noqa: E402

DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
NOW = datetime(2027, 1, 1, tzinfo=UTC)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def timed(client: TestClient, url: str, repeat: int, after: Callable[[], None]) -> list[float]:
    """Milliseconds per fetch of ``url`` (``after`` runs between fetches, untimed)."""
    assert client.get(url).status_code == 200, url  # warm-up
    after()
    ms = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = client.get(url)
        ms.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200, (url, r.status_code)
        after()  # the deferred entries are stored between fetches, as the recorder thread does
    return ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--log", type=int, default=100_000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-reads-") as tmp:
        folder = Path(tmp)
        events = folder / "events.jsonl"
        write_simulation(events, tables=args.tables, hours=args.hours, seed=11, error_rate=0.15)
        store = Store(folder / "bench.duckdb")
        audit_file(events, store)
        auth.add_user(store.con, "ada", "admin", "ada-admin-pass", NOW - timedelta(days=1))
        t0 = NOW - timedelta(days=30)
        for start in range(0, args.log, 10_000):  # the log's history
            batch = [
                AccessEntry(
                    entry_id=f"H{i:09d}",
                    at=t0 + timedelta(seconds=i),
                    user="rita",
                    client="10.0.0.7",
                    kind="finding_viewed",
                    outcome="ok",
                    detail=f"finding {i:016x}",
                )
                for i in range(start, min(start + 10_000, args.log))
            ]
            store.con.execute("BEGIN TRANSACTION")
            access_log.append(store.con, batch)
            store.con.execute("COMMIT")
        log(f"store: {args.tables} tables x {args.hours} h audited, {args.log:,} access-log entries")

        rows, _ = reviews.find(store.con, FindingFilter(), DUE, NOW, limit=None)
        f = next(r for r in rows if r["round_id"] is not None and r.get("cause_finding_id"))
        fid, table, round_id = f["finding_id"], f["table_id"], f["round_id"]
        pages = {
            "finding": f"/findings/{fid}",
            "case": f"/cases/{fid}",
            "replay": f"/replay?table={table}&round={round_id}&finding={fid}",
            "replay API p1": f"/api/v1/tables/{table}/replay?round={round_id}",
            "access log": "/admin/access",
        }
        app = create_app(store, ConsoleConfig(DUE, "s" * 48, clock=lambda: NOW))
        client = TestClient(app)
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
        assert csrf
        login = {"username": "ada", "password": "ada-admin-pass", "csrf": csrf.group(1), "next": "/", "code": ""}
        assert client.post("/login", data=login, follow_redirects=False).status_code == 303
        for r in rows[:20]:  # a finding whose evidence package can be made (some cannot: 409)
            if r["round_id"] is not None and client.get(f"/findings/{r['finding_id']}/evidence.zip").status_code == 200:
                pages["evidence.zip"] = f"/findings/{r['finding_id']}/evidence.zip"
                break
        recorder: guard.AccessLog = app.state.console.access
        deferred = recorder.record_read

        def inline(kind: str, user: str, detail: str = "", client: str | None = None) -> Any:
            return recorder.record(kind, user, "ok", detail, client)

        def none(*_a: object, **_k: object) -> None:
            return None

        modes: dict[str, Callable[..., Any]] = {"none": none, "deferred": deferred, "inline": inline}
        results: dict[str, dict[str, list[float]]] = {}
        for page, url in list(pages.items()):
            status = client.get(url).status_code
            if status != 200:  # e.g. no evidence package can be made of this finding (409)
                log(f"{page}: {url} answers {status}, left out")
                continue
            results[page] = {}
            for mode in ("none", "deferred", "inline", "none", "deferred", "inline"):  # twice, interleaved
                recorder.record_read = modes[mode]  # type: ignore[method-assign]
                results[page].setdefault(mode, []).extend(timed(client, url, args.repeat // 2, recorder.flush))
            recorder.record_read = deferred  # type: ignore[method-assign]
        recorder.flush()
        # the recording alone, as a request makes it (no page around it: steady on a busy machine)
        calls: dict[str, list[float]] = {"deferred": [], "inline": []}
        for _ in range(args.repeat):
            for mode in ("deferred", "inline"):
                t1 = time.perf_counter()
                modes[mode]("finding_viewed", "ada", f"finding {fid}", "127.0.0.1")
                calls[mode].append((time.perf_counter() - t1) * 1000)
                recorder.flush()
        for page, by_mode in results.items():
            med = {m: statistics.median(v) for m, v in by_mode.items()}
            p95 = {m: statistics.quantiles(v, n=20)[-1] for m, v in by_mode.items()}
            cells = "  ".join(f"{m} {med[m]:7.1f}/{p95[m]:7.1f}" for m in ("none", "deferred", "inline"))
            print(
                f"{page:<14} ms median/p95  {cells}   deferred {med['deferred'] - med['none']:+.1f}"
                f"  inline {med['inline'] - med['none']:+.1f}",
                flush=True,
            )
        d, i = statistics.median(calls["deferred"]), statistics.median(calls["inline"])
        print(f"recording call alone ms median: deferred {d:.3f}  inline {i:.2f}", flush=True)
        # the forwarder's round when caught up (it runs every poll_seconds in the writer's process)
        forwarder = AccessForwarder(store.con, [(JsonLinesSender(folder / "siem.jsonl"), Cursor(folder / "c"))])
        t0_ = time.perf_counter()
        sent, _ = forwarder.run_once()
        first = time.perf_counter() - t0_
        idle = []
        for _ in range(20):
            t1 = time.perf_counter()
            forwarder.run_once()
            idle.append((time.perf_counter() - t1) * 1000)
        idle_ms = statistics.median(idle)
        print(f"forwarder: first round {sent:,} entries in {first:.2f} s; idle round median {idle_ms:.1f} ms")
        store.close()


if __name__ == "__main__":
    main()
