"""The README's pictures: the demo report and one finding page, taken with headless Chromium.

``make screenshots`` runs this after ``make demo``: it copies ``out/dealtrail.duckdb`` (the demo
store itself is never changed), adds a viewer to the copy, serves the console over it on a free
loopback port, and writes ``docs/img/report.png`` (the top of ``out/report.html``) and
``docs/img/finding.png`` (the page of the demo's first voiding finding). Debian's Chromium
(``/usr/bin/chromium``) through Playwright; nothing downloads a browser.
"""

from __future__ import annotations

import shutil
import socket
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import uvicorn
from playwright.sync_api import sync_playwright

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.settings import load
from projections.models.reviews import ReviewDue
from projections.store.store import Store

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(out: Path = Path("out"), img: Path = Path("docs/img")) -> None:
    """Write the two pictures; exits 2 with one line when the demo's files are missing."""
    if not (out / "dealtrail.duckdb").exists() or not (out / "report.html").exists():
        sys.exit(f"error: no demo in {out}/: run `make demo` first")
    img.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "shots.duckdb"
        shutil.copy(out / "dealtrail.duckdb", db)
        store = Store(db)
        auth.add_user(store.con, "shots", "viewer", "screenshot-viewer", datetime.now(UTC))
        row = store.con.execute(
            "SELECT finding_id FROM dim_findings WHERE severity = 'voiding' ORDER BY observed_at LIMIT 1"
        ).fetchone()
        if row is None:
            sys.exit("error: the demo store has no voiding finding")
        # the casino's zone from the settings (DEALTRAIL_TIMEZONE), as `dealtrail serve` shows its pages
        app = create_app(store, ConsoleConfig(ReviewDue(24, 24, 72), "s" * 48, tz=load().zone))
        port = _free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.goto((out / "report.html").resolve().as_uri())
                page.screenshot(path=str(img / "report.png"))
                base = f"http://127.0.0.1:{port}"
                page.goto(f"{base}/login")
                page.fill("input[name=username]", "shots")
                page.fill("input[name=password]", "screenshot-viewer")
                page.click("button[type=submit]")
                page.goto(f"{base}/findings/{row[0]}")
                page.screenshot(path=str(img / "finding.png"))
                browser.close()
        finally:
            server.should_exit = True
            thread.join(timeout=15)
            store.close()
    for name in ("report.png", "finding.png"):
        (img / name).chmod(0o644)  # published with the docs, unlike what dealtrail writes
        print(f"wrote {img / name}")


if __name__ == "__main__":
    main()
