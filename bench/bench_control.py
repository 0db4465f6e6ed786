"""Benchmark of the control charts (issue 50): what the chart costs a dealer's and a table's page.

Run with ``make bench-control``. Set-up: a month of 8 tables (``--days`` 30; 24 dealers, one
shift each a day, about 600 rounds a shift: some 430,000 rounds, the rounds of the 30-day bench
store of ``bench_history.py``) written at the charts' grain (:mod:`dealtrail.simulator.month`)
into a temporary store, one admin signed in, the console of ``dealtrail serve`` in this process
through FastAPI's test client. The event trail itself is not simulated: the charts read only the
rounds and the incidents summary.

Prints one line per page (``--repeat`` fetches after one warm-up): the median and p95 in ms of the
page, and of the chart's query alone (:func:`projections.models.control.chart`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

warnings.filterwarnings("ignore", message=r"Using `httpx` with `starlette.testclient` is deprecated")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

from dealtrail.console import auth  # noqa: E402
from dealtrail.console.app import ConsoleConfig, create_app  # noqa: E402
from dealtrail.simulator.month import MonthSpec, write_month  # noqa: E402
from projections.models.control import ChartSpec, chart  # noqa: E402
from projections.models.reviews import ReviewDue  # noqa: E402
from projections.store.store import Store  # noqa: E402

START = datetime(2026, 11, 2, tzinfo=UTC)


def _ms(samples: list[float]) -> str:
    p95 = statistics.quantiles(samples, n=20)[-1] if len(samples) > 1 else samples[0]
    return f"median {statistics.median(samples):6.1f} ms  p95 {p95:6.1f} ms"


def main() -> None:
    """Build the month, time the pages, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "month.duckdb"
        t = time.perf_counter()
        rounds, findings = write_month(str(db), MonthSpec(days=args.days, start=START))
        print(f"month: {rounds:,} rounds, {findings:,} incidents, written in {time.perf_counter() - t:.1f} s")
        store = Store(db)
        auth.add_user(store.con, "ada", "admin", "ada-admin-pass", START)
        now = START + timedelta(days=args.days, hours=1)
        client = TestClient(create_app(store, ConsoleConfig(ReviewDue(24, 24, 72), "b" * 48, clock=lambda: now)))
        login = client.get("/login").text
        csrf = login.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        form = {"username": "ada", "password": "ada-admin-pass", "csrf": csrf, "next": "/", "code": ""}
        client.post("/login", data=form, follow_redirects=False)
        pages = {
            "dealer 7d": "/dealers/D-C691-02-2",
            "dealer 30d": "/dealers/D-C691-02-2?period=30d",
            "table 30d day": "/tables/C691-02?period=30d",
            "table 30d week": "/tables/C691-02?period=30d&slot=week",
        }
        for name, url in pages.items():
            assert client.get(url).status_code == 200  # warm-up
            samples = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                client.get(url)
                samples.append((time.perf_counter() - t) * 1000)
            print(f"page {name:<15} {_ms(samples)}")
        end = START + timedelta(days=args.days)
        for kind, slot, subject in (("dealer", "shift", "D-C691-02-2"), ("table", "day", "C691-02")):
            samples = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                chart(store.con, ChartSpec(kind, slot), end - timedelta(days=30), end, subject)  # type: ignore[arg-type]
                samples.append((time.perf_counter() - t) * 1000)
            print(f"chart query {kind} {slot:<6} 30d {_ms(samples)}")
        store.close()


if __name__ == "__main__":
    main()
