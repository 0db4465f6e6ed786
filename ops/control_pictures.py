"""The compliance guide's control-chart pictures (issue 50), taken from a simulated month.

``make control-pictures`` runs this: it writes a month of 8 tables (24 dealers, one shift each a
day) in which dealer D-C691-02-2 deals at four times the floor's error rate in the third week
(:mod:`dealtrail.simulator.month`) into a temporary store, then writes
``docs/img/control-chart.png`` (that dealer's chart by shift, as ``dealtrail chart`` draws it) and
``docs/img/control-dealer.png`` (the dealer's console page, with the signals list, taken with
headless Chromium through Playwright; Debian's ``/usr/bin/chromium``, nothing downloads a browser).
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import uvicorn
from playwright.sync_api import sync_playwright

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.simulator.month import MonthSpec, Raise, write_month
from projections.models.control import ChartSpec, chart
from projections.models.reviews import ReviewDue
from projections.records.baselines import label
from projections.reports.control_chart import render
from projections.store.store import Store

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
START = datetime(2026, 11, 2, tzinfo=UTC)
RAISED = Raise("D-C691-02-2", START + timedelta(days=14), START + timedelta(days=21), 4.0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(img: Path = Path("docs/img")) -> None:
    """Write the two pictures."""
    img.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "month.duckdb"
        write_month(str(db), MonthSpec(days=28, start=START, raises=(RAISED,)))
        store = Store(db)
        auth.add_user(store.con, "shots", "reviewer", "screenshot-reviewer", START)
        spec = ChartSpec("dealer", "shift")
        points = chart(store.con, spec, None, None, RAISED.dealer_id)
        (img / "control-chart.png").write_bytes(render(points, f"Dealer {RAISED.dealer_id}", spec, label(None), "png"))
        clock = START + timedelta(days=28, hours=1)
        app = create_app(store, ConsoleConfig(ReviewDue(24, 24, 72), "s" * 48, clock=lambda: clock))
        port = _free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 1400})
                base = f"http://127.0.0.1:{port}"
                page.goto(f"{base}/login")
                page.fill("input[name=username]", "shots")
                page.fill("input[name=password]", "screenshot-reviewer")
                page.click("button[type=submit]")
                page.goto(f"{base}/dealers/{RAISED.dealer_id}?period=30d")
                page.locator("#control").screenshot(path=str(img / "control-dealer.png"))
                browser.close()
        finally:
            server.should_exit = True
            thread.join(timeout=15)
            store.close()
    for name in ("control-chart.png", "control-dealer.png"):
        (img / name).chmod(0o644)  # published with the docs, unlike what dealtrail writes
        print(f"wrote {img / name}")


if __name__ == "__main__":
    main()
