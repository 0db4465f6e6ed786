"""The console in the streaming deployment, end to end on the real broker: a worker, the projector
with ``--serve`` (the console in its process) and a webhook receiver started by the test.

Events are published at 100 events/s while everything runs; the findings they raise must reach
the console's findings API and floor (what the floor page polls) and the webhook receiver; a
review POSTed through the API must come back through the reviews topic into the store, listed
with its user. Functional: generous timeouts, no timed assertions (``bench/bench_console.py``
measures the latencies).
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.kafka.conftest import Cluster, stop

pytestmark = pytest.mark.kafka


class Hook:
    """A local webhook receiver: every JSON body POSTed to it, in arrival order."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                received.append(json.loads(self.rfile.read(n)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    try:
        yield h
    finally:
        h.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dealtrail(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dealtrail.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_for(what: str, check: Callable[[], Any], timeout: float, log: Path) -> Any:
    """``check()``'s first truthy result, polled every 0.2 s; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {timeout:.0f} s\n{log.read_text()[-4000:]}")


def test_reviews_go_through_the_topic_and_new_findings_reach_the_floor_and_the_webhook(
    cluster: Cluster, hook: Hook, tmp_path: Path
) -> None:
    from dealtrail.simulator.run import write_simulation

    events = tmp_path / "events.jsonl"
    write_simulation(events, tables=2, hours=0.5, seed=3, error_rate=0.5)  # about 3,000 events, 48 findings
    db = tmp_path / "store" / "dealtrail.duckdb"
    port = free_port()
    env = {
        **cluster.env,
        "DEALTRAIL_NOTIFY__RULES": json.dumps([{"webhook": hook.url}]),
        "DEALTRAIL_CONSOLE__POLL_SECONDS": "1",
        "DEALTRAIL_CONSOLE__SESSION_SECRET": "e2e-session-secret-" + "x" * 32,
    }
    # the first users, before the projector holds the file
    for name, role in (("ada", "admin"), ("rita", "reviewer")):
        made = dealtrail(env, "users", "add", name, "--role", role, "--db", str(db), stdin=f"{name}-long-password\n")
        assert made.returncode == 0, made.stderr
    tokens = {}
    for name in ("ada", "rita"):
        out = dealtrail(env, "users", "token", name, "--db", str(db), stdin=f"{name}-long-password\n")
        assert out.returncode == 0, out.stderr
        tokens[name] = {"Authorization": "Bearer " + out.stdout.split()[-1]}

    worker_log, projector_log = tmp_path / "worker.log", tmp_path / "projector.log"
    worker = cluster.start_worker(worker_log)
    with projector_log.open("ab") as fh:
        projector = subprocess.Popen(
            [sys.executable, "-m", "dealtrail.cli", "project", "--db", str(db), "--serve", f"127.0.0.1:{port}"],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    api = httpx.Client(base_url=base, timeout=10)
    try:

        def answers() -> bool:
            try:
                return api.get("/login").status_code == 200
            except httpx.TransportError:
                assert projector.poll() is None, projector_log.read_text()
                return False

        wait_for("the console answers", answers, 60, projector_log)
        assert api.get("/api/v1/findings").status_code == 401

        # while the projector holds the file, the user commands point to the admin page
        held = dealtrail(env, "users", "token", "rita", "--db", str(db), stdin="rita-long-password\n")
        who = "held by another process (a projector, an audit or a console (serve)?)"
        assert held.returncode == 1 and who in held.stderr, held.stderr
        assert "manage users on the console's admin page" in held.stderr

        # events at 100 events/s, while everything runs
        published = dealtrail(env, "publish", str(events), "--rate", "100")
        assert published.returncode == 0, published.stderr

        def findings() -> dict[str, Any]:
            return dict(api.get("/api/v1/findings", params={"limit": 10_000}, headers=tokens["rita"]).json())

        listed = wait_for("findings in the console", lambda: findings()["total"] > 0 and findings(), 120, projector_log)
        fids = {f["finding_id"] for f in listed["findings"]}

        # the floor (the rows the floor page polls for) shows them, per table, as not yet disposed
        floor = api.get("/api/v1/floor", headers=tokens["rita"]).json()["tables"]
        assert {f["table_id"] for f in listed["findings"]} <= {t["table_id"] for t in floor}
        assert sum(t["open_voiding"] + t["open_integrity"] + t["open_procedural"] for t in floor) >= 1
        browser = httpx.Client(base_url=base, timeout=10)
        try:
            csrf = re.search(r'name="csrf" value="([^"]+)"', browser.get("/login").text)
            assert csrf
            signed = browser.post("/login", data={"username": "ada", "password": "ada-long-password",
                                                  "csrf": csrf.group(1), "next": "/"})  # fmt: skip
            assert signed.status_code == 303
            rows = browser.get("/floor/tables")
            assert rows.status_code == 200 and all(f["table_id"] in rows.text for f in listed["findings"])
        finally:
            browser.close()

        # the webhook receiver gets each new finding once its revision 0 is stored
        def hooked() -> set[str]:
            return {b["finding"]["finding_id"] for b in hook.bodies}

        wait_for("the webhook receives the findings", lambda: fids <= hooked(), 60, projector_log)
        first = hook.bodies[0]
        assert first["text"] and first["finding"]["rule_id"]

        # a review through the API: published to the reviews topic, stored by the projector
        fid = sorted(fids)[0]
        body = {"action": "dispose", "cause": "DEALER_ERROR", "note": "seen on camera", "corrective_action": "coached"}
        clip = {"camera": "CAM-1", "clip_id": "K-1", "url": "https://vms.local/k1?a=1&b=2", "note": "the exposure"}
        body["references"] = [clip]  # a video reference travels with the review through the topic
        r = api.post(f"/api/v1/findings/{fid}/reviews", json=body, headers=tokens["rita"])
        assert r.status_code == 201, r.text
        review_id = r.json()["review_id"]

        def reviewed() -> list[dict[str, Any]]:
            got = api.get("/api/v1/findings", params={"review_status": "disposed"}, headers=tokens["ada"]).json()
            return list(got["findings"])

        done = wait_for("the review reaches the store", reviewed, 60, projector_log)
        assert [(f["finding_id"], f["last_reviewed_by"], f["cause"]) for f in done] == [(fid, "rita", "DEALER_ERROR")]
        one = api.get(f"/api/v1/findings/{fid}", headers=tokens["ada"]).json()
        assert [(h["review_id"], h["user_name"]) for h in one["reviews"]] == [(review_id, "rita")]
        assert one["reviews"][0]["references"] == [clip]

        # the review is in the reviews topic, keyed by its finding
        from kafka import KafkaConsumer, TopicPartition

        topic = cluster.settings().topics.reviews.name
        consumer = KafkaConsumer(
            bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
        )
        try:
            parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
            consumer.assign(parts)
            consumer.seek_to_beginning()
            records = [(rec.key, json.loads(rec.value)) for rec in consumer]
        finally:
            consumer.close()
        assert [(k, v["review_id"], v["user"]) for k, v in records] == [(fid.encode(), review_id, "rita")]
    finally:
        api.close()
        assert stop(worker) == 0, worker_log.read_text()
        assert stop(projector, signal.SIGINT) in (0, 130), projector_log.read_text()

    # the projector closed the file: one review, stored once; every webhook delivery recorded
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*), any_value(user_name) FROM reviews").fetchall() == [(1, "rita")]
        outcomes = dict(con.execute("SELECT outcome, count(*) FROM dim_notifications GROUP BY 1").fetchall())
    finally:
        con.close()
    assert outcomes.get("delivered", 0) >= len(fids) and set(outcomes) == {"delivered"}
